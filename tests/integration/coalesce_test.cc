// Copyright (c) cqlstream authors.
//
// Coalesced reads of small samples (loader/coalesce.h) against the real
// node: exactly-once over several epochs, the same plan order as single
// reads, ranks, resume mid-epoch, Fetch, a sample deleted after planning
// (missing: named or skipped, as for single reads), corrupted rows and a
// sample with extra rows (the group read's per-partition limit).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>

#include "cqlstream/loader.h"
#include "damaged_dataset_fixture.h"
#include "dataset_fixture.h"
#include "shared_dataset_suite.h"
#include "test_env.h"

namespace cqlstream {
namespace {

using testing::Delivered;
using testing::MakeSyntheticDataset;
using testing::ReadEpoch;
using testing::SyntheticDataset;
using testing::SyntheticSpec;

// Small one-chunk samples (Fashion-MNIST-like), three segments.
SyntheticSpec SmallSpec(const std::string& name, int samples) {
  SyntheticSpec spec;
  spec.name = name;
  spec.samples = samples;
  spec.segments = 3;
  spec.chunk_size = 4096;
  spec.size = [](int i) -> int64_t { return 300 + (i * 53) % 900; };
  return spec;
}

class CoalesceTest : public testing::SharedDatasetSuite<CoalesceTest> {
 public:
  static SyntheticDataset Make(net::Session& s) {
    return MakeSyntheticDataset(s, testing::TestKeyspace(), SmallSpec("coal", 900));
  }

 protected:
  static LoaderOptions Options(int coalesce) {
    LoaderOptions o = testing::TestLoaderOptions("coal");
    o.coalesce = coalesce;
    o.batch_size = 32;
    o.seed = 3;
    return o;
  }
};

// Every epoch every key once, with its bytes (ReadEpoch checks them).
std::vector<std::vector<SampleKey>> ReadEpochs(Loader& l, const SyntheticDataset& d, int epochs) {
  std::vector<std::vector<SampleKey>> out;
  for (int e = 0; e < epochs; ++e) {
    Delivered r = ReadEpoch(l, d);
    EXPECT_TRUE(r.error.empty()) << r.error;
    std::set<SampleKey> seen;
    for (SampleKey k : r.keys) EXPECT_TRUE(seen.insert(k).second) << "epoch " << e << ": twice " << FormatKey(k);
    EXPECT_EQ(seen.size(), d.payload.size()) << "epoch " << e;
    out.push_back(std::move(r.keys));
  }
  return out;
}

TEST_F(CoalesceTest, ExactlyOnceOverEpochsInTheOrderOfSingleReads) {
  for (bool ordered : {false, true}) {
    SCOPED_TRACE(ordered ? "ordered" : "out of order");
    LoaderOptions on = Options(0), off = Options(1);
    on.epochs = off.epochs = 3;
    on.ordered = off.ordered = ordered;
    on.verify_checksums = true;
    auto a = Loader::Open(on);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    auto got_on = ReadEpochs(**a, *data_, 3);
    const LoaderMetrics m = (*a)->Metrics();
    EXPECT_GT(m.coalesced_requests, 0);
    EXPECT_GE(m.coalesced_samples, 2 * m.coalesced_requests) << "groups of at least two";
    EXPECT_EQ(m.skipped, 0);
    EXPECT_EQ(m.columns_decoded, 0) << "the coalesced reads' columns matched as bytes";
    (*a)->Close();
    auto b = Loader::Open(off);
    ASSERT_TRUE(b.ok());
    auto got_off = ReadEpochs(**b, *data_, 3);
    EXPECT_EQ((*b)->Metrics().coalesced_requests, 0);
    // Ordered assembly delivers in plan order: coalescing does not change it.
    if (ordered) {
      EXPECT_EQ(got_on, got_off);
    }
  }
}

TEST_F(CoalesceTest, RanksAreDisjointAndCoverTheSplit) {
  EXPECT_EQ(testing::ReadAllRanks(Options(0), 3, *data_).size(), data_->payload.size());
}

TEST_F(CoalesceTest, ResumeMidEpoch) {
  LoaderOptions o = Options(0);
  auto a = Loader::Open(o);
  ASSERT_TRUE(a.ok());
  Delivered first = ReadEpoch(**a, *data_, 7);
  ASSERT_EQ(first.keys.size(), 7u * 32u);
  const std::string state = (*a)->State();
  (*a)->Close();
  LoaderMetrics m;
  EXPECT_EQ(testing::ResumeEpoch(o, state, first.keys, *data_, &m).size(), data_->payload.size());
  EXPECT_GT(m.coalesced_requests, 0);
}

TEST_F(CoalesceTest, FetchGroupsKeysAndKeepsTheirOrder) {
  LoaderOptions o = Options(0);
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok());
  // Keys of one segment and of others, one of them twice.
  std::vector<SampleKey> keys;
  for (const auto& [k, p] : data_->payload) keys.push_back(k);
  ASSERT_NE(KeySegment(keys.front()), KeySegment(keys.back()));
  const SampleKey a = keys[5], b = keys[9], c = keys[11], d = keys[1], x = keys[keys.size() - 3],
                  y = keys[keys.size() - 7];
  std::vector<SampleKey> want = {a, x, b, a, c, y, d, x};
  auto got = (*l)->Fetch(want);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ((*got)->size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ((*got)->keys[i], want[i]);
    auto s = (*got)->sample(i);
    const auto& p = data_->payload.at(want[i]);
    EXPECT_TRUE(s.size() == p.size() && std::equal(s.begin(), s.end(), p.begin())) << FormatKey(want[i]);
  }
  EXPECT_GT((*l)->Metrics().coalesced_requests, 0);
}

// A dataset of one segment whose rows the test damages.
class DamagedCoalesceTest : public testing::DamagedDatasetTest {
 protected:
  SyntheticSpec Spec() const override {
    SyntheticSpec spec = SmallSpec("coal_dmg", 300);
    spec.segments = 1;
    return spec;
  }
  // Reads one epoch; returns the error that ended it (empty: none) and the
  // samples delivered. In plan order with a fixed window of 64, the first
  // fill issues samples 0-63 together: four groups of 16 (one replica set:
  // the integration tests run against one node), so each damaged sample
  // below (0:17, 0:40, 0:41, 0:50) is met first by a grouped read (no
  // hedge starts before 200 latencies are recorded, and a retry waits for
  // its group's answer).
  std::pair<std::string, size_t> ReadAll(OnMissing on_missing, LoaderMetrics* metrics) {
    LoaderOptions o = testing::TestLoaderOptions("coal_dmg");
    o.batch_size = 20;
    o.on_missing = on_missing;
    o.shuffle = false;
    o.adaptive = false;
    o.max_in_flight = 64;
    LoaderMetrics m;
    auto r = ReadOneEpoch(o, &m);
    EXPECT_GT(m.coalesced_requests, 0);
    if (metrics) *metrics = m;
    return r;
  }
};

TEST_F(DamagedCoalesceTest, ADeletedSampleIsMissingAsForSingleReads) {
  Run("DELETE FROM {}.d_coal_dmg WHERE seg = 0 AND idx = 17");
  auto [err, got] = ReadAll(OnMissing::kRaise, nullptr);
  EXPECT_NE(err.find("0:17"), std::string::npos) << err;
  EXPECT_NE(err.find(d_.path.at(MakeKey(0, 17))), std::string::npos) << "the error names the path: " << err;
  EXPECT_LT(got, 300u);
  LoaderMetrics m;
  auto [err2, got2] = ReadAll(OnMissing::kSkip, &m);
  EXPECT_TRUE(err2.empty()) << err2;
  EXPECT_EQ(got2, 299u);
  EXPECT_EQ(m.skipped, 1);
  EXPECT_EQ(m.group_failures, 1) << "the grouped read that lacked 0:17";
}

TEST_F(DamagedCoalesceTest, ACorruptedRowFailsOnlyItsSample) {
  // A size that disagrees with the chunk, and a label out of range.
  Run("UPDATE {}.d_coal_dmg SET size = 5 WHERE seg = 0 AND idx = 40");
  Run("UPDATE {}.d_coal_dmg SET label = 99 WHERE seg = 0 AND idx = 41");
  auto [err, got] = ReadAll(OnMissing::kRaise, nullptr);
  EXPECT_TRUE(err.find("0:40") != std::string::npos || err.find("0:41") != std::string::npos) << err;
  LoaderMetrics m;
  auto [err2, got2] = ReadAll(OnMissing::kSkip, &m);
  EXPECT_TRUE(err2.empty()) << err2;
  EXPECT_EQ(got2, 298u);
  EXPECT_EQ(m.skipped, 2);
  EXPECT_EQ(m.group_failures, 2) << "the grouped reads that held 0:40 and 0:41 damaged";
}

TEST_F(DamagedCoalesceTest, ASampleWithExtraRowsFailsAloneInItsGroup) {
  // Sample 0:50 gains 300 extra chunk rows. The group read is unpaged with
  // PER PARTITION LIMIT 2, so its answer holds two of 0:50's rows, which
  // show 0:50 corrupt (chunks past its size), and every other sample of
  // the group arrives.
  for (int c = 1; c <= 300; ++c) Run(fmt::format("INSERT INTO {{}}.d_coal_dmg (seg, idx, chunk, data) VALUES (0, 50, {}, 0x00)", c));
  LoaderMetrics m;
  auto [err, got] = ReadAll(OnMissing::kSkip, &m);
  EXPECT_TRUE(err.empty()) << err;
  EXPECT_EQ(got, 299u);
  EXPECT_EQ(m.skipped, 1);
  EXPECT_EQ(m.group_failures, 1) << "the grouped read that held two of 0:50's rows";
  auto [err2, got2] = ReadAll(OnMissing::kRaise, nullptr);
  EXPECT_NE(err2.find("0:50"), std::string::npos) << err2;
}

}  // namespace
}  // namespace cqlstream
