// Copyright (c) cqlstream authors.
//
// SampleWriter::report() from another thread while the feeder waits: the
// writer talks to the real node through FaultProxy, whose connections stop
// answering (black holes) once the writer is open, so with one write slot
// the second Add waits for the first write's request timeout. report()
// (Writer.written in Python) must answer at once meanwhile, not after it.
//
// Everything lives in one keyspace wrr_<pid>, dropped when the suite ends.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "fault_proxy.h"
#include "store/sample_writer.h"
#include "store/testing_fixtures.h"
#include "store_fixture.h"
#include "test_env.h"

namespace cqlstream {
namespace {

using Clock = std::chrono::steady_clock;

class SampleWriterReportTest : public testing::StoreFixture {
 protected:
  static void SetUpTestSuite() { SetUpStore("wrr"); }
};

TEST_F(SampleWriterReportTest, ReportDoesNotWaitForABlockedAdd) {
  // Its own loopback address, same port, so that no other suite's proxy is in the way.
  testing::FaultProxy proxy("127.0.0.41", testing::TestOptions().hosts.at(0), 9042);
  ASSERT_TRUE(proxy.ok()) << proxy.error();
  ConnectionOptions co = testing::TestOptions();
  co.hosts = {"127.0.0.41"};
  co.request_timeout = std::chrono::milliseconds(3000);
  auto session = net::Session::Connect(co);
  ASSERT_TRUE(session.ok()) << session.status().ToString();

  store::SampleWriterOptions o;
  o.keyspace = keyspace_;
  o.dataset = "blocked";
  o.source_id = "feeder";
  o.label_kind = LabelKind::kNone;
  o.concurrency = 1;  // the second Add waits for the first write
  o.write_attempts = 1;
  auto opened = store::SampleWriter::Open(*session, o);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<store::SampleWriter> w = std::move(opened).value();

  testing::FaultProxy::Faults f;
  f.blackhole_p = 1;  // every answer from now on is swallowed
  proxy.SetFaults(f);
  const std::vector<uint8_t> jpeg = store::testing::MakeJpeg(32, 32, 7);
  store::SampleInput in;
  in.data = jpeg;
  std::atomic<bool> second{false};
  Clock::time_point second_done;
  std::thread feeder([&] {
    (void)w->Add(in);  // issued; its answer never comes
    second = true;
    (void)w->Add(in);  // waits for the slot: until the first write times out
    second_done = Clock::now();
  });
  while (!second) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // inside the second Add by now
  const Clock::time_point t0 = Clock::now();
  const store::SampleWriterReport r = w->report();
  const Clock::time_point t1 = Clock::now();
  feeder.join();

  EXPECT_EQ(r.added, 1);  // the first Add; the second has not taken its position yet
  EXPECT_EQ(r.written, 0);
  EXPECT_LT(t1 - t0, std::chrono::milliseconds(500)) << "report() waited for the blocked Add";
  // The test proves something only if the second Add really was blocked
  // while report() answered.
  EXPECT_GT(second_done, t1) << "the second Add was not blocked (the black hole did not hold the write)";

  proxy.SetFaults({});
  proxy.ResetAll();
  (void)w->Abort();  // the write failed: the error, or a commit through a new connection
  w.reset();
  (*session)->Close();
}

}  // namespace
}  // namespace cqlstream
