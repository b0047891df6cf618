// Copyright (c) cqlstream authors.
//
// Deterministic synthetic "ImageNet-like" JPEGs for throughput work.
//
// Image i of a dataset is a pure function of (options, i, label): a smooth
// four-corner colour gradient, a few filled ellipses and rectangles in a
// class-dependent palette, and per-pixel noise of one of a few amplitudes,
// encoded by libjpeg-turbo (TurboJPEG API, 4:2:0, fixed quality). The file
// sizes follow a log-normal law by construction: Plan() draws a target size
// S = exp(mu + sigma * Z) (mean `mean_bytes`), then picks the pixel count
// that the calibrated bytes-per-pixel of the chosen noise level turns into S.
// The calibration (Create()) encodes a few probe images, so it is itself
// deterministic: the same seed gives byte-identical files with the same
// libjpeg-turbo version.
//
// Thread-safety: an ImageSynth is immutable after Create(); Plan(), Render()
// and Encode() may be called from any number of threads at once (Encode keeps
// one TurboJPEG handle per thread).
#ifndef CQLSTREAM_BENCH_GEN_IMAGE_SYNTH_H_
#define CQLSTREAM_BENCH_GEN_IMAGE_SYNTH_H_

#include <array>
#include <cstdint>
#include <vector>

#include "cqlstream/status.h"

namespace cqlstream::gen {

struct SynthOptions {
  uint64_t seed = 1;
  double mean_bytes = 110'000;  // mean of the target file size
  double sigma = 0.7;           // log-normal shape of the file size
  double min_bytes = 6'000;     // targets are clamped into [min, max]
  double max_bytes = 6'000'000;
  int quality = 90;             // JPEG quality, fixed for the whole dataset
};

// Everything that determines one image.
struct ImagePlan {
  uint64_t index = 0;
  int label = 0;
  int width = 0;
  int height = 0;
  int noise_level = 0;        // index into ImageSynth::kNoiseAmplitudes
  double target_bytes = 0;    // what the plan aims at (the file comes close)
  uint64_t content_seed = 0;  // drives colours, shapes and noise
};

class ImageSynth {
 public:
  static constexpr int kNumNoiseLevels = 4;
  // Peak-to-peak noise per channel, in 8-bit units.
  static constexpr std::array<int, kNumNoiseLevels> kNoiseAmplitudes = {48, 72, 100, 128};

  // Validates the options and calibrates bytes per pixel for each noise level.
  static StatusOr<ImageSynth> Create(const SynthOptions& options);

  const SynthOptions& options() const { return options_; }

  // The plan of image `index` with class `label` (no pixels are touched).
  ImagePlan Plan(uint64_t index, int label) const;

  // The RGB pixels (width * height * 3 bytes, row-major) of a plan.
  static void Render(const ImagePlan& plan, std::vector<uint8_t>* rgb);

  // Render + encode: the JPEG file bytes.
  StatusOr<std::vector<uint8_t>> Encode(const ImagePlan& plan) const;

  // Calibrated model: bytes ~ header + pixels * bytes_per_pixel.
  double bytes_per_pixel(int level) const { return bpp_[level]; }
  double header_bytes(int level) const { return header_[level]; }

 private:
  explicit ImageSynth(const SynthOptions& options) : options_(options) {}
  StatusOr<std::vector<uint8_t>> EncodeRgb(const std::vector<uint8_t>& rgb, int width,
                                           int height) const;

  SynthOptions options_;
  std::array<double, kNumNoiseLevels> bpp_{};
  std::array<double, kNumNoiseLevels> header_{};
};

// A splitmix64 generator: small, fast, identical on every platform (the
// standard library's distributions are not).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n).
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : Next() % n; }
  // Standard normal (Box-Muller).
  double Normal();

 private:
  uint64_t state_;
};

// Mixes a seed and up to two values into an independent stream seed.
uint64_t MixSeed(uint64_t seed, uint64_t a, uint64_t b = 0);

}  // namespace cqlstream::gen

#endif  // CQLSTREAM_BENCH_GEN_IMAGE_SYNTH_H_
