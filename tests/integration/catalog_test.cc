// Copyright (c) cqlstream authors.
//
// The catalog against the real node: reads fall back from LOCAL_QUORUM to
// LOCAL_ONE, with a warning, when the live replicas cannot give a quorum.
// On the one-node test cluster a keyspace whose replication factor is raised
// to 3 after the data was written is in exactly the state of an RF-3 cluster
// with two nodes dead: every row is on the one live replica, and LOCAL_QUORUM
// is Unavailable (required 2, alive 1). The node-kill version of this test is
// tests/integration/cluster_test.cc.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "dataset_fixture.h"
#include "store/catalog.h"
#include "store/schema.h"
#include "store/segments_table.h"
#include "test_env.h"

namespace cqlstream::testing {
namespace {

// A keyspace of replication factor 1 named `prefix`_<pid>, dropped first
// where a run before left it.
std::string FreshKeyspace(net::Session& s, const std::string& prefix) {
  const std::string ks = fmt::format("{}_{}", prefix, ::getpid());
  MustRun(s, fmt::format("DROP KEYSPACE IF EXISTS {}", ks));
  MustRun(s, fmt::format("CREATE KEYSPACE {} WITH replication = {{'class': 'SimpleStrategy', "
                         "'replication_factor': 1}}",
                         ks));
  return ks;
}

// A synthetic dataset (dataset_fixture.h) of `samples` samples in `segments` segments.
void MakeSmallDataset(net::Session& s, const std::string& ks, const std::string& name, int samples, int segments) {
  SyntheticSpec spec;
  spec.name = name;
  spec.samples = samples;
  spec.segments = segments;
  MakeSyntheticDataset(s, ks, spec);
}

// Inserts sealed, empty segment rows [from, to) of `dataset` (train) with
// `source` as their source text, 256 at a time; the number that failed.
int InsertSegmentRows(net::Session& s, const std::string& ks, const std::string& dataset, int32_t from, int32_t to,
                      const std::string& source) {
  auto ins = s.Prepare(fmt::format(
      "INSERT INTO {}.segments (dataset, seg, split, count, state, source) VALUES (?, ?, 'train', 0, 'sealed', ?)",
      ks));
  EXPECT_TRUE(ins.ok()) << ins.status().ToString();
  if (!ins.ok()) return to - from;
  std::atomic<int> pending{0}, failed{0};
  for (int32_t seg = from; seg < to; ++seg) {
    while (pending.load() > 256) std::this_thread::sleep_for(std::chrono::microseconds(200));
    ++pending;
    net::Statement st = net::Statement::Bound(*ins, {Value::Text(dataset), Value::Int(seg), Value::Text(source)});
    st.idempotent = true;
    s.ExecuteAsync(std::move(st), [&](StatusOr<net::ResultSet> r) {
      if (!r.ok()) ++failed;
      --pending;
    });
  }
  while (pending.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return failed.load();
}

TEST(CatalogTest, ReadsFallBackToLocalOneWhenNoQuorumIsAlive) {
  auto s = TestSession();
  const std::string ks = FreshKeyspace(*s, "it_rf3");
  constexpr int kSamples = 40, kSegments = 2;
  MakeSmallDataset(*s, ks, "rf3", kSamples, kSegments);
  MustRun(*s, fmt::format("ALTER KEYSPACE {} WITH replication = {{'class': 'SimpleStrategy', "
                          "'replication_factor': 3}}",
                          ks));

  // The premise: a quorum read is Unavailable now.
  net::Statement q = net::Statement::Query(fmt::format("SELECT name FROM {}.datasets", ks));
  q.consistency = cql::Consistency::kLocalQuorum;
  auto direct = s->Execute(q);
  ASSERT_FALSE(direct.ok());
  ASSERT_NE(direct.status().server_error(), nullptr) << direct.status().ToString();
  ASSERT_EQ(direct.status().server_error()->typed(), ServerErrorCode::kUnavailable) << direct.status().ToString();

  // Before the fix both failed with that Unavailable error.
  ::testing::internal::CaptureStderr();
  auto d = store::LoadDataset(*s, ks, "rf3");
  auto all = store::ListDatasets(*s, ks);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(d->segments.size(), size_t(kSegments));
  int64_t count = 0;
  for (const auto& g : d->segments) count += g.count;
  EXPECT_EQ(count, kSamples);
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].segments.size(), size_t(kSegments));
  EXPECT_NE(err.find("cannot be read at LOCAL_QUORUM"), std::string::npos) << err;
  EXPECT_NE(err.find("LOCAL_ONE"), std::string::npos) << err;

  MustRun(*s, fmt::format("DROP KEYSPACE {}", ks));
}

// A catalog made by the first release has no sample_kind / preprocess /
// source columns (the fixture creates exactly that table). Reading it works
// and gives the defaults; EnsureCatalog (run by every ingest and attach) adds
// the columns, once, and leaves the rows as they were.
TEST(CatalogTest, OlderCatalogIsReadAndUpgradedInPlace) {
  auto s = TestSession();
  const std::string ks = FreshKeyspace(*s, "it_oldcat");
  MakeSmallDataset(*s, ks, "old", 10, 2);

  auto before = store::LoadDataset(*s, ks, "old");
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_EQ(before->sample_kind, SampleKind::kImage);
  EXPECT_EQ(before->preprocess, "");
  EXPECT_FALSE(before->attached());

  ASSERT_TRUE(store::EnsureCatalog(*s, ks).ok());
  ASSERT_TRUE(store::EnsureCatalog(*s, ks).ok());  // a second run adds nothing and fails on nothing
  auto cols = s->Execute(net::Statement::Query(
      "SELECT column_name FROM system_schema.columns WHERE keyspace_name = ? AND table_name = 'datasets'",
      {Value::Text(ks)}));
  ASSERT_TRUE(cols.ok()) << cols.status().ToString();
  std::set<std::string> names;
  for (int32_t i = 0; i < cols->rows()->row_count(); ++i) names.insert(cols->rows()->Get<std::string>(i, 0).value());
  for (const auto& [column, type] : store::LaterCatalogColumns()) EXPECT_EQ(names.count(column), 1u) << column;

  MustRun(*s, fmt::format("UPDATE {}.datasets SET sample_kind = 'blob', preprocess = 'center-crop=8' WHERE name = 'old'",
                          ks));
  auto after = store::LoadDataset(*s, ks, "old");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->sample_kind, SampleKind::kBlob);
  EXPECT_EQ(after->preprocess, "center-crop=8");
  EXPECT_EQ(after->segments.size(), before->segments.size());

  // A kind no release writes is refused by name, not read as an image.
  MustRun(*s, fmt::format("UPDATE {}.datasets SET sample_kind = 'video' WHERE name = 'old'", ks));
  auto bad = store::LoadDataset(*s, ks, "old");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("video"), std::string::npos) << bad.status().ToString();

  MustRun(*s, fmt::format("DROP KEYSPACE {}", ks));
}

// A dataset holds at most store::kMaxSegments segments: one holding that
// many is read whole, ClaimSegment refuses the next, and a read that
// answers more (a writer from before the bound, or a server that pages
// without end) ends with an error naming the bound instead of keeping
// rows until memory runs out. drop removes such a dataset all the same,
// and counts its segment rows over every page (it counted the first
// page's, 5,000 at most).
TEST(CatalogTest, ADatasetHoldsAtMostMaxSegments) {
  auto s = TestSession();
  const std::string ks = FreshKeyspace(*s, "it_maxseg");
  MakeSmallDataset(*s, ks, "many", 10, 1);
  auto insert = [&](int32_t from, int32_t to) { return InsertSegmentRows(*s, ks, "many", from, to, ""); };
  const auto max = static_cast<int32_t>(store::kMaxSegments);
  ASSERT_EQ(insert(1, max), 0);

  auto full = store::LoadDataset(*s, ks, "many");
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(full->segments.size(), store::kMaxSegments);
  auto claimed = store::ClaimSegment(*s, ks, "many", store::NewSegment{"train", "x", "x", "x"});
  ASSERT_FALSE(claimed.ok()) << "claimed segment " << claimed->seg;
  EXPECT_EQ(claimed.status().code(), Status::Code::kUnsupported);
  EXPECT_NE(claimed.status().ToString().find(fmt::format("holds {} segments, the most a dataset may hold", max)),
            std::string::npos)
      << claimed.status().ToString();

  ASSERT_EQ(insert(max, max + 1), 0);
  const std::string bound = fmt::format("answered more than {} rows", max);
  auto over = store::LoadDataset(*s, ks, "many");
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), Status::Code::kUnsupported);
  EXPECT_NE(over.status().ToString().find("the segments read of dataset 'many'"), std::string::npos)
      << over.status().ToString();
  EXPECT_NE(over.status().ToString().find(bound), std::string::npos) << over.status().ToString();
  auto listed = store::ListDatasets(*s, ks);
  ASSERT_FALSE(listed.ok());
  EXPECT_NE(listed.status().ToString().find("the segments read of dataset 'many'"), std::string::npos)
      << listed.status().ToString();

  auto dropped = store::DropDataset(*s, ks, "many");
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  EXPECT_EQ(dropped->segments, max + 1);
  EXPECT_FALSE(dropped->segments_at_least);
  EXPECT_FALSE(store::LoadDataset(*s, ks, "many").ok());

  MustRun(*s, fmt::format("DROP KEYSPACE {}", ks));
}

// Segment rows with long source texts pass the segments read's bytes
// (store::kMaxCatalogReadBytes) before its rows: ClaimSegment then says
// that the dataset is full, as it does at kMaxSegments, and names the
// read's bound (it gave the read's message alone).
TEST(CatalogTest, ClaimingPastTheSegmentsReadBytesSaysTheDatasetIsFull) {
  auto s = TestSession();
  const std::string ks = FreshKeyspace(*s, "it_segbytes");
  MakeSmallDataset(*s, ks, "long", 10, 1);
  const std::string source(16 << 10, 's');
  const int32_t rows = static_cast<int32_t>(store::kMaxCatalogReadBytes / static_cast<int64_t>(source.size())) + 512;
  ASSERT_LT(rows, store::kMaxSegments);
  ASSERT_EQ(InsertSegmentRows(*s, ks, "long", 1, rows, source), 0);

  auto claimed = store::ClaimSegment(*s, ks, "long", store::NewSegment{"train", "x", "x", "x"});
  ASSERT_FALSE(claimed.ok()) << "claimed segment " << claimed->seg;
  EXPECT_EQ(claimed.status().code(), Status::Code::kUnsupported);
  const std::string m = claimed.status().ToString();
  EXPECT_NE(m.find("dataset 'long' in keyspace '" + ks + "' holds more segment rows than cqlstream reads: ingest "
                   "into another dataset"),
            std::string::npos)
      << m;
  const std::string bound = fmt::format("answered more than {} MiB", store::kMaxCatalogReadBytes >> 20);
  EXPECT_NE(m.find(bound), std::string::npos) << m;

  MustRun(*s, fmt::format("DROP KEYSPACE {}", ks));
}

}  // namespace
}  // namespace cqlstream::testing
