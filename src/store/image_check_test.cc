// Copyright (c) cqlstream authors.
#include "store/image_check.h"

#include <gtest/gtest.h>

#include "store/jpeg_sampling_fixture.h"
#include "store/testing_fixtures.h"

namespace cqlstream::store {
namespace {

using testing::MakeJpeg;
using testing::MakePng;
using testing::MakeWebpHeader;

TEST(ImageCheckTest, RealJpegAndPngGiveTheirDimensions) {
  ImageInfo info;
  const auto jpeg = MakeJpeg(40, 24, 1);
  EXPECT_EQ(CheckImage(jpeg, &info), "");
  EXPECT_EQ(info.format, ImageFormat::kJpeg);
  EXPECT_EQ(info.width, 40);
  EXPECT_EQ(info.height, 24);
  const auto png = MakePng(28, 28, 2);
  EXPECT_EQ(CheckImage(png, &info), "");
  EXPECT_EQ(info.format, ImageFormat::kPng);
  EXPECT_EQ(info.width, 28);
  EXPECT_EQ(info.height, 28);
  const auto webp = MakeWebpHeader(300, 200);
  EXPECT_EQ(CheckImage(webp, &info), "");
  EXPECT_EQ(info.format, ImageFormat::kWebp);
  EXPECT_EQ(info.width, 300);
  EXPECT_EQ(info.height, 200);
}

TEST(ImageCheckTest, ACorruptJpegHeaderDoesNotSpoilTheNextJpeg) {
  // The thread's decompressor is reused: a header that fails mid-way once
  // made every later valid JPEG on the thread fail ("two SOF markers") or
  // read as empty.
  const auto good = MakeJpeg(24, 16, 3);
  for (const auto& bad : testing::CorruptJpegHeaders(MakeJpeg(40, 32, 4))) {
    ImageInfo info;
    EXPECT_NE(CheckImage(bad, &info), "");
    EXPECT_EQ(CheckImage(good, &info), "");
    EXPECT_EQ(info.width, 24);
    EXPECT_EQ(info.height, 16);
  }
}

TEST(ImageCheckTest, JpegsOfUnclassifiedSubsamplingAreRead) {
  // 4:1:0 (luma 4x2) and 3x1: libjpeg-turbo 2.1's header call refuses to
  // classify them, the frame header still gives size and components.
  std::vector<uint8_t> rgb(static_cast<size_t>(40) * 24 * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i * 7);
  for (auto [yh, yv] : {std::pair{4, 2}, std::pair{3, 1}, std::pair{4, 1}}) {
    const auto jpeg = testing::MakeJpegWithSampling(rgb, 40, 24, yh, yv);
    ImageInfo info;
    EXPECT_EQ(CheckImage(jpeg, &info), "") << yh << "x" << yv;
    EXPECT_EQ(info.width, 40);
    EXPECT_EQ(info.height, 24);
    auto hd = ReadJpegHeader(jpeg);
    ASSERT_TRUE(hd.ok()) << hd.status().ToString();
    EXPECT_EQ(hd->width, 40);
    EXPECT_EQ(hd->height, 24);
    EXPECT_EQ(hd->components, 3);
  }
  auto gray = ReadJpegHeader(MakeJpeg(8, 8, 3));
  ASSERT_TRUE(gray.ok());
  EXPECT_EQ(gray->components, 3) << "MakeJpeg writes colour";
  // A header cut inside the frame header is corrupt, with libjpeg-turbo's reason.
  auto odd = testing::MakeJpegWithSampling(rgb, 40, 24, 4, 2);
  odd.resize(30);
  auto cut = ReadJpegHeader(odd);
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().code(), Status::Code::kCorruption) << cut.status().ToString();
  EXPECT_NE(cut.status().message().find("corrupt JPEG header: "), std::string::npos) << cut.status().ToString();
}

TEST(ImageCheckTest, SkipReasons) {
  ImageInfo info;
  EXPECT_EQ(CheckImage({}, &info), "empty file");
  const std::string text = "hello, I am not an image";
  EXPECT_EQ(CheckImage({reinterpret_cast<const uint8_t*>(text.data()), text.size()}, &info),
            "not an image (unknown signature)");

  // A JPEG signature followed by garbage.
  std::vector<uint8_t> bad_jpeg = {0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x02, 0x13, 0x37};
  EXPECT_EQ(CheckImage(bad_jpeg, &info), "corrupt JPEG header");
  // A JPEG cut before its frame header.
  auto jpeg = MakeJpeg(32, 32, 3);
  jpeg.resize(20);
  EXPECT_EQ(CheckImage(jpeg, &info), "corrupt JPEG header");

  // A PNG whose IHDR CRC is broken.
  auto png = MakePng(8, 8, 4);
  png[20] ^= 0xFF;  // inside the IHDR data
  EXPECT_EQ(CheckImage(png, &info), "corrupt PNG header");
  auto short_png = MakePng(8, 8, 4);
  short_png.resize(12);
  EXPECT_EQ(CheckImage(short_png, &info), "corrupt PNG header");

  auto webp = MakeWebpHeader(10, 10);
  webp.resize(24);
  EXPECT_NE(CheckImage(webp, &info).find("corrupt WebP header"), std::string::npos);
}

TEST(ImageCheckTest, Sniff) {
  EXPECT_EQ(SniffImage(MakeJpeg(8, 8, 1)), ImageFormat::kJpeg);
  EXPECT_EQ(SniffImage(MakePng(8, 8, 1)), ImageFormat::kPng);
  EXPECT_EQ(SniffImage(MakeWebpHeader(8, 8)), ImageFormat::kWebp);
  EXPECT_EQ(ImageFormatName(ImageFormat::kPng), "png");
  EXPECT_TRUE(IsImageExtension("jpeg"));
  EXPECT_FALSE(IsImageExtension("gif"));
}

}  // namespace
}  // namespace cqlstream::store
