// Copyright (c) cqlstream authors.
//
// Ingests that stop and start again, in the real node: resume after a
// crash, shards of one ingest, strict mode, appends and refused ingests,
// and a few end-to-end runs of the cqlstream binary. (Ingest formats,
// verify, export and select: store_test.cc.)
//
// Everything lives in one keyspace sr_<pid>, dropped when the suite ends.
// Fixture files are generated into temporary folders.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "store/catalog.h"
#include "store/ingest.h"
#include "store/schema.h"
#include "store/select.h"
#include "store/testing_fixtures.h"
#include "store/verify.h"
#include "store_ingest_fixture.h"
#include "test_env.h"

namespace cqlstream {
namespace {

namespace fs = std::filesystem;
using store::testing::MakePng;
using store::testing::TempDir;
using store::testing::WriteFile;
using testing::CliPath;
using testing::ExpectRefused;
using testing::MakeSmallFolder;
using testing::Sh;

class StoreResumeTest : public testing::IngestFixture {
 protected:
  static void SetUpTestSuite() { SetUpStore("sr"); }
};

TEST_F(StoreResumeTest, CrashResumeAndShardsMatchACleanIngest) {
  TempDir dir("resume");
  MakeSmallFolder(dir, 40);
  WriteFile(dir / "c1/bad.png", "nope");  // one skip in the middle of the listing

  auto clean_o = Opts("clean", {dir.path()});
  auto clean = Run(clean_o);
  ASSERT_TRUE(clean.first.ok()) << clean.first.ToString();
  EXPECT_EQ(clean.second.written, 40);
  const auto want = Content(Load("clean"));
  ASSERT_EQ(want.size(), 40u);

  // Crash after 17 samples, with watermarks every 5 positions.
  auto o = Opts("crashy", {dir.path()});
  o.crash_after = 17;
  o.commit_every = 5;
  o.concurrency = 4;
  auto crashed = Run(o);
  ASSERT_EQ(crashed.first.code(), Status::Code::kCancelled) << crashed.first.ToString();
  DatasetInfo mid = Load("crashy");
  ASSERT_EQ(mid.segments.size(), 1u);
  EXPECT_EQ(mid.segments[0].state, "open");
  EXPECT_GT(mid.segments[0].count, 0);
  EXPECT_LT(mid.segments[0].count, 40);
  // Rows above the committed count exist but are invisible.
  const auto raw_mid = RawMetaRows(mid);
  EXPECT_GT(raw_mid.at(mid.segments[0].seg), mid.segments[0].count);
  EXPECT_EQ(Committed(mid).size(), static_cast<size_t>(mid.segments[0].count));

  // The same command finishes it.
  o.crash_after = -1;
  auto resumed = Run(o);
  ASSERT_TRUE(resumed.first.ok()) << resumed.first.ToString();
  EXPECT_EQ(resumed.second.splits[0].action, "resumed");
  EXPECT_EQ(resumed.second.splits[0].seg, mid.segments[0].seg);
  EXPECT_EQ(resumed.second.written, 40 - mid.segments[0].count);
  DatasetInfo done = Load("crashy");
  ASSERT_EQ(done.segments.size(), 1u);
  EXPECT_EQ(done.segments[0].state, "sealed");
  EXPECT_EQ(done.segments[0].count, 40);
  EXPECT_EQ(Content(done), want);
  EXPECT_EQ(RawMetaRows(done).at(done.segments[0].seg), 40);  // no duplicates, nothing stray
  // Same keys as the clean run too: indices are deterministic.
  auto ck = Committed(Load("clean"));
  auto rk = Committed(done);
  std::vector<std::string> cp, rp;
  for (const auto& [k, m] : ck) cp.push_back(fmt::format("{}:{}", KeyIndex(k), m.path));
  for (const auto& [k, m] : rk) rp.push_back(fmt::format("{}:{}", KeyIndex(k), m.path));
  EXPECT_EQ(cp, rp);
  store::VerifyReport vr;
  ASSERT_TRUE(store::Verify(S(), done, {}, &vr).ok());
  EXPECT_TRUE(vr.problems.empty());

  // Two shards together equal one full ingest.
  for (int i = 0; i < 2; ++i) {
    auto so = Opts("sharded", {dir.path()});
    so.shard_index = i;
    so.shard_count = 2;
    auto r = Run(so);
    ASSERT_TRUE(r.first.ok()) << r.first.ToString();
  }
  DatasetInfo sh = Load("sharded");
  ASSERT_EQ(sh.segments.size(), 2u);
  EXPECT_NE(sh.segments[0].source_id, sh.segments[1].source_id);
  EXPECT_EQ(sh.Count("train"), 40);
  EXPECT_EQ(Content(sh), want);
}

TEST_F(StoreResumeTest, StrictFailsAndWritesNothing) {
  TempDir dir("strict");
  MakeSmallFolder(dir, 6);
  WriteFile(dir / "c0/empty.png", std::string_view());
  auto o = Opts("strictds", {dir.path()});
  o.strict = true;
  auto [st, rep] = Run(o);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Status::Code::kCorruption);
  EXPECT_NE(st.message().find("--strict"), std::string::npos);
  ASSERT_EQ(rep.skips.size(), 1u);
  EXPECT_EQ(rep.skips[0].path, "c0/empty.png");
  EXPECT_EQ(rep.skips[0].reason, "empty file");
  EXPECT_TRUE(store::LoadDataset(S(), keyspace_, "strictds").status().IsNotFound());
}

TEST_F(StoreResumeTest, AppendAndRefusedIngests) {
  TempDir dir("append");
  MakeSmallFolder(dir, 9);
  auto o = Opts("growing", {dir.path()});
  ASSERT_TRUE(Run(o).first.ok());
  // New files in the folder: only they are written, into a new segment.
  MakeSmallFolder(dir, 3, 100);
  auto [st, rep] = Run(o);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(rep.splits[0].action, "appended");
  EXPECT_EQ(rep.written, 3);
  DatasetInfo d = Load("growing");
  ASSERT_EQ(d.segments.size(), 2u);
  EXPECT_EQ(d.segments[1].count, 3);
  EXPECT_EQ(d.Count("train"), 12);
  std::set<std::string> paths;
  for (const auto& [k, m] : Committed(d)) EXPECT_TRUE(paths.insert(m.path).second) << "duplicate " << m.path;
  EXPECT_EQ(paths.size(), 12u);
  auto again = Run(o);
  ASSERT_TRUE(again.first.ok());
  EXPECT_EQ(again.second.written, 0);
  EXPECT_EQ(again.second.splits[0].action, "complete");

  // The same files from another location: refused, nothing written, unless
  // the user says the two sources hold different images.
  TempDir copy("append");
  fs::copy(dir.path(), copy.path(), fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  auto dup = Run(Opts("growing", {copy.path()}));
  ASSERT_NO_FATAL_FAILURE(ExpectRefused(dup.first, "12 of the 12 items to write into split 'train'"));
  EXPECT_EQ(dup.first.code(), Status::Code::kAlreadyExists);
  ExpectRefused(dup.first, "--allow-same-paths");
  EXPECT_EQ(Load("growing").Count("train"), 12);
  auto allowed_opts = Opts("growing", {copy.path()});
  allowed_opts.allow_same_paths = true;
  auto allowed = Run(allowed_opts);
  ASSERT_TRUE(allowed.first.ok()) << allowed.first.ToString();
  EXPECT_EQ(allowed.second.written, 12);
  EXPECT_EQ(Load("growing").Count("train"), 24);

  // A class the dataset does not have.
  TempDir other("append");
  WriteFile(other / "c0/x.png", MakePng(8, 8, 1));
  WriteFile(other / "emu/y.png", MakePng(8, 8, 2));
  auto unknown = Run(Opts("growing", {other.path()}));
  ASSERT_NO_FATAL_FAILURE(ExpectRefused(unknown.first, "'emu'"));
  // Another label kind.
  auto none = Opts("growing", {dir.path()});
  none.source.labels = store::LabelSource::kNone;
  auto kind = Run(none);
  ASSERT_NO_FATAL_FAILURE(ExpectRefused(kind.first, "label kind 'class'"));
  EXPECT_EQ(kind.first.code(), Status::Code::kAlreadyExists);
  // Another chunk size.
  auto cs = Opts("growing", {dir.path()});
  cs.chunk_size = 2048;
  auto chunk = Run(cs);
  ASSERT_NO_FATAL_FAILURE(ExpectRefused(chunk.first, "chunk size"));
  // Another layout version.
  Cql(fmt::format("INSERT INTO {}.datasets (name, layout_version, label_kind, chunk_size, checksum) VALUES "
                  "('oldlayout', 2, 'class', 1048576, 'xxh64')", keyspace_));
  auto old = Run(Opts("oldlayout", {dir.path()}));
  ASSERT_NO_FATAL_FAILURE(ExpectRefused(old.first, "layout version 2"));
  EXPECT_EQ(old.first.code(), Status::Code::kUnsupported);
  // A table of the name that is not a layout-1 table.
  Cql(fmt::format("CREATE TABLE {}.d_foreign (seg int PRIMARY KEY, note text)", keyspace_));
  ASSERT_TRUE(S().WaitForSchemaAgreement().ok());
  auto foreign = Run(Opts("foreign", {dir.path()}));
  ASSERT_NO_FATAL_FAILURE(ExpectRefused(foreign.first, "d_foreign exists but is not a cqlstream layout-1 table"));
  EXPECT_EQ(foreign.first.code(), Status::Code::kAlreadyExists);
  EXPECT_TRUE(store::LoadDataset(S(), keyspace_, "foreign").status().IsNotFound());
  // Leftover segments without a catalog entry.
  Cql(fmt::format("INSERT INTO {}.segments (dataset, seg, split, count) VALUES ('ghost', 0, 'train', 5)", keyspace_));
  auto ghost = Run(Opts("ghost", {dir.path()}));
  ASSERT_NO_FATAL_FAILURE(ExpectRefused(ghost.first, "cqlstream drop ghost"));
  auto dropped = store::DropDataset(S(), keyspace_, "ghost");
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  EXPECT_EQ(dropped->segments, 1);
  auto dropped_old = store::DropDataset(S(), keyspace_, "oldlayout");
  ASSERT_TRUE(dropped_old.ok());
  EXPECT_TRUE(dropped_old->catalog_row);
}

// --- the binary -----------------------------------------------------------------

TEST_F(StoreResumeTest, CommandLine) {
  const std::string cli = CliPath();
  ASSERT_TRUE(fs::exists(cli)) << cli << " is missing: build the cqlstream target (or set CQLSTREAM_CLI)";
  TempDir dir("cli");
  MakeSmallFolder(dir, 7);
  const std::string common = fmt::format("--keyspace {} --hosts {}", keyspace_,
                                         testing::Env("CQLSTREAM_TEST_HOSTS", "127.0.0.1"));
  auto [rc, out] = Sh(fmt::format("{} ingest --dataset clids {} --split val --concurrency 4 {}", cli, dir.path(), common));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("ingested 7 samples"), std::string::npos) << out;
  EXPECT_NE(out.find("split val"), std::string::npos) << out;

  auto ls = Sh(fmt::format("{} ls {}", cli, common));
  ASSERT_EQ(ls.first, 0) << ls.second;
  EXPECT_NE(ls.second.find("clids"), std::string::npos) << ls.second;
  EXPECT_NE(ls.second.find("val 7"), std::string::npos) << ls.second;

  auto info = Sh(fmt::format("{} info clids {}", cli, common));
  ASSERT_EQ(info.first, 0) << info.second;
  EXPECT_NE(info.second.find("label kind   class"), std::string::npos) << info.second;
  EXPECT_NE(info.second.find("c2"), std::string::npos) << info.second;

  auto verify = Sh(fmt::format("{} verify clids {}", cli, common));
  EXPECT_EQ(verify.first, 0) << verify.second;
  EXPECT_NE(verify.second.find("verified 7 of 7 samples"), std::string::npos) << verify.second;

  const std::string sel = (dir / "c1.sel").string();
  auto select = Sh(fmt::format("{} select clids --split val --label c1 -o {} {}", cli, sel, common));
  ASSERT_EQ(select.first, 0) << select.second;
  auto loaded = Selection::Load(sel);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->keys.size(), 2u);  // 1 and 4 of 0..6

  WriteFile(dir / "c0/zero.png", std::string_view());
  auto strict = Sh(fmt::format("{} ingest --dataset clistrict {} --strict {}", cli, dir.path(), common));
  EXPECT_EQ(strict.first, 1) << strict.second;
  EXPECT_NE(strict.second.find("empty file (1)"), std::string::npos) << strict.second;

  auto bad_args = Sh(fmt::format("{} ingest --dataset BadName {} {}", cli, dir.path(), common));
  EXPECT_EQ(bad_args.first, 2) << bad_args.second;

  auto no_yes = Sh(fmt::format("{} drop clids {} < /dev/null", cli, common));
  EXPECT_EQ(no_yes.first, 2) << no_yes.second;
  auto drop = Sh(fmt::format("{} drop clids --yes {}", cli, common));
  ASSERT_EQ(drop.first, 0) << drop.second;
  auto ls2 = Sh(fmt::format("{} ls {}", cli, common));
  EXPECT_EQ(ls2.second.find("clids"), std::string::npos) << ls2.second;
}

}  // namespace
}  // namespace cqlstream
