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
    tar.resize(tar.size() - 1024);
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
  EXPECT_NE(r1.status().message().find("checksum"), std::string::npos);
  auto r2 = ReadTarIndex(Reader(tar), 1500, "t.tar");
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("truncated"), std::string::npos) << r2.status().message();
  auto not_tar = std::vector<uint8_t>(2048, 'z');
  EXPECT_FALSE(ReadTarIndex(Reader(not_tar), not_tar.size(), "x").ok());
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

}  // namespace
}  // namespace cqlstream::store
