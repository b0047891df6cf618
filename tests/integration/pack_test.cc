// Copyright (c) cqlstream authors.
//
// The packed layout (store/pack.h) and packed reads (LoaderOptions::packed,
// loader/packed_order.h) against the real node: `pack` writes every full
// pack once and reports each segment; the loader reads each pack with one
// request, delivers every sample exactly once per epoch with its bytes, in
// ranks that cover the split, resumes mid-epoch, and refuses a checkpoint
// of the other order; a damaged or missing pack row is read again from the
// data table, and lying packs rows are named.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>
#include <string_view>

#include "cqlstream/loader.h"
#include "damaged_dataset_fixture.h"
#include "dataset_fixture.h"
#include "shared_dataset_suite.h"
#include "store/catalog.h"
#include "store/pack.h"
#include "store/schema.h"
#include "store/segments_table.h"
#include "test_env.h"

namespace cqlstream {
namespace {

using testing::Delivered;
using testing::MakeSyntheticDataset;
using testing::ReadEpoch;
using testing::SyntheticDataset;
using testing::SyntheticSpec;

constexpr int kSamples = 900, kSegments = 3, kPackSize = 16;
// 300 samples per segment: 18 packs of 16 and 12 samples read alone.
constexpr int kPacks = kSegments * (kSamples / kSegments / kPackSize);
constexpr int kPacked = kPacks * kPackSize;

SyntheticSpec PackSpec(const std::string& name) {
  SyntheticSpec spec;
  spec.name = name;
  spec.samples = kSamples;
  spec.segments = kSegments;
  spec.chunk_size = 4096;
  spec.size = [](int i) -> int64_t { return 300 + (i * 53) % 900; };
  return spec;
}

store::PackReport Pack(net::Session& s, const std::string& name, bool force = false) {
  auto d = store::LoadDataset(s, testing::TestKeyspace(), name);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  store::PackOptions o;
  o.pack_size = kPackSize;
  o.force = force;
  store::PackReport r;
  Status st = store::PackDataset(s, *d, o, &r);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return r;
}

class PackTest : public testing::SharedDatasetSuite<PackTest> {
 public:
  static SyntheticDataset Make(net::Session& s) {
    SyntheticDataset data = MakeSyntheticDataset(s, testing::TestKeyspace(), PackSpec("packd"));
    store::PackReport r = Pack(s, "packd");
    EXPECT_EQ(r.samples_packed, kPacked);
    EXPECT_EQ(r.packs_written, kPacks);
    return data;
  }

 protected:
  static LoaderOptions Options() {
    LoaderOptions o = testing::TestLoaderOptions("packd");
    o.packed = true;
    o.batch_size = 32;
    o.seed = 5;
    return o;
  }
};

TEST_F(PackTest, PackReportsEachSegmentAndARerunWritesNothing) {
  auto s = testing::TestSession();
  ASSERT_NE(s, nullptr);
  store::PackReport again = Pack(*s, "packd");
  ASSERT_EQ(again.segments.size(), static_cast<size_t>(kSegments));
  for (const auto& g : again.segments) {
    EXPECT_EQ(g.outcome, "already packed") << g.seg;
    EXPECT_EQ(g.info.pack_size, kPackSize);
    EXPECT_EQ(g.info.packed, kPacked / kSegments);
    EXPECT_EQ(g.info.left_out, 0);
  }
  EXPECT_EQ(again.packs_written, 0);
  auto rows = store::ReadPacks(*s, testing::TestKeyspace(), "packd");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), static_cast<size_t>(kSegments));
  auto d = store::LoadDataset(*s, testing::TestKeyspace(), "packd");
  ASSERT_TRUE(d.ok());
  for (const auto& p : *rows) {
    const SegmentInfo* g = nullptr;
    for (const auto& x : d->segments) g = x.seg == p.seg ? &x : g;
    EXPECT_TRUE(store::ValidatePack(p, g, *d).ok());
  }
  // Each pack partition holds exactly its members.
  auto n = s->Query(fmt::format("SELECT COUNT(*) FROM {}.p_packd", testing::TestKeyspace()));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->rows()->Get<int64_t>(0, 0).value(), kPacked);
  s->Close();
}

TEST_F(PackTest, ExactlyOnceOverEpochsOnePackPerRequest) {
  for (bool ordered : {false, true}) {
    SCOPED_TRACE(ordered ? "ordered" : "out of order");
    LoaderOptions o = Options();
    o.epochs = 3;
    o.ordered = ordered;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    std::vector<std::vector<SampleKey>> epochs;
    for (int e = 0; e < 3; ++e) {
      Delivered r = ReadEpoch(**l, *data_);  // checks every sample's bytes and label
      EXPECT_TRUE(r.error.empty()) << r.error;
      std::set<SampleKey> seen(r.keys.begin(), r.keys.end());
      EXPECT_EQ(seen.size(), r.keys.size()) << "epoch " << e << ": a sample twice";
      EXPECT_EQ(seen.size(), data_->payload.size()) << "epoch " << e;
      epochs.push_back(std::move(r.keys));
    }
    EXPECT_NE(epochs[0], epochs[1]);
    const LoaderMetrics m = (*l)->Metrics();
    // Every pack of every epoch in one request of all its members (a pack
    // is issued whole), and nothing else reads packs.
    EXPECT_EQ(m.packed_requests, 3 * kPacks);
    EXPECT_GE(m.coalesced_samples, 3 * kPacked);
    EXPECT_EQ(m.retries, 0);
  }
}

TEST_F(PackTest, RanksAreDisjointAndCoverTheSplit) {
  EXPECT_EQ(testing::ReadAllRanks(Options(), 3, *data_).size(), data_->payload.size());
}

TEST_F(PackTest, ResumeMidEpochAndRefuseTheOtherOrdersCheckpoint) {
  LoaderOptions o = Options();
  auto a = Loader::Open(o);
  ASSERT_TRUE(a.ok());
  Delivered first = ReadEpoch(**a, *data_, 7);
  ASSERT_EQ(first.keys.size(), 7u * 32u);
  const std::string state = (*a)->State();
  (*a)->Close();

  LoaderOptions per_sample = o;
  per_sample.packed = false;
  auto wrong = Loader::Open(per_sample);
  ASSERT_TRUE(wrong.ok());
  Status refused = (*wrong)->Restore({state});
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("another sample set or order"), std::string::npos) << refused.ToString();
  const std::string per_sample_state = (*wrong)->State();
  (*wrong)->Close();

  auto b = Loader::Open(o);
  ASSERT_TRUE(b.ok());
  Status other = (*b)->Restore({per_sample_state});
  EXPECT_NE(other.message().find("per-sample order"), std::string::npos) << other.ToString();
  (*b)->Close();

  LoaderMetrics m;
  EXPECT_EQ(testing::ResumeEpoch(o, state, first.keys, *data_, &m).size(), data_->payload.size());
  EXPECT_GT(m.packed_requests, 0);
}

TEST_F(PackTest, OptionsOutOfRangeAreNamedBeforeAnythingIsWritten) {
  auto s = testing::TestSession();
  ASSERT_NE(s, nullptr);
  auto d = store::LoadDataset(*s, testing::TestKeyspace(), "packd");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  struct Case {
    int32_t pack_size;
    int concurrency;
    std::string_view error;
  };
  for (const Case& c : {Case{1, 8, "pack size must be in [2, 100], got 1"},
                        Case{101, 8, "pack size must be in [2, 100], got 101"},
                        Case{16, 0, "pack concurrency must be in [1, 256], got 0"},
                        Case{16, 257, "pack concurrency must be in [1, 256], got 257"}}) {
    store::PackOptions o;
    o.pack_size = c.pack_size;
    o.concurrency = c.concurrency;
    o.force = true;
    store::PackReport r;
    Status st = store::PackDataset(*s, *d, o, &r);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.ToString();
    EXPECT_NE(st.message().find(c.error), std::string::npos) << st.ToString();
    EXPECT_EQ(r.packs_written, 0);
  }
  // The packs written by the suite are still there.
  store::PackReport again = Pack(*s, "packd");
  EXPECT_EQ(again.packs_written, 0);
  s->Close();
}

TEST_F(PackTest, ASelectionIsRefused) {
  Selection sel;
  sel.dataset = "packd";
  sel.split = "train";
  sel.keys = {data_->payload.begin()->first};
  const std::string path = ::testing::TempDir() + "/packd.sel";
  ASSERT_TRUE(sel.Save(path).ok());
  LoaderOptions so = Options();
  so.selection_path = path;
  auto ls = Loader::Open(so);
  ASSERT_FALSE(ls.ok());
  EXPECT_NE(ls.status().message().find("selection"), std::string::npos) << ls.status().ToString();
}

// A dataset of one segment whose packs the test damages.
class DamagedPackTest : public testing::DamagedDatasetTest {
 protected:
  SyntheticSpec Spec() const override {
    SyntheticSpec spec = PackSpec("pack_dmg");
    spec.samples = 320;
    spec.segments = 1;
    return spec;
  }
  void AfterMake() override {
    store::PackReport r = Pack(*s_, "pack_dmg", /*force=*/true);
    ASSERT_EQ(r.samples_packed, 320);
  }
  // A write of the packs table or p_pack_dmg (`cql` with two {}: the
  // keyspace, the timestamp): with a client timestamp, as `pack` writes
  // them (a server timestamp has millisecond precision plus a counter, and
  // can fall below the client's microseconds of the row just written).
  void RunOnPacks(const std::string& cql) {
    testing::MustRun(*s_, fmt::format(fmt::runtime(cql), testing::TestKeyspace(), store::NowMicros() + 1));
  }
  // The pack of segment 0 that holds idx (by the packs row's seed).
  int32_t PackOf(int32_t idx) {
    auto rows = store::ReadPacks(*s_, testing::TestKeyspace(), "pack_dmg");
    EXPECT_TRUE(rows.ok() && rows->size() == 1u);
    if (!rows.ok() || rows->size() != 1u) return -1;
    store::PackMembership members(320, kPackSize, (*rows)[0].seed, 0);
    for (int64_t j = 0; j < members.packs(); ++j) {
      for (int32_t k = 0; k < kPackSize; ++k) {
        if (members.Member(j, k) == idx) return static_cast<int32_t>(j);
      }
    }
    ADD_FAILURE() << "idx " << idx << " is in no pack";
    return -1;
  }
  // One epoch, packed, checksums verified; every delivered sample's bytes
  // are checked against the fixture.
  std::pair<std::string, size_t> ReadAll(LoaderMetrics* m, int max_attempts = 0) {
    LoaderOptions o = testing::TestLoaderOptions("pack_dmg");
    o.max_attempts = max_attempts;
    o.packed = true;
    o.batch_size = 20;
    o.verify_checksums = true;
    o.hedge = false;  // (the retries counted are those of the damaged samples)
    return ReadOneEpoch(o, m);
  }
};

TEST_F(DamagedPackTest, ADamagedOrMissingCopyIsReadFromTheDataTableUncounted) {
  // Member 0:7's copy in its pack gets other bytes of the same size; 0:9's
  // is deleted. Both are read again alone from d_, at once and without
  // counting a failed attempt: with one attempt per sample, every sample
  // arrives with its own bytes.
  const int32_t pack7 = PackOf(7), pack9 = PackOf(9);
  const size_t size7 = d_.payload.at(MakeKey(0, 7)).size();
  RunOnPacks(fmt::format("UPDATE {{}}.p_pack_dmg USING TIMESTAMP {{}} SET data = 0x{} WHERE seg = 0 AND pack = {} AND "
                         "idx = 7",
                         std::string(2 * size7, 'a'), pack7));
  RunOnPacks(fmt::format("DELETE FROM {{}}.p_pack_dmg USING TIMESTAMP {{}} WHERE seg = 0 AND pack = {} AND idx = 9",
                         pack9));
  LoaderMetrics metrics;
  auto [err, got] = ReadAll(&metrics, /*max_attempts=*/1);
  EXPECT_TRUE(err.empty()) << err;
  EXPECT_EQ(got, 320u);
  EXPECT_EQ(metrics.pack_fallbacks, 2);
  EXPECT_EQ(metrics.group_failures, 2);
  EXPECT_EQ(metrics.retries, 0);
  EXPECT_EQ(metrics.packed_requests, 20);
}

TEST_F(DamagedPackTest, ASampleDamagedInTheDataTableTooIsNamed) {
  // The copy missing and the data row damaged: the fallback read's failure
  // counts as usual and names the sample.
  RunOnPacks(fmt::format("DELETE FROM {{}}.p_pack_dmg USING TIMESTAMP {{}} WHERE seg = 0 AND pack = {} AND idx = 11",
                         PackOf(11)));
  Run("UPDATE {}.d_pack_dmg SET size = 5 WHERE seg = 0 AND idx = 11");
  auto [err, got] = ReadAll(nullptr, /*max_attempts=*/1);
  EXPECT_NE(err.find("0:11"), std::string::npos) << err;
}

TEST_F(DamagedPackTest, LyingPacksRowsAreNamed) {
  RunOnPacks("UPDATE {}.packs USING TIMESTAMP {} SET pack_size = 0 WHERE dataset = 'pack_dmg' AND seg = 0");
  auto [err, got] = ReadAll(nullptr);
  EXPECT_NE(err.find("pack size 0 is outside"), std::string::npos) << err;
  RunOnPacks("UPDATE {}.packs USING TIMESTAMP {} SET pack_size = 16, count = 319 WHERE dataset = 'pack_dmg' AND "
             "seg = 0");
  auto [err2, got2] = ReadAll(nullptr);
  EXPECT_NE(err2.find("packed for 319 samples, but the segment holds 320"), std::string::npos) << err2;
  RunOnPacks("UPDATE {}.packs USING TIMESTAMP {} SET count = 320, packed = 400 WHERE dataset = 'pack_dmg' AND seg = 0");
  auto [err3, got3] = ReadAll(nullptr);
  EXPECT_NE(err3.find("do not add up"), std::string::npos) << err3;
  // `pack --force` writes it again.
  store::PackReport r = Pack(*s_, "pack_dmg", /*force=*/true);
  EXPECT_EQ(r.samples_packed, 320);
  auto [err4, got4] = ReadAll(nullptr);
  EXPECT_TRUE(err4.empty()) << err4;
  EXPECT_EQ(got4, 320u);
}

TEST_F(DamagedPackTest, ASplitWithoutPacksIsNamed) {
  RunOnPacks("DELETE FROM {}.packs USING TIMESTAMP {} WHERE dataset = 'pack_dmg'");
  auto [err, got] = ReadAll(nullptr);
  EXPECT_NE(err.find("has no packs: run `cqlstream pack pack_dmg`"), std::string::npos) << err;
  EXPECT_EQ(got, 0u);
}

TEST_F(DamagedPackTest, DropRemovesThePacks) {
  auto rep = store::DropDataset(*s_, testing::TestKeyspace(), "pack_dmg");
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_NE(std::find(rep->tables.begin(), rep->tables.end(), "p_pack_dmg"), rep->tables.end());
  auto rows = store::ReadPacks(*s_, testing::TestKeyspace(), "pack_dmg");
  ASSERT_TRUE(rows.ok());
  EXPECT_TRUE(rows->empty());
}

}  // namespace
}  // namespace cqlstream

namespace cqlstream {
namespace {

TEST(PackSizeTest, ASplitGetsOnePackSizeThatFitsAllItsSegments) {
  auto s = testing::TestSession();
  ASSERT_NE(s, nullptr);
  // Segments 0 and 1 hold samples of 500 bytes, segment 2 of up to 12,000:
  // 512 KiB / 12,000 = 43 samples per pack for the whole split.
  SyntheticSpec spec;
  spec.name = "pack_sizes";
  spec.samples = 300;
  spec.segments = 3;
  spec.chunk_size = 16384;
  spec.size = [](int i) -> int64_t { return i < 200 ? 500 : 12000; };
  SyntheticDataset d = MakeSyntheticDataset(*s, testing::TestKeyspace(), spec);
  store::PackReport r = Pack(*s, "pack_sizes", /*force=*/true);  // (Pack asks for 16)
  ASSERT_EQ(r.segments.size(), 3u);
  for (const auto& g : r.segments) {
    EXPECT_EQ(g.outcome, "packed") << g.seg;
    EXPECT_EQ(g.info.pack_size, kPackSize) << g.seg;
  }
  auto d2 = store::LoadDataset(*s, testing::TestKeyspace(), "pack_sizes");
  ASSERT_TRUE(d2.ok());
  store::PackOptions o;
  o.pack_size = 64;
  o.force = true;
  ASSERT_TRUE(store::PackDataset(*s, *d2, o, &r).ok());
  for (const auto& g : r.segments) {
    EXPECT_EQ(g.outcome, "packed") << g.seg;
    EXPECT_EQ(g.info.pack_size, 43) << g.seg;
  }
  // A later run that asks for another size keeps the split's.
  o.force = false;
  o.pack_size = 20;
  ASSERT_TRUE(store::PackDataset(*s, *d2, o, &r).ok());
  for (const auto& g : r.segments) EXPECT_EQ(g.outcome, "already packed") << g.seg;
  // And the loader reads every segment by pack.
  LoaderOptions lo = testing::TestLoaderOptions("pack_sizes");
  lo.packed = true;
  lo.batch_size = 25;
  auto l = Loader::Open(lo);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  Delivered got = ReadEpoch(**l, d);
  EXPECT_TRUE(got.error.empty()) << got.error;
  EXPECT_EQ(std::set<SampleKey>(got.keys.begin(), got.keys.end()).size(), 300u);
  EXPECT_EQ((*l)->Metrics().packed_requests, 6);  // 3 segments x 2 packs of 43
  s->Close();
}

}  // namespace
}  // namespace cqlstream
