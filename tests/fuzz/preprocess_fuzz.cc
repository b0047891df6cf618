// Copyright (c) cqlstream authors.
//
// libFuzzer target for ingest-time preprocessing (store/preprocess.h): Apply
// and ApplyToTarget on arbitrary bytes (JPEG via libjpeg-turbo, PNG via
// libpng's simplified API, the resampler, both encoders) under small pixel
// limits, and the spec's text parser.
//
// Input layout:
//   byte 0  resize-shorter: 0 (none) when b < 64, else 1 + b % 48
//   byte 1  center-crop: 0 (none) when b < 128, else 1 + b % 32
//   byte 2  bits 0-1 reencode keep / png / jpeg (quality 1 + byte 3 % 100);
//           bits 2-5 max_pixels = 1 << (6 + b % 16) (64 .. 2^21)
//   byte 3  JPEG quality
//   rest    the image bytes; also parsed as spec text
//
// Checked beyond "no crash, no leak, no UB":
//  - a result passes CheckImage with the size Apply reports, in the format
//    Apply reports, and within the pixel bound;
//  - with a crop, the result is crop x crop;
//  - text that parses prints canonically and parses again to the same text;
//  - the thread's JPEG decompressor reads a valid JPEG as itself afterwards
//    (a failed header read once left it mid-header: a valid image after a
//    corrupt one was refused or misread).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>

#include "store/image_check.h"
#include "image_state_check.h"
#include "store/preprocess.h"
#include "fuzz_check.h"

namespace {

using cqlstream::store::PreprocessedImage;
using cqlstream::store::PreprocessLimits;
using cqlstream::store::PreprocessSpec;
using cqlstream::store::Reencode;

using cqlstream::fuzz::Check;

void CheckResult(const PreprocessSpec& spec, const PreprocessLimits& limits, const PreprocessedImage& r) {
  cqlstream::store::ImageInfo info;
  Check(cqlstream::store::CheckImage(r.bytes, &info).empty());
  Check(info.format == r.format);
  Check(info.width == r.width && info.height == r.height);
  Check(static_cast<uint64_t>(r.width) * static_cast<uint64_t>(r.height) <= limits.max_pixels);
  if (spec.center_crop > 0) Check(r.width == spec.center_crop && r.height == spec.center_crop);
}

void FuzzText(std::string_view text) {
  auto spec = PreprocessSpec::Parse(text);
  if (!spec.ok()) return;
  const std::string canonical = spec->ToString();
  auto again = PreprocessSpec::Parse(canonical);
  Check(again.ok() && again->ToString() == canonical);
}

void OneInput(const uint8_t* data, size_t size) {
  if (size < 4) return;
  PreprocessSpec spec;
  spec.resize_shorter = data[0] < 64 ? 0 : 1 + data[0] % 48;
  spec.center_crop = data[1] < 128 ? 0 : 1 + data[1] % 32;
  const int re = data[2] & 3;
  spec.reencode = re == 1 ? Reencode::kPng : re >= 2 ? Reencode::kJpeg : Reencode::kKeep;
  spec.jpeg_quality = spec.reencode == Reencode::kJpeg ? 1 + data[3] % 100 : 0;
  PreprocessLimits limits;
  limits.max_pixels = uint64_t{1} << (6 + ((data[2] >> 2) & 15));
  const std::span<const uint8_t> bytes(data + 4, size - 4);
  FuzzText(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  if (!spec.Validate().ok() || spec.empty()) return;

  auto r = cqlstream::store::Apply(spec, bytes, limits);
  if (!r.ok()) return;
  CheckResult(spec, limits, *r);
  spec.resize_target = true;
  auto t = cqlstream::store::ApplyToTarget(spec, bytes, r->source_width, r->source_height, limits);
  if (t.ok()) {
    CheckResult(spec, limits, *t);
    Check(t->format == cqlstream::store::ImageFormat::kPng);
    Check(t->width == r->width && t->height == r->height);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  OneInput(data, size);
  cqlstream::fuzz::CheckThreadJpegDecoderIsClean();
  return 0;
}
