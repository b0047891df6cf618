// Copyright (c) cqlstream authors.
//
// Datasets in the real node: ingest from folders, manifests and tar shards;
// idempotent re-runs; verify (corruption, missing rows), export
// (byte-identical), select, class counts, drop. Resume after a crash,
// shards, appends, refused ingests and the cqlstream binary are in
// store_resume_test.cc.
//
// Everything lives in one keyspace st_<pid>, dropped when the suite ends.
// Fixture files are generated into temporary folders.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "store/catalog.h"
#include "store/export.h"
#include "store/ingest.h"
#include "store/sample_row.h"
#include "store/scan.h"
#include "store/schema.h"
#include "store/select.h"
#include "store/stats.h"
#include "store/testing_fixtures.h"
#include "store/verify.h"
#include "fault_proxy.h"
#include "store_ingest_fixture.h"
#include "test_env.h"

namespace cqlstream {
namespace {

namespace fs = std::filesystem;
using store::testing::MakeJpeg;
using store::testing::MakePng;
using store::testing::ReadFile;
using store::testing::TarBuilder;
using store::testing::TempDir;
using store::testing::WriteFile;
using testing::ExpectRefused;

class StoreTest : public testing::IngestFixture {
 protected:
  static void SetUpTestSuite() { SetUpStore("st"); }
};

std::map<std::string, std::string> SkipsByPath(const store::IngestReport& r) {
  std::map<std::string, std::string> out;
  for (const auto& s : r.skips) out[s.path] = s.reason;
  return out;
}

// A split/class folder with images of three size classes (one chunk; a few
// chunks: one batch; many chunks: chunk by chunk) and bad files.
struct PetFolder {
  TempDir dir{"pets"};
  std::map<std::string, std::vector<uint8_t>> valid;  // relative path -> bytes
  PetFolder() {
    auto add = [&](const std::string& rel, std::vector<uint8_t> bytes) {
      WriteFile(dir / rel, bytes);
      valid[rel] = std::move(bytes);
    };
    add("train/cat/c1.png", MakePng(16, 16, 1));
    add("train/cat/c2.png", MakePng(24, 24, 2));
    add("train/cat/c3.jpg", MakeJpeg(64, 64, 3));      // ~10 kB: a few chunks, one batch
    add("train/dog/d1.jpg", MakeJpeg(32, 32, 4));
    add("train/dog/d2.jpg", MakeJpeg(320, 320, 5));    // > 32 KiB (max_batch_bytes below): chunk by chunk
    add("train/dog/d3.png", MakePng(8, 8, 6));
    add("test/cat/t1.png", MakePng(12, 12, 7));
    add("test/dog/t2.jpg", MakeJpeg(40, 40, 8));
    WriteFile(dir / "train/cat/zero.png", std::string_view());
    WriteFile(dir / "train/dog/notes.jpg", "these are not pixels");
    fs::create_symlink(dir / "train/cat/gone.png", dir / "train/cat/dangling.png");
  }
};

// The report of the first ingest of a PetFolder: 8 written, its 3 bad files
// skipped with their reasons.
void ExpectPetsReport(const store::IngestReport& rep) {
  EXPECT_TRUE(rep.created_dataset);
  EXPECT_EQ(rep.written, 8);
  auto skips = SkipsByPath(rep);
  EXPECT_EQ(skips.size(), 3u);
  EXPECT_EQ(skips["train/cat/zero.png"], "empty file");
  EXPECT_EQ(skips["train/dog/notes.jpg"], "not an image (unknown signature)");
  EXPECT_NE(skips["train/cat/dangling.png"].find("unreadable"), std::string::npos) << skips["train/cat/dangling.png"];
  EXPECT_NE(rep.FormatSkips().find("empty file (1):\n    train: train/cat/zero.png"), std::string::npos);
}

// Indices follow the sorted listing of the valid items; labels and sizes
// are the files'.
void ExpectPetsMeta(const std::map<SampleKey, store::MetaRow>& meta, PetFolder& f) {
  std::vector<std::string> train_paths;
  for (const auto& [k, m] : meta) {
    if (m.path.starts_with("train/")) train_paths.push_back(m.path);
  }
  EXPECT_EQ(train_paths, (std::vector<std::string>{"train/cat/c1.png", "train/cat/c2.png", "train/cat/c3.jpg",
                                                   "train/dog/d1.jpg", "train/dog/d2.jpg", "train/dog/d3.png"}));
  for (const auto& [k, m] : meta) {
    EXPECT_EQ(m.label, m.path.find("/cat/") != std::string::npos ? 0 : 1) << m.path;
    EXPECT_EQ(m.size, static_cast<int64_t>(f.valid[m.path].size()));
  }
}

// Verify finds nothing; export writes every file byte-identical.
void ExpectCleanVerifyAndExport(net::Session& s, const DatasetInfo& d2, PetFolder& f) {
  store::VerifyReport vr;
  ASSERT_TRUE(store::Verify(s, d2, {}, &vr).ok());
  EXPECT_EQ(vr.checked, 8);
  EXPECT_TRUE(vr.problems.empty()) << vr.problems[0].what;

  // Export: byte-identical.
  TempDir out("export");
  store::ExportOptions eo;
  eo.dir = out.path();
  store::ExportReport er;
  ASSERT_TRUE(store::Export(s, d2, eo, &er).ok());
  EXPECT_EQ(er.samples, 8);
  EXPECT_TRUE(er.problems.empty());
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(out.path())) {
    if (!e.is_regular_file()) continue;
    ++files;
    const std::string rel = fs::relative(e.path(), out.path()).string();
    ASSERT_TRUE(f.valid.count(rel)) << rel;
    EXPECT_EQ(ReadFile(e.path()), f.valid[rel]) << rel;
  }
  EXPECT_EQ(files, 8u);
}

// Select: by label, by fraction (deterministic), committed keys only.
void ExpectPetsSelect(net::Session& s, const DatasetInfo& d2, std::map<SampleKey, store::MetaRow>& meta) {
  store::SelectOptions so;
  so.split = "train";
  so.labels = {"dog"};
  auto dogs = store::Select(s, d2, so);
  ASSERT_TRUE(dogs.ok()) << dogs.status().ToString();
  ASSERT_EQ(dogs->keys.size(), 3u);
  for (SampleKey k : dogs->keys) EXPECT_EQ(meta[k].label, 1);
  so.labels = {"0"};
  auto cats = store::Select(s, d2, so);
  ASSERT_TRUE(cats.ok());
  EXPECT_EQ(cats->keys.size(), 3u);
  so.labels.clear();
  so.fraction = 0.5;
  so.seed = 11;
  auto half1 = store::Select(s, d2, so);
  auto half2 = store::Select(s, d2, so);
  ASSERT_TRUE(half1.ok() && half2.ok());
  EXPECT_EQ(half1->keys.size(), 3u);
  EXPECT_EQ(half1->keys, half2->keys);
  for (SampleKey k : half1->keys) EXPECT_TRUE(meta.count(k));
  TempDir seldir("sel");
  ASSERT_TRUE(half1->Save((seldir / "half.sel").string()).ok());
  auto loaded = Selection::Load((seldir / "half.sel").string());
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->keys, half1->keys);
  EXPECT_EQ(loaded->dataset, "pets");
}

// Drop removes everything: the catalog row, the segments and both tables.
void ExpectDropRemovesAll(net::Session& s, const std::string& ks, const std::string& name) {
  auto dr = store::DropDataset(s, ks, name);
  ASSERT_TRUE(dr.ok()) << dr.status().ToString();
  EXPECT_TRUE(dr->catalog_row);
  EXPECT_EQ(dr->segments, 2);
  EXPECT_EQ(dr->tables, (std::vector<std::string>{"d_" + name, "m_" + name}));
  EXPECT_TRUE(store::LoadDataset(s, ks, name).status().IsNotFound());
  auto tables = s.Execute(net::Statement::Query(
      "SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?", {Value::Text(ks)}));
  ASSERT_TRUE(tables.ok());
  for (int32_t i = 0; i < tables->rows()->row_count(); ++i) {
    const std::string t = tables->rows()->value(i, 0)->as_text();
    EXPECT_TRUE(t != "d_" + name && t != "m_" + name) << t;
  }
  auto segs = s.Execute(net::Statement::Query(
      fmt::format("SELECT seg FROM {}.segments WHERE dataset = '{}'", ks, name)));
  ASSERT_TRUE(segs.ok());
  EXPECT_EQ(segs->rows()->row_count(), 0);
  EXPECT_TRUE(store::DropDataset(s, ks, name).status().IsNotFound());
}

TEST_F(StoreTest, FolderLifecycle) {
  PetFolder f;
  auto o = Opts("pets", {f.dir.path()});
  o.chunk_size = 4096;
  o.max_batch_bytes = 32 << 10;
  o.description = "cats and dogs";
  ASSERT_GT(f.valid["train/dog/d2.jpg"].size(), static_cast<size_t>(o.max_batch_bytes));
  auto [st, rep] = Run(o);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ExpectPetsReport(rep);

  DatasetInfo d = Load("pets");
  EXPECT_EQ(d.label_kind, LabelKind::kClass);
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(d.chunk_size, 4096);
  EXPECT_EQ(d.description, "cats and dogs");
  EXPECT_EQ(d.Count("train"), 6);
  EXPECT_EQ(d.Count("test"), 2);
  int64_t train_bytes = 0;
  for (const auto& [p, b] : f.valid) train_bytes += p.starts_with("train/") ? static_cast<int64_t>(b.size()) : 0;
  EXPECT_EQ(d.Bytes("train"), train_bytes);
  for (const auto& g : d.segments) EXPECT_EQ(g.state, "sealed");

  // Indices follow the sorted listing of the valid items.
  auto meta = Committed(d);
  ASSERT_EQ(meta.size(), 8u);
  ExpectPetsMeta(meta, f);

  // A re-run changes nothing.
  auto [st2, rep2] = Run(o);
  ASSERT_TRUE(st2.ok()) << st2.ToString();
  EXPECT_EQ(rep2.written, 0);
  for (const auto& s : rep2.splits) EXPECT_EQ(s.action, "complete");
  DatasetInfo d2 = Load("pets");
  EXPECT_EQ(d2.segments.size(), d.segments.size());
  EXPECT_EQ(d2.Count("train"), 6);
  auto raw = RawMetaRows(d2);
  int64_t rows = 0;
  for (const auto& [seg, n] : raw) rows += n;
  EXPECT_EQ(rows, 8);

  ASSERT_NO_FATAL_FAILURE(ExpectCleanVerifyAndExport(S(), d2, f));

  ASSERT_NO_FATAL_FAILURE(ExpectPetsSelect(S(), d2, meta));

  // Per-class counts from the token-range scan.
  auto counts = store::ClassCounts(S(), d2, 16, 4);
  ASSERT_TRUE(counts.ok()) << counts.status().ToString();
  EXPECT_EQ((*counts)["train"], (std::vector<int64_t>{3, 3}));
  EXPECT_EQ((*counts)["test"], (std::vector<int64_t>{1, 1}));

  // Verify finds a corrupted chunk and a missing data partition, by key and path.
  SampleKey big = 0, small = 0;
  for (const auto& [k, m] : meta) {
    if (m.path == "train/dog/d2.jpg") big = k;
    if (m.path == "test/cat/t1.png") small = k;
  }
  Cql(fmt::format("UPDATE {}.d_pets SET data = ? WHERE seg = ? AND idx = ? AND chunk = 3", keyspace_),
      {Value::Blob(std::vector<uint8_t>(4096, 0)), Value::Int(KeySegment(big)), Value::Int(KeyIndex(big))});
  Cql(fmt::format("DELETE FROM {}.d_pets WHERE seg = ? AND idx = ?", keyspace_),
      {Value::Int(KeySegment(small)), Value::Int(KeyIndex(small))});
  store::VerifyReport bad;
  ASSERT_TRUE(store::Verify(S(), d2, {}, &bad).ok());
  ASSERT_EQ(bad.problems.size(), 2u);
  std::map<SampleKey, store::VerifyProblem> probs;
  for (const auto& p : bad.problems) probs[p.key] = p;
  EXPECT_EQ(probs[big].path, "train/dog/d2.jpg");
  EXPECT_NE(probs[big].what.find("checksum mismatch"), std::string::npos) << probs[big].what;
  EXPECT_EQ(probs[small].path, "test/cat/t1.png");
  EXPECT_EQ(probs[small].what, "missing data");
  store::VerifyOptions only_train;
  only_train.split = "train";
  ASSERT_TRUE(store::Verify(S(), d2, only_train, &bad).ok());
  EXPECT_EQ(bad.problems.size(), 1u);

  ASSERT_NO_FATAL_FAILURE(ExpectDropRemovesAll(S(), keyspace_, "pets"));
}

// A dataset with blob targets (img/a.jpg + masks/a.png, img/b.png +
// masks/b.png in train) verifies clean and exports images, targets and a
// manifest naming both with the extra column.
void ExpectTargetsExported(net::Session& s, const DatasetInfo& t, const std::vector<uint8_t>& a,
                           const std::vector<uint8_t>& m1, const std::vector<uint8_t>& m2) {
  store::VerifyReport vr;
  ASSERT_TRUE(store::Verify(s, t, {}, &vr).ok());
  EXPECT_TRUE(vr.problems.empty());
  TempDir out("export");
  store::ExportOptions eo;
  eo.dir = out.path();
  store::ExportReport er;
  ASSERT_TRUE(store::Export(s, t, eo, &er).ok());
  EXPECT_EQ(er.files, 4);
  EXPECT_EQ(ReadFile(out / "train/img/a.jpg"), a);
  EXPECT_EQ(ReadFile(out / "train/masks/a.png"), m1);
  EXPECT_EQ(ReadFile(out / "train/masks/b.png"), m2);
  const auto csv = ReadFile(out / "manifest.csv");
  EXPECT_NE(std::string(csv.begin(), csv.end()).find("train/img/a.jpg,train/masks/a.png,train,x"), std::string::npos);
}

// The multilabel dataset: selecting label "sky" finds one sample; verify is
// clean.
void ExpectSkySelectedAndVerified(net::Session& s, const DatasetInfo& ml) {
  store::SelectOptions so;
  so.split = "train";
  so.labels = {"sky"};
  auto sky = store::Select(s, ml, so);
  ASSERT_TRUE(sky.ok());
  EXPECT_EQ(sky->keys.size(), 1u);
  store::VerifyReport mv;
  ASSERT_TRUE(store::Verify(s, ml, {}, &mv).ok());
  EXPECT_TRUE(mv.problems.empty()) << mv.problems[0].what;
}

TEST_F(StoreTest, ManifestCsvWithExtrasAndJsonlTargets) {
  TempDir dir("manifest");
  const auto a = MakeJpeg(20, 20, 1), b = MakePng(10, 10, 2), c = MakeJpeg(30, 30, 3);
  WriteFile(dir / "img/a.jpg", a);
  WriteFile(dir / "img/b.png", b);
  WriteFile(dir / "img/c.jpg", c);
  WriteFile(dir / "labels.csv",
            "path,label,split,source\nimg/a.jpg,cat,train,web\nimg/b.png,dog,train,book\nimg/c.jpg,dog,val,web\n"
            "img/missing.jpg,cat,train,web\nimg/a.jpg,,val,\n");
  // The last row lists img/a.jpg again: a duplicate path.
  auto dup = Run(Opts("mcsv", {(dir / "labels.csv").string()}));
  ASSERT_NO_FATAL_FAILURE(ExpectRefused(dup.first, "duplicate path"));
  EXPECT_TRUE(store::LoadDataset(S(), keyspace_, "mcsv").status().IsNotFound());

  WriteFile(dir / "labels.csv",
            "path,label,split,source\nimg/a.jpg,cat,train,web\nimg/b.png,dog,train,book\nimg/c.jpg,dog,val,web\n"
            "img/missing.jpg,cat,train,web\n");
  auto [st, rep] = Run(Opts("mcsv", {(dir / "labels.csv").string()}));
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(rep.written, 3);
  ASSERT_EQ(rep.skips.size(), 1u);
  EXPECT_EQ(rep.skips[0].path, "img/missing.jpg");
  EXPECT_NE(rep.skips[0].reason.find("unreadable"), std::string::npos);
  DatasetInfo d = Load("mcsv");
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(d.Count("train"), 2);
  EXPECT_EQ(d.Count("val"), 1);
  auto meta = Committed(d);
  std::map<std::string, store::MetaRow> by_path;
  for (const auto& [k, m] : meta) by_path[m.path] = m;
  EXPECT_EQ(by_path["img/b.png"].extra.at("source"), "book");
  EXPECT_EQ(by_path["img/b.png"].label, 1);
  store::SelectOptions so;
  so.split = "train";
  so.extra = {{"source", "web"}};
  auto web = store::Select(S(), d, so);
  ASSERT_TRUE(web.ok()) << web.status().ToString();
  ASSERT_EQ(web->keys.size(), 1u);
  EXPECT_EQ(meta[web->keys[0]].path, "img/a.jpg");

  // JSONL with blob targets: payload = image bytes + target bytes.
  const auto m1 = MakePng(20, 20, 9), m2 = MakePng(10, 10, 10);
  WriteFile(dir / "masks/a.png", m1);
  WriteFile(dir / "masks/b.png", m2);
  WriteFile(dir / "seg.jsonl",
            "{\"path\": \"img/a.jpg\", \"target\": \"masks/a.png\", \"city\": \"x\"}\n"
            "{\"path\": \"img/b.png\", \"target\": \"masks/b.png\"}\n");
  auto [st2, rep2] = Run(Opts("mseg", {(dir / "seg.jsonl").string()}));
  ASSERT_TRUE(st2.ok()) << st2.ToString();
  EXPECT_EQ(rep2.written, 2);
  DatasetInfo t = Load("mseg");
  EXPECT_EQ(t.label_kind, LabelKind::kTarget);
  auto tm = Committed(t);
  for (const auto& [k, m] : tm) {
    const bool is_a = m.path == "img/a.jpg";
    EXPECT_EQ(m.image_size, static_cast<int64_t>((is_a ? a : b).size()));
    EXPECT_EQ(m.size, static_cast<int64_t>((is_a ? a.size() + m1.size() : b.size() + m2.size())));
    EXPECT_EQ(m.target_path, is_a ? "masks/a.png" : "masks/b.png");
  }
  ASSERT_NO_FATAL_FAILURE(ExpectTargetsExported(S(), t, a, m1, m2));

  // Multilabel from a JSONL labels array.
  WriteFile(dir / "multi.jsonl",
            "{\"path\": \"img/a.jpg\", \"labels\": [\"sky\", \"tree\"]}\n{\"path\": \"img/c.jpg\", \"labels\": "
            "\"tree\"}\n");
  auto [st3, rep3] = Run(Opts("mmulti", {(dir / "multi.jsonl").string()}));
  ASSERT_TRUE(st3.ok()) << st3.ToString();
  DatasetInfo ml = Load("mmulti");
  EXPECT_EQ(ml.label_kind, LabelKind::kMultiLabel);
  EXPECT_EQ(ml.class_names, (std::vector<std::string>{"sky", "tree"}));
  ASSERT_NO_FATAL_FAILURE(ExpectSkySelectedAndVerified(S(), ml));
}

TEST_F(StoreTest, TarShards) {
  TempDir dir("tar");
  const auto j1 = MakeJpeg(20, 20, 1), p2 = MakePng(12, 12, 2), j3 = MakeJpeg(16, 16, 3);
  {
    TarBuilder b;
    b.Add("s0001.jpg", j1);
    b.Add("s0001.cls", "2");
    b.Add("s0001.txt", "a red car");
    b.Add("s0002.png", p2);
    b.Add("s0002.json", "{\"label\": 0, \"photographer\": \"ann\"}");
    b.Add("s0003.cls", "1");  // no image
    WriteFile(dir / "shards/train-000000.tar", b.Finish());
  }
  {
    TarBuilder b;
    b.Add("s0004.jpg", j3);
    b.Add("s0004.cls", "2");
    WriteFile(dir / "shards/train-000001.tar", b.Finish());
  }
  auto o = Opts("tars", {(dir / "shards/train-*.tar").string()});
  auto [st, rep] = Run(o);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(rep.written, 3);
  ASSERT_EQ(rep.skips.size(), 1u);
  EXPECT_EQ(rep.skips[0].path, "train-000000.tar/s0003");
  EXPECT_NE(rep.skips[0].reason.find("no image member"), std::string::npos);
  DatasetInfo d = Load("tars");
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"0", "1", "2"}));
  auto meta = Committed(d);
  std::map<std::string, store::MetaRow> by;
  for (const auto& [k, m] : meta) by[m.path] = m;
  ASSERT_EQ(by.size(), 3u);
  EXPECT_EQ(by["train-000000.tar/s0001.jpg"].label, 2);
  EXPECT_EQ(by["train-000000.tar/s0001.jpg"].extra.at("txt"), "a red car");
  EXPECT_EQ(by["train-000000.tar/s0002.png"].label, 0);
  EXPECT_EQ(by["train-000000.tar/s0002.png"].extra.at("photographer"), "ann");
  EXPECT_EQ(by["train-000001.tar/s0004.jpg"].size, static_cast<int64_t>(j3.size()));
  store::VerifyReport vr;
  ASSERT_TRUE(store::Verify(S(), d, {}, &vr).ok());
  EXPECT_EQ(vr.checked, 3);
  EXPECT_TRUE(vr.problems.empty());
  TempDir out("export");
  store::ExportOptions eo;
  eo.dir = out.path();
  store::ExportReport er;
  ASSERT_TRUE(store::Export(S(), d, eo, &er).ok());
  EXPECT_EQ(ReadFile(out / "train/2/s0001.jpg"), j1);
  EXPECT_EQ(ReadFile(out / "train/0/s0002.png"), p2);
  // Same command again: complete.
  auto again = Run(o);
  ASSERT_TRUE(again.first.ok());
  EXPECT_EQ(again.second.written, 0);
  EXPECT_EQ(again.second.splits[0].action, "complete");
}

// An interrupt ends a sample's read at its next look at the flag, not after
// its last chunk (verify, export and pack pass their interrupt flag): set
// before the read, the read ends at its first wait (with the first page
// when that was in hand at once), the rest of the large sample unread.
TEST_F(StoreTest, ASampleReadEndsAtAnInterruptBeforeItsLastChunk) {
  TempDir dir("intr");
  const auto big = MakeJpeg(320, 320, 5);
  WriteFile(dir / "train/a/big.jpg", big);
  auto o = Opts("intr", {dir.path()});
  o.chunk_size = 4096;
  auto [st, rep] = Run(o);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(rep.written, 1);
  ASSERT_GT(big.size(), 8u * 4096) << "the sample must span more than a few pages of chunks";
  DatasetInfo d = Load("intr");
  ASSERT_EQ(d.segments.size(), 1u);
  const SampleKey key = MakeKey(d.segments[0].seg, 0);
  auto q = S().Prepare(store::DataReadQuery(d));
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  const store::SampleHints hints = store::HintsFor(d, d.segments[0].max_size);

  std::atomic<bool> stop{false};
  store::SampleRowDecoder whole(key, hints, /*keep_bytes=*/true);
  ASSERT_TRUE(store::ReadSampleRows(S(), *q, key, /*page_size=*/2, &whole, &stop).ok());
  ASSERT_TRUE(whole.Finish().ok());
  EXPECT_EQ(whole.data_bytes(), static_cast<int64_t>(big.size()));

  stop = true;  // as the interrupt handler sets it, here before the first page
  store::SampleRowDecoder cut(key, hints, /*keep_bytes=*/true);
  const Status read = store::ReadSampleRows(S(), *q, key, /*page_size=*/2, &cut, &stop);
  EXPECT_EQ(read.code(), Status::Code::kCancelled) << read.ToString();
  EXPECT_EQ(read.message(), "interrupted");
  // The first page when it was in hand at once (else none), then the read
  // ends.
  EXPECT_LE(cut.rows(), 2);
  EXPECT_EQ(cut.data_bytes(), cut.rows() * 4096);
}

// An interrupt ends a sample's read that waits on a page the server holds:
// the read does not wait for the request timeout (a CLI command's Ctrl-C
// did until then).
TEST_F(StoreTest, AnInterruptEndsASampleReadWaitingOnAPageThatDoesNotCome) {
  TempDir dir("intrwait");
  WriteFile(dir / "train/a/one.jpg", MakeJpeg(32, 32, 6));
  auto [st, rep] = Run(Opts("intrwait", {dir.path()}));
  ASSERT_TRUE(st.ok()) << st.ToString();
  DatasetInfo d = Load("intrwait");
  ASSERT_EQ(d.segments.size(), 1u);
  const SampleKey key = MakeKey(d.segments[0].seg, 0);
  const store::SampleHints hints = store::HintsFor(d, d.segments[0].max_size);

  // Its own loopback address, same port, so that no other suite's proxy is in the way.
  testing::FaultProxy proxy("127.0.0.42", testing::TestOptions().hosts.at(0), 9042);
  ASSERT_TRUE(proxy.ok()) << proxy.error();
  ConnectionOptions co = testing::TestOptions();
  co.hosts = {"127.0.0.42"};
  co.request_timeout = std::chrono::milliseconds(20000);
  auto session = net::Session::Connect(co);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  auto q = (*session)->Prepare(store::DataReadQuery(d));
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  testing::FaultProxy::Faults f;
  f.blackhole_p = 1;  // every answer from now on is swallowed
  proxy.SetFaults(f);

  std::atomic<bool> stop{false};
  store::SampleRowDecoder dec(key, hints, /*keep_bytes=*/true);
  std::thread interrupt([&stop] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  const Status read = store::ReadSampleRows(**session, *q, key, /*page_size=*/2, &dec, &stop);
  const auto waited = std::chrono::steady_clock::now() - t0;
  interrupt.join();
  EXPECT_EQ(read.code(), Status::Code::kCancelled) << read.ToString();
  EXPECT_EQ(read.message(), "interrupted");
  EXPECT_EQ(dec.rows(), 0);
  EXPECT_LT(waited, std::chrono::seconds(5)) << "the read waited for its request's timeout";
  proxy.SetFaults({});
  (*session)->Close();
}

}  // namespace
}  // namespace cqlstream
