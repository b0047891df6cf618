// Copyright (c) cqlstream authors.
//
// Hardening of the dataset commands against what the keyspace, the files and
// the user hand them (issue 9), against the real node: export streams block
// by block, never follows a link or overwrites a file in its target and maps
// unusable stored names to safe ones; reserved-word keyspaces are refused; a
// failed final commit is reported as what the database holds; oversized class
// lists are refused before any DDL and orphan tables are reported; every
// binary turns an escaped exception into a message and exit code 1; control
// characters from the database are escaped in human output.
//
// Tables live in keyspace sh_<pid> (plus one throw-away keyspace), dropped
// when the suite ends. Fixture files are generated into temporary folders.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>

#include "store/catalog.h"
#include "store/export.h"
#include "store/ingest.h"
#include "store/schema.h"
#include "store/testing_fixtures.h"
#include "store_fixture.h"
#include "test_env.h"

namespace cqlstream {
namespace {

namespace fs = std::filesystem;
using store::testing::MakePng;
using store::testing::ReadFile;
using store::testing::TempDir;
using store::testing::WriteFile;
using testing::CliPath;
using testing::Sh;

void MakeFolder(const TempDir& dir, int n) {
  for (int i = 0; i < n; ++i) {
    WriteFile(dir / fmt::format("c{}/{:03}.png", i % 3, i), MakePng(8 + i % 5, 8, static_cast<uint32_t>(i)));
  }
}

class StoreHardeningTest : public testing::StoreFixture {
 protected:
  static void SetUpTestSuite() { SetUpStore("sh"); }

  DatasetInfo Ingested(const std::string& name, const TempDir& dir) {
    store::IngestReport r;
    Status st = store::Ingest(S(), Opts(name, {dir.path()}), &r);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return Load(name);
  }
};

std::set<std::string> FilesUnder(const std::string& root) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file()) out.insert(fs::relative(e.path(), root).string());
  }
  return out;
}

// --- export (items 6, 8, 21) ----------------------------------------------------

TEST_F(StoreHardeningTest, ExportRefusesNonEmptyTargetAndNeverOverwrites) {
  TempDir src("exsrc");
  MakeFolder(src, 9);
  const DatasetInfo d = Ingested("exforce", src);
  TempDir out("exout");
  store::ExportOptions o;
  o.dir = (out / "a").string();
  store::ExportReport r;
  Status st = store::Export(S(), d, o, &r);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(r.samples, 9);
  EXPECT_EQ(r.renamed, 0);
  const auto first = FilesUnder(o.dir);
  EXPECT_EQ(first.size(), 9u);
  EXPECT_EQ(ReadFile(fs::path(o.dir) / "train/c0/000.png"), ReadFile(src / "c0/000.png"));

  // Non-empty without force: refused, nothing changes.
  WriteFile(fs::path(o.dir) / "train/c0/000.png", "keep me");
  st = store::Export(S(), d, o, &r);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("not empty"), std::string::npos) << st.ToString();
  EXPECT_EQ(FilesUnder(o.dir), first);

  // With force: the existing file is kept as it is, ours gets a suffix.
  o.force = true;
  st = store::Export(S(), d, o, &r);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(r.samples, 9);
  EXPECT_EQ(r.renamed, 9);
  const auto kept = ReadFile(fs::path(o.dir) / "train/c0/000.png");
  EXPECT_EQ(std::string(kept.begin(), kept.end()), "keep me");
  EXPECT_EQ(ReadFile(fs::path(o.dir) / fmt::format("train/c0/000.{}_0.png", d.segments[0].seg)),
            ReadFile(src / "c0/000.png"));
  EXPECT_EQ(FilesUnder(o.dir).size(), 18u);
}

TEST_F(StoreHardeningTest, ExportNeverFollowsLinksInTheTarget) {
  TempDir src("exlsrc");
  MakeFolder(src, 4);
  const DatasetInfo d = Ingested("exlink", src);
  TempDir out("exlout");
  TempDir outside("exloutside");
  // A folder of the output tree is a link out of it.
  fs::create_symlink(outside.path(), out / "train");
  store::ExportOptions o;
  o.dir = out.path();
  o.force = true;
  store::ExportReport r;
  Status st = store::Export(S(), d, o, &r);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("symbolic link"), std::string::npos) << st.ToString();
  EXPECT_TRUE(fs::is_empty(outside.path()));

  // A file of the output tree is a link to a file outside: not written through.
  TempDir out2("exlout2");
  WriteFile(outside / "victim", "precious");
  fs::create_directories(out2 / "train/c0");
  fs::create_symlink(outside / "victim", out2 / "train/c0/000.png");
  o.dir = out2.path();
  st = store::Export(S(), d, o, &r);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const auto v = ReadFile(outside / "victim");
  EXPECT_EQ(std::string(v.begin(), v.end()), "precious");
  EXPECT_EQ(r.renamed, 1);
  EXPECT_EQ(r.samples, 4);
}

TEST_F(StoreHardeningTest, ExportMapsDotAndEmptyFileNamesToSafeNames) {
  TempDir src("exdsrc");
  MakeFolder(src, 6);
  const DatasetInfo d = Ingested("exdots", src);
  ASSERT_FALSE(d.segments.empty());
  const int32_t seg = d.segments[0].seg;
  // Stored paths whose file name is '..', '.', or nothing.
  Cql(fmt::format("UPDATE {}.m_exdots SET path = 'c0/..' WHERE seg = {} AND block = 0 AND idx = 0", keyspace_, seg));
  Cql(fmt::format("UPDATE {}.m_exdots SET path = 'c1/.' WHERE seg = {} AND block = 0 AND idx = 1", keyspace_, seg));
  Cql(fmt::format("UPDATE {}.m_exdots SET path = 'c2/' WHERE seg = {} AND block = 0 AND idx = 2", keyspace_, seg));
  Cql(fmt::format("UPDATE {}.m_exdots SET path = '' WHERE seg = {} AND block = 0 AND idx = 3", keyspace_, seg));
  TempDir out("exdout");
  store::ExportOptions o;
  o.dir = (out / "x").string();
  store::ExportReport r;
  Status st = store::Export(S(), d, o, &r);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(r.samples, 6);
  EXPECT_TRUE(r.problems.empty());
  const auto files = FilesUnder(o.dir);
  EXPECT_EQ(files.size(), 6u);
  for (const auto& f : files) {
    EXPECT_EQ(f.find(".."), std::string::npos) << f;
    EXPECT_TRUE(fs::path(f).filename().string().rfind("_", 0) == 0 || fs::path(f).extension() == ".png") << f;
  }
  EXPECT_EQ(store::ExportPath(d, "train", "a/..", 0), "train/c0/_");
  EXPECT_EQ(store::ExportPath(d, "train", "a/.", 0), "train/c0/_");
  EXPECT_EQ(store::ExportPath(d, "train", "", 0), "train/c0/_");
}

// --- reserved words (item 16) ----------------------------------------------------

TEST_F(StoreHardeningTest, ReservedWordKeyspacesAreRefusedClearly) {
  for (const char* ks : {"select", "token"}) {
    std::string note;
    Status st = store::EnsureKeyspace(S(), ks, store::Replication::Parse("simple:1").value(), false, &note);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.ToString();
    EXPECT_NE(st.message().find("reserved word"), std::string::npos) << st.ToString();
    TempDir src("kwsrc");
    MakeFolder(src, 2);
    store::IngestReport r;
    st = store::Ingest(S(), Opts("kw", {src.path()}, ks), &r);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.ToString();
    EXPECT_NE(st.message().find(fmt::format("keyspace name '{}' is a CQL reserved word", ks)), std::string::npos)
        << st.ToString();
  }
  const std::string cli = CliPath();
  ASSERT_TRUE(fs::exists(cli)) << cli;
  TempDir src("kwcli");
  MakeFolder(src, 2);
  auto [rc, out] = Sh(fmt::format("{} ingest --dataset kw {} --keyspace select --hosts {}", cli, src.path(),
                                  testing::Env("CQLSTREAM_TEST_HOSTS", "127.0.0.1")));
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("reserved word"), std::string::npos) << out;
  EXPECT_EQ(out.find("SyntaxError"), std::string::npos) << out;
}

// --- the summary after a failed final commit (item 17) ---------------------------

TEST_F(StoreHardeningTest, FailedFinalCommitReportsWhatTheDatabaseHolds) {
  const std::string ks = keyspace_ + "_fc";
  TempDir src("fcsrc");
  MakeFolder(src, 23);
  store::IngestOptions o = Opts("fc", {src.path()}, ks);
  o.commit_interval = std::chrono::hours(1);
  o.commit_every = 5;
  o.write_attempts = 1;
  bool broken = false;
  o.on_progress = [&](const store::IngestProgress& p) {
    // Every item handled, only the final commit left: make it fail.
    if (!broken && p.items_done == p.items_total) {
      broken = true;
      Status st = store::RunDdl(S(), fmt::format("ALTER TABLE {}.segments DROP size_hist", ks));
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
  };
  store::IngestReport r;
  Status st = store::Ingest(S(), o, &r);
  EXPECT_TRUE(broken);
  EXPECT_FALSE(st.ok());
  ASSERT_EQ(r.splits.size(), 1u);
  EXPECT_EQ(r.splits[0].written, 23);
  EXPECT_FALSE(r.splits[0].sealed);
  net::Statement q = net::Statement::Query(
      fmt::format("SELECT count FROM {}.segments WHERE dataset = 'fc' AND seg = {}", ks, r.splits[0].seg));
  q.consistency = cql::Consistency::kLocalQuorum;
  auto rs = S().Execute(q);
  ASSERT_TRUE(rs.ok()) << rs.status().ToString();
  ASSERT_NE(rs->rows(), nullptr);
  ASSERT_EQ(rs->rows()->row_count(), 1);
  const int64_t in_db = rs->rows()->value(0, 0)->as_int();
  EXPECT_LT(in_db, 23);
  EXPECT_EQ(r.splits[0].count, in_db);  // not the in-memory watermark (23)
  (void)store::RunDdl(S(), "DROP KEYSPACE IF EXISTS " + ks);
}

TEST_F(StoreHardeningTest, NoSuccessLineBeforeAnIngestError) {
  const std::string cli = CliPath();
  ASSERT_TRUE(fs::exists(cli)) << cli;
  TempDir src("crashcli");
  MakeFolder(src, 12);
  auto [rc, out] = Sh(fmt::format("{} ingest --dataset crashcli {} --crash-after 4 {}", cli, src.path(), Common()));
  EXPECT_EQ(rc, 130) << out;
  EXPECT_EQ(out.find("ingested "), std::string::npos) << out;
  EXPECT_EQ(out.find("(sealed)"), std::string::npos) << out;
  EXPECT_NE(out.find("did not finish"), std::string::npos) << out;
  EXPECT_NE(out.find("committed by this run"), std::string::npos) << out;
  EXPECT_NE(out.find("stopped: 4 samples written"), std::string::npos) << out;
}

// --- sizes before DDL, orphan tables (item 18) -----------------------------------

TEST_F(StoreHardeningTest, OversizedClassListIsRefusedBeforeAnyTable) {
  TempDir src("bigcls");
  std::string csv = "path,label\n";
  for (int i = 0; i < 3; ++i) {
    WriteFile(src / fmt::format("{}.png", i), MakePng(8, 8, static_cast<uint32_t>(i)));
    csv += fmt::format("{}.png,{}{}\n", i, std::string(6 << 20, 'a'), i);  // 3 x 6 MiB class names
  }
  WriteFile(src / "m.csv", csv);
  store::IngestReport r;
  Status st = store::Ingest(S(), Opts("bigcls", {(src / "m.csv").string()}), &r);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.ToString().substr(0, 300);
  EXPECT_NE(st.message().find("class list is too large"), std::string::npos) << st.ToString().substr(0, 300);
  auto orphans = store::OrphanTables(S(), keyspace_, {});
  ASSERT_TRUE(orphans.ok()) << orphans.status().ToString();
  for (const auto& t : *orphans) EXPECT_NE(t, "d_bigcls");
  for (const auto& t : *orphans) EXPECT_NE(t, "m_bigcls");
}

TEST_F(StoreHardeningTest, LsReportsOrphanTables) {
  for (const auto& q : store::DatasetTablesCql(keyspace_, "orph")) ASSERT_TRUE(store::RunDdl(S(), q).ok()) << q;
  auto orphans = store::OrphanTables(S(), keyspace_, {});
  ASSERT_TRUE(orphans.ok()) << orphans.status().ToString();
  EXPECT_TRUE(std::count(orphans->begin(), orphans->end(), "d_orph") == 1);
  EXPECT_TRUE(std::count(orphans->begin(), orphans->end(), "m_orph") == 1);
  const std::string cli = CliPath();
  ASSERT_TRUE(fs::exists(cli)) << cli;
  auto [rc, out] = Sh(fmt::format("{} ls {}", cli, Common()));
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("tables without a dataset entry (orphans): "), std::string::npos) << out;
  EXPECT_NE(out.find("d_orph"), std::string::npos) << out;
  EXPECT_NE(out.find("m_orph"), std::string::npos) << out;
  EXPECT_NE(out.find("cqlstream drop orph --yes"), std::string::npos) << out;
  auto drop = Sh(fmt::format("{} drop orph --yes {}", cli, Common()));
  EXPECT_EQ(drop.first, 0) << drop.second;
  auto after = store::OrphanTables(S(), keyspace_, {});
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(std::count(after->begin(), after->end(), "d_orph"), 0);
}

// --- --allow-paths-outside reaches the manifest reader (item 22) ------------------

TEST_F(StoreHardeningTest, ManifestPathsOutsideNeedTheFlag) {
  const std::string cli = CliPath();
  ASSERT_TRUE(fs::exists(cli)) << cli;
  TempDir root("outside");
  WriteFile(root / "secret.png", MakePng(8, 8, 1));
  WriteFile(root / "m/inside.png", MakePng(8, 8, 2));
  WriteFile(root / "m/list.csv", "path,label\ninside.png,a\n../secret.png,b\n");
  const std::string manifest = (root / "m/list.csv").string();
  auto refused = Sh(fmt::format("{} ingest --dataset outside {} {}", cli, manifest, Common()));
  EXPECT_NE(refused.first, 0) << refused.second;
  EXPECT_NE(refused.first, -1) << refused.second;
  EXPECT_NE(refused.second.find("secret.png"), std::string::npos) << refused.second;
  EXPECT_NE(refused.second.find("--allow-paths-outside"), std::string::npos) << refused.second;
  auto allowed = Sh(fmt::format("{} ingest --dataset outside {} --allow-paths-outside {}", cli, manifest, Common()));
  EXPECT_EQ(allowed.first, 0) << allowed.second;
  EXPECT_NE(allowed.second.find("ingested 2 samples"), std::string::npos) << allowed.second;
}

// --- main() guard (item 3) and escaping (item 9) ----------------------------------

TEST_F(StoreHardeningTest, BadSelectionEndsWithAMessageNotASignal) {
  const std::string cli = CliPath();
  ASSERT_TRUE(fs::exists(cli)) << cli;
  TempDir src("selsrc");
  MakeFolder(src, 3);
  Ingested("selds", src);
  TempDir dir("seldir");
  // A clean error (exit 1, or 2 where the file is judged a bad argument), never
  // a signal (Sh reports -1 then; it was SIGABRT from an escaped
  // std::ios_base::failure).
  auto [rc, out] = Sh(fmt::format("{} bench selds --selection {} --epochs 1 {}", cli, dir.path(), Common()));
  EXPECT_TRUE(rc == 1 || rc == 2) << rc << ": " << out;
  EXPECT_NE(out.find("error"), std::string::npos) << out;
  WriteFile(dir / "bad.sel", std::string("CQLSSEL1{\"dataset\": \"\\uZZZZ\"}"));
  auto bad = Sh(fmt::format("{} bench selds --selection {} --epochs 1 {}", cli, (dir / "bad.sel").string(), Common()));
  EXPECT_TRUE(bad.first == 1 || bad.first == 2) << bad.first << ": " << bad.second;
  EXPECT_NE(bad.second.find("error"), std::string::npos) << bad.second;
}

TEST_F(StoreHardeningTest, ControlCharactersFromTheDatabaseAreEscaped) {
  const std::string cli = CliPath();
  ASSERT_TRUE(fs::exists(cli)) << cli;
  TempDir src("escsrc");
  WriteFile(src / "a\x1b[2Jb/1.png", MakePng(8, 8, 1));
  WriteFile(src / "plain/2.png", MakePng(8, 8, 2));
  Ingested("escds", src);
  auto [rc, out] = Sh(fmt::format("{} info escds {}", cli, Common()));
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  EXPECT_NE(out.find("a\\x1b[2Jb"), std::string::npos) << out;
}

}  // namespace
}  // namespace cqlstream
