// Copyright (c) cqlstream authors.
//
// The loader over attached datasets (store/attached.h) against the real
// node: a table in the reference system's layout
//   data_<split>(id uuid PRIMARY KEY, label int, data blob)
// written row by row as a third-party tool would, attached as `cqlstream
// attach` does (store::Attach: key snapshot, segments, the catalog's source
// map), then read on 3 ranks exactly once
// and byte-identical, resumed from a checkpoint, and read after a foreign
// row and a snapshot row were deleted (a per-sample error naming the sample
// and the table, or a skip). Blob targets and text labels too.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <future>
#include <set>

#include "attached_fixture.h"
#include "cqlstream/loader.h"
#include "dataset_fixture.h"
#include "shared_dataset_suite.h"
#include "store/attach.h"
#include "store/attached.h"
#include "store/catalog.h"
#include "test_env.h"

namespace cqlstream {
namespace {

using testing::Attach;
using testing::Delivered;
using testing::ForeignTable;
using testing::ReadEpoch;
using testing::RowId;
using testing::SyntheticDataset;
using testing::WriteForeignTable;

class AttachedLoaderTest : public testing::SharedDatasetSuite<AttachedLoaderTest> {
 public:
  static SyntheticDataset Make(net::Session& s) {
    const std::string& ks = testing::TestKeyspace();
    ForeignTable t{ks + ".data_train", "int", 400, 1};
    WriteForeignTable(s, t);
    return Attach(s, ks, "att", t, LabelKind::kClass);
  }
};

TEST_F(AttachedLoaderTest, ThreeRanksReadAnEpochExactlyOnceAndByteIdentical) {
  ASSERT_TRUE(data_->info.attached());
  const size_t n = data_->payload.size();
  ASSERT_EQ(n, 400u);
  for (bool ordered : {false, true}) {
    SCOPED_TRACE(ordered ? "ordered" : "out of order");
    std::vector<std::future<Delivered>> ranks;
    for (int r = 0; r < 3; ++r) {
      ranks.push_back(std::async(std::launch::async, [r, ordered] {
        LoaderOptions o = testing::TestLoaderOptions("att");
        o.batch_size = 16;
        o.seed = 11;
        o.rank = r;
        o.world_size = 3;
        o.ordered = ordered;
        o.epochs = 1;
        auto l = Loader::Open(o);
        if (!l.ok()) {
          Delivered d;
          d.error = l.status().ToString();
          return d;
        }
        return ReadEpoch(**l, *data_);  // checks every sample's bytes and label
      }));
    }
    std::set<SampleKey> all;
    for (auto& f : ranks) {
      Delivered d = f.get();
      ASSERT_TRUE(d.error.empty()) << d.error;
      for (SampleKey k : d.keys) EXPECT_TRUE(all.insert(k).second) << "delivered twice: " << FormatKey(k);
    }
    EXPECT_EQ(all.size(), n);
  }
}

TEST_F(AttachedLoaderTest, ResumesFromACheckpoint) {
  LoaderOptions o = testing::TestLoaderOptions("att");
  o.batch_size = 20;
  o.seed = 3;
  o.epochs = 1;
  auto a = Loader::Open(o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  Delivered first = ReadEpoch(**a, *data_, 4);
  ASSERT_TRUE(first.error.empty()) << first.error;
  ASSERT_EQ(first.keys.size(), 80u);
  const std::string state = (*a)->State();
  (*a)->Close();
  auto b = Loader::Open(o);
  ASSERT_TRUE(b.ok());
  Status rs = (*b)->Restore({state});
  ASSERT_TRUE(rs.ok()) << rs.ToString();
  Delivered rest = ReadEpoch(**b, *data_);
  ASSERT_TRUE(rest.error.empty()) << rest.error;
  std::set<SampleKey> all(first.keys.begin(), first.keys.end());
  for (SampleKey k : rest.keys) EXPECT_TRUE(all.insert(k).second) << "delivered twice: " << FormatKey(k);
  EXPECT_EQ(all.size(), data_->payload.size());
}

TEST_F(AttachedLoaderTest, FetchReadsGivenKeys) {
  auto l = Loader::Open(testing::TestLoaderOptions("att"));
  ASSERT_TRUE(l.ok());
  const std::vector<SampleKey> keys = {data_->payload.rbegin()->first, data_->payload.begin()->first,
                                       std::next(data_->payload.begin(), 200)->first};
  auto b = (*l)->Fetch(keys);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ((*b)->size(), 3u);
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ((*b)->keys[i], keys[i]);
    const auto s = (*b)->sample(i);
    EXPECT_TRUE(std::equal(s.begin(), s.end(), data_->payload.at(keys[i]).begin(), data_->payload.at(keys[i]).end()));
    EXPECT_EQ((*b)->labels[i], data_->label.at(keys[i]));
  }
}

// Each sample's foreign key is looked up once in the loader's life: later
// epochs and Fetch read the row in one request, from the kept key, and
// deliver the same bytes.
TEST_F(AttachedLoaderTest, LaterEpochsReuseTheLookedUpKeys) {
  LoaderOptions o = testing::TestLoaderOptions("att");
  o.batch_size = 32;
  o.seed = 5;
  o.epochs = 3;
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  const int64_t n = static_cast<int64_t>(data_->payload.size());
  Delivered first = ReadEpoch(**l, *data_);
  ASSERT_TRUE(first.error.empty()) << first.error;
  ASSERT_EQ(static_cast<int64_t>(first.keys.size()), n);
  const LoaderMetrics after_first = (*l)->Metrics();
  // At most one lookup per sample (how many fewer depends on how early the
  // look-ahead answers come back: TheFirstEpochLooksKeysUpAhead bounds
  // that with a fixed window), more only where a hedge or retry raced.
  EXPECT_GT(after_first.key_lookups, 0);
  EXPECT_LE(after_first.key_lookups, n + after_first.hedges + after_first.retries);
  EXPECT_EQ(after_first.foreign_keys_cached, n);
  for (int e = 1; e < 3; ++e) {
    SCOPED_TRACE(e);
    Delivered d = ReadEpoch(**l, *data_);  // checks every sample's bytes and label
    ASSERT_TRUE(d.error.empty()) << d.error;
    EXPECT_EQ(static_cast<int64_t>(d.keys.size()), n);
    EXPECT_EQ((*l)->Metrics().key_lookups, after_first.key_lookups);
  }
  const SampleKey k = std::next(data_->payload.begin(), 123)->first;
  auto b = (*l)->Fetch({k});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ((*b)->size(), 1u);
  const auto s = (*b)->sample(0);
  EXPECT_TRUE(std::equal(s.begin(), s.end(), data_->payload.at(k).begin(), data_->payload.at(k).end()));
  EXPECT_EQ((*l)->Metrics().key_lookups, after_first.key_lookups);
  // A fresh loader starts without keys.
  auto fresh = Loader::Open(testing::TestLoaderOptions("att"));
  ASSERT_TRUE(fresh.ok());
  auto one = (*fresh)->Fetch({k});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ((*fresh)->Metrics().key_lookups, 1);
  EXPECT_EQ((*fresh)->Metrics().foreign_keys_cached, 1);
}

// In the first epoch the keys of the samples about to be issued are looked
// up ahead, 64 to a request, so that each sample then reads its row in one
// request: far fewer lookups than samples, every sample once with its bytes.
TEST_F(AttachedLoaderTest, TheFirstEpochLooksKeysUpAhead) {
  LoaderOptions o = testing::TestLoaderOptions("att");
  o.batch_size = 16;
  o.epochs = 1;
  o.adaptive = false;  // 4 in flight: issued one completion at a time
  o.max_in_flight = 4;
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  Delivered d = ReadEpoch(**l, *data_);  // checks every sample's bytes and label
  ASSERT_TRUE(d.error.empty()) << d.error;
  const int64_t n = static_cast<int64_t>(data_->payload.size());
  EXPECT_EQ(static_cast<int64_t>(d.keys.size()), n);
  const LoaderMetrics m = (*l)->Metrics();
  EXPECT_EQ(m.foreign_keys_cached, n);
  // The first 4 alone, then 396 keys ahead in about 7 requests (a sample
  // issued before its look-ahead answered looks its key up itself).
  EXPECT_LT(m.key_lookups, n / 4);
}

// Samples issued together (a Fetch, the start of an epoch) look their keys
// up several to a request (`SELECT seg, idx, key ... WHERE seg = ? AND idx
// IN ?`, at most `coalesce` keys); coalesce 1 looks each up alone. Either
// way every sample arrives once with its bytes.
TEST_F(AttachedLoaderTest, KeysIssuedTogetherAreLookedUpSeveralToARequest) {
  std::vector<SampleKey> keys;
  for (auto it = data_->payload.begin(); keys.size() < 200; ++it) keys.push_back(it->first);
  for (int coalesce : {0, 1}) {
    SCOPED_TRACE(coalesce);
    LoaderOptions o = testing::TestLoaderOptions("att");
    o.coalesce = coalesce;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    auto b = (*l)->Fetch(keys);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    ASSERT_EQ((*b)->size(), keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      ASSERT_EQ((*b)->keys[i], keys[i]);
      const auto s = (*b)->sample(i);
      const auto& want = data_->payload.at(keys[i]);
      EXPECT_TRUE(std::equal(s.begin(), s.end(), want.begin(), want.end())) << FormatKey(keys[i]);
    }
    const LoaderMetrics m = (*l)->Metrics();
    EXPECT_EQ(m.foreign_keys_cached, 200);
    if (coalesce == 1) {
      EXPECT_GE(m.key_lookups, 200);
    } else {
      // 200 keys of one segment: groups of up to 64 (the default) per
      // replica set; 4 on one node, at most 25 (8 keys a request) here.
      EXPECT_LE(m.key_lookups, 200 / 8 + m.hedges + m.retries);
    }
  }
}

// Reads one epoch; the error that ended it ("" when none) and the samples.
std::pair<std::string, size_t> Drain(Loader& l) {
  size_t got = 0;
  for (;;) {
    auto b = l.Next();
    if (!b.ok()) return {b.status().ToString(), got};
    if (!*b) return {"", got};
    got += (*b)->size();
  }
}

TEST(AttachedLoaderErrors, ADeletedRowIsNamedOrSkipped) {
  auto s = testing::TestSession();
  ASSERT_NE(s, nullptr);
  const std::string& ks = testing::TestKeyspace();
  ForeignTable t{ks + ".data_del", "int", 60, 2};
  WriteForeignTable(*s, t);
  SyntheticDataset d = Attach(*s, ks, "att_del", t, LabelKind::kClass);
  // A foreign row deleted after the snapshot, and a snapshot row lost.
  ASSERT_EQ(d.payload.size(), 60u);
  const int32_t seg = KeySegment(d.payload.begin()->first);
  const SampleKey gone = MakeKey(seg, 17), lost = MakeKey(seg, 33);
  Uuid u;
  std::copy(d.path.at(gone).begin(), d.path.at(gone).end(), u.bytes.begin());
  testing::MustRun(*s, fmt::format("DELETE FROM {} WHERE id = {}", t.table, u.ToString()));
  testing::MustRun(*s, fmt::format("DELETE FROM {}.k_att_del WHERE seg = {} AND idx = 33", ks, seg));
  {
    LoaderOptions o = testing::TestLoaderOptions("att_del");
    o.batch_size = 10;
    o.epochs = 1;
    o.ordered = true;  // the first error met is the deleted row's (17 < 33)
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok());
    auto [err, got] = Drain(**l);
    EXPECT_TRUE(err.find(FormatKey(gone)) != std::string::npos || err.find(FormatKey(lost)) != std::string::npos)
        << err;
    if (err.find(FormatKey(gone)) != std::string::npos) {
      EXPECT_NE(err.find(t.table), std::string::npos) << "the error should name the table: " << err;
      EXPECT_NE(err.find(u.ToString()), std::string::npos) << "the error should name the key: " << err;
    }
    EXPECT_LT(got, 60u);
  }
  {
    LoaderOptions o = testing::TestLoaderOptions("att_del");
    o.batch_size = 10;
    o.epochs = 1;
    o.on_missing = OnMissing::kSkip;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok());
    d.payload.erase(gone);
    d.payload.erase(lost);
    Delivered r = ReadEpoch(**l, d);
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(r.keys.size(), 58u);
    EXPECT_EQ((*l)->Metrics().skipped, 2);
  }
  // The lost snapshot row, alone, names the key snapshot table.
  {
    LoaderOptions o = testing::TestLoaderOptions("att_del");
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok());
    auto b = (*l)->Fetch({lost});
    ASSERT_FALSE(b.ok());
    EXPECT_NE(b.status().message().find(FormatKey(lost)), std::string::npos) << b.status().ToString();
    EXPECT_NE(b.status().message().find("k_att_del"), std::string::npos) << b.status().ToString();
  }
  // In a grouped lookup (a Fetch of 20 keys: one request), the lost row and
  // a snapshot row whose key is no uuid (3 bytes) fail their own samples
  // only, each named; the other 18 arrive with their bytes.
  const SampleKey bad = MakeKey(seg, 40);
  testing::MustRun(*s, fmt::format("UPDATE {}.k_att_del SET key = 0x010203 WHERE seg = {} AND idx = 40", ks, seg));
  std::vector<SampleKey> keys;
  for (int32_t i = 25; i < 45; ++i) keys.push_back(MakeKey(seg, i));
  {
    LoaderOptions o = testing::TestLoaderOptions("att_del");
    o.on_missing = OnMissing::kSkip;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok());
    auto b = (*l)->Fetch(keys);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    std::set<SampleKey> got((*b)->keys.begin(), (*b)->keys.end());
    EXPECT_EQ(got.size(), keys.size() - 2);
    EXPECT_FALSE(got.count(lost));
    EXPECT_FALSE(got.count(bad));
    for (size_t i = 0; i < (*b)->size(); ++i) {
      const auto v = (*b)->sample(i);
      const auto& want = d.payload.at((*b)->keys[i]);
      EXPECT_TRUE(std::equal(v.begin(), v.end(), want.begin(), want.end())) << FormatKey((*b)->keys[i]);
    }
    const LoaderMetrics m = (*l)->Metrics();
    EXPECT_EQ(m.skipped, 2);
    EXPECT_EQ(m.foreign_keys_cached, static_cast<int64_t>(keys.size()) - 2);
    // One grouped lookup; the two failed samples' retries look up alone.
    EXPECT_LE(m.key_lookups, 1 + m.retries + m.hedges);
  }
  {
    auto l = Loader::Open(testing::TestLoaderOptions("att_del"));
    ASSERT_TRUE(l.ok());
    auto b = (*l)->Fetch({keys[0], bad, keys[1]});
    ASSERT_FALSE(b.ok());
    EXPECT_NE(b.status().message().find(FormatKey(bad)), std::string::npos) << b.status().ToString();
    EXPECT_NE(b.status().message().find("not a uuid"), std::string::npos) << b.status().ToString();
  }
  s->Close();
}

TEST(AttachedLoaderLabels, BlobTargetsAndTextLabels) {
  auto s = testing::TestSession();
  ASSERT_NE(s, nullptr);
  const std::string& ks = testing::TestKeyspace();
  ForeignTable masks{ks + ".data_seg", "blob", 50, 3};
  WriteForeignTable(*s, masks);
  SyntheticDataset seg = Attach(*s, ks, "att_seg", masks, LabelKind::kTarget);
  ForeignTable texts{ks + ".data_txt", "text", 50, 4};
  WriteForeignTable(*s, texts);
  SyntheticDataset txt = Attach(*s, ks, "att_txt", texts, LabelKind::kClass);
  {
    LoaderOptions o = testing::TestLoaderOptions("att_seg");
    o.batch_size = 8;
    o.epochs = 1;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    size_t got = 0;
    for (;;) {
      auto b = (*l)->Next();
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      if (!*b) break;
      for (size_t i = 0; i < (*b)->size(); ++i, ++got) {
        const SampleKey k = (*b)->keys[i];
        const auto& want = seg.payload.at(k);
        const auto sample = (*b)->sample(i);
        ASSERT_TRUE(std::equal(sample.begin(), sample.end(), want.begin(), want.end())) << FormatKey(k);
        // image_size: the data's length; the mask follows it.
        const size_t mask = want.size() - (*b)->image_sizes[i];
        EXPECT_EQ(mask, static_cast<size_t>(10 + (want[want.size() - 1] % 7))) << FormatKey(k);
      }
    }
    EXPECT_EQ(got, 50u);
  }
  {
    LoaderOptions o = testing::TestLoaderOptions("att_txt");
    o.batch_size = 8;
    o.epochs = 1;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    Delivered r = ReadEpoch(**l, txt);  // labels: the text's index in the sorted class names
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(r.keys.size(), 50u);
  }
  s->Close();
}

// A target dataset whose foreign rows include null data cells next to good
// rows: the null rows are per-sample errors naming the sample and the table
// (skipped and counted, or raised), and the good rows' bytes are intact (a
// target placed before a data cell would land in the previous slot).
TEST(AttachedLoaderErrors, ANullDataCellIsAnErrorAndItsNeighboursAreIntact) {
  auto s = testing::TestSession();
  ASSERT_NE(s, nullptr);
  const std::string& ks = testing::TestKeyspace();
  ForeignTable t{ks + ".data_nul", "blob", 40, 5};
  WriteForeignTable(*s, t);
  SyntheticDataset d = Attach(*s, ks, "att_nul", t, LabelKind::kTarget);
  ASSERT_EQ(d.payload.size(), 40u);
  const int32_t seg = KeySegment(d.payload.begin()->first);
  std::vector<SampleKey> bad;
  for (int32_t idx : {3, 4, 17, 39}) {
    const SampleKey k = MakeKey(seg, idx);
    Uuid u;
    std::copy(d.path.at(k).begin(), d.path.at(k).end(), u.bytes.begin());
    testing::MustRun(*s, fmt::format("UPDATE {} SET data = null WHERE id = {}", t.table, u.ToString()));
    d.payload.erase(k);
    bad.push_back(k);
  }
  for (bool ordered : {true, false}) {
    SCOPED_TRACE(ordered ? "ordered" : "out of order");
    LoaderOptions o = testing::TestLoaderOptions("att_nul");
    o.batch_size = 40;  // the good and the bad rows' slots side by side
    o.epochs = 1;
    o.ordered = ordered;
    o.on_missing = OnMissing::kSkip;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    Delivered r = ReadEpoch(**l, d);  // checks every delivered sample's bytes
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(r.keys.size(), 36u);
    EXPECT_EQ((*l)->Metrics().skipped, 4);
  }
  {
    auto l = Loader::Open(testing::TestLoaderOptions("att_nul"));
    ASSERT_TRUE(l.ok());
    const SampleKey good = MakeKey(seg, 2);
    auto b = (*l)->Fetch({good, bad[0]});
    ASSERT_FALSE(b.ok());
    const std::string m = b.status().message();
    EXPECT_NE(m.find(FormatKey(bad[0])), std::string::npos) << m;
    EXPECT_NE(m.find("its data cell is null"), std::string::npos) << m;
    EXPECT_NE(m.find(t.table), std::string::npos) << m;
    auto g = (*l)->Fetch({good});
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    const auto sample = (*g)->sample(0);
    const auto& want = d.payload.at(good);
    EXPECT_TRUE(std::equal(sample.begin(), sample.end(), want.begin(), want.end()));
  }
  s->Close();
}

// A refresh to another table half done: the catalog names the new table, the
// segments still hold the old snapshot's keys. The loader reads each segment
// from the table its snapshot was taken from (the segment row's source), so
// it delivers the old table's rows even where the new table holds other
// rows under the same keys; a segment source that is no table name is an
// error at open naming the segment and both tables.
TEST(AttachedLoaderErrors, SegmentsAreReadFromTheTableTheirSnapshotCameFrom) {
  auto s = testing::TestSession();
  ASSERT_NE(s, nullptr);
  const std::string& ks = testing::TestKeyspace();
  ForeignTable old_table{ks + ".data_srca", "int", 30, 6};
  WriteForeignTable(*s, old_table);
  SyntheticDataset d = Attach(*s, ks, "att_src", old_table, LabelKind::kClass);
  ASSERT_EQ(d.payload.size(), 30u);
  // The new table: the same keys, other bytes and labels.
  const std::string new_table = ks + ".data_srcb";
  testing::MustRun(*s, fmt::format("CREATE TABLE IF NOT EXISTS {} (id uuid PRIMARY KEY, label int, data blob)", new_table));
  for (int i = 0; i < old_table.rows; ++i) {
    testing::MustRun(*s, fmt::format("INSERT INTO {} (id, label, data) VALUES ({}, {}, 0x{:02x}{:02x})", new_table,
                                     RowId(old_table.id, i).ToString(), (i + 1) % 10, i, i));
  }
  testing::MustRun(*s, fmt::format("UPDATE {}.datasets SET source['table:train'] = '{}' WHERE name = 'att_src'", ks,
                                   new_table));
  auto info = store::LoadDataset(*s, ks, "att_src");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  ASSERT_EQ(info->source.at("table:train"), new_table);
  ASSERT_FALSE(info->segments.empty());
  for (const auto& g : info->segments) ASSERT_EQ(g.source, old_table.table) << g.seg;
  {
    LoaderOptions o = testing::TestLoaderOptions("att_src");
    o.batch_size = 8;
    o.epochs = 1;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    Delivered r = ReadEpoch(**l, d);  // the old table's bytes and labels
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(r.keys.size(), 30u);
  }
  const int32_t seg = info->segments.front().seg;
  testing::MustRun(*s, fmt::format("UPDATE {}.segments SET source = 'not a table' WHERE dataset = 'att_src' AND seg = {}",
                                   ks, seg));
  auto l = Loader::Open(testing::TestLoaderOptions("att_src"));
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), Status::Code::kCorruption) << l.status().ToString();
  const std::string m = l.status().message();
  EXPECT_NE(m.find(fmt::format("segment {}", seg)), std::string::npos) << m;
  EXPECT_NE(m.find("'not a table'"), std::string::npos) << m;
  EXPECT_NE(m.find(new_table), std::string::npos) << m;
  s->Close();
}

}  // namespace
}  // namespace cqlstream
