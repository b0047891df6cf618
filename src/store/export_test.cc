// Copyright (c) cqlstream authors.
#include "store/export.h"

#include <gtest/gtest.h>

namespace cqlstream::store {
namespace {

TEST(ExportTest, SafeRelativePaths) {
  EXPECT_EQ(SafeRelativePath("a/b.jpg"), "a/b.jpg");
  EXPECT_EQ(SafeRelativePath("/etc/passwd"), "etc/passwd");
  EXPECT_EQ(SafeRelativePath("../../x.jpg"), "_/_/x.jpg");
  EXPECT_EQ(SafeRelativePath("./a//b/./c.png"), "a/b/c.png");
  EXPECT_EQ(SafeRelativePath(""), "_");
  EXPECT_EQ(SafeRelativePath(".."), "_");
}

TEST(ExportTest, PathsFollowTheLabelKind) {
  DatasetInfo d;
  d.label_kind = LabelKind::kClass;
  d.class_names = {"cat", "dog"};
  EXPECT_EQ(ExportPath(d, "train", "train/dog/1.png", 1), "train/dog/1.png");
  EXPECT_EQ(ExportPath(d, "val", "imgs/sub/2.jpg", 0), "val/cat/2.jpg");
  EXPECT_EQ(ExportPath(d, "val", "shard.tar/k.jpg", 1), "val/dog/k.jpg");
  EXPECT_EQ(ExportPath(d, "val", "x.jpg", std::nullopt), "val/_unlabeled/x.jpg");
  EXPECT_EQ(ExportPath(d, "val", "x.jpg", 9), "val/_unlabeled/x.jpg");
  d.label_kind = LabelKind::kNone;
  EXPECT_EQ(ExportPath(d, "train", "imgs/sub/2.jpg", std::nullopt), "train/imgs/sub/2.jpg");
  EXPECT_EQ(ExportPath(d, "train", "../2.jpg", std::nullopt), "train/_/2.jpg");
}

TEST(ExportTest, ReencodedImagesAreNamedAfterTheirStoredFormat) {
  DatasetInfo d;
  d.label_kind = LabelKind::kClass;
  d.class_names = {"cat"};
  d.preprocess = "resize-shorter=64,reencode=png";
  EXPECT_EQ(ExportPath(d, "train", "a/1.jpg", 0), "train/cat/1.png");
  EXPECT_EQ(ExportPath(d, "train", "a/2.PNG", 0), "train/cat/2.PNG") << "already named after its format";
  EXPECT_EQ(ExportPath(d, "train", "a/noext", 0), "train/cat/noext.png");
  EXPECT_EQ(ExportPath(d, "train", "a/.hidden", 0), "train/cat/.hidden.png") << "a leading dot is no extension";
  d.preprocess = "reencode=jpeg:90";
  EXPECT_EQ(ExportPath(d, "train", "b/3.png", 0), "train/cat/3.jpg");
  EXPECT_EQ(ExportPath(d, "train", "b/4.jpeg", 0), "train/cat/4.jpeg");
  d.label_kind = LabelKind::kNone;
  EXPECT_EQ(ExportPath(d, "train", "dir.v2/5", std::nullopt), "train/dir.v2/5.jpg")
      << "a dot in a folder is no extension";
  d.preprocess = "resize-shorter=64";  // the format is kept
  EXPECT_EQ(ExportPath(d, "train", "b/3.png", std::nullopt), "train/b/3.png");
  d.preprocess = "reencode=png";
  d.sample_kind = SampleKind::kBlob;  // never re-encoded
  EXPECT_EQ(ExportPath(d, "train", "b/6.npy", std::nullopt), "train/b/6.npy");
}

// Issue 9 item 8: a stored file name of '.', '..' or nothing used to give
// an output path naming a folder ("val/cat/..") or ending in '/'.
TEST(ExportTest, DotAndEmptyFileNamesBecomeSafeNames) {
  DatasetInfo d;
  d.label_kind = LabelKind::kClass;
  d.class_names = {"cat", ".."};
  EXPECT_EQ(ExportPath(d, "val", "a/..", 0), "val/cat/_");
  EXPECT_EQ(ExportPath(d, "val", "a/.", 0), "val/cat/_");
  EXPECT_EQ(ExportPath(d, "val", "a/", 0), "val/cat/_");
  EXPECT_EQ(ExportPath(d, "val", "", 0), "val/cat/_");
  EXPECT_EQ(ExportPath(d, "val", "..", 0), "val/cat/_");
  EXPECT_EQ(ExportPath(d, "val", "x.png", 1), "val/_/x.png");  // a class named '..'
  EXPECT_EQ(ExportPath(d, "..", "x.png", 0), "_/cat/x.png");
  d.label_kind = LabelKind::kNone;
  EXPECT_EQ(ExportPath(d, "train", "a/..", std::nullopt), "train/a/_");
  EXPECT_EQ(ExportPath(d, "train", "/", std::nullopt), "train/_");
  EXPECT_EQ(SafeRelativePath(std::string("a\0b", 3)), "a_b");
}

}  // namespace
}  // namespace cqlstream::store
