// Copyright (c) cqlstream authors.
#include "store/manifest.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "store/source.h"
#include "store/testing_fixtures.h"

namespace cqlstream::store {
namespace {

using testing::MakeJpeg;
using testing::MakePng;
using testing::TempDir;
using testing::WriteFile;

TEST(CsvTest, QuotesCommasNewlinesAndBom) {
  auto r = ParseCsv("\xEF\xBB\xBFpath,label,note\r\na.jpg,cat,\"x, \"\"quoted\"\"\"\r\n\r\n\"b\nc.jpg\",dog,\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].fields, (std::vector<std::string>{"path", "label", "note"}));
  EXPECT_EQ((*r)[1].fields, (std::vector<std::string>{"a.jpg", "cat", "x, \"quoted\""}));
  EXPECT_EQ((*r)[1].line, 2u);
  EXPECT_EQ((*r)[2].fields, (std::vector<std::string>{"b\nc.jpg", "dog", ""}));
  EXPECT_EQ((*r)[2].line, 4u);
}

TEST(CsvTest, MalformedQuotesAreErrorsWithLines) {
  auto a = ParseCsv("path\n\"unterminated\n");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("line 2"), std::string::npos) << a.status().message();
  EXPECT_FALSE(ParseCsv("path\na\"b\n").ok());
  EXPECT_FALSE(ParseCsv("path\n\"a\"b\n").ok());
}

TEST(ManifestTest, CsvColumnsAndExtra) {
  auto m = ParseManifest("path,label,split,source,empty\nimg/1.jpg,cat,train,web,\nimg/2.jpg,,val,,\n", false, "m.csv");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->has_label_column);
  EXPECT_TRUE(m->has_split_column);
  ASSERT_EQ(m->rows.size(), 2u);
  EXPECT_EQ(m->rows[0].path, "img/1.jpg");
  EXPECT_TRUE(m->rows[0].has_label);
  EXPECT_EQ(m->rows[0].labels, (std::vector<std::string>{"cat"}));
  EXPECT_EQ(m->rows[0].split, "train");
  EXPECT_EQ(m->rows[0].extra, (std::map<std::string, std::string>{{"source", "web"}}));
  EXPECT_FALSE(m->rows[1].has_label);
  EXPECT_TRUE(m->rows[1].extra.empty());
  EXPECT_EQ(m->rows[1].line, 3u);
}

TEST(ManifestTest, LabelsAsSemicolonListOrJsonArray) {
  auto m = ParseManifest("path,labels\na.jpg,cat; dog ;\nb.jpg,\"[\"\"x\"\", 3]\"\nc.jpg,\n", false, "m.csv");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->has_labels_column);
  EXPECT_EQ(m->rows[0].labels, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(m->rows[1].labels, (std::vector<std::string>{"x", "3"}));
  EXPECT_TRUE(m->rows[2].labels.empty());
  auto bad = ParseLabelList("[{\"a\":1}]");
  EXPECT_FALSE(bad.ok());
}

TEST(ManifestTest, Jsonl) {
  auto m = ParseManifest(
      "{\"path\": \"a.png\", \"labels\": \"2\", \"width\": 28, \"tags\": {\"k\": 1}}\n\n"
      "{\"path\": \"b.png\", \"labels\": [\"x\", \"y\"], \"target\": \"b.mask.png\", \"note\": null}\n",
      true, "m.jsonl");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->rows.size(), 2u);
  EXPECT_EQ(m->rows[0].labels, (std::vector<std::string>{"2"}));
  EXPECT_EQ(m->rows[0].extra.at("width"), "28");
  EXPECT_EQ(m->rows[0].extra.at("tags"), "{\"k\":1}");
  EXPECT_EQ(m->rows[1].line, 3u);
  EXPECT_EQ(m->rows[1].labels, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(m->rows[1].target, "b.mask.png");
  EXPECT_EQ(m->rows[1].extra.count("note"), 0u);
}

TEST(ManifestTest, ErrorsNameTheLine) {
  auto no_path = ParseManifest("file,label\na,b\n", false, "m.csv");
  ASSERT_FALSE(no_path.ok());
  EXPECT_NE(no_path.status().message().find("'path'"), std::string::npos);
  auto ragged = ParseManifest("path,label\na.jpg\n", false, "m.csv");
  ASSERT_FALSE(ragged.ok());
  EXPECT_NE(ragged.status().message().find("m.csv line 2"), std::string::npos) << ragged.status().message();
  auto empty_path = ParseManifest("{\"path\": \"\"}\n", true, "m.jsonl");
  ASSERT_FALSE(empty_path.ok());
  EXPECT_NE(empty_path.status().message().find("line 1"), std::string::npos);
  auto not_obj = ParseManifest("{\"path\": \"a\"}\n[1]\n", true, "m.jsonl");
  ASSERT_FALSE(not_obj.ok());
  EXPECT_NE(not_obj.status().message().find("line 2"), std::string::npos);
  EXPECT_FALSE(ParseManifest("path,label,labels\na,b,c\n", false, "m.csv").ok());
}

TEST(ManifestTest, ListingResolvesPathsKindsAndSplits) {
  TempDir dir("manifest");
  WriteFile(dir / "imgs/a.jpg", MakeJpeg(16, 16, 1));
  WriteFile(dir / "imgs/b.png", MakePng(8, 8, 2));
  WriteFile(dir / "masks/b.png", MakePng(8, 8, 3));
  WriteFile(dir / "m.csv", "path,target,split,quality\nimgs/b.png,masks/b.png,val,good\nimgs/a.jpg,,train,\n"
                           "imgs/missing.jpg,masks/b.png,train,\n");
  ListOptions o;
  o.sources = {(dir / "m.csv").string()};
  auto l = ListSource(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->kind, SourceKind::kManifest);
  EXPECT_EQ(l->label_kind, LabelKind::kTarget);
  ASSERT_EQ(l->items.size(), 3u);
  // Sorted by split, then path.
  EXPECT_EQ(l->items[0].split, "train");
  EXPECT_EQ(l->items[0].path, "imgs/a.jpg");
  EXPECT_EQ(l->items[0].skip, "no target");
  EXPECT_EQ(l->items[1].path, "imgs/missing.jpg");
  EXPECT_NE(l->items[1].skip.find("unreadable"), std::string::npos);
  EXPECT_EQ(l->items[2].split, "val");
  EXPECT_EQ(l->items[2].target_path, "masks/b.png");
  EXPECT_EQ(l->items[2].extra.at("quality"), "good");
  Payload p;
  EXPECT_EQ(ReadItem(l->items[2], &p), "");
  EXPECT_EQ(p.size, std::filesystem::file_size(dir / "imgs/b.png") + std::filesystem::file_size(dir / "masks/b.png"));
  EXPECT_EQ(p.image_size, std::filesystem::file_size(dir / "imgs/b.png"));

  o.split = "val";
  auto only_val = ListSource(o);
  ASSERT_TRUE(only_val.ok());
  ASSERT_EQ(only_val->items.size(), 1u);
  EXPECT_EQ(only_val->items[0].path, "imgs/b.png");
}

TEST(ManifestTest, ClassesOfEverySplitAreKnownWhenOneIsSelected) {
  TempDir dir("manifest");
  WriteFile(dir / "a.jpg", MakeJpeg(8, 8, 1));
  WriteFile(dir / "b.jpg", MakeJpeg(8, 8, 2));
  WriteFile(dir / "m.csv", "path,label,split\na.jpg,cat,train\nb.jpg,dog,val\n");
  ListOptions o;
  o.sources = {(dir / "m.csv").string()};
  o.split = "val";
  auto l = ListSource(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l->items.size(), 1u);
  EXPECT_EQ(UsedLabelTexts(*l), (std::vector<std::string>{"dog"}));
  EXPECT_EQ(l->all_label_texts, (std::vector<std::string>{"cat", "dog"}));
}

TEST(ManifestTest, DuplicatePathIsAnError) {
  TempDir dir("manifest");
  WriteFile(dir / "a.jpg", MakeJpeg(8, 8, 1));
  WriteFile(dir / "m.csv", "path,label\na.jpg,cat\n./a.jpg,dog\n");
  ListOptions o;
  o.sources = {(dir / "m.csv").string()};
  auto l = ListSource(o);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("duplicate path"), std::string::npos) << l.status().message();
  EXPECT_NE(l.status().message().find("'a.jpg'"), std::string::npos) << l.status().message();
  EXPECT_NE(l.status().message().find("line 2"), std::string::npos) << l.status().message();
}

// Issue 9 item 22: a third-party manifest could make ingest upload any file
// the user can read. Paths outside the manifest's folder are refused unless
// allow_paths_outside is set.
TEST(ManifestTest, PathsOutsideTheFolderAreRefused) {
  TempDir outside("manifest");
  WriteFile(outside / "secret.jpg", MakeJpeg(8, 8, 9));
  TempDir dir("manifest");
  WriteFile(dir / "in/a.jpg", MakeJpeg(8, 8, 1));
  ASSERT_EQ(::symlink((outside / "secret.jpg").c_str(), (dir / "in/link.jpg").c_str()), 0);
  ASSERT_EQ(::symlink(outside.path().c_str(), (dir / "out").c_str()), 0);
  ASSERT_EQ(::symlink("a.jpg", (dir / "in/inner-link.jpg").c_str()), 0);
  const std::string abs = (outside / "secret.jpg").string();
  const std::string rel_up = "../" + std::filesystem::path(outside.path()).filename().string() + "/secret.jpg";
  struct Case {
    std::string manifest, text, why;
  };
  const std::vector<Case> cases = {
      {"abs.csv", "path,label\nin/a.jpg,x\n" + abs + ",y\n", "is absolute"},
      {"up.csv", "path,label\nin/a.jpg,x\n" + rel_up + ",y\n", "leads outside"},
      {"updeep.csv", "path,label\nin/../../x.jpg,y\n", "leads outside"},
      {"link.csv", "path,label\nin/link.jpg,y\n", "resolves to"},
      {"dirlink.csv", "path,label\nout/secret.jpg,y\n", "resolves to"},
      {"target.csv", "path,target\nin/a.jpg," + abs + "\n", "is absolute"},
      {"abs.jsonl", "{\"path\": \"" + abs + "\", \"label\": 1}\n", "is absolute"},
  };
  for (const auto& c : cases) {
    WriteFile(dir / c.manifest, c.text);
    ListOptions o;
    o.sources = {(dir / c.manifest).string()};
    auto l = ListSource(o);
    ASSERT_FALSE(l.ok()) << c.manifest;
    EXPECT_EQ(l.status().code(), Status::Code::kInvalidArgument) << l.status().ToString();
    EXPECT_NE(l.status().message().find(c.why), std::string::npos) << l.status().message();
    EXPECT_NE(l.status().message().find("--allow-paths-outside"), std::string::npos) << l.status().message();
    EXPECT_NE(l.status().message().find("line "), std::string::npos) << l.status().message();
    o.allow_paths_outside = true;
    auto allowed = ListSource(o);
    EXPECT_TRUE(allowed.ok()) << c.manifest << ": " << allowed.status().ToString();
  }
  // Inside: plain paths, "./", "x/../", and a symlink that stays inside.
  WriteFile(dir / "ok.csv", "path,label\nin/a.jpg,x\n./in/inner-link.jpg,y\nin/../in/missing.jpg,z\n");
  ListOptions o;
  o.sources = {(dir / "ok.csv").string()};
  auto l = ListSource(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->items.size(), 3u);
}

}  // namespace
}  // namespace cqlstream::store
