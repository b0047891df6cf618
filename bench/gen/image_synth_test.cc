// Copyright (c) cqlstream authors.
#include "gen/image_synth.h"

#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <cmath>

namespace cqlstream::gen {
namespace {

SynthOptions Small(uint64_t seed) {
  SynthOptions o;
  o.seed = seed;
  o.mean_bytes = 20'000;  // small images keep the test fast
  return o;
}

// Decodes a JPEG fully; returns false if TurboJPEG rejects it.
bool Decodes(const std::vector<uint8_t>& jpeg, int* w, int* h) {
  tjhandle d = tjInitDecompress();
  int subsamp = 0, colorspace = 0;
  bool ok = tjDecompressHeader3(d, jpeg.data(), jpeg.size(), w, h, &subsamp, &colorspace) == 0;
  if (ok) {
    std::vector<uint8_t> rgb(static_cast<size_t>(*w) * *h * 3);
    ok = tjDecompress2(d, jpeg.data(), jpeg.size(), rgb.data(), *w, 0, *h, TJPF_RGB, 0) == 0 &&
         subsamp == TJSAMP_420;
  }
  tjDestroy(d);
  return ok;
}

TEST(ImageSynthTest, SameSeedSameBytes) {
  auto a = ImageSynth::Create(Small(7));
  auto b = ImageSynth::Create(Small(7));
  ASSERT_TRUE(a.ok() && b.ok());
  for (int k = 0; k < ImageSynth::kNumNoiseLevels; ++k) {
    EXPECT_EQ(a->bytes_per_pixel(k), b->bytes_per_pixel(k));
  }
  for (uint64_t i = 0; i < 6; ++i) {
    ImagePlan pa = a->Plan(i, static_cast<int>(i % 3)), pb = b->Plan(i, static_cast<int>(i % 3));
    EXPECT_EQ(pa.width, pb.width);
    EXPECT_EQ(pa.height, pb.height);
    EXPECT_EQ(pa.content_seed, pb.content_seed);
    auto ja = a->Encode(pa), jb = b->Encode(pb);
    ASSERT_TRUE(ja.ok() && jb.ok());
    EXPECT_EQ(*ja, *jb) << "image " << i;
  }
}

TEST(ImageSynthTest, DifferentSeedDifferentImages) {
  auto a = ImageSynth::Create(Small(1));
  auto b = ImageSynth::Create(Small(2));
  ASSERT_TRUE(a.ok() && b.ok());
  int same_size = 0;
  for (uint64_t i = 0; i < 20; ++i) {
    ImagePlan pa = a->Plan(i, 0), pb = b->Plan(i, 0);
    same_size += pa.width == pb.width && pa.height == pb.height;
    EXPECT_NE(pa.content_seed, pb.content_seed);
  }
  EXPECT_LT(same_size, 3);
  auto ja = a->Encode(a->Plan(0, 0)), jb = b->Encode(b->Plan(0, 0));
  ASSERT_TRUE(ja.ok() && jb.ok());
  EXPECT_NE(*ja, *jb);
}

TEST(ImageSynthTest, OutputDecodesAsJpegWithThePlannedSize) {
  auto s = ImageSynth::Create(Small(3));
  ASSERT_TRUE(s.ok());
  for (uint64_t i = 0; i < 8; ++i) {
    ImagePlan p = s->Plan(i, static_cast<int>(i));
    auto jpeg = s->Encode(p);
    ASSERT_TRUE(jpeg.ok()) << jpeg.status().ToString();
    ASSERT_GE(jpeg->size(), 4u);
    EXPECT_EQ((*jpeg)[0], 0xff);  // SOI
    EXPECT_EQ((*jpeg)[1], 0xd8);
    EXPECT_EQ((*jpeg)[jpeg->size() - 2], 0xff);  // EOI
    EXPECT_EQ((*jpeg)[jpeg->size() - 1], 0xd9);
    int w = 0, h = 0;
    ASSERT_TRUE(Decodes(*jpeg, &w, &h)) << "image " << i;
    EXPECT_EQ(w, p.width);
    EXPECT_EQ(h, p.height);
  }
}

TEST(ImageSynthTest, SizesFollowTheTargetDistribution) {
  SynthOptions o = Small(11);
  o.min_bytes = 500;  // keep the clamp out of the variance check
  auto s = ImageSynth::Create(o);
  ASSERT_TRUE(s.ok());
  // Targets: log-normal with the requested mean.
  double sum = 0, sum_log = 0, sum_log2 = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double t = s->Plan(static_cast<uint64_t>(i), 0).target_bytes;
    sum += t;
    sum_log += std::log(t);
    sum_log2 += std::log(t) * std::log(t);
  }
  EXPECT_NEAR(sum / n, o.mean_bytes, o.mean_bytes * 0.03);
  const double var = sum_log2 / n - (sum_log / n) * (sum_log / n);
  EXPECT_NEAR(std::sqrt(var), o.sigma, 0.03);
  // Files: close to their targets (the calibration works).
  double ratio_sum = 0;
  const int m = 24;
  for (int i = 0; i < m; ++i) {
    ImagePlan p = s->Plan(static_cast<uint64_t>(i), i % 5);
    auto jpeg = s->Encode(p);
    ASSERT_TRUE(jpeg.ok());
    const double ratio = static_cast<double>(jpeg->size()) / p.target_bytes;
    EXPECT_GT(ratio, 0.6) << i;
    EXPECT_LT(ratio, 1.5) << i;
    ratio_sum += ratio;
  }
  EXPECT_NEAR(ratio_sum / m, 1.0, 0.1);
}

TEST(ImageSynthTest, RejectsBadOptions) {
  SynthOptions o;
  o.quality = 0;
  EXPECT_FALSE(ImageSynth::Create(o).ok());
  o = SynthOptions{};
  o.mean_bytes = -1;
  EXPECT_FALSE(ImageSynth::Create(o).ok());
  o = SynthOptions{};
  o.max_bytes = 1;
  EXPECT_FALSE(ImageSynth::Create(o).ok());
}

}  // namespace
}  // namespace cqlstream::gen
