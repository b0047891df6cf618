// Copyright (c) cqlstream authors.
//
// ReadItem with ReadOptions: kind blob, ingest-time preprocessing of the
// image and (resize-target) of the target, for folder items and tar members.
#include <gtest/gtest.h>

#include "store/image_check.h"
#include "store/source.h"
#include "store/testing_fixtures.h"

namespace cqlstream::store {
namespace {

using testing::MakeJpeg;
using testing::MakePng;
using testing::TarBuilder;
using testing::TempDir;
using testing::WriteFile;

ReadOptions ReadOptionsOf(SampleKind kind, std::string_view preprocess) {
  auto o = MakeReadOptions(kind, preprocess);
  EXPECT_TRUE(o.ok()) << o.status().ToString();
  return o.ok() ? *o : ReadOptions();
}

ImageInfo ImageInfoOf(std::span<const uint8_t> b) {
  ImageInfo info;
  EXPECT_EQ(CheckImage(b, &info), "");
  return info;
}

std::map<std::string, const SourceItem*> ByPath(const SourceListing& l) {
  std::map<std::string, const SourceItem*> by;
  for (const auto& it : l.items) by[it.path] = &it;
  return by;
}

TEST(ReadOptionsTest, RefusesBadTextAndBlobPreprocessing) {
  EXPECT_TRUE(MakeReadOptions(SampleKind::kImage, "").ok());
  EXPECT_TRUE(MakeReadOptions(SampleKind::kBlob, "").ok());
  auto o = MakeReadOptions(SampleKind::kImage, "resize-shorter=abc");
  EXPECT_EQ(o.status().code(), Status::Code::kInvalidArgument);
  o = MakeReadOptions(SampleKind::kBlob, "resize-shorter=64");
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("kind blob"), std::string::npos) << o.status().ToString();
}

TEST(ReadItemTest, BlobsAreAnyNonEmptyBytes) {
  TempDir dir("read-blob");
  WriteFile(dir / "c/a.npy", "\x93NUMPY not an image");
  WriteFile(dir / "c/b.jpg", "");
  ListOptions lo;
  lo.sources = {dir.path()};
  auto l = ListSource(lo);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  auto by = ByPath(*l);
  ASSERT_TRUE(by.count("c/a.npy"));
  Payload p;
  EXPECT_EQ(ReadItem(*by["c/a.npy"], ReadOptionsOf(SampleKind::kBlob, ""), &p), "");
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(p.data.get()), p.size), "\x93NUMPY not an image");
  EXPECT_EQ(ReadItem(*by["c/a.npy"], ReadOptionsOf(SampleKind::kImage, ""), &p), "not an image (unknown signature)");
  EXPECT_EQ(ReadItem(*by["c/b.jpg"], ReadOptionsOf(SampleKind::kBlob, ""), &p), "empty file");
}

TEST(ReadItemTest, PreprocessesImagesAndSkipsWithAReason) {
  TempDir dir("read-pre");
  WriteFile(dir / "c/big.jpg", MakeJpeg(320, 240, 1));
  WriteFile(dir / "c/small.png", MakePng(20, 30, 2));
  ListOptions lo;
  lo.sources = {dir.path()};
  auto l = ListSource(lo);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  auto by = ByPath(*l);
  const ReadOptions o = ReadOptionsOf(SampleKind::kImage, "resize-shorter=64,center-crop=56,reencode=jpeg:90");
  Payload p;
  ASSERT_EQ(ReadItem(*by["c/big.jpg"], o, &p), "");
  EXPECT_EQ(p.image_size, p.size);
  const ImageInfo info = ImageInfoOf(p.bytes());
  EXPECT_EQ(info.format, ImageFormat::kJpeg);
  EXPECT_EQ(info.width, 56);
  EXPECT_EQ(info.height, 56);
  // Enlarged (20 -> 64), then cropped: PNG in, JPEG out.
  ASSERT_EQ(ReadItem(*by["c/small.png"], o, &p), "");
  EXPECT_EQ(ImageInfoOf(p.bytes()).format, ImageFormat::kJpeg);
  // A crop larger than the image is a skip with its reason.
  ReadOptions crop = ReadOptionsOf(SampleKind::kImage, "center-crop=100");
  const std::string why = ReadItem(*by["c/small.png"], crop, &p);
  EXPECT_EQ(why.rfind("preprocess: ", 0), 0u) << why;
  EXPECT_NE(why.find("smaller than center-crop 100"), std::string::npos) << why;
  // The pixel bound of the options.
  ReadOptions bounded = o;
  bounded.limits.max_pixels = 1000;
  EXPECT_NE(ReadItem(*by["c/big.jpg"], bounded, &p).find("exceeds the preprocessing bound"), std::string::npos);
}

TEST(ReadItemTest, TarTargetsKeptUnlessResizeTarget) {
  TempDir dir("read-tar");
  TarBuilder b;
  const auto img = MakeJpeg(120, 80, 3);
  const auto mask = MakePng(120, 80, 4);
  b.Add("a.jpg", img);
  b.Add("a.mask.png", mask);
  WriteFile(dir / "t.tar", b.Finish());
  ListOptions lo;
  lo.sources = {(dir / "t.tar").string()};
  auto l = ListSource(lo);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l->items.size(), 1u);
  Payload p;
  // Without resize-target the mask is stored as it came.
  ASSERT_EQ(ReadItem(l->items[0], ReadOptionsOf(SampleKind::kImage, "resize-shorter=40,reencode=png"), &p), "");
  const ImageInfo im = ImageInfoOf({p.data.get(), p.image_size});
  EXPECT_EQ(im.format, ImageFormat::kPng);
  EXPECT_EQ(im.width, 60);
  EXPECT_EQ(im.height, 40);
  EXPECT_EQ(std::vector<uint8_t>(p.data.get() + p.image_size, p.data.get() + p.size), mask);
  // With it, the mask gets the image's geometry, as PNG.
  const ReadOptions o = ReadOptionsOf(SampleKind::kImage, "resize-shorter=40,center-crop=32,resize-target");
  ASSERT_EQ(ReadItem(l->items[0], o, &p), "");
  const ImageInfo a = ImageInfoOf({p.data.get(), p.image_size});
  const ImageInfo t = ImageInfoOf({p.data.get() + p.image_size, p.size - p.image_size});
  EXPECT_EQ(a.format, ImageFormat::kJpeg);
  EXPECT_EQ(t.format, ImageFormat::kPng);
  EXPECT_EQ(a.width, 32);
  EXPECT_EQ(t.width, 32);
  EXPECT_EQ(t.height, 32);
}

TEST(PreparePayloadTest, InMemorySamples) {
  const auto img = MakeJpeg(100, 50, 5);
  Payload p;
  p.size = p.image_size = img.size();
  p.data.reset(new uint8_t[p.size]);
  std::memcpy(p.data.get(), img.data(), img.size());
  ASSERT_EQ(PreparePayload(ReadOptionsOf(SampleKind::kImage, "resize-shorter=25"), false, &p), "");
  const ImageInfo info = ImageInfoOf(p.bytes());
  EXPECT_EQ(info.width, 50);
  EXPECT_EQ(info.height, 25);
  Payload junk;
  junk.size = junk.image_size = 3;
  junk.data.reset(new uint8_t[3]{1, 2, 3});
  EXPECT_EQ(PreparePayload(ReadOptionsOf(SampleKind::kImage, "resize-shorter=25"), false, &junk),
            "not an image (unknown signature)");
  EXPECT_EQ(PreparePayload(ReadOptionsOf(SampleKind::kBlob, ""), false, &junk), "");
}

}  // namespace
}  // namespace cqlstream::store
