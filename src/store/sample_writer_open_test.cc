// Copyright (c) cqlstream authors.
//
// SampleWriter::Open on a session made with an opening's stop
// (net::SessionOptions::stop): against a host that answers the handshake
// and its system tables but never the catalog read
// (net/stalling_host_test_util.h), Open ends within a poll of the flag
// being set, in its reads (before any write), not at the request time-out.
#include "store/sample_writer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "net/session.h"
#include "net/stalling_host_test_util.h"

namespace cqlstream::store {
namespace {

using namespace std::chrono_literals;

TEST(SampleWriterOpen, AnOpenWaitingOnTheCatalogEndsAtTheStop) {
  net::testing::StallingHost host;
  auto flag = std::make_shared<std::atomic<bool>>(false);
  net::SessionOptions so;
  so.watch_events = false;
  so.stop = flag;
  auto session = net::Session::Connect(host.Options(), so);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  SampleWriterOptions o;
  o.keyspace = "ks";
  o.dataset = "toy";
  o.source_id = "interrupted-opening";
  const auto t0 = std::chrono::steady_clock::now();
  StatusOr<std::unique_ptr<SampleWriter>> w = Status::Internal("not opened");
  {
    std::jthread stopper = host.StopOnceAsked(flag);
    w = SampleWriter::Open(*session, o);
  }
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), Status::Code::kCancelled) << w.status().ToString();
  EXPECT_TRUE(host.asked()) << "no catalog read reached the server";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);  // the catalog read alone would wait 10 s
  (*session)->Close();
}

}  // namespace
}  // namespace cqlstream::store
