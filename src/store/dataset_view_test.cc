// Copyright (c) cqlstream authors.
//
// DatasetView::Open's stop: against a host that answers the handshake and
// its system tables but never the catalog read
// (net/stalling_host_test_util.h), Open ends within a poll of the flag
// being set, not at the request time-out.
#include "store/dataset_view.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "net/stalling_host_test_util.h"

namespace cqlstream::store {
namespace {

using namespace std::chrono_literals;

TEST(DatasetViewOpen, AnOpenWaitingOnTheCatalogEndsAtTheStop) {
  net::testing::StallingHost host;
  auto flag = std::make_shared<std::atomic<bool>>(false);
  const auto t0 = std::chrono::steady_clock::now();
  StatusOr<std::unique_ptr<DatasetView>> v = Status::Internal("not opened");
  {
    std::jthread stopper = host.StopOnceAsked(flag);
    v = DatasetView::Open(host.Options(), "toy", flag);
  }
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), Status::Code::kCancelled) << v.status().ToString();
  EXPECT_EQ(v.status().message(), "interrupted");
  EXPECT_TRUE(host.asked()) << "no catalog read reached the server";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);  // the catalog read alone would wait 10 s
}

}  // namespace
}  // namespace cqlstream::store
