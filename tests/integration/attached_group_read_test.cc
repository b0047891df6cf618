// Copyright (c) cqlstream authors.
//
// Coalesced foreign reads of attached datasets (loader_foreign_group.cc)
// against the real node: a foreign table of small rows (100-699 bytes),
// attached, read by loaders whose samples' keys are known (after the first
// samples, or from the key cache in later epochs) several rows to a request
// (`SELECT "id", "data", "label" ... WHERE "id" IN ?`), exactly once and
// byte-identical, with labels, also when answers outlive their requests'
// timeouts mid-frame; none with coalesce 1 or when a sample was larger than
// a coalesced read takes; a foreign row deleted since the snapshot named or
// skipped as in a single read.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <future>
#include <set>

#include "attached_fixture.h"
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

class AttachedGroupReadTest : public testing::SharedDatasetSuite<AttachedGroupReadTest> {
 public:
  static SyntheticDataset Make(net::Session& s) {
    const std::string& ks = testing::TestKeyspace();
    testing::ForeignTable t{ks + ".data_small", "int", 600, 3, /*max_small=*/600, /*big_every=*/0};
    testing::WriteForeignTable(s, t);
    return testing::Attach(s, ks, "att_small", t, LabelKind::kClass);
  }
};

TEST_F(AttachedGroupReadTest, SmallRowsAreReadSeveralToARequestExactlyOnce) {
  ASSERT_TRUE(data_->info.attached());
  const int64_t n = static_cast<int64_t>(data_->payload.size());
  ASSERT_EQ(n, 600);
  for (bool ordered : {false, true}) {
    SCOPED_TRACE(ordered ? "ordered" : "out of order");
    LoaderOptions o = testing::TestLoaderOptions("att_small");
    o.batch_size = 32;
    o.seed = 9;
    o.epochs = 2;
    o.ordered = ordered;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    for (int e = 0; e < 2; ++e) {
      SCOPED_TRACE(e);
      Delivered d = ReadEpoch(**l, *data_);  // checks every sample's bytes and label, each once
      ASSERT_TRUE(d.error.empty()) << d.error;
      EXPECT_EQ(static_cast<int64_t>(d.keys.size()), n);
    }
    const LoaderMetrics m = (*l)->Metrics();
    EXPECT_GT(m.coalesced_requests, 0);
    // The second epoch's keys are all known: most rows share requests.
    EXPECT_GE(m.coalesced_samples, n) << m.coalesced_requests << " requests";
    EXPECT_GE(m.coalesced_samples, 4 * m.coalesced_requests);
  }
}

TEST_F(AttachedGroupReadTest, ThreeRanksReadAnEpochExactlyOnce) {
  std::vector<std::future<Delivered>> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.push_back(std::async(std::launch::async, [r] {
      LoaderOptions o = testing::TestLoaderOptions("att_small");
      o.batch_size = 16;
      o.seed = 4;
      o.rank = r;
      o.world_size = 3;
      o.epochs = 2;
      Delivered all;
      auto l = Loader::Open(o);
      if (!l.ok()) {
        all.error = l.status().ToString();
        return all;
      }
      for (int e = 0; e < 2; ++e) {
        Delivered d = ReadEpoch(**l, *data_);
        if (!d.error.empty()) return d;
        if (e == 1) all = std::move(d);  // the epoch read with every key known
      }
      return all;
    }));
  }
  std::set<SampleKey> all;
  for (auto& f : ranks) {
    Delivered d = f.get();
    ASSERT_TRUE(d.error.empty()) << d.error;
    for (SampleKey k : d.keys) EXPECT_TRUE(all.insert(k).second) << "delivered twice: " << FormatKey(k);
  }
  EXPECT_EQ(all.size(), data_->payload.size());
}

TEST_F(AttachedGroupReadTest, CoalesceOneReadsEachRowAlone) {
  LoaderOptions o = testing::TestLoaderOptions("att_small");
  o.coalesce = 1;
  o.epochs = 2;
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  for (int e = 0; e < 2; ++e) {
    Delivered d = ReadEpoch(**l, *data_);
    ASSERT_TRUE(d.error.empty()) << d.error;
  }
  EXPECT_EQ((*l)->Metrics().coalesced_requests, 0);
}

// A grouped answer that keeps arriving after its request timed out: its
// late rows must claim none of its samples (each is retried; the retry's
// bytes are the ones kept), and every sample arrives once.
TEST_F(AttachedGroupReadTest, AnAnswerFinishingAfterItsTimeoutClaimsNothing) {
  // Its own loopback address (other tests' proxies use 127.0.0.2 and .5).
  testing::FaultProxy proxy("127.0.0.6", "127.0.0.1", 9042);
  ASSERT_TRUE(proxy.ok()) << proxy.error();
  testing::FaultProxy::Faults none;
  proxy.SetFaults(none);  // connect undisturbed
  LoaderOptions o = testing::TestLoaderOptions("att_small");
  o.connection.hosts = {"127.0.0.6"};
  o.connection.connect_timeout = std::chrono::milliseconds(3000);
  o.batch_size = 20;
  o.hedge = false;  // the retry, not a hedge, must deliver the late samples
  o.request_timeout = std::chrono::milliseconds(300);
  o.epochs = 2;
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  testing::FaultProxy::Faults f;
  f.stall_p = 0.03;
  f.stall_for = std::chrono::milliseconds(700);  // past the request timeout
  proxy.SetFaults(f);
  auto fut = std::async(std::launch::async, [&] {
    std::vector<Delivered> epochs;
    for (int e = 0; e < 2; ++e) {
      epochs.push_back(ReadEpoch(**l, *data_));
      if (!epochs.back().error.empty()) break;
    }
    return epochs;
  });
  if (fut.wait_for(std::chrono::seconds(120)) != std::future_status::ready) {
    (*l)->Close();  // ends the hung Next(), so that the test ends
    fut.wait();
    FAIL() << "the loader hangs";
  }
  proxy.SetFaults(none);
  const std::vector<Delivered> epochs = fut.get();
  ASSERT_EQ(epochs.size(), 2u) << epochs.back().error;
  for (const Delivered& d : epochs) {
    ASSERT_TRUE(d.error.empty()) << d.error;
    std::set<SampleKey> unique(d.keys.begin(), d.keys.end());
    EXPECT_EQ(unique.size(), d.keys.size()) << "duplicates";
    EXPECT_EQ(unique.size(), data_->payload.size()) << "samples lost";
  }
  const LoaderMetrics m = (*l)->Metrics();
  std::printf("[   INFO   ] %llu stalled frames; %lld timeouts %lld retries %lld coalesced requests\n",
              static_cast<unsigned long long>(proxy.stats().stalls), static_cast<long long>(m.timeouts),
              static_cast<long long>(m.retries), static_cast<long long>(m.coalesced_requests));
  // The case under test happened: answers outlived their timeouts, and rows
  // were read in groups.
  EXPECT_GT(proxy.stats().stalls, 0u);
  EXPECT_GT(m.timeouts, 0);
  EXPECT_GT(m.coalesced_requests, 0);
}

// Keys of every kind bind and come back byte for byte: an int, a bigint, a
// text and a blob key read in groups, exactly once with their bytes. A
// snapshot row whose text key is not UTF-8 (it decodes, but cannot be
// bound) fails its own sample only: it is never put in a group.
TEST(AttachedGroupReadKeys, KeysOfEveryKindAreReadInGroups) {
  auto s = testing::TestSession();
  ASSERT_NE(s, nullptr);
  const std::string& ks = testing::TestKeyspace();
  int id = 20;
  for (const std::string type : {"int", "bigint", "text", "blob"}) {
    SCOPED_TRACE(type);
    testing::ForeignTable t{ks + ".data_k" + type, "int", 200, id++, /*max_small=*/600, /*big_every=*/0, type};
    testing::WriteForeignTable(*s, t);
    SyntheticDataset d = testing::Attach(*s, ks, "att_k" + type, t, LabelKind::kClass);
    ASSERT_EQ(d.payload.size(), 200u);
    const int32_t seg = KeySegment(d.payload.begin()->first);
    const SampleKey bad = MakeKey(seg, 150);
    if (type == "text") {
      testing::MustRun(*s, fmt::format("UPDATE {}.k_att_ktext SET key = 0xfffe41 WHERE seg = {} AND idx = 150", ks,
                                       seg));
      d.payload.erase(bad);
    }
    LoaderOptions o = testing::TestLoaderOptions("att_k" + type);
    o.epochs = 2;
    o.shuffle = false;  // sample 150 is issued after groups have started
    o.on_missing = OnMissing::kSkip;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    for (int e = 0; e < 2; ++e) {
      Delivered r = ReadEpoch(**l, d);  // checks every sample's bytes and label
      ASSERT_TRUE(r.error.empty()) << r.error;
      EXPECT_EQ(r.keys.size(), d.payload.size());
    }
    const LoaderMetrics m = (*l)->Metrics();
    EXPECT_GT(m.coalesced_requests, 0);
    EXPECT_EQ(m.skipped, type == "text" ? 2 : 0);  // the bad key, once per epoch
  }
  s->Close();
}

// Rows of 300 kB: groups never start (a group takes samples of at most
// 16 KiB), every row is read alone.
TEST(AttachedGroupReadSizes, LargeRowsAreReadAlone) {
  auto s = testing::TestSession();
  ASSERT_NE(s, nullptr);
  const std::string& ks = testing::TestKeyspace();
  testing::ForeignTable t{ks + ".data_large", "int", 48, 5, /*max_small=*/3000, /*big_every=*/1};
  testing::WriteForeignTable(*s, t);
  SyntheticDataset d = testing::Attach(*s, ks, "att_large", t, LabelKind::kClass);
  ASSERT_EQ(d.payload.size(), 48u);
  LoaderOptions o = testing::TestLoaderOptions("att_large");
  o.epochs = 2;
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  for (int e = 0; e < 2; ++e) {
    Delivered r = ReadEpoch(**l, d);
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(r.keys.size(), 48u);
  }
  EXPECT_EQ((*l)->Metrics().coalesced_requests, 0);
  s->Close();
}

// A row deleted from the foreign table after the snapshot: a grouped read's
// answer lacks it, its sample's attempt fails and is retried alone, and
// the error names the sample, or the sample is skipped; the rows around it
// arrive with their bytes. (In plan order without shuffle and with a fixed
// window of 32, sample 250 is issued long after groups have started, in a
// group: group_failures shows that a grouped read met the deleted row.)
TEST(AttachedGroupReadErrors, ADeletedRowInAGroupIsNamedOrSkipped) {
  auto s = testing::TestSession();
  ASSERT_NE(s, nullptr);
  const std::string& ks = testing::TestKeyspace();
  testing::ForeignTable t{ks + ".data_gdel", "int", 300, 6, /*max_small=*/600, /*big_every=*/0};
  testing::WriteForeignTable(*s, t);
  SyntheticDataset d = testing::Attach(*s, ks, "att_gdel", t, LabelKind::kClass);
  ASSERT_EQ(d.payload.size(), 300u);
  const int32_t seg = KeySegment(d.payload.begin()->first);
  const SampleKey gone = MakeKey(seg, 250);
  Uuid u;
  std::copy(d.path.at(gone).begin(), d.path.at(gone).end(), u.bytes.begin());
  testing::MustRun(*s, fmt::format("DELETE FROM {} WHERE id = {}", t.table, u.ToString()));
  d.payload.erase(gone);
  {
    LoaderOptions o = testing::TestLoaderOptions("att_gdel");
    o.epochs = 1;
    o.shuffle = false;
    o.on_missing = OnMissing::kSkip;
    o.adaptive = false;
    o.max_in_flight = 32;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    Delivered r = ReadEpoch(**l, d);
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(r.keys.size(), 299u);
    const LoaderMetrics m = (*l)->Metrics();
    EXPECT_EQ(m.skipped, 1);
    EXPECT_GT(m.coalesced_requests, 0);
    EXPECT_EQ(m.group_failures, 1) << "the grouped read that lacked sample 250";
  }
  {
    LoaderOptions o = testing::TestLoaderOptions("att_gdel");
    o.epochs = 1;
    o.shuffle = false;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    Delivered r = ReadEpoch(**l, d);
    EXPECT_NE(r.error.find(FormatKey(gone)), std::string::npos) << r.error;
    EXPECT_NE(r.error.find(u.ToString()), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("data_gdel"), std::string::npos) << r.error;
    EXPECT_GT((*l)->Metrics().coalesced_requests, 0);
  }
  s->Close();
}

}  // namespace
}  // namespace cqlstream
