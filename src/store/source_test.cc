// Copyright (c) cqlstream authors.
#include "store/source.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>

#include "store/testing_fixtures.h"

namespace cqlstream::store {
namespace {

using testing::MakeJpeg;
using testing::MakePng;
using testing::TempDir;
using testing::WriteFile;

std::vector<std::string> Paths(const SourceListing& l) {
  std::vector<std::string> out;
  for (const auto& it : l.items) out.push_back(it.split + ":" + it.path);
  return out;
}

TEST(FolderSourceTest, SplitClassLayout) {
  TempDir dir("folder");
  WriteFile(dir / "train/dog/b.png", MakePng(8, 8, 1));
  WriteFile(dir / "train/cat/a.jpg", MakeJpeg(8, 8, 2));
  WriteFile(dir / "test/cat/c.jpg", MakeJpeg(8, 8, 3));
  std::filesystem::create_directories(dir / "test/bird");  // an empty class still counts
  WriteFile(dir / "README.txt", "about");                   // outside the layout: ignored, noted
  WriteFile(dir / "train/.hidden.jpg", "x");                 // hidden: ignored
  ListOptions o;
  o.sources = {dir.path()};
  auto l = ListSource(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->kind, SourceKind::kFolder);
  EXPECT_EQ(l->label_kind, LabelKind::kClass);
  EXPECT_EQ(Paths(*l), (std::vector<std::string>{"test:test/cat/c.jpg", "train:train/cat/a.jpg",
                                                   "train:train/dog/b.png"}));
  EXPECT_EQ(l->folder_classes, (std::vector<std::string>{"bird", "cat", "dog"}));
  EXPECT_EQ(l->items[2].label_texts, (std::vector<std::string>{"dog"}));
  ASSERT_EQ(l->notes.size(), 1u);
  EXPECT_NE(l->notes[0].find("README.txt"), std::string::npos);
  EXPECT_EQ(ListingSplits(*l), (std::vector<std::string>{"test", "train"}));

  o.split = "train";
  auto t = ListSource(o);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->items.size(), 2u);
  EXPECT_EQ(t->folder_classes.size(), 3u);  // the mapping still covers every split
  o.split = "nope";
  auto n = ListSource(o);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("test, train"), std::string::npos) << n.status().message();
}

TEST(FolderSourceTest, ClassLayoutTakesTheSplitName) {
  TempDir dir("folder");
  WriteFile(dir / "b/2.jpg", MakeJpeg(8, 8, 1));
  WriteFile(dir / "a/1.jpg", MakeJpeg(8, 8, 2));
  ListOptions o;
  o.sources = {dir.path()};
  o.split = "val";
  auto l = ListSource(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(Paths(*l), (std::vector<std::string>{"val:a/1.jpg", "val:b/2.jpg"}));
  o.split.clear();
  auto d = ListSource(o);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->items[0].split, "train");
}

TEST(FolderSourceTest, MixedLayoutAndEmptyFolderAreErrors) {
  TempDir dir("folder");
  WriteFile(dir / "a/1.jpg", MakeJpeg(8, 8, 1));
  WriteFile(dir / "train/a/1.jpg", MakeJpeg(8, 8, 1));
  ListOptions o;
  o.sources = {dir.path()};
  auto l = ListSource(o);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("mixes"), std::string::npos);

  TempDir empty("folder");
  o.sources = {empty.path()};
  EXPECT_FALSE(ListSource(o).ok());
  o.sources = {empty.path() + "/does-not-exist"};
  EXPECT_EQ(ListSource(o).status().code(), Status::Code::kNotFound);
}

TEST(FolderSourceTest, LabelsNoneTakesEveryFile) {
  TempDir dir("folder");
  WriteFile(dir / "x.jpg", MakeJpeg(8, 8, 1));
  WriteFile(dir / "deep/er/y.png", MakePng(8, 8, 1));
  ListOptions o;
  o.sources = {dir.path()};
  o.labels = LabelSource::kNone;
  auto l = ListSource(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->label_kind, LabelKind::kNone);
  EXPECT_EQ(Paths(*l), (std::vector<std::string>{"train:deep/er/y.png", "train:x.jpg"}));
}

// Issue 9 item 4: `self -> .` stored every file 32 times; two links to `.`
// made the walk exponential. Each directory is now entered once.
TEST(FolderSourceTest, SymlinkLoopsAndSecondLinksAreSkippedAndReported) {
  TempDir dir("folder");
  WriteFile(dir / "x.jpg", MakeJpeg(8, 8, 1));
  WriteFile(dir / "sub/y.jpg", MakeJpeg(8, 8, 2));
  ASSERT_EQ(::symlink(".", (dir / "self").c_str()), 0);
  ASSERT_EQ(::symlink(".", (dir / "self2").c_str()), 0);
  ASSERT_EQ(::symlink("..", (dir / "sub/up").c_str()), 0);
  ASSERT_EQ(::symlink("sub", (dir / "zsub").c_str()), 0);  // a second link to sub/, listed after it
  ListOptions o;
  o.sources = {dir.path()};
  o.labels = LabelSource::kNone;
  auto l = ListSource(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(Paths(*l), (std::vector<std::string>{"train:sub/y.jpg", "train:x.jpg"}));
  ASSERT_EQ(l->notes.size(), 1u);
  EXPECT_NE(l->notes[0].find("skipped 4 folders already listed"), std::string::npos) << l->notes[0];
  EXPECT_NE(l->notes[0].find("'self'"), std::string::npos) << l->notes[0];
  EXPECT_NE(l->notes[0].find("'sub/up'"), std::string::npos) << l->notes[0];
  EXPECT_NE(l->notes[0].find("'zsub'"), std::string::npos) << l->notes[0];

  // In a class layout, a link from one class folder to another is not a second class copy.
  TempDir cls("folder");
  WriteFile(cls / "cat/a.jpg", MakeJpeg(8, 8, 1));
  WriteFile(cls / "dog/b.jpg", MakeJpeg(8, 8, 2));
  ASSERT_EQ(::symlink("cat", (cls / "kitten").c_str()), 0);
  o.sources = {cls.path()};
  o.labels = LabelSource::kAuto;
  auto c = ListSource(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(Paths(*c), (std::vector<std::string>{"train:cat/a.jpg", "train:dog/b.jpg"}));
  EXPECT_EQ(c->folder_classes, (std::vector<std::string>{"cat", "dog"}));
  ASSERT_EQ(c->notes.size(), 1u);
  EXPECT_NE(c->notes[0].find("'kitten'"), std::string::npos) << c->notes[0];
}

TEST(ReadItemTest, ValidationReasons) {
  TempDir dir("read");
  WriteFile(dir / "c/ok.png", MakePng(8, 8, 1));
  WriteFile(dir / "c/empty.jpg", "");
  WriteFile(dir / "c/text.jpg", "not really a jpeg");
  WriteFile(dir / "c/locked.png", MakePng(8, 8, 2));
  ::chmod((dir / "c/locked.png").c_str(), 0);
  ListOptions o;
  o.sources = {dir.path()};
  auto l = ListSource(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  std::map<std::string, std::string> why;
  for (const auto& it : l->items) {
    Payload p;
    why[it.path] = ReadItem(it, &p);
  }
  EXPECT_EQ(why["c/ok.png"], "");
  EXPECT_EQ(why["c/empty.jpg"], "empty file");
  EXPECT_EQ(why["c/text.jpg"], "not an image (unknown signature)");
  if (::geteuid() != 0) {  // root reads anything
    EXPECT_NE(why["c/locked.png"].find("unreadable"), std::string::npos) << why["c/locked.png"];
  }
}

TEST(ShardTest, RoundRobinByPosition) {
  EXPECT_EQ(ShardPositions(7, 0, 3), (std::vector<size_t>{0, 3, 6}));
  EXPECT_EQ(ShardPositions(7, 2, 3), (std::vector<size_t>{2, 5}));
  EXPECT_EQ(ShardPositions(2, 1, 1), (std::vector<size_t>{}));
  std::set<size_t> all;
  for (int i = 0; i < 4; ++i) {
    for (size_t p : ShardPositions(10, i, 4)) EXPECT_TRUE(all.insert(p).second);
  }
  EXPECT_EQ(all.size(), 10u);
  int i = 0, n = 0;
  EXPECT_TRUE(ParseShard("1/4", &i, &n).ok());
  EXPECT_EQ(i, 1);
  EXPECT_EQ(n, 4);
  for (const char* bad : {"4/4", "-1/2", "1", "a/b", "1/0", "1/2x", "/2"}) {
    EXPECT_FALSE(ParseShard(bad, &i, &n).ok()) << bad;
  }
}

TEST(IdentityTest, SourceIdAndFingerprint) {
  const std::string a = SourceId("ds", "train", "folder:/x", 0, 1);
  EXPECT_EQ(a.size(), 16u);
  EXPECT_EQ(a, SourceId("ds", "train", "folder:/x", 0, 1));
  EXPECT_NE(a, SourceId("ds", "test", "folder:/x", 0, 1));
  EXPECT_NE(a, SourceId("ds", "train", "folder:/x", 0, 2));
  EXPECT_NE(a, SourceId("ds2", "train", "folder:/x", 0, 1));

  SourceItem x, y;
  x.path = "a.jpg";
  x.image.size = 10;
  y.path = "b.jpg";
  y.image.size = 20;
  const std::string f = Fingerprint({&x, &y});
  EXPECT_EQ(f, Fingerprint({&x, &y}));
  EXPECT_NE(f, Fingerprint({&y, &x}));
  EXPECT_NE(f, Fingerprint({&x}));
  SourceItem y2 = y;
  y2.image.size = 21;
  EXPECT_NE(f, Fingerprint({&x, &y2}));
  y2 = y;
  y2.mtime_ns = 5;
  EXPECT_NE(f, Fingerprint({&x, &y2}));
  y2 = y;
  y2.label_texts = {"cat"};
  EXPECT_NE(f, Fingerprint({&x, &y2}));
}

TEST(LabelsTest, ClassMappingAndResolution) {
  EXPECT_EQ(BuildClassMapping({"dog", "cat", "dog"}), (std::vector<std::string>{"cat", "dog"}));
  // Integer labels keep their value as the index.
  EXPECT_EQ(BuildClassMapping({"2", "0", "10"}).size(), 11u);
  EXPECT_EQ(BuildClassMapping({"2", "0", "10"})[10], "10");
  EXPECT_EQ(BuildClassMapping({"1", "02"}), (std::vector<std::string>{"02", "1"}));  // not canonical: names
  EXPECT_TRUE(BuildClassMapping({}).empty());

  SourceListing l;
  l.items.resize(3);
  l.items[0].label_texts = {"dog"};
  l.items[1].label_texts = {};
  l.items[2].label_texts = {"cat"};
  ASSERT_TRUE(ResolveLabels(LabelKind::kClass, {"cat", "dog"}, &l).ok());
  EXPECT_EQ(l.items[0].label, 1);
  EXPECT_EQ(l.items[1].skip, "no label");
  EXPECT_EQ(l.items[2].label, 0);
  auto st = ResolveLabels(LabelKind::kClass, {"cat"}, &l);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'dog'"), std::string::npos) << st.message();

  SourceListing m;
  m.items.resize(1);
  m.items[0].label_texts = {"b", "a"};
  ASSERT_TRUE(ResolveLabels(LabelKind::kMultiLabel, {"a", "b"}, &m).ok());
  EXPECT_EQ(m.items[0].labels, (std::vector<int32_t>{1, 0}));
}

TEST(SourceKindTest, Detection) {
  TempDir dir("kind");
  WriteFile(dir / "notes.txt", "x");
  ListOptions o;
  o.sources = {(dir / "notes.txt").string()};
  EXPECT_EQ(ListSource(o).status().code(), Status::Code::kInvalidArgument);
  o.sources = {(dir / "notes.txt").string(), (dir / "notes.txt").string()};
  EXPECT_EQ(ListSource(o).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(ParseLabelSource("imagefolder").value(), LabelSource::kImageFolder);
  EXPECT_FALSE(ParseLabelSource("folders").ok());
}

TEST(LabelKindOptionTest, ConvertsOrRefuses) {
  TempDir dir("kind");
  WriteFile(dir / "a/1.jpg", MakeJpeg(8, 8, 1));
  ListOptions o;
  o.sources = {dir.path()};
  o.label_kind = LabelKind::kMultiLabel;
  auto m = ListSource(o);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->label_kind, LabelKind::kMultiLabel);
  o.label_kind = LabelKind::kNone;
  auto n = ListSource(o);
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(n->items[0].label_texts.empty());
  o.label_kind = LabelKind::kTarget;
  EXPECT_FALSE(ListSource(o).ok());
}

}  // namespace
}  // namespace cqlstream::store
