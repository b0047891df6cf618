// Copyright (c) cqlstream authors.
//
// The sample writer (store/sample_writer.h) against the real node: a round
// trip read back byte-identical with its labels, paths and extras; resume
// after a simulated crash with the same source_id (no duplicate, nothing
// lost); a complete source_id writes nothing; another source_id appends a
// segment; Abort leaves the segment open for the next writer; blobs are
// stored without image validation; refused samples and refused writers; and
// `cqlstream ingest --kind blob` of a folder of .npy files.
//
// Everything lives in one keyspace wr_<pid>, dropped when the suite ends.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "store/catalog.h"
#include "store/ingest.h"
#include "store/sample_row.h"
#include "store/sample_writer.h"
#include "store/scan.h"
#include "store/testing_fixtures.h"
#include "store_ingest_fixture.h"
#include "test_env.h"

namespace cqlstream {
namespace {

using store::SampleInput;
using store::SampleWriter;
using store::SampleWriterOptions;
using store::testing::MakeJpeg;
using store::testing::MakePng;

class WriterTest : public testing::IngestFixture {
 protected:
  static void SetUpTestSuite() { SetUpStore("wr"); }

  SampleWriterOptions Opts(const std::string& dataset, const std::string& source_id) {
    SampleWriterOptions o;
    o.keyspace = keyspace_;
    o.dataset = dataset;
    o.split = "train";
    o.source_id = source_id;
    o.label_kind = LabelKind::kClass;
    o.class_names = std::vector<std::string>{"cat", "dog", "fish"};
    o.concurrency = 8;
    o.commit_every = 5;
    return o;
  }

  std::unique_ptr<SampleWriter> Open(const SampleWriterOptions& o) {
    auto w = SampleWriter::Open(session_, o);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    return w.ok() ? std::move(w).value() : nullptr;
  }

  // The bytes of one sample, read through the data row's decoder.
  std::vector<uint8_t> Data(const DatasetInfo& d, SampleKey key) {
    auto q = S().Prepare(store::DataReadQuery(d));
    EXPECT_TRUE(q.ok()) << q.status().ToString();
    if (!q.ok()) return {};
    store::SampleRowDecoder dec(key, store::HintsFor(d, -1), /*keep_bytes=*/true);
    net::Statement st = net::Statement::Bound(*q, {Value::Int(KeySegment(key)), Value::Int(KeyIndex(key))});
    st.page_size = 8;
    Status rs = S().ForEachPage(st, [&](const cql::Rows& r) {
      dec.AddPage(r);
      return Status::OK();
    });
    EXPECT_TRUE(rs.ok()) << rs.ToString();
    Status f = dec.Finish();
    EXPECT_TRUE(f.ok()) << f.ToString();
    EXPECT_EQ(static_cast<int64_t>(dec.xxh64()), dec.statics().checksum) << FormatKey(key);
    auto b = dec.bytes();
    return {b.begin(), b.end()};
  }
};

// Images of several sizes: one chunk, a few chunks (one batch), many chunks.
std::vector<std::vector<uint8_t>> Images(int n) {
  std::vector<std::vector<uint8_t>> out;
  for (int i = 0; i < n; ++i) {
    if (i % 7 == 3) {
      out.push_back(MakeJpeg(160, 160, 100 + i));  // ~60 kB: chunk by chunk at a 4 KiB chunk size
    } else if (i % 2) {
      out.push_back(MakeJpeg(24 + i % 9, 24, 100 + i));
    } else {
      out.push_back(MakePng(16 + i % 5, 16, 100 + i));
    }
  }
  return out;
}

SampleInput In(const std::vector<uint8_t>& bytes, int i) {
  SampleInput in;
  in.data = bytes;
  in.label = i % 3;
  in.path = fmt::format("img/{:03d}.bin", i);
  in.extra = {{"n", std::to_string(i)}};
  return in;
}

TEST_F(WriterTest, RoundTripByteIdentical) {
  const auto images = Images(30);
  auto o = Opts("round", "job-1/part-0");
  o.chunk_size = 4096;
  o.max_batch_bytes = 32 << 10;
  auto w = Open(o);
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->report().created_dataset);
  EXPECT_EQ(w->report().action, "new");
  std::vector<SampleKey> keys;
  for (int i = 0; i < 30; ++i) {
    auto k = w->Add(In(images[i], i));
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    keys.push_back(*k);
  }
  ASSERT_TRUE(w->Close().ok());
  const auto r = w->report();
  EXPECT_EQ(r.written, 30);
  EXPECT_EQ(r.count, 30);
  EXPECT_TRUE(r.sealed);

  DatasetInfo d = Load("round");
  EXPECT_EQ(d.label_kind, LabelKind::kClass);
  EXPECT_EQ(d.sample_kind, SampleKind::kImage);
  EXPECT_EQ(d.chunk_size, 4096);
  ASSERT_EQ(d.segments.size(), 1u);
  EXPECT_EQ(d.segments[0].state, "sealed");
  EXPECT_EQ(d.segments[0].source_id, "job-1/part-0");
  EXPECT_EQ(d.Count("train"), 30);
  auto meta = Committed(d);
  ASSERT_EQ(meta.size(), 30u);
  for (int i = 0; i < 30; ++i) {
    const SampleKey k = keys[i];
    EXPECT_EQ(KeyIndex(k), i);
    const store::MetaRow& m = meta.at(k);
    EXPECT_EQ(m.path, fmt::format("img/{:03d}.bin", i));
    EXPECT_EQ(m.label, i % 3);
    EXPECT_EQ(m.extra.at("n"), std::to_string(i));
    EXPECT_EQ(m.checksum, static_cast<int64_t>(XXH64(images[i].data(), images[i].size(), 0)));
    EXPECT_EQ(Data(d, k), images[i]) << i;
  }
}

TEST_F(WriterTest, ResumeAfterCrashWritesNoDuplicate) {
  const auto images = Images(40);
  {
    auto w = Open(Opts("crashy", "job-7/part-3"));
    ASSERT_NE(w, nullptr);
    for (int i = 0; i < 23; ++i) ASSERT_TRUE(w->Add(In(images[i], i)).ok());
    w->AbandonForTesting();  // rows above the committed count exist
  }
  DatasetInfo mid = Load("crashy");
  ASSERT_EQ(mid.segments.size(), 1u);
  EXPECT_EQ(mid.segments[0].state, "open");
  const int64_t committed = mid.segments[0].count;
  EXPECT_GE(committed, 5);  // commit_every 5
  EXPECT_LT(committed, 23);

  auto w = Open(Opts("crashy", "job-7/part-3"));
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->report().action, "resumed");
  EXPECT_EQ(w->report().start_count, committed);
  for (int i = 0; i < 40; ++i) {
    auto k = w->Add(In(images[i], i));
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    EXPECT_EQ(KeyIndex(*k), i);
  }
  ASSERT_TRUE(w->Close().ok());
  EXPECT_EQ(w->report().resumed, committed);
  EXPECT_EQ(w->report().written, 40 - committed);

  DatasetInfo d = Load("crashy");
  ASSERT_EQ(d.segments.size(), 1u);
  EXPECT_EQ(d.segments[0].state, "sealed");
  EXPECT_EQ(d.Count("train"), 40);
  auto meta = Committed(d);
  ASSERT_EQ(meta.size(), 40u);
  std::set<std::string> paths;
  for (const auto& [k, m] : meta) {
    paths.insert(m.path);
    EXPECT_EQ(m.path, fmt::format("img/{:03d}.bin", KeyIndex(k)));
    EXPECT_EQ(m.checksum,
              static_cast<int64_t>(XXH64(images[KeyIndex(k)].data(), images[KeyIndex(k)].size(), 0)));
  }
  EXPECT_EQ(paths.size(), 40u);

  // Run again: complete, nothing written; one sample more is refused.
  auto again = Open(Opts("crashy", "job-7/part-3"));
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->report().action, "complete");
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(again->Add(In(images[i], i)).ok());
  auto past = again->Add(In(images[0], 40));
  EXPECT_EQ(past.status().code(), Status::Code::kAlreadyExists) << past.status().ToString();
  ASSERT_TRUE(again->Close().ok());
  EXPECT_EQ(again->report().written, 0);
  EXPECT_EQ(again->report().resumed, 40);
  EXPECT_EQ(Load("crashy").Count("train"), 40);
}

TEST_F(WriterTest, AnotherSourceAppendsAndAbortLeavesOpen) {
  const auto images = Images(12);
  auto a = Open(Opts("multi", "part-a"));
  ASSERT_NE(a, nullptr);
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(a->Add(In(images[i], i)).ok());
  ASSERT_TRUE(a->Close().ok());

  // Existing class dataset: the classes may be left out.
  auto o = Opts("multi", "part-b");
  o.class_names.reset();
  o.label_kind.reset();
  auto b = Open(o);
  ASSERT_NE(b, nullptr);
  EXPECT_FALSE(b->report().created_dataset);
  for (int i = 6; i < 10; ++i) ASSERT_TRUE(b->Add(In(images[i], i)).ok());
  ASSERT_TRUE(b->Abort().ok());
  DatasetInfo d = Load("multi");
  ASSERT_EQ(d.segments.size(), 2u);
  EXPECT_NE(d.segments[0].seg, d.segments[1].seg);
  EXPECT_EQ(d.segments[1].state, "open");
  EXPECT_EQ(d.segments[1].count, 4);  // Abort commits what was written

  auto b2 = Open(o);
  ASSERT_NE(b2, nullptr);
  EXPECT_EQ(b2->report().action, "resumed");
  for (int i = 6; i < 12; ++i) ASSERT_TRUE(b2->Add(In(images[i], i)).ok());
  ASSERT_TRUE(b2->Close().ok());
  EXPECT_EQ(b2->report().resumed, 4);
  EXPECT_EQ(b2->report().written, 2);
  d = Load("multi");
  EXPECT_EQ(d.Count("train"), 12);
  EXPECT_EQ(Committed(d).size(), 12u);
}

TEST_F(WriterTest, BlobsSkipImageValidation) {
  auto o = Opts("blobs", "b");
  o.label_kind = LabelKind::kTarget;
  o.class_names.reset();
  o.kind = SampleKind::kBlob;
  auto w = Open(o);
  ASSERT_NE(w, nullptr);
  const std::string npy = std::string("\x93NUMPY\x01\x00", 8) + "not checked";
  const std::string mask = "any target bytes";
  SampleInput in;
  in.data = {reinterpret_cast<const uint8_t*>(npy.data()), npy.size()};
  in.target = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(mask.data()), mask.size());
  in.path = "a.npy";
  in.target_path = "a.mask";
  auto k = w->Add(in);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  ASSERT_TRUE(w->Close().ok());
  DatasetInfo d = Load("blobs");
  EXPECT_EQ(d.sample_kind, SampleKind::kBlob);
  const auto bytes = Data(d, *k);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), npy + mask);
  const auto meta = Committed(d);
  EXPECT_EQ(meta.at(*k).image_size, static_cast<int64_t>(npy.size()));
  EXPECT_EQ(meta.at(*k).target_path, "a.mask");

  // The kind is the dataset's: an image writer is refused.
  auto img = o;
  img.kind = SampleKind::kImage;
  img.source_id = "c";
  auto refused = SampleWriter::Open(session_, img);
  EXPECT_EQ(refused.status().code(), Status::Code::kAlreadyExists) << refused.status().ToString();
}

TEST_F(WriterTest, RefusedSamplesTakeNoPosition) {
  const auto images = Images(3);
  auto w = Open(Opts("refuse", "r"));
  ASSERT_NE(w, nullptr);
  const std::string text = "not an image";
  SampleInput bad;
  bad.data = {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
  bad.label = 0;
  bad.path = "bad.jpg";
  auto st = w->Add(bad);
  EXPECT_EQ(st.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.status().message().find("not an image"), std::string::npos) << st.status().ToString();
  SampleInput no_label = In(images[0], 0);
  no_label.label.reset();
  EXPECT_EQ(w->Add(no_label).status().code(), Status::Code::kInvalidArgument);
  SampleInput out_of_range = In(images[0], 0);
  out_of_range.label = 3;
  EXPECT_NE(w->Add(out_of_range).status().message().find("not in [0, 3)"), std::string::npos);
  SampleInput bad_utf8 = In(images[0], 0);
  bad_utf8.path = "\xff\xfe";
  EXPECT_EQ(w->Add(bad_utf8).status().code(), Status::Code::kInvalidArgument);
  SampleInput empty = In(images[0], 0);
  empty.data = {};
  EXPECT_EQ(w->Add(empty).status().code(), Status::Code::kInvalidArgument);
  auto k = w->Add(In(images[1], 1));
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(KeyIndex(*k), 0);  // the refused ones took no position
  ASSERT_TRUE(w->Close().ok());
  EXPECT_EQ(w->Add(In(images[2], 2)).status().code(), Status::Code::kInvalidArgument);  // closed

  // Writers refused before anything is written.
  auto o = Opts("refuse2", "r");
  o.class_names.reset();
  EXPECT_EQ(SampleWriter::Open(session_, o).status().code(), Status::Code::kInvalidArgument);  // new, no classes
  auto other = Opts("refuse", "r2");
  other.class_names = std::vector<std::string>{"dog", "cat", "fish"};
  EXPECT_EQ(SampleWriter::Open(session_, other).status().code(), Status::Code::kInvalidArgument);  // order differs
  auto split = Opts("refuse", "r3");
  split.split = "a/b";
  EXPECT_EQ(SampleWriter::Open(session_, split).status().code(), Status::Code::kInvalidArgument);
  auto nosrc = Opts("refuse", "");
  EXPECT_EQ(SampleWriter::Open(session_, nosrc).status().code(), Status::Code::kInvalidArgument);
  auto kind = Opts("refuse", "r4");
  kind.label_kind = LabelKind::kNone;
  kind.class_names.reset();
  EXPECT_EQ(SampleWriter::Open(session_, kind).status().code(), Status::Code::kAlreadyExists);
}

// A .npy file (format 1.0) of n little-endian float32 values i * 0.5.
std::vector<uint8_t> Npy(int n) {
  std::string header = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}", n);
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<uint8_t>(header.size() & 0xff),
                              static_cast<uint8_t>(header.size() >> 8)};
  out.insert(out.end(), header.begin(), header.end());
  for (int i = 0; i < n; ++i) {
    const float f = static_cast<float>(i) * 0.5f;
    uint8_t b[4];
    std::memcpy(b, &f, 4);
    out.insert(out.end(), b, b + 4);
  }
  return out;
}

// `cqlstream ingest --kind blob`: a folder of .npy files is stored without
// image validation and read back byte-identical; as images they are skipped.
TEST_F(WriterTest, IngestKindBlobReadsBackByteIdentical) {
  store::testing::TempDir dir("npy");
  std::map<std::string, std::vector<uint8_t>> files;
  for (int i = 0; i < 9; ++i) {
    const std::string rel = fmt::format("{}/{:02d}.npy", i % 2 ? "odd" : "even", i);
    files[rel] = Npy(1 + i * 3000);  // up to ~96 kB: one chunk, a batch of chunks, chunk by chunk
    store::testing::WriteFile(dir / rel, files[rel]);
  }
  store::IngestOptions o;
  o.keyspace = keyspace_;
  o.dataset = "npyblobs";
  o.source.sources = {dir.path()};
  o.kind = SampleKind::kBlob;
  o.chunk_size = 16384;
  o.max_batch_bytes = 64 << 10;
  o.concurrency = 4;
  store::IngestReport report;
  Status st = store::Ingest(S(), o, &report);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(report.written, 9);
  EXPECT_TRUE(report.skips.empty()) << report.FormatSkips();
  DatasetInfo d = Load("npyblobs");
  EXPECT_EQ(d.sample_kind, SampleKind::kBlob);
  EXPECT_EQ(d.label_kind, LabelKind::kClass);
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"even", "odd"}));
  const auto meta = Committed(d);
  ASSERT_EQ(meta.size(), 9u);
  for (const auto& [k, m] : meta) {
    ASSERT_TRUE(files.count(m.path)) << m.path;
    EXPECT_EQ(Data(d, k), files.at(m.path)) << m.path;
    EXPECT_EQ(d.class_names[*m.label], m.path.substr(0, m.path.find('/')));
  }

  // As images, every file is skipped; the dataset's kind stays what it is.
  o.dataset = "npyimages";
  o.kind = SampleKind::kImage;
  st = store::Ingest(S(), o, &report);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(report.written, 0);
  EXPECT_EQ(report.skips.size(), 9u);
  o.dataset = "npyblobs";
  st = store::Ingest(S(), o, &report);
  EXPECT_EQ(st.code(), Status::Code::kAlreadyExists) << st.ToString();

  // The command line: --kind blob, and info names the kind.
  auto [rc, out] = testing::Sh(fmt::format("{} ingest --dataset npycli --kind blob {} {}", testing::CliPath(),
                                           dir.path(), Common()));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("ingested 9 samples"), std::string::npos) << out;
  std::tie(rc, out) = testing::Sh(fmt::format("{} info npycli {}", testing::CliPath(), Common()));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("sample kind  blob"), std::string::npos) << out;
  std::tie(rc, out) = testing::Sh(fmt::format("{} ingest --dataset npycli --kind sound {} {}", testing::CliPath(),
                                              dir.path(), Common()));
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("--kind"), std::string::npos) << out;
}

}  // namespace
}  // namespace cqlstream
