// Copyright (c) cqlstream authors.
//
// The data row against the catalog without a server: key checks, static
// columns (typed widths, sizes, labels), and the placement of chunks inside
// the sample's region whatever the row claims.
#include "store/sample_row.h"

#include <gtest/gtest.h>

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cql/wire.h"

namespace cqlstream::store {
namespace {

std::vector<uint8_t> Int(int32_t v) {
  std::vector<uint8_t> b(4);
  const uint32_t u = static_cast<uint32_t>(v);
  for (int i = 0; i < 4; ++i) b[static_cast<size_t>(i)] = static_cast<uint8_t>(u >> (24 - 8 * i));
  return b;
}
std::vector<uint8_t> Big(int64_t v) {
  std::vector<uint8_t> b(8);
  const uint64_t u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) b[static_cast<size_t>(i)] = static_cast<uint8_t>(u >> (56 - 8 * i));
  return b;
}
std::optional<std::span<const uint8_t>> View(const std::vector<uint8_t>& v) { return std::span<const uint8_t>(v); }

const SampleKey kKey = MakeKey(3, 1500);

// The static and key cells of row `row` of an answer for `key` (to the
// cells of a page or to a decoder).
template <typename Sink>
void FeedRow(Sink& c, int32_t row, SampleKey key, int64_t size) {
  const auto seg = Int(KeySegment(key)), idx = Int(KeyIndex(key)), sz = Big(size), img = Big(size), ck = Big(42),
             lb = Int(7);
  c.OnCell(row, kColSeg, View(seg));
  c.OnCell(row, kColIdx, View(idx));
  c.OnCell(row, kColSize, View(sz));
  c.OnCell(row, kColImageSize, View(img));
  c.OnCell(row, kColChecksum, View(ck));
  c.OnCell(row, kColLabel, View(lb));
  c.OnCell(row, kColLabels, std::nullopt);
}

SampleHints Hints() {
  SampleHints h;
  h.max_size = 10000;
  h.chunk_size = 4096;
  h.label_kind = LabelKind::kClass;
  h.classes = 10;
  return h;
}

TEST(SampleRowTest, ReadsTheStaticsOfAnHonestRow) {
  SampleRowCells c(kKey, false);
  FeedRow(c, 0, kKey, 5000);
  ASSERT_TRUE(c.status().ok()) << c.status().ToString();
  EXPECT_FALSE(c.key_mismatch());
  EXPECT_TRUE(c.statics().present);
  EXPECT_EQ(c.statics().size, 5000);
  EXPECT_EQ(c.statics().image_size, 5000);
  EXPECT_EQ(c.statics().checksum, 42);
  EXPECT_EQ(c.statics().label, 7);
  EXPECT_TRUE(CheckStatics(kKey, c.statics(), Hints()).ok());
}

TEST(SampleRowTest, AnotherSamplesKeyIsAMismatchOnAnyRow) {
  SampleRowCells c(kKey, false);
  FeedRow(c, 0, kKey, 5000);
  FeedRow(c, 1, MakeKey(3, 1501), 5000);
  EXPECT_TRUE(c.key_mismatch());
  SampleRowCells d(kKey, true);  // a later page is checked too
  const auto wrong = Int(4);
  d.OnCell(0, kColSeg, View(wrong));
  EXPECT_TRUE(d.key_mismatch());
  SampleRowCells n(kKey, false);
  n.OnCell(0, kColIdx, std::nullopt);
  EXPECT_TRUE(n.key_mismatch());
}

TEST(SampleRowTest, MistypedStaticsAreCorruptionNamingTheColumn) {
  SampleRowCells c(kKey, false);
  const auto four = Int(5000);
  c.OnCell(0, kColSize, View(four));
  ASSERT_FALSE(c.status().ok());
  EXPECT_EQ(c.status().code(), Status::Code::kCorruption);
  EXPECT_NE(c.status().message().find("size column is 4 bytes"), std::string::npos) << c.status().ToString();
  EXPECT_NE(c.status().message().find("3:1500"), std::string::npos);

  SampleRowCells l(kKey, false);
  const std::vector<uint8_t> junk = {0, 0, 0, 9, 1};  // a list of 9 ints in 1 byte
  l.OnCell(0, kColLabels, View(junk));
  EXPECT_EQ(l.status().code(), Status::Code::kCorruption);
}

TEST(SampleRowTest, StaticsThatDisagreeWithTheCatalogAreRefused) {
  SampleStatics s;
  s.present = true;
  s.size = 10001;  // more than the segment's max_size
  Status st = CheckStatics(kKey, s, Hints());
  EXPECT_EQ(st.code(), Status::Code::kCorruption);
  EXPECT_NE(st.message().find("max_size of 10000"), std::string::npos) << st.ToString();
  s.size = -1;
  EXPECT_FALSE(CheckStatics(kKey, s, Hints()).ok());
  s.size = INT64_MIN;
  EXPECT_FALSE(CheckStatics(kKey, s, Hints()).ok());
  s.size = 100;
  s.image_size = 101;
  EXPECT_FALSE(CheckStatics(kKey, s, Hints()).ok());
  s.image_size = 100;
  s.label = 10;  // classes 0..9
  EXPECT_FALSE(CheckStatics(kKey, s, Hints()).ok());
  s.label = -1;
  EXPECT_TRUE(CheckStatics(kKey, s, Hints()).ok());
  SampleStatics none;
  EXPECT_FALSE(CheckStatics(kKey, none, Hints()).ok()) << "a row without a size";
  SampleHints multi = Hints();
  multi.label_kind = LabelKind::kMultiLabel;
  s.labels = {1, 12};
  EXPECT_FALSE(CheckStatics(kKey, s, multi).ok());
  // Unknown hints do not refuse honest rows.
  SampleHints unknown;
  s.size = int64_t{1} << 40;
  s.image_size = -1;
  EXPECT_TRUE(CheckStatics(kKey, s, unknown).ok());
}

TEST(SampleRowTest, ChunksArePlacedInOrderInsideTheRegion) {
  ChunkPlacer p;
  p.Begin(4096 * 2 + 100, 4096);
  auto a = p.Place(kKey, 4096), b = p.Place(kKey, 4096), c = p.Place(kKey, 100);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, 0u);
  EXPECT_EQ(*b, 4096u);
  EXPECT_EQ(*c, 8192u);
  EXPECT_TRUE(p.Finish(kKey).ok());
}

TEST(SampleRowTest, ChunksThatLieAboutTheSizeNeverLeaveTheRegion) {
  ChunkPlacer more;
  more.Begin(5000, 4096);
  ASSERT_TRUE(more.Place(kKey, 4096).ok());
  auto over = more.Place(kKey, 4096);  // 8192 > 5000
  EXPECT_EQ(over.status().code(), Status::Code::kCorruption);
  EXPECT_NE(over.status().message().find("more than its size"), std::string::npos);

  ChunkPlacer less;
  less.Begin(5000, 4096);
  ASSERT_TRUE(less.Place(kKey, 4096).ok());
  Status fin = less.Finish(kKey);  // a missing last chunk
  EXPECT_EQ(fin.code(), Status::Code::kCorruption);
  EXPECT_NE(fin.message().find("add up to 4096 bytes, its size is 5000"), std::string::npos) << fin.ToString();

  ChunkPlacer gap;
  gap.Begin(4096 * 3, 4096);
  ASSERT_TRUE(gap.Place(kKey, 4096).ok());
  ASSERT_TRUE(gap.Place(kKey, 100).ok());
  EXPECT_FALSE(gap.Place(kKey, 4096).ok()) << "a chunk after a short one";

  ChunkPlacer big;
  big.Begin(10000, 4096);
  EXPECT_FALSE(big.Place(kKey, 5000).ok()) << "a chunk longer than the chunk size";

  ChunkPlacer wrap;
  wrap.Begin(100, 0);
  ASSERT_TRUE(wrap.Place(kKey, 60).ok());
  EXPECT_FALSE(wrap.Place(kKey, INT64_MAX).ok()) << "an offset + length that would wrap";
  EXPECT_FALSE(wrap.Place(kKey, -1).ok());

  ChunkPlacer empty;
  empty.Begin(0, 4096);
  EXPECT_TRUE(empty.Finish(kKey).ok());
  EXPECT_FALSE(empty.Place(kKey, 1).ok());
}

// One row of an answer through the buffered decoder: key and static cells
// (the statics only matter on the first row), then the data cell.
void FeedDecoder(SampleRowDecoder& d, int32_t row, SampleKey key, int64_t size, const std::vector<uint8_t>& chunk) {
  FeedRow(d, row, key, size);
  d.OnCell(row, kColData, View(chunk));
}

std::vector<uint8_t> FilledBytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7);
  return b;
}

TEST(SampleRowTest, DecoderHoldsTheChunksOfAnAnswerOverPages) {
  const auto c0 = FilledBytes(4096, 1), c1 = FilledBytes(4096, 2), c2 = FilledBytes(100, 3);
  SampleRowDecoder d(kKey, Hints(), /*keep_bytes=*/true);
  d.BeginPage();
  FeedDecoder(d, 0, kKey, 8292, c0);
  FeedDecoder(d, 1, kKey, 8292, c1);
  d.BeginPage();  // a later page: its rows' statics are not read again
  FeedDecoder(d, 0, kKey, 1, c2);
  ASSERT_TRUE(d.Finish().ok()) << d.Finish().ToString();
  EXPECT_EQ(d.rows(), 3);
  EXPECT_EQ(d.statics().size, 8292);
  EXPECT_EQ(d.statics().label, 7);
  EXPECT_TRUE(d.statics().checksum_present);
  EXPECT_EQ(d.data_bytes(), 8292);
  std::vector<uint8_t> all = c0;
  all.insert(all.end(), c1.begin(), c1.end());
  all.insert(all.end(), c2.begin(), c2.end());
  ASSERT_EQ(d.bytes().size(), all.size());
  EXPECT_EQ(std::memcmp(d.bytes().data(), all.data(), all.size()), 0);
  EXPECT_EQ(d.xxh64(), XXH64(all.data(), all.size(), 0));

  // Without keeping bytes: the same checks, counted and hashed only.
  SampleRowDecoder h(kKey, Hints(), /*keep_bytes=*/false);
  h.BeginPage();
  FeedDecoder(h, 0, kKey, 8292, c0);
  FeedDecoder(h, 1, kKey, 8292, c1);
  FeedDecoder(h, 2, kKey, 8292, c2);
  EXPECT_TRUE(h.Finish().ok());
  EXPECT_TRUE(h.bytes().empty());
  EXPECT_EQ(h.xxh64(), d.xxh64());
}

TEST(SampleRowTest, DecoderRefusesWhatTheLoaderRefuses) {
  const auto chunk = FilledBytes(4096, 1);
  // Chunks short of the size.
  SampleRowDecoder short_answer(kKey, Hints(), true);
  FeedDecoder(short_answer, 0, kKey, 5000, chunk);
  Status st = short_answer.Finish();
  EXPECT_EQ(st.code(), Status::Code::kCorruption);
  EXPECT_NE(st.message().find("add up to 4096 bytes, its size is 5000"), std::string::npos) << st.ToString();
  EXPECT_TRUE(short_answer.bytes().empty());
  EXPECT_EQ(short_answer.data_bytes(), 4096);  // still counted: verify says how many bytes there were

  // More than the catalog's max_size: refused before a byte is kept.
  SampleRowDecoder large(kKey, Hints(), true);
  FeedDecoder(large, 0, kKey, 20000, chunk);
  st = large.Finish();
  EXPECT_EQ(st.code(), Status::Code::kCorruption);
  EXPECT_NE(st.message().find("max_size"), std::string::npos) << st.ToString();

  // A row of another sample, on a later page.
  SampleRowDecoder other(kKey, Hints(), true);
  other.BeginPage();
  FeedDecoder(other, 0, kKey, 8192, chunk);
  other.BeginPage();
  FeedDecoder(other, 0, kKey + 1, 8192, chunk);
  st = other.Finish();
  EXPECT_EQ(st.code(), Status::Code::kCorruption);
  EXPECT_NE(st.message().find("another sample's key"), std::string::npos) << st.ToString();
  EXPECT_TRUE(other.answered_another_key());
  EXPECT_FALSE(short_answer.answered_another_key());
  EXPECT_FALSE(large.answered_another_key());
  // Reset for a read sent again: the honest answer then decodes whole, as in
  // a decoder of its own (rows, bytes and hash from the second answer only).
  other.Reset();
  EXPECT_FALSE(other.answered_another_key());
  EXPECT_EQ(other.rows(), 0);
  EXPECT_EQ(other.data_bytes(), 0);
  other.BeginPage();
  FeedDecoder(other, 0, kKey, 5000, chunk);
  other.BeginPage();
  FeedDecoder(other, 1, kKey, 5000, FilledBytes(904, 2));
  SampleRowDecoder fresh(kKey, Hints(), true);
  fresh.BeginPage();
  FeedDecoder(fresh, 0, kKey, 5000, chunk);
  fresh.BeginPage();
  FeedDecoder(fresh, 1, kKey, 5000, FilledBytes(904, 2));
  ASSERT_TRUE(fresh.Finish().ok());
  st = other.Finish();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(other.rows(), 2);
  EXPECT_EQ(other.data_bytes(), 5000);
  EXPECT_EQ(other.xxh64(), fresh.xxh64());
  ASSERT_EQ(other.bytes().size(), 5000u);
  EXPECT_TRUE(std::equal(other.bytes().begin(), other.bytes().end(), fresh.bytes().begin()));

  // No rows at all: nothing wrong with rows that do not exist (the caller
  // says "missing data").
  SampleRowDecoder none(kKey, Hints(), true);
  none.BeginPage();
  EXPECT_TRUE(none.Finish().ok());
  EXPECT_EQ(none.rows(), 0);
}

// A row whose data cell is null or empty is a chunk of no bytes: a sample
// of no bytes has one, and after a short chunk (or the last whole one)
// another is out of place. Before, such rows were not counted at all, and
// a server that paged them without end kept a reader asking forever.
TEST(SampleRowTest, RowsWithoutDataAreChunksOfNoBytes) {
  const auto chunk = FilledBytes(4096, 1);
  // A sample of no bytes: one row without data.
  SampleRowDecoder empty(kKey, Hints(), true);
  empty.BeginPage();
  FeedRow(empty, 0, kKey, 0);
  empty.OnCell(0, kColData, std::nullopt);
  ASSERT_TRUE(empty.Finish().ok()) << empty.Finish().ToString();
  EXPECT_EQ(empty.rows(), 1);
  for (bool null_cell : {true, false}) {
    SCOPED_TRACE(null_cell ? "null data cells" : "empty data cells");
    const std::vector<uint8_t> none;
    SampleRowDecoder d(kKey, Hints(), true);
    d.BeginPage();
    FeedDecoder(d, 0, kKey, 4096, chunk);
    for (int32_t row = 1; row < 4; ++row) {  // one page after another, a row each
      d.BeginPage();
      FeedRow(d, 0, kKey, 4096);
      d.OnCell(0, kColData, null_cell ? std::nullopt : View(none));
    }
    const Status st = d.Finish();
    EXPECT_EQ(st.code(), Status::Code::kCorruption);
    EXPECT_NE(st.message().find("follows a short chunk"), std::string::npos) << st.ToString();
    EXPECT_TRUE(d.failed());
  }
  // One row without data after the last whole chunk ends the sample; after
  // a short chunk it is out of place.
  SampleRowDecoder whole(kKey, Hints(), true);
  whole.BeginPage();
  FeedDecoder(whole, 0, kKey, 4096, chunk);
  FeedRow(whole, 1, kKey, 4096);
  whole.OnCell(1, kColData, std::nullopt);
  EXPECT_TRUE(whole.Finish().ok()) << whole.Finish().ToString();
  SampleRowDecoder after_short(kKey, Hints(), true);
  after_short.BeginPage();
  FeedDecoder(after_short, 0, kKey, 100, FilledBytes(100, 4));
  EXPECT_FALSE(after_short.failed());
  FeedRow(after_short, 1, kKey, 100);
  after_short.OnCell(1, kColData, std::nullopt);
  EXPECT_TRUE(after_short.failed());
  EXPECT_NE(after_short.Finish().message().find("follows a short chunk"), std::string::npos);
}

// The coalesced read (loader/coalesce.h): the key cells first (the row
// demultiplexer reads them before any data cell), and at most two rows per
// key, the bound that lets the loader send it unpaged.
TEST(SampleRowTest, TheGroupReadPutsTheKeyFirstAndBoundsRowsPerKey) {
  DatasetInfo d;
  d.keyspace = "ks";
  d.name = "tiny";
  EXPECT_EQ(DataReadManyQuery(d),
            "SELECT seg, idx, size, image_size, checksum, label, labels, data FROM ks.d_tiny "
            "WHERE seg = ? AND idx IN ? PER PARTITION LIMIT 2");
}

}  // namespace
}  // namespace cqlstream::store
