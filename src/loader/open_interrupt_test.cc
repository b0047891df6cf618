// Copyright (c) cqlstream authors.
//
// LoaderOptions::open_stop: Loader::Open against a host that answers the
// handshake and its system tables but never the catalog read
// (net/stalling_host_test_util.h) waited for the request time-out and the
// setup reads' retries (40 s here) without it; with it, Open ends within a
// poll of the flag being set.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "cqlstream/loader.h"
#include "net/stalling_host_test_util.h"

namespace cqlstream {
namespace {

using namespace std::chrono_literals;

TEST(LoaderOpenStop, AnOpenWaitingOnTheCatalogEndsAtTheStop) {
  net::testing::StallingHost host;
  LoaderOptions o;
  o.connection = host.Options();
  o.dataset = "toy";
  auto flag = std::make_shared<std::atomic<bool>>(false);
  o.open_stop = flag;
  const auto t0 = std::chrono::steady_clock::now();
  StatusOr<std::unique_ptr<Loader>> l = Status::Internal("not opened");
  {
    std::jthread stopper = host.StopOnceAsked(flag);
    l = Loader::Open(o);
  }
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), Status::Code::kCancelled) << l.status().ToString();
  EXPECT_EQ(l.status().message(), "interrupted");
  EXPECT_TRUE(host.asked()) << "no catalog read reached the server";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);  // the catalog read alone would wait 10 s
}

}  // namespace
}  // namespace cqlstream
