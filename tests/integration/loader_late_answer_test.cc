// Copyright (c) cqlstream authors.
//
// An answer that keeps arriving after its request timed out (the frame
// decoder holds the attempt's sink until the frame is complete): its late
// cells must not claim the sample, or the retry's bytes are dropped and
// nothing settles the sample (the epoch hung). A fault proxy stalls response
// frames mid-frame for longer than the request timeout; single and
// coalesced reads must still deliver every sample exactly once.
#include <gtest/gtest.h>

#include <cstdio>
#include <future>
#include <set>

#include "cqlstream/loader.h"
#include "dataset_fixture.h"
#include "fault_proxy.h"
#include "shared_dataset_suite.h"
#include "test_env.h"

namespace cqlstream {
namespace {

using testing::Delivered;
using testing::ReadEpoch;
using testing::SyntheticDataset;
using testing::SyntheticSpec;

class LoaderLateAnswerTest : public testing::SharedDatasetSuite<LoaderLateAnswerTest> {
 public:
  static SyntheticDataset Make(net::Session& s) {
    SyntheticSpec spec;
    spec.name = "lateans";
    spec.samples = 600;
    spec.segments = 2;
    spec.chunk_size = 4096;
    spec.size = [](int i) -> int64_t { return 200 + (i * 37) % 700; };  // one chunk: coalescible
    return testing::MakeSyntheticDataset(s, testing::TestKeyspace(), spec);
  }
};

TEST_F(LoaderLateAnswerTest, AnAnswerFinishingAfterItsTimeoutClaimsNothing) {
  // Its own loopback address: other tests' proxies use 127.0.0.2.
  testing::FaultProxy proxy("127.0.0.5", "127.0.0.1", 9042);
  ASSERT_TRUE(proxy.ok()) << proxy.error();
  for (int coalesce : {1, 16}) {
    SCOPED_TRACE(coalesce == 1 ? "single reads" : "coalesced reads");
    const uint64_t stalls_before = proxy.stats().stalls;
    testing::FaultProxy::Faults none;
    proxy.SetFaults(none);  // connect undisturbed
    LoaderOptions o = testing::TestLoaderOptions("lateans");
    o.connection.hosts = {"127.0.0.5"};
    o.connection.connect_timeout = std::chrono::milliseconds(3000);
    o.batch_size = 20;
    o.coalesce = coalesce;
    o.hedge = false;  // the retry, not a hedge, must deliver the late samples
    o.request_timeout = std::chrono::milliseconds(300);
    o.epochs = 1;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    testing::FaultProxy::Faults f;
    f.stall_p = 0.08;
    f.stall_for = std::chrono::milliseconds(700);  // past the request timeout
    proxy.SetFaults(f);
    auto fut = std::async(std::launch::async, [&] { return ReadEpoch(**l, *data_); });
    if (fut.wait_for(std::chrono::seconds(90)) != std::future_status::ready) {
      (*l)->Close();  // ends the hung Next(), so that the test ends
      fut.wait();
      FAIL() << "the loader hangs";
    }
    proxy.SetFaults(none);
    Delivered d = fut.get();
    ASSERT_TRUE(d.error.empty()) << d.error;
    std::set<SampleKey> unique(d.keys.begin(), d.keys.end());
    EXPECT_EQ(unique.size(), d.keys.size()) << "duplicates";
    EXPECT_EQ(unique.size(), data_->payload.size()) << "samples lost";
    auto m = (*l)->Metrics();
    std::printf("[   INFO   ] coalesce %d: %llu stalled frames; %lld timeouts %lld retries %lld coalesced requests "
                "%lld duplicates dropped\n",
                coalesce, static_cast<unsigned long long>(proxy.stats().stalls - stalls_before),
                static_cast<long long>(m.timeouts), static_cast<long long>(m.retries),
                static_cast<long long>(m.coalesced_requests), static_cast<long long>(m.duplicates_dropped));
    // The case under test happened: answers outlived their timeouts.
    EXPECT_GT(proxy.stats().stalls - stalls_before, 0u);
    EXPECT_GT(m.timeouts, 0);
    if (coalesce > 1) {
      EXPECT_GT(m.coalesced_requests, 0);
    }
  }
}

}  // namespace
}  // namespace cqlstream
