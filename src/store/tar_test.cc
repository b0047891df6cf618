// Copyright (c) cqlstream authors.
#include "store/tar.h"

#include <gtest/gtest.h>

#include <cstring>

#include "store/source.h"
#include "store/testing_fixtures.h"

namespace cqlstream::store {
namespace {

using testing::MakeJpeg;
using testing::MakePng;
using testing::TarBuilder;
using testing::TempDir;
using testing::WriteFile;

ReadAtFn Reader(const std::vector<uint8_t>& bytes) {
  return [&bytes](uint64_t off, size_t n, uint8_t* dst) {
    if (off + n > bytes.size()) return false;
    std::memcpy(dst, bytes.data() + off, n);
    return true;
  };
}

// One 512-byte ustar header with the given type, size field and link name
// (size: octal unless base256 bytes are given), checksum filled in.
std::vector<uint8_t> Header(std::string_view name, uint64_t size, char type = '0', std::string_view link = "",
                            const std::vector<uint8_t>& base256 = {}) {
  std::vector<uint8_t> h(512, 0);
  char* c = reinterpret_cast<char*>(h.data());
  std::memcpy(c, name.data(), std::min<size_t>(name.size(), 100));
  std::snprintf(c + 100, 8, "%07o", 0644);
  std::snprintf(c + 108, 8, "%07o", 0);
  std::snprintf(c + 116, 8, "%07o", 0);
  if (base256.empty()) {
    std::snprintf(c + 124, 12, "%011llo", static_cast<unsigned long long>(size));
  } else {
    std::memcpy(c + 124, base256.data(), std::min<size_t>(base256.size(), 12));
  }
  std::snprintf(c + 136, 12, "%011o", 0);
  c[156] = type;
  std::memcpy(c + 157, link.data(), std::min<size_t>(link.size(), 100));
  std::memcpy(c + 257, "ustar", 6);
  std::memcpy(c + 263, "00", 2);
  std::memset(c + 148, ' ', 8);
  unsigned sum = 0;
  for (uint8_t b : h) sum += b;
  std::snprintf(c + 148, 8, "%06o", sum);
  return h;
}

void Append(std::vector<uint8_t>* tar, const std::vector<uint8_t>& bytes, bool pad = true) {
  tar->insert(tar->end(), bytes.begin(), bytes.end());
  if (pad) tar->resize((tar->size() + 511) / 512 * 512, 0);
}

void AppendMember(std::vector<uint8_t>* tar, std::string_view name, std::string_view data, char type = '0') {
  Append(tar, Header(name, data.size(), type));
  Append(tar, std::vector<uint8_t>(data.begin(), data.end()));
}

std::vector<uint8_t> EndBlocks() { return std::vector<uint8_t>(1024, 0); }

TEST(TarTest, SplitKey) {
  std::string key, ext;
  SplitTarKey("a/b.c/x1.seg.PNG", &key, &ext);
  EXPECT_EQ(key, "a/b.c/x1");
  EXPECT_EQ(ext, "seg.png");
  SplitTarKey("plain", &key, &ext);
  EXPECT_EQ(key, "plain");
  EXPECT_EQ(ext, "");
}

TEST(TarTest, IndexOfMembers) {
  TarBuilder b;
  b.Add("s1.jpg", std::string(700, 'x'));
  b.Add("s1.cls", "3");
  b.Add("./dir/s2.png", "");
  const auto tar = b.Finish();
  auto idx = ReadTarIndex(Reader(tar), tar.size(), "t.tar");
  ASSERT_TRUE(idx.ok()) << idx.status().ToString();
  ASSERT_EQ(idx->size(), 3u);
  EXPECT_EQ((*idx)[0].name, "s1.jpg");
  EXPECT_EQ((*idx)[0].offset, 512u);
  EXPECT_EQ((*idx)[0].size, 700u);
  EXPECT_EQ((*idx)[1].name, "s1.cls");
  EXPECT_EQ((*idx)[1].offset, 512u + 1024u + 512u);
  EXPECT_EQ((*idx)[2].name, "dir/s2.png");
  EXPECT_EQ((*idx)[2].size, 0u);
}

TEST(TarTest, GnuLongNames) {
  const std::string long_name = std::string(120, 'n') + ".jpg";
  // GNU long name: a 'L' member holding the name of the next member.
  std::vector<uint8_t> tar;
  {
    TarBuilder l;
    l.Add("././@LongLink", long_name + std::string(1, '\0'));
    tar = l.Finish();
    ASSERT_GE(tar.size(), 1536u);
    // Drop the end blocks (erase, not resize: GCC's -O1 sanitizer build
    // cannot prove the smaller size and warns of a 2^64-byte memset).
    tar.erase(tar.end() - 1024, tar.end());
    tar[156] = 'L';
    // Recompute the checksum of the patched header.
    std::memset(tar.data() + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; ++i) sum += tar[static_cast<size_t>(i)];
    std::snprintf(reinterpret_cast<char*>(tar.data()) + 148, 8, "%06o", sum);
  }
  TarBuilder rest;
  rest.Add("ignored-short-name", "abc");
  const auto r = rest.Finish();
  tar.insert(tar.end(), r.begin(), r.end());
  auto idx = ReadTarIndex(Reader(tar), tar.size(), "t.tar");
  ASSERT_TRUE(idx.ok()) << idx.status().ToString();
  ASSERT_EQ(idx->size(), 1u);
  EXPECT_EQ((*idx)[0].name, long_name);
  EXPECT_EQ((*idx)[0].size, 3u);
}

TEST(TarTest, CorruptHeadersAndTruncation) {
  TarBuilder b;
  b.Add("a.jpg", std::string(2000, 'x'));
  auto tar = b.Finish();
  auto bad = tar;
  bad[10] ^= 0x20;  // name byte: the checksum no longer matches
  auto r1 = ReadTarIndex(Reader(bad), bad.size(), "t.tar");
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.status().code(), Status::Code::kCorruption);
  EXPECT_NE(r1.status().message().find("t.tar"), std::string::npos) << r1.status().message();
  auto r2 = ReadTarIndex(Reader(tar), 1500, "t.tar");
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("truncated"), std::string::npos) << r2.status().message();
  auto not_tar = std::vector<uint8_t>(2048, 'z');
  EXPECT_FALSE(ReadTarIndex(Reader(not_tar), not_tar.size(), "x").ok());
  // A damaged header after a good member names that member.
  std::vector<uint8_t> two;
  AppendMember(&two, "good.jpg", "abc");
  AppendMember(&two, "bad.jpg", "def");
  Append(&two, EndBlocks());
  two[1024 + 10] ^= 0x20;  // in the second header
  auto r3 = ReadTarIndex(Reader(two), two.size(), "t.tar");
  ASSERT_FALSE(r3.ok());
  EXPECT_EQ(r3.status().code(), Status::Code::kCorruption);
  EXPECT_NE(r3.status().message().find("'good.jpg'"), std::string::npos) << r3.status().message();
}

TEST(TarTest, WebDatasetSamples) {
  TempDir dir("tar");
  TarBuilder b;
  const auto j1 = MakeJpeg(16, 16, 1);
  const auto p2 = MakePng(8, 8, 2);
  b.Add("k1.jpg", j1);
  b.Add("k1.cls", "4\n");
  b.Add("k1.txt", "a caption");
  b.Add("k2.png", p2);
  b.Add("k2.json", "{\"label\": 1, \"source\": \"web\", \"score\": 0.5}");
  b.Add("k3.cls", "2");  // no image
  b.Add("k4.jpg", j1);
  b.Add("k4.cls", "cat");  // not an integer
  b.Add("k5.jpg", j1);
  b.Add("k5.png", p2);  // two images
  b.Add("k5.cls", "1");
  WriteFile(dir / "shard-000.tar", b.Finish());

  ListOptions o;
  o.sources = {(dir / "shard-000.tar").string()};
  o.split = "val";
  auto l = ListSource(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->kind, SourceKind::kTar);
  EXPECT_EQ(l->label_kind, LabelKind::kClass);
  ASSERT_EQ(l->items.size(), 5u);
  std::map<std::string, const SourceItem*> by;
  for (const auto& it : l->items) {
    EXPECT_EQ(it.split, "val");
    by[it.path] = &it;
  }
  ASSERT_TRUE(by.count("shard-000.tar/k1.jpg"));
  EXPECT_EQ(by["shard-000.tar/k1.jpg"]->label_texts, (std::vector<std::string>{"4"}));
  EXPECT_EQ(by["shard-000.tar/k1.jpg"]->extra.at("txt"), "a caption");
  EXPECT_EQ(by["shard-000.tar/k2.png"]->label_texts, (std::vector<std::string>{"1"}));
  EXPECT_EQ(by["shard-000.tar/k2.png"]->extra.at("source"), "web");
  EXPECT_EQ(by["shard-000.tar/k2.png"]->extra.at("score"), "0.5");
  EXPECT_NE(by["shard-000.tar/k3"]->skip.find("no image member"), std::string::npos);
  EXPECT_NE(by["shard-000.tar/k4.jpg"]->skip.find("invalid .cls"), std::string::npos);
  EXPECT_NE(by["shard-000.tar/k5.jpg"]->skip.find("several image members"), std::string::npos);

  Payload p;
  EXPECT_EQ(ReadItem(*by["shard-000.tar/k1.jpg"], &p), "");
  EXPECT_EQ(std::vector<uint8_t>(p.data.get(), p.data.get() + p.size), j1);
}

TEST(TarTest, TargetsMakeTheLabelKindTarget) {
  TempDir dir("tar");
  TarBuilder b;
  const auto img = MakeJpeg(16, 16, 5);
  const auto mask = MakePng(16, 16, 6);
  b.Add("a.jpg", img);
  b.Add("a.mask.png", mask);
  b.Add("a.cls", "1");
  b.Add("b.jpg", img);
  WriteFile(dir / "t.tar", b.Finish());
  ListOptions o;
  o.sources = {(dir / "t.tar").string()};
  auto l = ListSource(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->label_kind, LabelKind::kTarget);
  ASSERT_EQ(l->items.size(), 2u);
  EXPECT_EQ(l->items[0].target_path, "t.tar/a.mask.png");
  EXPECT_EQ(l->items[0].extra.at("label"), "1");
  EXPECT_TRUE(l->items[0].label_texts.empty());
  EXPECT_NE(l->items[1].skip.find("no target member"), std::string::npos);
  Payload p;
  ASSERT_EQ(ReadItem(l->items[0], &p), "");
  EXPECT_EQ(p.image_size, img.size());
  EXPECT_EQ(p.size, img.size() + mask.size());
  EXPECT_EQ(std::vector<uint8_t>(p.data.get() + p.image_size, p.data.get() + p.size), mask);
}

TEST(TarTest, FoldersAndGlobsOfShards) {
  TempDir dir("tar");
  for (int s = 0; s < 3; ++s) {
    TarBuilder b;
    b.Add("x" + std::to_string(s) + ".jpg", MakeJpeg(8, 8, static_cast<uint32_t>(s)));
    WriteFile(dir / ("shards/part-" + std::to_string(s) + ".tar"), b.Finish());
  }
  ListOptions o;
  o.sources = {(dir / "shards").string()};
  auto a = ListSource(o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->items.size(), 3u);
  o.sources = {(dir / "shards/part-*.tar").string()};
  auto g = ListSource(o);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->items.size(), 3u);
  o.sources = {(dir / "shards/part-0.tar").string(), (dir / "shards/part-2.tar").string()};
  auto two = ListSource(o);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  ASSERT_EQ(two->items.size(), 2u);
  EXPECT_EQ(two->items[1].path, "part-2.tar/x2.jpg");
  // Different source arguments are different sources.
  EXPECT_NE(a->canonical, g->canonical);
  EXPECT_NE(g->canonical, two->canonical);
  o.sources = {(dir / "nothing-*.tar").string()};
  EXPECT_FALSE(ListSource(o).ok());
}

// Issue 9 item 2: a base-256 size near 2^64 made `data + size` wrap; the
// archive was then looped over forever or accepted as complete.
TEST(TarTest, SizesNear2To64AreTruncationErrorsNamingTheMember) {
  for (const std::vector<uint8_t>& field :
       {std::vector<uint8_t>{0x80, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
        std::vector<uint8_t>{0x80, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 0x00},
        std::vector<uint8_t>{0x80, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
        std::vector<uint8_t>{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}) {
    std::vector<uint8_t> tar;
    AppendMember(&tar, "ok.jpg", "abc");
    Append(&tar, Header("huge.jpg", 0, '0', "", field));
    AppendMember(&tar, "after.jpg", "xyz");
    Append(&tar, EndBlocks());
    auto r = ReadTarIndex(Reader(tar), tar.size(), "t.tar");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Status::Code::kCorruption) << r.status().ToString();
    EXPECT_NE(r.status().message().find("t.tar"), std::string::npos) << r.status().message();
  }
}

// Issue 9 item 7: cut copies of a shard must never be taken as complete.
TEST(TarTest, TruncatedArchivesAreErrorsNamingTheMember) {
  std::vector<uint8_t> whole;
  AppendMember(&whole, "first.jpg", std::string(700, 'a'));   // header 0, data 512..1212, padded to 1536
  AppendMember(&whole, "second.jpg", std::string(100, 'b'));  // header 1536, data 2048..2148, padded to 2560
  const size_t members_end = whole.size();
  Append(&whole, EndBlocks());
  ASSERT_TRUE(ReadTarIndex(Reader(whole), whole.size(), "t.tar").ok());

  auto cut = [&](size_t n) {
    std::vector<uint8_t> part(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(n));
    return ReadTarIndex(Reader(part), part.size(), "t.tar");
  };
  // Mid-member: the member that runs past the end is named.
  auto mid_member = cut(900);
  ASSERT_FALSE(mid_member.ok());
  EXPECT_NE(mid_member.status().message().find("'first.jpg'"), std::string::npos) << mid_member.status().message();
  EXPECT_NE(mid_member.status().message().find("remain"), std::string::npos) << mid_member.status().message();
  // Mid-header: the member before it is named.
  auto mid_header = cut(1536 + 200);
  ASSERT_FALSE(mid_header.ok());
  EXPECT_EQ(mid_header.status().code(), Status::Code::kCorruption);
  EXPECT_NE(mid_header.status().message().find("'first.jpg'"), std::string::npos) << mid_header.status().message();
  // Mid-padding of the last member's data.
  EXPECT_FALSE(cut(2148 + 10).ok());
  // At a member boundary, with no end-of-archive marker: distinguishable.
  auto boundary = cut(members_end);
  ASSERT_FALSE(boundary.ok());
  EXPECT_TRUE(IsMissingEndOfArchive(boundary.status())) << boundary.status().ToString();
  EXPECT_NE(boundary.status().message().find("'second.jpg'"), std::string::npos) << boundary.status().message();
  EXPECT_FALSE(IsMissingEndOfArchive(mid_member.status()));
  // At the first member boundary too.
  EXPECT_TRUE(IsMissingEndOfArchive(cut(1536).status()));
  // One zero block (GNU tar writes two) is still an end marker.
  EXPECT_TRUE(cut(members_end + 512).ok());
}

TEST(TarTest, TrailingBytesMustBeWholeZeroBlocks) {
  std::vector<uint8_t> tar;
  AppendMember(&tar, "a.jpg", "abc");
  Append(&tar, EndBlocks());
  auto padded = tar;
  padded.resize(10240, 0);  // GNU tar's record padding
  EXPECT_TRUE(ReadTarIndex(Reader(padded), padded.size(), "t.tar").ok());

  auto garbage = tar;
  for (char c : std::string("not a tar block")) garbage.push_back(static_cast<uint8_t>(c));
  auto r1 = ReadTarIndex(Reader(garbage), garbage.size(), "t.tar");
  ASSERT_FALSE(r1.ok());
  EXPECT_NE(r1.status().message().find("'a.jpg'"), std::string::npos) << r1.status().message();

  auto block = tar;
  block.resize(tar.size() + 512, 0);
  block[tar.size() + 7] = 'x';  // a whole block, but not zero
  auto r2 = ReadTarIndex(Reader(block), block.size(), "t.tar");
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("non-zero byte at offset"), std::string::npos) << r2.status().message();

  auto partial = tar;
  partial.resize(tar.size() + 100, 0);  // zeros, but not a whole block
  EXPECT_FALSE(ReadTarIndex(Reader(partial), partial.size(), "t.tar").ok());
}

TEST(TarTest, LinksDevicesAndSparseFilesAreSkippedAndReported) {
  std::vector<uint8_t> tar;
  AppendMember(&tar, "dir/", "", '5');
  AppendMember(&tar, "dir/a.jpg", "abc");
  Append(&tar, Header("dir/b.jpg", 0, '2', "a.jpg"));       // symbolic link
  Append(&tar, Header("dir/c.jpg", 0, '1', "dir/a.jpg"));   // hard link
  Append(&tar, Header("dir/dev", 0, '3'));                  // character device
  Append(&tar, Header("dir/fifo", 0, '6'));                 // FIFO
  Append(&tar, EndBlocks());
  std::vector<TarSkip> skipped;
  auto r = ReadTarIndex(Reader(tar), tar.size(), "t.tar", &skipped);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].name, "dir/a.jpg");
  ASSERT_EQ(skipped.size(), 4u);
  EXPECT_EQ(skipped[0].member, "dir/b.jpg");
  EXPECT_EQ(skipped[0].reason, "symbolic link");
  EXPECT_EQ(skipped[1].reason, "hard link");
  EXPECT_EQ(skipped[2].reason, "character device");
  EXPECT_EQ(skipped[3].reason, "FIFO");

  // The listing reports them as a note (what ingest prints).
  TempDir dir("tar");
  WriteFile(dir / "s.tar", tar);
  ListOptions o;
  o.sources = {(dir / "s.tar").string()};
  auto l = ListSource(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l->notes.size(), 1u);
  EXPECT_NE(l->notes[0].find("skipped 4 members"), std::string::npos) << l->notes[0];
  EXPECT_NE(l->notes[0].find("'dir/b.jpg' (symbolic link)"), std::string::npos) << l->notes[0];
}

TEST(TarTest, GnuSparseMembersAreSkippedClearly) {
  // An old-GNU sparse member ('S'): one 512-byte region at offset 0 of a
  // 4096-byte file. Its data offsets are not file offsets, so it is skipped.
  std::vector<uint8_t> h = Header("sparse.jpg", 512, 'S');
  char* c = reinterpret_cast<char*>(h.data());
  std::memset(c + 257, 0, 8);
  std::memcpy(c + 257, "ustar  ", 8);                 // old GNU magic
  std::snprintf(c + 386, 12, "%011o", 0);             // sparse[0].offset
  std::snprintf(c + 398, 12, "%011o", 512);           // sparse[0].numbytes
  std::snprintf(c + 483, 12, "%011o", 4096);          // realsize
  std::memset(c + 148, ' ', 8);
  unsigned sum = 0;
  for (uint8_t b : h) sum += b;
  std::snprintf(c + 148, 8, "%06o", sum);
  std::vector<uint8_t> tar;
  Append(&tar, h);
  Append(&tar, std::vector<uint8_t>(512, 'z'));
  AppendMember(&tar, "plain.jpg", "abc");
  Append(&tar, EndBlocks());
  std::vector<TarSkip> skipped;
  auto r = ReadTarIndex(Reader(tar), tar.size(), "t.tar", &skipped);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].name, "plain.jpg");
  EXPECT_EQ((*r)[0].offset, 512u * 3);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].reason.find("sparse"), std::string::npos) << skipped[0].reason;
}

TEST(TarTest, PaxPathsAndOffsets) {
  const std::string long_path = "deep/" + std::string(150, 'p') + "/\xc3\xa9t\xc3\xa9.jpg";
  std::string rec = " path=" + long_path + "\n";
  size_t len = rec.size() + 3;  // the length prefix counts itself
  rec = std::to_string(len) + rec;
  ASSERT_EQ(rec.size(), len);
  std::vector<uint8_t> tar;
  AppendMember(&tar, "PaxHeaders/x", rec, 'x');
  AppendMember(&tar, "short.jpg", "pixels");
  AppendMember(&tar, "next.cls", "7");
  Append(&tar, EndBlocks());
  auto r = ReadTarIndex(Reader(tar), tar.size(), "t.tar");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].name, long_path);
  EXPECT_EQ((*r)[0].offset, 512u * 3);
  EXPECT_EQ((*r)[0].size, 6u);
  EXPECT_EQ(std::string(tar.begin() + 512 * 3, tar.begin() + 512 * 3 + 6), "pixels");
  EXPECT_EQ((*r)[1].name, "next.cls");
  EXPECT_EQ((*r)[1].offset, 512u * 5);
}

TEST(TarTest, MembersOverTheLimitAreSkipped) {
  // A virtual archive: one header, kMaxTarMemberBytes + 1 bytes of zeros, end blocks.
  const std::vector<uint8_t> h = Header("big.jpg", kMaxTarMemberBytes + 1);
  const uint64_t data_end = 512 + (kMaxTarMemberBytes + 1 + 511) / 512 * 512;
  const uint64_t size = data_end + 1024;
  ReadAtFn read = [&](uint64_t off, size_t n, uint8_t* dst) {
    if (off > size || n > size - off) return false;
    for (size_t i = 0; i < n; ++i) dst[i] = off + i < 512 ? h[off + i] : 0;
    return true;
  };
  std::vector<TarSkip> skipped;
  auto r = ReadTarIndex(read, size, "big.tar", &skipped);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->empty());
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].reason.find("larger than the 1024 MiB limit"), std::string::npos) << skipped[0].reason;
}

TEST(TarTest, CompressedOrForeignFilesAreNotTar) {
  const std::vector<uint8_t> gz = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  auto r = ReadTarIndex(Reader(gz), gz.size(), "t.tar.gz");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("t.tar.gz"), std::string::npos) << r.status().message();
  const std::vector<uint8_t> empty;
  EXPECT_FALSE(ReadTarIndex(Reader(empty), 0, "empty.tar").ok());
}

TEST(TarTest, ReadErrorsAreReported) {
  std::vector<uint8_t> tar;
  AppendMember(&tar, "a.jpg", "abc");
  Append(&tar, EndBlocks());
  ReadAtFn failing = [](uint64_t, size_t, uint8_t*) { return false; };
  auto r = ReadTarIndex(failing, tar.size(), "t.tar");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cannot read"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace cqlstream::store
