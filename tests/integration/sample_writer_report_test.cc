// Copyright (c) cqlstream authors.
//
// The sample writer while its writes are held: it talks to the real node
// through FaultProxy, whose connections stop answering (black holes) or
// hold each answer (stalls) once the writer is open. report() (Writer.written
// in Python) answers at once from another thread while an Add waits; an
// Add, Flush, Close or Abort whose caller's check says stop ends its wait
// (Ctrl-C in Python), leaving the writer open and its positions as they
// were.
//
// Everything lives in one keyspace wrr_<pid>, dropped when the suite ends.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
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

  // A writer of `dataset` (source "feeder", no labels, one write attempt,
  // requests timing out after `timeout`) that talks to the node through
  // proxy_, on its own loopback address, same port, so that no other
  // suite's proxy is in the way. `tune` sets the rest of its options.
  void OpenProxiedWriter(const std::string& dataset, std::chrono::milliseconds timeout,
                         const std::function<void(store::SampleWriterOptions*)>& tune = {}) {
    CloseProxiedWriter();
    proxy_ = std::make_unique<testing::FaultProxy>(kProxyHost, testing::TestOptions().hosts.at(0), 9042);
    ASSERT_TRUE(proxy_->ok()) << proxy_->error();
    ConnectionOptions co = testing::TestOptions();
    co.hosts = {kProxyHost};
    co.request_timeout = timeout;
    auto session = net::Session::Connect(co);
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    proxied_session_ = std::move(session).value();
    store::SampleWriterOptions o;
    o.keyspace = keyspace_;
    o.dataset = dataset;
    o.source_id = "feeder";
    o.label_kind = LabelKind::kNone;
    o.write_attempts = 1;
    if (tune) tune(&o);
    auto opened = store::SampleWriter::Open(proxied_session_, o);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    writer_ = std::move(opened).value();
  }
  // Every answer from now on is held for 3 s (the proxy's stall).
  void HoldAnswers() {
    testing::FaultProxy::Faults f;
    f.stall_p = 1;
    f.stall_for = std::chrono::milliseconds(3000);
    proxy_->SetFaults(f);
  }
  void CloseProxiedWriter() {
    if (proxy_) proxy_->SetFaults({});  // a failed test does not wait out held answers
    writer_.reset();
    if (proxied_session_) proxied_session_->Close();
    proxied_session_.reset();
    proxy_.reset();
  }
  void TearDown() override { CloseProxiedWriter(); }

  static constexpr const char* kProxyHost = "127.0.0.41";
  std::unique_ptr<testing::FaultProxy> proxy_;
  std::shared_ptr<net::Session> proxied_session_;
  std::unique_ptr<store::SampleWriter> writer_;
};

TEST_F(SampleWriterReportTest, ReportDoesNotWaitForABlockedAdd) {
  ASSERT_NO_FATAL_FAILURE(OpenProxiedWriter("blocked", std::chrono::milliseconds(3000), [](auto* o) {
    o->concurrency = 1;  // the second Add waits for the first write
  }));
  store::SampleWriter* w = writer_.get();
  testing::FaultProxy::Faults f;
  f.blackhole_p = 1;  // every answer from now on is swallowed
  proxy_->SetFaults(f);
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

  proxy_->SetFaults({});
  proxy_->ResetAll();
  (void)w->Abort();  // the write failed: the error, or a commit through a new connection
}

// An Add that waits for a write slot (the writes in flight hold it; a
// stalled cluster holds them up to the request timeout; here the proxy
// holds the first write's answer 3 s) ends when its caller's check says
// so, the sample not taken: the next Add takes its position. Also an Add
// waiting for memory (memory_bytes below two samples).
TEST_F(SampleWriterReportTest, AnInterruptedAddTakesNoPosition) {
  for (const bool by_memory : {false, true}) {
    SCOPED_TRACE(by_memory ? "waiting for memory" : "waiting for a write slot");
    // Blobs of 768 KiB: the least memory a writer takes is 1 MiB, one of them.
    const std::vector<uint8_t> blob(768 << 10, 0x5a);
    ASSERT_NO_FATAL_FAILURE(OpenProxiedWriter(by_memory ? "interrupted_mem" : "interrupted_slot",
                                              std::chrono::milliseconds(20000), [by_memory](auto* o) {
                                                o->kind = SampleKind::kBlob;
                                                o->concurrency = by_memory ? 64 : 1;
                                                if (by_memory) o->memory_bytes = 1 << 20;  // one sample at a time
                                              }));
    store::SampleWriter* w = writer_.get();
    HoldAnswers();
    store::SampleInput in;
    in.data = blob;
    auto first = w->Add(in);  // issued; its answer is held
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    int asked = 0;
    const Clock::time_point t0 = Clock::now();
    const std::function<bool()> after_300ms = [&] {
      ++asked;
      return Clock::now() - t0 >= std::chrono::milliseconds(300);
    };
    auto cut = w->Add(in, after_300ms);
    const auto waited = Clock::now() - t0;
    EXPECT_EQ(cut.status().code(), Status::Code::kCancelled) << cut.status().ToString();
    EXPECT_EQ(cut.status().message(), "interrupted");
    EXPECT_LT(waited, std::chrono::milliseconds(2500)) << "the Add waited for the first write's answer";
    EXPECT_GE(asked, 2) << "asked before each wait";
    EXPECT_EQ(w->report().added, 1) << "the interrupted sample took a position";

    // The next Add takes position 1 once the first write's answer came.
    proxy_->SetFaults({});
    auto next = w->Add(in);
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    EXPECT_EQ(KeyIndex(*next), 1);
    EXPECT_EQ(w->report().added, 2);
    EXPECT_TRUE(w->Close().ok());
    EXPECT_EQ(w->report().count, 2);
    CloseProxiedWriter();
  }
}

// Flush, Close and Abort wait for the writes in flight; the caller's check
// ends that wait with Cancelled("interrupted"), nothing committed or
// sealed, the writer still open: a later Close seals what was written.
TEST_F(SampleWriterReportTest, AnInterruptedFlushOrCloseLeavesTheWriterOpen) {
  for (const char* call : {"flush", "close", "abort"}) {
    SCOPED_TRACE(call);
    ASSERT_NO_FATAL_FAILURE(OpenProxiedWriter(std::string("interrupted_") + call, std::chrono::milliseconds(20000),
                                              [](auto* o) { o->kind = SampleKind::kBlob; }));
    store::SampleWriter* w = writer_.get();
    HoldAnswers();
    const std::vector<uint8_t> blob(4096, 0x33);
    store::SampleInput in;
    in.data = blob;
    ASSERT_TRUE(w->Add(in).ok());
    const Clock::time_point t0 = Clock::now();
    const std::function<bool()> after_300ms = [&] { return Clock::now() - t0 >= std::chrono::milliseconds(300); };
    const std::string_view c = call;
    const Status cut = c == "flush" ? w->Flush(after_300ms) : c == "close" ? w->Close(after_300ms)
                                                                             : w->Abort(after_300ms);
    EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(2500)) << "it waited for the write's answer";
    EXPECT_EQ(cut.code(), Status::Code::kCancelled) << cut.ToString();
    EXPECT_EQ(cut.message(), "interrupted");
    store::SampleWriterReport r = w->report();
    EXPECT_EQ(r.count, 0) << "an interrupted call committed";
    EXPECT_FALSE(r.sealed);

    proxy_->SetFaults({});
    ASSERT_TRUE(w->Add(in).ok()) << "the writer is still open";
    ASSERT_TRUE(w->Close().ok());
    r = w->report();
    EXPECT_TRUE(r.sealed);
    EXPECT_EQ(r.count, 2);
    CloseProxiedWriter();
  }
}

}  // namespace
}  // namespace cqlstream
