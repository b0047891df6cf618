// Copyright (c) cqlstream authors.
#include "store/preprocess.h"

#include <gtest/gtest.h>
#include <png.h>
#include <turbojpeg.h>

#include <cstring>
#include <set>

#include "store/image_check.h"
#include "store/jpeg_sampling_fixture.h"
#include "store/testing_fixtures.h"

namespace cqlstream::store {
namespace {

using testing::MakeJpeg;
using testing::MakePng;

// A PNG of the given simplified-API format from raw pixels (the fixture's
// encoder, checked here).
std::vector<uint8_t> EncodePng(int w, int h, png_uint_32 format, const std::vector<uint8_t>& px) {
  std::vector<uint8_t> out = testing::EncodePng(w, h, format, px);
  EXPECT_FALSE(out.empty());
  return out;
}

struct Decoded {
  int w = 0, h = 0, channels = 0;
  std::vector<uint8_t> px;
};

Decoded DecodePngPixels(const std::vector<uint8_t>& b) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  EXPECT_NE(png_image_begin_read_from_memory(&image, b.data(), b.size()), 0);
  image.format &= PNG_FORMAT_FLAG_COLOR | PNG_FORMAT_FLAG_ALPHA;
  Decoded d{static_cast<int>(image.width), static_cast<int>(image.height),
            static_cast<int>(PNG_IMAGE_SAMPLE_CHANNELS(image.format)), std::vector<uint8_t>(PNG_IMAGE_SIZE(image))};
  EXPECT_NE(png_image_finish_read(&image, nullptr, d.px.data(), 0, nullptr), 0);
  png_image_free(&image);
  return d;
}

PreprocessSpec Spec(std::string_view text) {
  auto s = PreprocessSpec::Parse(text);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : PreprocessSpec();
}

ImageInfo Info(const std::vector<uint8_t>& b) {
  ImageInfo info;
  EXPECT_EQ(CheckImage(b, &info), "");
  return info;
}

TEST(PreprocessSpecTest, CanonicalTextRoundTrips) {
  EXPECT_TRUE(Spec("").empty());
  EXPECT_EQ(Spec("").ToString(), "");
  EXPECT_EQ(Spec("reencode=keep").ToString(), "");
  const PreprocessSpec s = Spec("reencode=jpeg:90,center-crop=56,resize-shorter=64");
  EXPECT_EQ(s.resize_shorter, 64);
  EXPECT_EQ(s.center_crop, 56);
  EXPECT_EQ(s.reencode, Reencode::kJpeg);
  EXPECT_EQ(s.jpeg_quality, 90);
  EXPECT_EQ(s.ToString(), "resize-shorter=64,center-crop=56,reencode=jpeg:90");
  EXPECT_EQ(Spec(s.ToString()).ToString(), s.ToString());
  EXPECT_EQ(Spec("center-crop=8,reencode=png,resize-target").ToString(), "center-crop=8,reencode=png,resize-target");
}

TEST(PreprocessSpecTest, RefusesBadText) {
  for (const char* bad : {"resize-shorter", "resize-shorter=0", "resize-shorter=-3", "resize-shorter=16385",
                          "resize-shorter=12x", "center-crop=", "reencode=jpeg:0", "reencode=jpeg:101",
                          "reencode=jpeg", "reencode=webp", "rotate=90", "resize-shorter=64,", ",resize-shorter=64",
                          "resize-shorter=64,resize-shorter=32", "resize-shorter=32,center-crop=64",
                          "resize-target", "resize-target=1,center-crop=4", "reencode=png,resize-target"}) {
    auto s = PreprocessSpec::Parse(bad);
    EXPECT_FALSE(s.ok()) << bad;
    if (!s.ok()) {
      EXPECT_EQ(s.status().code(), Status::Code::kInvalidArgument) << bad;
    }
  }
  auto s = PreprocessSpec::Parse("resize-shorter=32,center-crop=64");
  EXPECT_NE(s.status().message().find("larger than resize-shorter"), std::string::npos) << s.status().ToString();
}

TEST(PreprocessSpecTest, FromOptions) {
  auto s = PreprocessSpec::FromOptions(64, 56, "jpeg:90", false);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->ToString(), "resize-shorter=64,center-crop=56,reencode=jpeg:90");
  s = PreprocessSpec::FromOptions(0, 0, "", false);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->empty());
  EXPECT_FALSE(PreprocessSpec::FromOptions(-1, 0, "", false).ok());
  EXPECT_FALSE(PreprocessSpec::FromOptions(32, 64, "", false).ok());
  EXPECT_FALSE(PreprocessSpec::FromOptions(64, 0, "gif", false).ok());
  EXPECT_FALSE(PreprocessSpec::FromOptions(0, 0, "png", true).ok());
}

TEST(PreprocessApplyTest, ResizeCropReencodeJpeg) {
  const auto jpeg = MakeJpeg(300, 200, 1);
  auto r = Apply(Spec("resize-shorter=64,center-crop=56,reencode=jpeg:90"), jpeg);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, ImageFormat::kJpeg);
  EXPECT_EQ(r->source_width, 300);
  EXPECT_EQ(r->source_height, 200);
  const ImageInfo info = Info(r->bytes);
  EXPECT_EQ(info.format, ImageFormat::kJpeg);
  EXPECT_EQ(info.width, 56);
  EXPECT_EQ(info.height, 56);
  // Resize only: the longer side is floor(64 * 300 / 200) = 96; keep stays JPEG.
  r = Apply(Spec("resize-shorter=64"), jpeg);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->width, 96);
  EXPECT_EQ(r->height, 64);
  EXPECT_EQ(Info(r->bytes).format, ImageFormat::kJpeg);
  // Portrait, upscaled, to PNG: 20x31 -> 64 x floor(64 * 31 / 20) = 99.
  r = Apply(Spec("resize-shorter=64,reencode=png"), MakeJpeg(20, 31, 2));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ImageInfo up = Info(r->bytes);
  EXPECT_EQ(up.format, ImageFormat::kPng);
  EXPECT_EQ(up.width, 64);
  EXPECT_EQ(up.height, 99);
  EXPECT_EQ(DecodePngPixels(r->bytes).channels, 3);
}

TEST(PreprocessApplyTest, JpegOfUnclassifiedSubsamplingIsPreprocessed) {
  // 4:1:0, which the ingest accepts: preprocessing reads it too.
  std::vector<uint8_t> rgb(static_cast<size_t>(120) * 80 * 3, 0);
  for (size_t i = 0; i < rgb.size(); i += 3) rgb[i] = 200;  // red
  const auto jpeg = testing::MakeJpegWithSampling(rgb, 120, 80, 4, 2);
  auto r = Apply(Spec("resize-shorter=40,center-crop=32,reencode=png"), jpeg);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->source_width, 120);
  EXPECT_EQ(r->source_height, 80);
  const ImageInfo info = Info(r->bytes);
  EXPECT_EQ(info.width, 32);
  EXPECT_EQ(info.height, 32);
  const auto px = DecodePngPixels(r->bytes);
  ASSERT_EQ(px.channels, 3);
  EXPECT_NEAR(px.px[0], 200, 12);
  EXPECT_NEAR(px.px[1], 0, 12);
}

TEST(PreprocessApplyTest, GrayscalePngStaysGray) {
  auto r = Apply(Spec("center-crop=40,reencode=jpeg:80"), MakePng(50, 80, 3));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->channels, 1);
  tjhandle tj = tjInitDecompress();
  int w = 0, h = 0, subsamp = -1, cs = -1;
  ASSERT_EQ(tjDecompressHeader3(tj, r->bytes.data(), static_cast<unsigned long>(r->bytes.size()), &w, &h, &subsamp, &cs),
            0);
  tjDestroy(tj);
  EXPECT_EQ(w, 40);
  EXPECT_EQ(h, 40);
  EXPECT_EQ(cs, TJCS_GRAY);
  // Crop only of a lossless source to PNG: exactly the centre pixels.
  const auto src = MakePng(50, 80, 3);
  r = Apply(Spec("center-crop=40,reencode=png"), src);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Decoded in = DecodePngPixels(src), out = DecodePngPixels(r->bytes);
  ASSERT_EQ(out.w, 40);
  ASSERT_EQ(out.h, 40);
  for (int y = 0; y < 40; ++y) {
    for (int x = 0; x < 40; ++x) {
      ASSERT_EQ(out.px[static_cast<size_t>(y * 40 + x)], in.px[static_cast<size_t>((y + 20) * 50 + x + 5)]);
    }
  }
}

TEST(PreprocessApplyTest, RgbaKeepsAlphaInPngAndDropsItInJpeg) {
  const int w = 40, h = 30;
  std::vector<uint8_t> px(static_cast<size_t>(w * h * 4));
  for (size_t i = 0; i < px.size(); i += 4) {
    px[i] = 10;
    px[i + 1] = 200;
    px[i + 2] = 30;
    px[i + 3] = 128;
  }
  const auto png = EncodePng(w, h, PNG_FORMAT_RGBA, px);
  auto r = Apply(Spec("resize-shorter=15"), png);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Decoded d = DecodePngPixels(r->bytes);
  EXPECT_EQ(d.w, 20);
  EXPECT_EQ(d.h, 15);
  ASSERT_EQ(d.channels, 4);
  // A uniform image stays uniform through the bilinear filter.
  for (size_t i = 0; i < d.px.size(); i += 4) {
    ASSERT_EQ(d.px[i], 10);
    ASSERT_EQ(d.px[i + 1], 200);
    ASSERT_EQ(d.px[i + 2], 30);
    ASSERT_EQ(d.px[i + 3], 128);
  }
  r = Apply(Spec("resize-shorter=15,reencode=jpeg:95"), png);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Info(r->bytes).format, ImageFormat::kJpeg);
  // Gray + alpha to JPEG: the gray plane.
  std::vector<uint8_t> ga(static_cast<size_t>(w * h * 2), 77);
  r = Apply(Spec("center-crop=10,reencode=jpeg:90"), EncodePng(w, h, PNG_FORMAT_GA, ga));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Info(r->bytes).width, 10);
}

TEST(PreprocessApplyTest, UnchangedGeometryKeepsTheBytes) {
  const auto jpeg = MakeJpeg(64, 80, 4);
  auto r = Apply(Spec("resize-shorter=64"), jpeg);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->bytes, jpeg);
  EXPECT_EQ(r->channels, 0);
  // An explicit quality re-encodes even then.
  r = Apply(Spec("resize-shorter=64,reencode=jpeg:50"), jpeg);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->bytes, jpeg);
  EXPECT_EQ(Info(r->bytes).width, 64);
}

TEST(PreprocessApplyTest, PerSampleErrors) {
  // Smaller than the crop: skipped, never padded.
  auto r = Apply(Spec("center-crop=64"), MakeJpeg(100, 50, 5));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("smaller than center-crop 64"), std::string::npos) << r.status().ToString();
  // The pixel bound, on the header, before any decoding.
  r = Apply(Spec("resize-shorter=8"), MakePng(100, 100, 6), PreprocessLimits{5000});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("exceeds the preprocessing bound of 5000"), std::string::npos)
      << r.status().ToString();
  // A JPEG whose frame header claims 65000 x 65000 pixels (SOF0 patched).
  auto bomb = MakeJpeg(16, 16, 7);
  size_t sof = 2;
  while (sof + 1 < bomb.size() && !(bomb[sof] == 0xFF && bomb[sof + 1] == 0xC0)) ++sof;
  ASSERT_LT(sof + 9, bomb.size());
  const uint8_t big[4] = {0xFD, 0xE8, 0xFD, 0xE8};
  std::memcpy(&bomb[sof + 5], big, 4);
  r = Apply(Spec("resize-shorter=8"), bomb);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("65000x65000"), std::string::npos) << r.status().ToString();
  // The output bound: an extreme aspect ratio.
  r = Apply(Spec("resize-shorter=1000"), MakePng(2000, 2, 8));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("output of 1000000x1000"), std::string::npos) << r.status().ToString();
  // Not decodable here.
  r = Apply(Spec("resize-shorter=8"), testing::MakeWebpHeader(32, 32));
  EXPECT_EQ(r.status().code(), Status::Code::kUnsupported);
  const std::vector<uint8_t> junk = {0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3, 4, 5};
  r = Apply(Spec("resize-shorter=8"), junk);
  EXPECT_EQ(r.status().code(), Status::Code::kCorruption);
  auto png = MakePng(30, 30, 9);
  png.resize(png.size() - 30);  // IDAT cut short
  r = Apply(Spec("resize-shorter=8"), png);
  EXPECT_EQ(r.status().code(), Status::Code::kCorruption) << r.status().ToString();
}

TEST(PreprocessApplyTest, ACorruptJpegDoesNotSpoilTheNextOne) {
  const auto good = MakeJpeg(40, 20, 10);
  for (const auto& bad : testing::CorruptJpegHeaders(MakeJpeg(64, 48, 11))) {
    EXPECT_EQ(Apply(Spec("resize-shorter=8"), bad).status().code(), Status::Code::kCorruption);
    auto r = Apply(Spec("resize-shorter=10,reencode=jpeg:90"), good);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->width, 20);
    EXPECT_EQ(r->height, 10);
  }
}

TEST(PreprocessApplyTest, TargetNearestKeepsLabelValues) {
  const int w = 60, h = 40;
  std::vector<uint8_t> mask(static_cast<size_t>(w * h));
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) mask[static_cast<size_t>(y * w + x)] = static_cast<uint8_t>((x / 7 + y / 5) % 3);
  }
  const auto png = EncodePng(w, h, PNG_FORMAT_GRAY, mask);
  const PreprocessSpec spec = Spec("resize-shorter=25,center-crop=20,reencode=jpeg:90,resize-target");
  auto r = ApplyToTarget(spec, png, w, h);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, ImageFormat::kPng);
  const Decoded d = DecodePngPixels(r->bytes);
  EXPECT_EQ(d.w, 20);
  EXPECT_EQ(d.h, 20);
  EXPECT_EQ(d.channels, 1);
  std::set<int> values(d.px.begin(), d.px.end());
  EXPECT_EQ(values, (std::set<int>{0, 1, 2}));
  // The same geometry as the image's.
  auto img = Apply(spec, MakeJpeg(w, h, 10));
  ASSERT_TRUE(img.ok());
  EXPECT_EQ(img->width, d.w);
  EXPECT_EQ(img->height, d.h);
  r = ApplyToTarget(spec, png, w + 1, h);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("does not match"), std::string::npos);
}

}  // namespace
}  // namespace cqlstream::store
