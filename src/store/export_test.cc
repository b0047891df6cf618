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

}  // namespace
}  // namespace cqlstream::store
