// Copyright (c) cqlstream authors.
#include "gen/image_synth.h"

#include <fmt/format.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>

namespace cqlstream::gen {
namespace {

struct Rgb {
  int c[3];
};

// A colour of class `label`'s palette (independent of the dataset seed, so a
// class looks alike in every dataset).
Rgb ClassColor(int label, int k) {
  SplitMix64 r(MixSeed(0xc1a55c01u, static_cast<uint64_t>(label), static_cast<uint64_t>(k)));
  return Rgb{{static_cast<int>(r.Below(256)), static_cast<int>(r.Below(256)),
              static_cast<int>(r.Below(256))}};
}

Rgb Mix(const Rgb& a, const Rgb& b, int wa /* of 256 */) {
  Rgb out;
  for (int c = 0; c < 3; ++c) out.c[c] = (a.c[c] * wa + b.c[c] * (256 - wa)) >> 8;
  return out;
}

// Maps [0, 255] into [lo, 255 - lo] so that noise of amplitude 2 * lo fits.
Rgb Squeeze(const Rgb& c, int lo) {
  Rgb out;
  for (int k = 0; k < 3; ++k) out.c[k] = lo + c.c[k] * (255 - 2 * lo) / 255;
  return out;
}

// Largest row: 16000 pixels * 3 channels.
constexpr size_t kMaxRowBytes = 16000 * 3;
constexpr size_t kNoiseTableBytes = (1 << 18) + kMaxRowBytes;

// Uniform noise in [-A/2, A/2] as two's-complement bytes, one table per
// level, fixed forever (part of the output format).
const std::vector<uint8_t>& NoiseTable(int level) {
  static const auto tables = [] {
    std::array<std::vector<uint8_t>, ImageSynth::kNumNoiseLevels> t;
    for (int l = 0; l < ImageSynth::kNumNoiseLevels; ++l) {
      const int amp = ImageSynth::kNoiseAmplitudes[static_cast<size_t>(l)];
      SplitMix64 r(MixSeed(0x7ab1e, static_cast<uint64_t>(l)));
      t[static_cast<size_t>(l)].resize(kNoiseTableBytes);
      for (uint8_t& b : t[static_cast<size_t>(l)]) {
        b = static_cast<uint8_t>(static_cast<int>(r.Below(static_cast<uint64_t>(amp) + 1)) - amp / 2);
      }
    }
    return t;
  }();
  return tables[static_cast<size_t>(level)];
}

// One TurboJPEG compressor per thread (handles are not thread-safe).
struct Compressor {
  tjhandle handle = tjInitCompress();
  ~Compressor() {
    if (handle != nullptr) tjDestroy(handle);
  }
};

}  // namespace

double SplitMix64::Normal() {
  const double u1 = 1.0 - Uniform();  // (0, 1]
  const double u2 = Uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

uint64_t MixSeed(uint64_t seed, uint64_t a, uint64_t b) {
  SplitMix64 r(seed ^ (a * 0xd1b54a32d192ed03ull) ^ (b * 0x8cb92ba72f3d8dd7ull));
  r.Next();
  return r.Next();
}

namespace {

// Background: a bilinear gradient between four corner colours, each a mix
// of a class colour and a random one.
void DrawBackground(const ImagePlan& plan, int lo, SplitMix64& r, uint8_t* px) {
  const int w = plan.width, h = plan.height;
  Rgb corner[4];
  for (int k = 0; k < 4; ++k) {
    Rgb random{{static_cast<int>(r.Below(256)), static_cast<int>(r.Below(256)),
                static_cast<int>(r.Below(256))}};
    corner[k] = Squeeze(Mix(ClassColor(plan.label, k), random, 96 + static_cast<int>(r.Below(96))), lo);
  }
  const int hd = std::max(h - 1, 1), wd = std::max(w - 1, 1);
  for (int y = 0; y < h; ++y) {
    uint8_t* row = px + static_cast<size_t>(y) * w * 3;
    int32_t v[3], step[3];
    for (int c = 0; c < 3; ++c) {
      const int64_t left = (static_cast<int64_t>(corner[0].c[c]) * (hd - y) + corner[2].c[c] * y) * 65536 / hd;
      const int64_t right = (static_cast<int64_t>(corner[1].c[c]) * (hd - y) + corner[3].c[c] * y) * 65536 / hd;
      v[c] = static_cast<int32_t>(left);
      step[c] = static_cast<int32_t>((right - left) / wd);
    }
    for (int x = 0; x < w; ++x) {
      row[3 * x + 0] = static_cast<uint8_t>(v[0] >> 16);
      row[3 * x + 1] = static_cast<uint8_t>(v[1] >> 16);
      row[3 * x + 2] = static_cast<uint8_t>(v[2] >> 16);
      v[0] += step[0];
      v[1] += step[1];
      v[2] += step[2];
    }
  }
}

// A few filled ellipses and rectangles in the class palette.
void DrawShapes(const ImagePlan& plan, int lo, SplitMix64& r, uint8_t* px) {
  const int w = plan.width, h = plan.height;
  const int shapes = 2 + static_cast<int>(r.Below(5));
  for (int s = 0; s < shapes; ++s) {
    const bool ellipse = r.Below(2) == 0;
    const int cx = static_cast<int>(r.Below(static_cast<uint64_t>(w)));
    const int cy = static_cast<int>(r.Below(static_cast<uint64_t>(h)));
    const int rx = std::max(2, static_cast<int>(w / 16 + r.Below(static_cast<uint64_t>(w / 4 + 1))));
    const int ry = std::max(2, static_cast<int>(h / 16 + r.Below(static_cast<uint64_t>(h / 4 + 1))));
    Rgb col = ClassColor(plan.label, 4 + static_cast<int>(r.Below(4)));
    for (int c = 0; c < 3; ++c) col.c[c] = std::clamp(col.c[c] + static_cast<int>(r.Below(61)) - 30, 0, 255);
    col = Squeeze(col, lo);
    const int y0 = std::max(0, cy - ry), y1 = std::min(h - 1, cy + ry);
    const int x0 = std::max(0, cx - rx), x1 = std::min(w - 1, cx + rx);
    const int64_t rx2 = static_cast<int64_t>(rx) * rx, ry2 = static_cast<int64_t>(ry) * ry;
    for (int y = y0; y <= y1; ++y) {
      uint8_t* row = px + static_cast<size_t>(y) * w * 3;
      int xa = x0, xb = x1;
      if (ellipse) {
        const int64_t dy = y - cy;
        // Half-width of the ellipse on this row: dx^2 <= rx^2 (1 - dy^2/ry^2).
        const double frac = 1.0 - static_cast<double>(dy * dy) / static_cast<double>(ry2);
        if (frac < 0) continue;
        const int half = static_cast<int>(std::sqrt(static_cast<double>(rx2) * frac));
        xa = std::max(x0, cx - half);
        xb = std::min(x1, cx + half);
      }
      for (int x = xa; x <= xb; ++x) {
        row[3 * x + 0] = static_cast<uint8_t>(col.c[0]);
        row[3 * x + 1] = static_cast<uint8_t>(col.c[1]);
        row[3 * x + 2] = static_cast<uint8_t>(col.c[2]);
      }
    }
  }
}

// Per-channel noise in [-A/2, A/2]: what makes the file size (texture that
// a JPEG encoder at high quality cannot drop). Each row adds a window of a
// fixed noise table at a random offset; the 8x8 DCT blocks of a JPEG never
// see the repetition. Base colours were squeezed into [A/2, 255 - A/2], so
// a wrapping byte add is exact (and vectorizes).
void AddNoise(const ImagePlan& plan, SplitMix64& r, uint8_t* px) {
  const std::vector<uint8_t>& table = NoiseTable(plan.noise_level);
  const size_t row_bytes = static_cast<size_t>(plan.width) * 3;
  for (int y = 0; y < plan.height; ++y) {
    uint8_t* row = px + static_cast<size_t>(y) * row_bytes;
    const uint8_t* nz = table.data() + r.Below(table.size() - row_bytes + 1);
    for (size_t i = 0; i < row_bytes; ++i) row[i] = static_cast<uint8_t>(row[i] + nz[i]);
  }
}

}  // namespace

void ImageSynth::Render(const ImagePlan& plan, std::vector<uint8_t>* rgb) {
  rgb->resize(static_cast<size_t>(plan.width) * plan.height * 3);
  SplitMix64 r(plan.content_seed);
  const int lo = (kNoiseAmplitudes[static_cast<size_t>(plan.noise_level)] + 1) / 2;
  DrawBackground(plan, lo, r, rgb->data());
  DrawShapes(plan, lo, r, rgb->data());
  AddNoise(plan, r, rgb->data());
}

StatusOr<std::vector<uint8_t>> ImageSynth::EncodeRgb(const std::vector<uint8_t>& rgb, int width,
                                                     int height) const {
  thread_local Compressor compressor;
  if (compressor.handle == nullptr) return Status::Internal("tjInitCompress failed");
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  if (tjCompress2(compressor.handle, rgb.data(), width, 0, height, TJPF_RGB, &buf, &size, TJSAMP_420,
                  options_.quality, 0) != 0) {
    std::string err = tjGetErrorStr2(compressor.handle);
    if (buf != nullptr) tjFree(buf);
    return Status::Internal(fmt::format("tjCompress2 {}x{}: {}", width, height, err));
  }
  std::vector<uint8_t> out(buf, buf + size);
  tjFree(buf);
  return out;
}

StatusOr<std::vector<uint8_t>> ImageSynth::Encode(const ImagePlan& plan) const {
  std::vector<uint8_t> rgb;
  Render(plan, &rgb);
  return EncodeRgb(rgb, plan.width, plan.height);
}

StatusOr<ImageSynth> ImageSynth::Create(const SynthOptions& options) {
  if (!(options.mean_bytes > 0) || !(options.sigma >= 0) || options.sigma > 3 ||
      !(options.min_bytes > 0) || options.max_bytes < options.min_bytes) {
    return Status::InvalidArgument("bad size distribution (mean, sigma, min, max)");
  }
  if (options.quality < 1 || options.quality > 100) return Status::InvalidArgument("quality must be 1..100");
  ImageSynth synth(options);
  // Two probe sizes per noise level, three contents each: size is close to
  // linear in the pixel count, header + pixels * bpp.
  constexpr int kSizes[2][2] = {{320, 240}, {960, 720}};
  for (int level = 0; level < kNumNoiseLevels; ++level) {
    double bytes[2] = {0, 0};
    for (int s = 0; s < 2; ++s) {
      for (int k = 0; k < 3; ++k) {
        ImagePlan probe;
        probe.label = k * 37;
        probe.width = kSizes[s][0];
        probe.height = kSizes[s][1];
        probe.noise_level = level;
        probe.content_seed = MixSeed(0x9a0be, static_cast<uint64_t>(level), static_cast<uint64_t>(k));
        CQLS_ASSIGN_OR_RETURN(std::vector<uint8_t> jpeg, synth.Encode(probe));
        bytes[s] += static_cast<double>(jpeg.size()) / 3;
      }
    }
    const double px0 = kSizes[0][0] * kSizes[0][1], px1 = kSizes[1][0] * kSizes[1][1];
    synth.bpp_[level] = (bytes[1] - bytes[0]) / (px1 - px0);
    synth.header_[level] = std::max(0.0, bytes[0] - px0 * synth.bpp_[level]);
    if (!(synth.bpp_[level] > 0)) return Status::Internal("calibration failed");
  }
  return synth;
}

ImagePlan ImageSynth::Plan(uint64_t index, int label) const {
  SplitMix64 r(MixSeed(options_.seed, index, 0x91a4));
  ImagePlan p;
  p.index = index;
  p.label = label;
  const double sigma = options_.sigma;
  const double mu = std::log(options_.mean_bytes) - sigma * sigma / 2;
  p.target_bytes = std::clamp(std::exp(mu + sigma * r.Normal()), options_.min_bytes, options_.max_bytes);
  p.noise_level = static_cast<int>(r.Below(kNumNoiseLevels));
  static constexpr double kAspects[] = {4.0 / 3, 3.0 / 4, 1.0, 3.0 / 2, 2.0 / 3, 16.0 / 9};
  const double aspect = kAspects[r.Below(std::size(kAspects))];
  const auto lvl = static_cast<size_t>(p.noise_level);
  const double pixels = std::max(256.0, (p.target_bytes - header_[lvl]) / bpp_[lvl]);
  int w = static_cast<int>(std::lround(std::sqrt(pixels * aspect)));
  int h = static_cast<int>(std::lround(pixels / std::max(w, 1)));
  p.width = std::clamp(w & ~1, 16, 16000);
  p.height = std::clamp(h & ~1, 16, 16000);
  p.content_seed = MixSeed(options_.seed, index, 0xc0de);
  return p;
}

}  // namespace cqlstream::gen
