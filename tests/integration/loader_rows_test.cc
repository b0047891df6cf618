// Copyright (c) cqlstream authors.
//
// The loader against data rows that contradict the catalog (issue 9, item
// 1): a dataset is written through the fixture, then some of its data rows
// are rewritten behind the loader's back with CQL (larger than the
// segment's max_size, a size column that disagrees with the chunks, a
// missing chunk, a negative size, a label outside the classes, an image_size
// past the payload). In ordered and out-of-order mode, with on_missing raise
// and skip, every such sample is a clean per-sample error naming it (or is
// skipped and counted), every other sample arrives exactly once with its
// bytes, and the epoch ends in bounded time: no signal, no hang. Also:
// honest batches larger than the up-front reservation load.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cqlstream/loader.h"
#include "dataset_fixture.h"
#include "shared_dataset_suite.h"
#include "test_env.h"

namespace cqlstream {
namespace {

using testing::MakeSyntheticDataset;
using testing::SyntheticDataset;
using testing::SyntheticSpec;

constexpr auto kBound = std::chrono::seconds(90);

void Exec(net::Session& s, const std::string& q, std::vector<Value> v) {
  net::Statement st = net::Statement::Query(q, std::move(v));
  st.timeout = std::chrono::milliseconds(30000);
  auto r = s.Execute(st);
  ASSERT_TRUE(r.ok()) << q << ": " << r.status().ToString();
}

LoaderOptions Options(const std::string& dataset, bool ordered, OnMissing on_missing) {
  LoaderOptions o = testing::TestLoaderOptions(dataset);
  o.batch_size = 4;
  o.shuffle = false;  // batch 0 holds samples 0..3 (the three oversized rows)
  o.ordered = ordered;
  o.on_missing = on_missing;
  o.verify_checksums = true;
  return o;
}

// What one epoch delivered: keys with correct bytes, and the errors.
struct Outcome {
  std::multiset<SampleKey> keys;
  std::vector<std::string> errors;
  int bad_bytes = 0;
  int64_t skipped = 0;
};

Outcome ReadAll(Loader& l, const SyntheticDataset& d) {
  Outcome out;
  for (int calls = 0; calls < 10000; ++calls) {
    auto r = l.Next();
    if (!r.ok()) {
      out.errors.push_back(r.status().ToString());
      if (r.status().code() == Status::Code::kCancelled) break;
      continue;
    }
    if (!*r) break;
    const Batch& b = **r;
    for (size_t i = 0; i < b.size(); ++i) {
      out.keys.insert(b.keys[i]);
      auto it = d.payload.find(b.keys[i]);
      auto got = b.sample(i);
      if (it == d.payload.end() || got.size() != it->second.size() ||
          !std::equal(got.begin(), got.end(), it->second.begin())) {
        out.bad_bytes++;
      }
    }
  }
  out.skipped = l.Metrics().skipped;
  return out;
}

// Reads an epoch on another thread; a loader that has not finished within
// kBound is closed (and the test fails) instead of hanging the suite.
Outcome ReadBounded(const LoaderOptions& o, const SyntheticDataset& d) {
  auto l = Loader::Open(o);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  if (!l.ok()) return {};
  auto f = std::async(std::launch::async, [&] { return ReadAll(**l, d); });
  if (f.wait_for(kBound) != std::future_status::ready) {
    ADD_FAILURE() << "the epoch did not end within " << kBound.count() << " s (ordered=" << o.ordered << ")";
    (*l)->Close();
  }
  return f.get();
}

class LoaderRowsTest : public testing::SharedDatasetSuite<LoaderRowsTest> {
 public:
  static SyntheticDataset Make(net::Session& s) {
    SyntheticSpec spec;
    spec.name = "ldr_lies";
    spec.samples = 80;
    spec.segments = 1;
    spec.chunk_size = 4096;
    // Small samples; every tenth has three chunks (4096 + 4096 + 50).
    spec.size = [](int i) -> int64_t { return i % 10 == 0 ? 4096 * 2 + 50 : 300 + i * 7; };
    SyntheticDataset data = MakeSyntheticDataset(s, testing::TestKeyspace(), spec);
    const std::string t = fmt::format("{}.d_ldr_lies", testing::TestKeyspace());
    auto key = [](int idx) { return MakeKey(0, idx); };
    // Three rows of 1 MiB in one batch: each far above the catalog's
    // max_size (8242); together above the batch's reservation (which made
    // ordered mode write past its mapping).
    for (int idx : {1, 2, 3}) {
      std::vector<uint8_t> big(1 << 20, static_cast<uint8_t>(idx));
      Exec(s, fmt::format("DELETE FROM {} WHERE seg = 0 AND idx = ?", t), {Value::Int(idx)});
      Exec(s,
           fmt::format("INSERT INTO {} (seg, idx, chunk, size, image_size, checksum, label, data) "
                       "VALUES (0, ?, 0, ?, ?, 0, 1, ?)",
                       t),
           {Value::Int(idx), Value::Bigint(1 << 20), Value::Bigint(1 << 20), Value::Blob(std::move(big))});
      lies_[key(idx)] = "max_size";
    }
    // A size column smaller than its chunks (a three-chunk sample).
    Exec(s, fmt::format("UPDATE {} SET size = 5000, image_size = 5000 WHERE seg = 0 AND idx = 20", t), {});
    lies_[key(20)] = "more than its size";
    // A size column larger than its one chunk.
    Exec(s, fmt::format("UPDATE {} SET size = 600, image_size = 600 WHERE seg = 0 AND idx = 31", t), {});
    lies_[key(31)] = "add up to";
    // A missing middle chunk.
    Exec(s, fmt::format("DELETE FROM {} WHERE seg = 0 AND idx = 40 AND chunk = 1", t), {});
    lies_[key(40)] = "add up to";
    // A negative size, a label outside the 10 classes, an image_size past the payload.
    Exec(s, fmt::format("UPDATE {} SET size = -5 WHERE seg = 0 AND idx = 41", t), {});
    lies_[key(41)] = "negative size";
    Exec(s, fmt::format("UPDATE {} SET label = 99 WHERE seg = 0 AND idx = 42", t), {});
    lies_[key(42)] = "classes";
    Exec(s, fmt::format("UPDATE {} SET image_size = 100000 WHERE seg = 0 AND idx = 43", t), {});
    lies_[key(43)] = "image_size";
    return data;
  }

 protected:
  static void Check(bool ordered, OnMissing mode) {
    SCOPED_TRACE(fmt::format("ordered={} on_missing={}", ordered, mode == OnMissing::kRaise ? "raise" : "skip"));
    Outcome r = ReadBounded(Options("ldr_lies", ordered, mode), *data_);
    // Every honest sample exactly once, with its bytes.
    std::multiset<SampleKey> want;
    for (const auto& [k, v] : data_->payload) {
      if (!lies_.count(k)) want.insert(k);
    }
    EXPECT_EQ(r.keys, want);
    EXPECT_EQ(r.bad_bytes, 0);
    EXPECT_EQ(r.skipped, static_cast<int64_t>(lies_.size()));
    if (mode == OnMissing::kSkip) {
      EXPECT_TRUE(r.errors.empty()) << r.errors.front();
      return;
    }
    // One error per lying row, naming it (key and path) and what is wrong.
    ASSERT_EQ(r.errors.size(), lies_.size());
    std::set<SampleKey> named;
    for (const auto& e : r.errors) {
      for (const auto& [k, why] : lies_) {
        if (e.find(fmt::format("[{} (path '{}')]", FormatKey(k), data_->path.at(k))) == std::string::npos) continue;
        named.insert(k);
        EXPECT_NE(e.find(why), std::string::npos) << "expected '" << why << "' in: " << e;
      }
    }
    EXPECT_EQ(named.size(), lies_.size());
  }

  static std::map<SampleKey, std::string> lies_;  // key -> words its error must hold
};
std::map<SampleKey, std::string> LoaderRowsTest::lies_;

TEST_F(LoaderRowsTest, OrderedRaiseNamesEveryRowThatContradictsTheCatalog) { Check(true, OnMissing::kRaise); }
TEST_F(LoaderRowsTest, OrderedSkipSkipsAndCountsThem) { Check(true, OnMissing::kSkip); }
TEST_F(LoaderRowsTest, OutOfOrderRaiseNamesEveryRowThatContradictsTheCatalog) { Check(false, OnMissing::kRaise); }
TEST_F(LoaderRowsTest, OutOfOrderSkipSkipsAndCountsThem) { Check(false, OnMissing::kSkip); }

// Honest batches larger than the address space reserved up front load: the
// samples that do not fit get buffers of their own, joined at the end.
TEST(LoaderReservationTest, HonestBatchesLargerThanTheReservationLoad) {
  auto s = testing::TestSession();
  ASSERT_NE(s, nullptr);
  SyntheticSpec spec;
  spec.name = "ldr_grow";
  spec.samples = 90;
  spec.segments = 2;
  spec.chunk_size = 4096;
  spec.size = [](int i) -> int64_t { return i % 7 == 0 ? 4096 * 3 + i : 1000 + i * 13; };
  auto d = MakeSyntheticDataset(*s, testing::TestKeyspace(), spec);
  s->Close();
  for (bool ordered : {true, false}) {
    SCOPED_TRACE(fmt::format("ordered={}", ordered));
    LoaderOptions o = Options("ldr_grow", ordered, OnMissing::kRaise);
    o.shuffle = true;
    o.batch_size = 8;
    o.max_batch_reservation = 5000;  // a few samples per buffer; the rest aside
    Outcome r = ReadBounded(o, d);
    EXPECT_TRUE(r.errors.empty()) << r.errors.front();
    std::multiset<SampleKey> want;
    for (const auto& [k, v] : d.payload) want.insert(k);
    EXPECT_EQ(r.keys, want);
    EXPECT_EQ(r.bad_bytes, 0);
  }
}

// A missing table: without the metadata table a failing sample is still
// named (path unknown); without the data table Open fails naming it.
TEST(LoaderRowsTableTest, AMissingTableIsAClearError) {
  auto s = testing::TestSession();
  ASSERT_NE(s, nullptr);
  SyntheticSpec spec;
  spec.name = "ldr_notable";
  spec.samples = 20;
  spec.segments = 1;
  auto d = MakeSyntheticDataset(*s, testing::TestKeyspace(), spec);
  const std::string ks = testing::TestKeyspace();
  testing::MustRun(*s, fmt::format("DELETE FROM {}.d_ldr_notable WHERE seg = 0 AND idx = 5", ks));
  testing::MustRun(*s, fmt::format("DROP TABLE {}.m_ldr_notable", ks));
  {
    LoaderOptions o = Options("ldr_notable", false, OnMissing::kRaise);
    o.verify_checksums = false;
    Outcome r = ReadBounded(o, d);
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_NE(r.errors[0].find("[0:5 (path unknown)]"), std::string::npos) << r.errors[0];
    EXPECT_EQ(r.keys.size(), 19u);
  }
  testing::MustRun(*s, fmt::format("DROP TABLE {}.d_ldr_notable", ks));
  auto l = Loader::Open(Options("ldr_notable", false, OnMissing::kRaise));
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().ToString().find("d_ldr_notable"), std::string::npos) << l.status().ToString();
  s->Close();
}

}  // namespace
}  // namespace cqlstream
