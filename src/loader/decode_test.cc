// Copyright (c) cqlstream authors.
#include "loader/decode.h"

#include <gtest/gtest.h>
#include <png.h>
#include <turbojpeg.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>

#include "store/jpeg_sampling_fixture.h"
#include "store/testing_fixtures.h"

namespace cqlstream::loader {
namespace {

std::vector<uint8_t> Pixels(int w, int h, int ch, uint32_t seed, bool smooth) {
  std::vector<uint8_t> px(static_cast<size_t>(w) * h * ch);
  uint32_t x = seed * 2654435761u + 1;
  for (int y = 0; y < h; ++y) {
    for (int i = 0; i < w; ++i) {
      for (int c = 0; c < ch; ++c) {
        uint8_t v;
        if (smooth) {
          v = static_cast<uint8_t>((i * 255 / std::max(1, w - 1) + y * 97 / std::max(1, h - 1) + c * 40 + seed) % 256);
        } else {
          x ^= x << 13;
          x ^= x >> 17;
          x ^= x << 5;
          v = static_cast<uint8_t>(x);
        }
        px[(static_cast<size_t>(y) * w + i) * ch + c] = v;
      }
    }
  }
  return px;
}

// format: PNG_FORMAT_GRAY, _RGB, _RGBA, _GA.
std::vector<uint8_t> EncodePng(const std::vector<uint8_t>& px, int w, int h, png_uint_32 format) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(w);
  image.height = static_cast<png_uint_32>(h);
  image.format = format;
  png_alloc_size_t size = 0;
  EXPECT_NE(png_image_write_get_memory_size(image, size, 0, px.data(), 0, nullptr), 0);
  std::vector<uint8_t> out(size);
  EXPECT_NE(png_image_write_to_memory(&image, out.data(), &size, 0, px.data(), 0, nullptr), 0);
  out.resize(size);
  return out;
}

std::vector<uint8_t> EncodeJpeg(const std::vector<uint8_t>& px, int w, int h, int ch, int quality = 95) {
  tjhandle tj = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  const int pf = ch == 1 ? TJPF_GRAY : TJPF_RGB;
  const int samp = ch == 1 ? TJSAMP_GRAY : TJSAMP_444;
  EXPECT_EQ(tjCompress2(tj, px.data(), w, 0, h, pf, &out, &size, samp, quality, 0), 0);
  std::vector<uint8_t> v(out, out + size);
  tjFree(out);
  tjDestroy(tj);
  return v;
}

int MaxDiff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  EXPECT_EQ(a.size(), b.size());
  int m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::abs(int{a[i]} - int{b[i]}));
  return m;
}

Image Gray(int w, int h, std::vector<uint8_t> px) {
  Image img;
  img.width = w;
  img.height = h;
  img.channels = 1;
  img.pixels = std::move(px);
  return img;
}

TEST(DecodeTest, SniffsFormats) {
  const auto png = EncodePng(Pixels(4, 4, 1, 1, false), 4, 4, PNG_FORMAT_GRAY);
  const auto jpg = EncodeJpeg(Pixels(8, 8, 3, 1, true), 8, 8, 3);
  EXPECT_EQ(SniffFormat(png), ImageFormat::kPng);
  EXPECT_EQ(SniffFormat(jpg), ImageFormat::kJpeg);
  const uint8_t webp[] = {'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'E', 'B', 'P'};
  EXPECT_EQ(SniffFormat(webp), ImageFormat::kWebp);
  EXPECT_EQ(SniffFormat(std::span<const uint8_t>()), ImageFormat::kUnknown);
}

TEST(DecodeTest, ValidatesOptions) {
  DecodeOptions o;
  EXPECT_FALSE(o.Validate().ok());  // no size
  o.height = 28;
  o.width = 28;
  EXPECT_TRUE(o.Validate().ok());
  o.channels = 2;
  Status s = o.Validate();
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("channels"), std::string::npos);
}

TEST(DecodeTest, PlansCropStretchAndJpegScale) {
  DecodeOptions o;
  o.height = 224;
  o.width = 224;
  // Landscape 500x375 (w x h): the height fits, width round(500 * 224 / 375) = 299.
  ResizePlan p = PlanResize(375, 500, o);
  EXPECT_EQ(p.resized_h, 224);
  EXPECT_EQ(p.resized_w, 299);
  EXPECT_EQ(p.top, 0);
  EXPECT_EQ(p.left, 37);
  EXPECT_EQ(p.jpeg_scale, 1);
  // Portrait: the width fits.
  p = PlanResize(500, 375, o);
  EXPECT_EQ(p.resized_w, 224);
  EXPECT_EQ(p.resized_h, 299);
  EXPECT_EQ(p.top, 37);
  // Large images: the largest power of two not above min(w / rw, h / rh).
  EXPECT_EQ(PlanResize(1000, 1000, o).jpeg_scale, 4);
  EXPECT_EQ(PlanResize(2000, 1800, o).jpeg_scale, 8);
  EXPECT_EQ(PlanResize(448, 700, o).jpeg_scale, 2);
  EXPECT_EQ(PlanResize(447, 700, o).jpeg_scale, 1);
  o.jpeg_scaling = false;
  EXPECT_EQ(PlanResize(2000, 1800, o).jpeg_scale, 1);
  // Stretch ignores the aspect ratio.
  o.mode = ResizeMode::kStretch;
  o.height = 10;
  o.width = 40;
  p = PlanResize(100, 100, o);
  EXPECT_EQ(p.resized_h, 10);
  EXPECT_EQ(p.resized_w, 40);
  EXPECT_EQ(p.top, 0);
  EXPECT_EQ(p.left, 0);
}

// Golden values from Pillow 13: Image.fromarray(a).resize(size, Image.BILINEAR).
TEST(DecodeTest, ResizeMatchesPillowBilinear) {
  uint8_t out[64];
  ResizeWindow(Gray(4, 1, {0, 100, 200, 255}), 1, 2, 0, 0, 1, 2, out);
  EXPECT_EQ(out[0], 71);
  EXPECT_EQ(out[1], 209);

  std::vector<uint8_t> ramp(25);
  for (int i = 0; i < 25; ++i) ramp[static_cast<size_t>(i)] = static_cast<uint8_t>(i * 10);
  const Image r = Gray(5, 5, ramp);
  ResizeWindow(r, 2, 3, 0, 0, 2, 3, out);
  EXPECT_EQ(std::vector<uint8_t>(out, out + 6), (std::vector<uint8_t>{54, 70, 86, 154, 170, 186}));

  std::vector<uint8_t> up(56);
  ResizeWindow(r, 7, 8, 0, 0, 7, 8, up.data());
  const std::vector<uint8_t> want = {0,   4,   11,  17,  23,  29,  36,  40,  29,  33,  40,  46,  52,  58,
                                     65,  69,  64,  68,  75,  81,  87,  93,  100, 104, 100, 104, 111, 117,
                                     123, 129, 136, 140, 136, 140, 147, 153, 159, 165, 172, 176, 171, 175,
                                     182, 188, 194, 200, 207, 211, 200, 204, 211, 217, 223, 229, 236, 240};
  EXPECT_EQ(up, want);
  // A window of the same resize is the same pixels (crop = resize, then cut).
  uint8_t win[6];
  ResizeWindow(r, 7, 8, 2, 3, 2, 3, win);
  for (int y = 0; y < 2; ++y) {
    for (int x = 0; x < 3; ++x) EXPECT_EQ(win[y * 3 + x], want[static_cast<size_t>((2 + y) * 8 + 3 + x)]);
  }
}

TEST(DecodeTest, WindowsEqualTheFullResize) {
  // Downscale and upscale on each axis; every window equals the same part of
  // the full resize.
  for (const auto& [w, h, rw, rh] : std::vector<std::array<int, 4>>{
           {27, 61, 24, 54}, {61, 27, 54, 24}, {40, 40, 90, 70}, {33, 80, 33, 50}, {80, 33, 50, 33}}) {
    for (int ch : {1, 3}) {
      Image img;
      img.width = w;
      img.height = h;
      img.channels = ch;
      img.pixels = Pixels(w, h, ch, 11, false);
      std::vector<uint8_t> full(static_cast<size_t>(rw) * rh * ch);
      ResizeWindow(img, rh, rw, 0, 0, rh, rw, full.data());
      for (const auto& [top, left, oh, ow] : std::vector<std::array<int, 4>>{
               {0, 0, rh, rw}, {rh / 4, 0, rh / 2, rw}, {0, rw / 3, rh, rw / 2}, {rh - 1, rw - 1, 1, 1}}) {
        std::vector<uint8_t> win(static_cast<size_t>(oh) * ow * ch);
        ResizeWindow(img, rh, rw, top, left, oh, ow, win.data());
        for (int y = 0; y < oh; ++y) {
          ASSERT_EQ(0, std::memcmp(win.data() + static_cast<size_t>(y) * ow * ch,
                                   full.data() + (static_cast<size_t>(top + y) * rw + left) * ch,
                                   static_cast<size_t>(ow) * ch))
              << w << "x" << h << " -> " << rw << "x" << rh << " ch " << ch << " window " << top << "," << left
              << " row " << y;
        }
      }
    }
  }
}

TEST(DecodeTest, ResizeKeepsConstantImagesAndCopiesWithoutResize) {
  Image c;
  c.width = 37;
  c.height = 23;
  c.channels = 3;
  c.pixels.assign(37 * 23 * 3, 0);
  for (size_t i = 0; i < c.pixels.size(); i += 3) {
    c.pixels[i] = 200;
    c.pixels[i + 1] = 7;
    c.pixels[i + 2] = 255;
  }
  std::vector<uint8_t> out(11 * 13 * 3);
  ResizeWindow(c, 11, 17, 0, 2, 11, 13, out.data());
  for (size_t i = 0; i < out.size(); i += 3) {
    ASSERT_EQ(out[i], 200);
    ASSERT_EQ(out[i + 1], 7);
    ASSERT_EQ(out[i + 2], 255);
  }
  // Same size: a plain copy of the window.
  Image n;
  n.width = 6;
  n.height = 5;
  n.channels = 1;
  n.pixels = Pixels(6, 5, 1, 3, false);
  std::vector<uint8_t> w(3 * 2);
  ResizeWindow(n, 5, 6, 1, 2, 2, 3, w.data());
  for (int y = 0; y < 2; ++y) {
    for (int x = 0; x < 3; ++x) EXPECT_EQ(w[static_cast<size_t>(y * 3 + x)], n.pixels[static_cast<size_t>((1 + y) * 6 + 2 + x)]);
  }
}

TEST(DecodeTest, PngRoundTripsAndConvertsChannels) {
  const int w = 19, h = 11;
  const auto rgb = Pixels(w, h, 3, 5, false);
  const auto png = EncodePng(rgb, w, h, PNG_FORMAT_RGB);
  Image img;
  ASSERT_TRUE(DecodeImage(png, 3, 1, &img).ok());
  EXPECT_EQ(img.width, w);
  EXPECT_EQ(img.height, h);
  EXPECT_EQ(img.pixels, rgb);
  // RGB -> L as Pillow's convert("L").
  ASSERT_TRUE(DecodeImage(png, 1, 1, &img).ok());
  for (size_t i = 0; i < img.pixels.size(); ++i) {
    const uint32_t l = (rgb[3 * i] * 19595u + rgb[3 * i + 1] * 38470u + rgb[3 * i + 2] * 7471u + 0x8000u) >> 16;
    ASSERT_EQ(img.pixels[i], l);
  }
  // Gray -> RGB replicates; gray stays exact.
  const auto g = Pixels(w, h, 1, 9, false);
  const auto gpng = EncodePng(g, w, h, PNG_FORMAT_GRAY);
  ASSERT_TRUE(DecodeImage(gpng, 1, 1, &img).ok());
  EXPECT_EQ(img.pixels, g);
  ASSERT_TRUE(DecodeImage(gpng, 3, 1, &img).ok());
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_EQ(img.pixels[3 * i], g[i]);
    ASSERT_EQ(img.pixels[3 * i + 2], g[i]);
  }
  // Alpha is dropped, not composited.
  auto rgba = Pixels(w, h, 4, 2, false);
  for (size_t i = 3; i < rgba.size(); i += 4) rgba[i] = 10;
  ASSERT_TRUE(DecodeImage(EncodePng(rgba, w, h, PNG_FORMAT_RGBA), 3, 1, &img).ok());
  for (size_t i = 0; i < static_cast<size_t>(w * h); ++i) {
    ASSERT_EQ(img.pixels[3 * i], rgba[4 * i]);
    ASSERT_EQ(img.pixels[3 * i + 1], rgba[4 * i + 1]);
  }
}

TEST(DecodeTest, JpegDecodesCloseToTheSourceAndScales) {
  const int w = 64, h = 48;
  const auto rgb = Pixels(w, h, 3, 1, true);
  const auto jpg = EncodeJpeg(rgb, w, h, 3, 100);
  Image img;
  ASSERT_TRUE(DecodeImage(jpg, 3, 1, &img).ok());
  EXPECT_EQ(img.width, w);
  EXPECT_EQ(img.height, h);
  EXPECT_LE(MaxDiff(img.pixels, rgb), 8);
  // A grayscale JPEG as RGB: three equal channels.
  const auto gray = Pixels(w, h, 1, 4, true);
  ASSERT_TRUE(DecodeImage(EncodeJpeg(gray, w, h, 1), 3, 1, &img).ok());
  for (size_t i = 0; i < gray.size(); ++i) {
    ASSERT_EQ(img.pixels[3 * i], img.pixels[3 * i + 1]);
    ASSERT_EQ(img.pixels[3 * i], img.pixels[3 * i + 2]);
  }
  // DCT scaling: 1/4 of 64x48 is 16x12; 1/8 of 63 rounds up to 8.
  ASSERT_TRUE(DecodeImage(jpg, 3, 4, &img).ok());
  EXPECT_EQ(img.width, 16);
  EXPECT_EQ(img.height, 12);
  const auto odd = EncodeJpeg(Pixels(63, 17, 3, 1, true), 63, 17, 3);
  ASSERT_TRUE(DecodeImage(odd, 1, 8, &img).ok());
  EXPECT_EQ(img.width, 8);
  EXPECT_EQ(img.height, 3);
  EXPECT_EQ(img.channels, 1);
}

TEST(DecodeTest, ACorruptJpegDoesNotSpoilTheNextOne) {
  const int w = 32, h = 24;
  const auto jpg = EncodeJpeg(Pixels(w, h, 3, 2, true), w, h, 3);
  for (const auto& bad : store::testing::CorruptJpegHeaders(store::testing::MakeJpeg(48, 40, 5))) {
    Image img;
    EXPECT_EQ(DecodeImage(bad, 3, 1, &img).code(), Status::Code::kCorruption);
    ASSERT_TRUE(DecodeImage(jpg, 3, 1, &img).ok());
    EXPECT_EQ(img.width, w);
    EXPECT_EQ(img.height, h);
  }
}

TEST(DecodeTest, JpegOfUnclassifiedSubsamplingDecodes) {
  // 4:1:0 (luma 4x2): accepted by the ingest check, so the loader reads it,
  // whole and DCT-scaled.
  // A flat colour survives chroma at 1/4 x 1/2 resolution.
  const int w = 64, h = 48;
  std::vector<uint8_t> rgb(static_cast<size_t>(w) * h * 3);
  for (size_t i = 0; i < rgb.size(); i += 3) {
    rgb[i] = 30;
    rgb[i + 1] = 140;
    rgb[i + 2] = 220;
  }
  const auto jpg = store::testing::MakeJpegWithSampling(rgb, w, h, 4, 2);
  Image img;
  Status st = DecodeImage(jpg, 3, 1, &img);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(img.width, w);
  EXPECT_EQ(img.height, h);
  EXPECT_LE(MaxDiff(img.pixels, rgb), 4);
  st = DecodeImage(jpg, 1, 4, &img);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(img.width, 16);
  EXPECT_EQ(img.height, 12);
  DecodeOptions o;
  o.height = 8;
  o.width = 8;
  std::vector<uint8_t> out(o.frame_bytes());
  st = DecodeTo(jpg, o, out);
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST(DecodeTest, DecodeToUsesJpegScalingForLargeImages) {
  // A flat-colour 800x600 JPEG to 50x50: decoded at 1/8, then resized; the
  // colour survives either way.
  std::vector<uint8_t> px(800 * 600 * 3);
  for (size_t i = 0; i < px.size(); i += 3) {
    px[i] = 30;
    px[i + 1] = 140;
    px[i + 2] = 220;
  }
  const auto jpg = EncodeJpeg(px, 800, 600, 3, 95);
  DecodeOptions o;
  o.height = 50;
  o.width = 50;
  EXPECT_EQ(PlanResize(600, 800, o).jpeg_scale, 8);
  std::vector<uint8_t> a(o.frame_bytes()), b(o.frame_bytes());
  ASSERT_TRUE(DecodeTo(jpg, o, a).ok());
  o.jpeg_scaling = false;
  ASSERT_TRUE(DecodeTo(jpg, o, b).ok());
  EXPECT_LE(MaxDiff(a, b), 3);
  EXPECT_NEAR(a[0], 30, 3);
  EXPECT_NEAR(a[1], 140, 3);
  EXPECT_NEAR(a[2], 220, 3);
}

TEST(DecodeTest, DecodeToIsExactWithoutResize) {
  const auto g = Pixels(28, 28, 1, 8, false);
  DecodeOptions o;
  o.height = 28;
  o.width = 28;
  o.channels = 1;
  std::vector<uint8_t> out(o.frame_bytes());
  ASSERT_TRUE(DecodeTo(EncodePng(g, 28, 28, PNG_FORMAT_GRAY), o, out).ok());
  EXPECT_EQ(out, g);
}

TEST(DecodeTest, ErrorsSayWhatIsWrong) {
  Image img;
  const uint8_t junk[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  Status s = DecodeImage(junk, 3, 1, &img);
  EXPECT_EQ(s.code(), Status::Code::kUnsupported);
  EXPECT_NE(s.message().find("not a JPEG or PNG"), std::string::npos) << s.ToString();

  auto png = EncodePng(Pixels(30, 30, 3, 1, false), 30, 30, PNG_FORMAT_RGB);
  png.resize(png.size() / 2);
  s = DecodeImage(png, 3, 1, &img);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("PNG"), std::string::npos) << s.ToString();

  auto jpg = EncodeJpeg(Pixels(30, 30, 3, 1, true), 30, 30, 3);
  std::vector<uint8_t> bad(jpg.begin(), jpg.begin() + 20);
  s = DecodeImage(bad, 3, 1, &img);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("JPEG"), std::string::npos) << s.ToString();

  const uint8_t webp[] = {'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'E', 'B', 'P', 0, 0};
  s = DecodeImage(webp, 3, 1, &img);
  EXPECT_EQ(s.code(), Status::Code::kUnsupported);
  EXPECT_NE(s.message().find("WebP"), std::string::npos);
}

// Crafted headers: a real small image whose header claims another size.
std::vector<uint8_t> WithJpegSize(std::vector<uint8_t> jpg, int w, int h) {
  for (size_t i = 2; i + 9 < jpg.size();) {
    EXPECT_EQ(jpg[i], 0xFF);
    const uint8_t m = jpg[i + 1];
    if (m == 0xC0 || m == 0xC1 || m == 0xC2) {  // SOFn: len(2) precision(1) height(2) width(2)
      jpg[i + 5] = static_cast<uint8_t>(h >> 8);
      jpg[i + 6] = static_cast<uint8_t>(h);
      jpg[i + 7] = static_cast<uint8_t>(w >> 8);
      jpg[i + 8] = static_cast<uint8_t>(w);
      return jpg;
    }
    i += 2 + ((size_t{jpg[i + 2]} << 8) | jpg[i + 3]);
  }
  ADD_FAILURE() << "no SOF marker";
  return jpg;
}

uint32_t Crc32(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

std::vector<uint8_t> WithPngSize(std::vector<uint8_t> png, uint32_t w, uint32_t h) {
  // Signature (8), then IHDR: length(4) "IHDR"(4) width(4) height(4) ... crc.
  EXPECT_EQ(std::memcmp(png.data() + 12, "IHDR", 4), 0);
  for (int k = 0; k < 4; ++k) {
    png[16 + k] = static_cast<uint8_t>(w >> (24 - 8 * k));
    png[20 + k] = static_cast<uint8_t>(h >> (24 - 8 * k));
  }
  const uint32_t crc = Crc32(png.data() + 12, 4 + 13);
  for (int k = 0; k < 4; ++k) png[29 + k] = static_cast<uint8_t>(crc >> (24 - 8 * k));
  return png;
}

TEST(DecodeTest, TheDecodedPixelBoundFollowsTheOutputSize) {
  DecodeOptions o;
  o.height = o.width = 224;
  ASSERT_TRUE(o.Validate().ok());
  EXPECT_EQ(o.MaxPixels(), DecodeOptions::kDecodePixelsFloor);
  o.height = o.width = 1024;  // 64 x 2^20
  EXPECT_EQ(o.MaxPixels(), uint64_t{1} << 26);
  o.height = o.width = 8192;
  EXPECT_EQ(o.MaxPixels(), DecodeOptions::kDecodePixelsMax);
  o.max_decode_pixels = 1000;
  EXPECT_EQ(o.MaxPixels(), 1000u);
  o.max_decode_pixels = DecodeOptions::kDecodePixelsMax + 1;
  const Status s = o.Validate();
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("max_decode_pixels"), std::string::npos) << s.ToString();
}

TEST(DecodeTest, AHugeJpegHeaderIsAClearErrorBeforeAnyPixelMemory) {
  // 65000 x 65000 claimed; even at 1/8 that is 66 Mpx, above the 32 Mpx a
  // 32 x 32 output allows (the old bound, 2^28, let it allocate ~200 MB).
  const auto jpg = WithJpegSize(EncodeJpeg(Pixels(16, 16, 3, 1, true), 16, 16, 3), 65000, 65000);
  DecodeOptions o;
  o.height = o.width = 32;
  std::vector<uint8_t> out(o.frame_bytes());
  const Status s = DecodeTo(jpg, o, out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("65000x65000"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("decoded at 1/8"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("exceeds the decode bound"), std::string::npos) << s.ToString();
}

TEST(DecodeTest, AHugeProgressiveJpegIsBoundedAtFullSizeEvenWhenScaled) {
  // 20000 x 20000 = 400 Mpx claimed: at 1/8, 6.25 Mpx, within the 32 Mpx a
  // 32 x 32 output allows; but a progressive JPEG's decoder keeps the
  // coefficients of the full-size image (2 bytes per sample: 1.2 GB here).
  // The image fuzzer found one of 43077 x 16976 taking 2.2 GB.
  auto jpg = WithJpegSize(EncodeJpeg(Pixels(16, 16, 3, 1, true), 16, 16, 3), 20000, 20000);
  for (size_t i = 2; i + 1 < jpg.size(); ++i) {
    if (jpg[i] == 0xFF && (jpg[i + 1] == 0xC0 || jpg[i + 1] == 0xC1)) {
      jpg[i + 1] = 0xC2;  // SOF2: progressive
      break;
    }
  }
  DecodeOptions o;
  o.height = o.width = 32;
  std::vector<uint8_t> out(o.frame_bytes());
  const Status s = DecodeTo(jpg, o, out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("progressive (multi-scan) JPEG of 20000x20000"), std::string::npos) << s.ToString();
  // The same size as a baseline JPEG is decoded at 1/8 within the bound
  // (its one scan needs no full-size buffer); its data is only 16 x 16, so
  // the decoder reports the data, not the bound.
  const auto baseline = WithJpegSize(EncodeJpeg(Pixels(16, 16, 3, 1, true), 16, 16, 3), 20000, 20000);
  const Status b = DecodeTo(baseline, o, out);
  EXPECT_EQ(b.message().find("exceeds the decode bound"), std::string::npos) << b.ToString();
}

TEST(DecodeTest, AHugePngHeaderIsAClearErrorBeforeAnyPixelMemory) {
  // 16000 x 16000 = 256 Mpx: under the old fixed 2^28 bound (a 768 MB
  // allocation per decode thread), above what a 224 x 224 output allows.
  const auto png = WithPngSize(EncodePng(Pixels(8, 8, 3, 1, false), 8, 8, PNG_FORMAT_RGB), 16000, 16000);
  DecodeOptions o;
  o.height = o.width = 224;
  std::vector<uint8_t> out(o.frame_bytes());
  const Status s = DecodeTo(png, o, out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("16000x16000"), std::string::npos) << s.ToString();
  // Claimed sizes past 2^31 are reported, not wrapped.
  const auto wide = WithPngSize(EncodePng(Pixels(8, 8, 3, 1, false), 8, 8, PNG_FORMAT_RGB), 0x7FFFFFFFu, 3);
  EXPECT_FALSE(DecodeTo(wide, o, out).ok());
}

TEST(DecodeTest, AnExplicitPixelBoundApplies) {
  const auto png = EncodePng(Pixels(20, 20, 3, 2, false), 20, 20, PNG_FORMAT_RGB);
  DecodeOptions o;
  o.height = o.width = 10;
  o.max_decode_pixels = 399;
  std::vector<uint8_t> out(o.frame_bytes());
  Status s = DecodeTo(png, o, out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("20x20"), std::string::npos) << s.ToString();
  o.max_decode_pixels = 400;
  EXPECT_TRUE(DecodeTo(png, o, out).ok());
}

TEST(DecodePoolTest, RunsEveryIndexOnceAndReportsTheFirstError) {
  DecodePool pool(4);
  EXPECT_EQ(pool.threads(), 4);
  std::vector<std::atomic<int>> hits(1000);
  std::mutex mu;
  std::set<std::thread::id> ids;
  const std::thread::id caller = std::this_thread::get_id();
  auto a_worker_ran = [&] {
    std::lock_guard<std::mutex> l(mu);
    for (const auto& id : ids) {
      if (id != caller) return true;
    }
    return false;
  };
  Status s = pool.ParallelFor(hits.size(), [&](size_t i) {
    hits[i]++;
    {
      std::lock_guard<std::mutex> l(mu);
      ids.insert(std::this_thread::get_id());
    }
    // The caller runs items too: the first item waits (at most 10 s) until a
    // worker ran one, so that the workers' part does not hang on how soon
    // the scheduler starts them.
    if (i == 0) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!a_worker_ran() && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    return Status::OK();
  });
  EXPECT_TRUE(s.ok());
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  EXPECT_GE(ids.size(), 2u);  // the workers took part

  std::atomic<int> ran{0};
  s = pool.ParallelFor(100, [&](size_t i) {
    ran++;
    if (i == 70 || i == 30) return Status::Corruption("bad " + std::to_string(i));
    return Status::OK();
  });
  EXPECT_EQ(ran.load(), 100);
  EXPECT_EQ(s.message(), "bad 30");
  EXPECT_TRUE(pool.ParallelFor(0, [](size_t) { return Status::Internal("never"); }).ok());
}

TEST(DecodePoolTest, ConcurrentCallersShareThePool) {
  DecodePool pool(3);
  std::atomic<int64_t> sum{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int r = 0; r < 20; ++r) {
        Status s = pool.ParallelFor(50, [&](size_t i) {
          sum += static_cast<int64_t>(i);
          return Status::OK();
        });
        ASSERT_TRUE(s.ok());
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(sum.load(), 4 * 20 * (49 * 50 / 2));
  DecodePool single(1);
  EXPECT_EQ(single.threads(), 1);
  int n = 0;
  EXPECT_TRUE(single.ParallelFor(5, [&](size_t) {
                      ++n;
                      return Status::OK();
                    }).ok());
  EXPECT_EQ(n, 5);
}

// A batch over a plain vector, as the loader hands them out.
struct VectorBatch final : Batch {
  std::vector<uint8_t> bytes;
  std::span<const uint8_t> data() const override { return bytes; }
  void Add(const std::vector<uint8_t>& b, SampleKey key) {
    offsets.push_back(bytes.size());
    sizes.push_back(b.size());
    image_sizes.push_back(b.size());
    labels.push_back(0);
    keys.push_back(key);
    bytes.insert(bytes.end(), b.begin(), b.end());
  }
};

TEST(DecodeBatchTest, DecodesEverySampleInOrderAndNamesBadKeys) {
  DecodeOptions o;
  o.height = 16;
  o.width = 16;
  VectorBatch b;
  std::vector<std::vector<uint8_t>> files;
  for (int i = 0; i < 9; ++i) {
    const int w = 16 + 7 * i, h = 40 - 2 * i;
    files.push_back(i % 2 ? EncodePng(Pixels(w, h, 3, static_cast<uint32_t>(i), false), w, h, PNG_FORMAT_RGB)
                          : EncodeJpeg(Pixels(w, h, 3, static_cast<uint32_t>(i), true), w, h, 3));
    b.Add(files.back(), MakeKey(0, i));
  }
  DecodePool pool(3);
  std::vector<uint8_t> out(b.size() * o.frame_bytes());
  ASSERT_TRUE(DecodeBatch(pool, b, o, out).ok());
  for (size_t i = 0; i < files.size(); ++i) {
    std::vector<uint8_t> one(o.frame_bytes());
    ASSERT_TRUE(DecodeTo(files[i], o, one).ok());
    ASSERT_EQ(0, std::memcmp(one.data(), out.data() + i * o.frame_bytes(), one.size())) << i;
  }
  b.Add({0xFF, 0xD8, 0xFF, 0x00, 0x01}, MakeKey(3, 17));
  out.resize(b.size() * o.frame_bytes());
  Status s = DecodeBatch(pool, b, o, out);
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_NE(s.message().find("sample 3:17"), std::string::npos) << s.ToString();
  std::vector<Status> each;
  s = DecodeBatch(pool, b, o, out, &each);
  EXPECT_FALSE(s.ok());
  ASSERT_EQ(each.size(), b.size());
  for (size_t i = 0; i + 1 < each.size(); ++i) EXPECT_TRUE(each[i].ok()) << i;
  EXPECT_EQ(each.back().message(), s.message());
}

TEST(DecodeBatchTest, AStopSetLeavesTheSamplesNotBegunUndecoded) {
  DecodeOptions o;
  o.height = 16;
  o.width = 16;
  VectorBatch b;
  for (int i = 0; i < 4; ++i) b.Add(EncodeJpeg(Pixels(32, 32, 3, static_cast<uint32_t>(i), true), 32, 32, 3), i);
  DecodePool pool(2);
  std::vector<uint8_t> out(b.size() * o.frame_bytes());
  std::atomic<bool> stop{true};
  std::vector<Status> each;
  Status s = DecodeBatch(pool, b, o, out, &each, &stop);
  EXPECT_EQ(s.code(), Status::Code::kCancelled) << s.ToString();
  EXPECT_NE(s.message().find("interrupted"), std::string::npos) << s.ToString();
  ASSERT_EQ(each.size(), b.size());
  for (const Status& e : each) EXPECT_EQ(e.code(), Status::Code::kCancelled) << e.ToString();
  stop = false;
  EXPECT_TRUE(DecodeBatch(pool, b, o, out, nullptr, &stop).ok());
}

}  // namespace
}  // namespace cqlstream::loader
