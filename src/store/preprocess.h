// Copyright (c) cqlstream authors.
//
// Ingest-time preprocessing of images (`cqlstream ingest --resize-shorter N
// --center-crop N --reencode jpeg:Q|png [--resize-target]`, and the same
// keywords on cqlstream.Writer): the stored image is the processed one.
//
// Steps, always in this order:
//   1. resize   the shorter side becomes N, the longer side
//               floor(N * long / short) (at least 1), as torchvision's
//               Resize(N); images smaller than N are enlarged. Antialiased
//               bilinear, Pillow-exact (store/resample.h). A JPEG at least
//               twice as large as the resized size on both axes is decoded
//               at 1/2, 1/4 or 1/8 size by libjpeg (DCT scaling: the largest
//               factor not above min(w / resized_w, h / resized_h), as
//               Pillow's draft()) and resampled from there: much less work,
//               and the DCT is a proper low-pass.
//   2. crop     the centre N x N (top = (h - N) / 2, left = (w - N) / 2,
//               rounded down). An image smaller than N on a side (after the
//               resize) is skipped with a reason, never padded.
//   3. encode   keep: the source's format (JPEG at kKeepJpegQuality, PNG);
//               jpeg:Q: baseline JPEG of quality Q (1..100), 4:2:0 chroma
//               subsampling for colour, one plane for grayscale; png: PNG
//               (libpng's simplified writer, zlib's default level).
//   An image whose geometry does not change and whose format is kept is
//   stored byte-identical (no generation loss).
//
// Pixels: JPEG is decoded to grayscale or RGB (as its colour space says;
// CMYK/YCCK JPEGs are refused), PNG to gray, gray+alpha, RGB or RGBA (8 bits
// per sample: palettes expanded, 16-bit samples reduced by libpng's
// simplified reader). Alpha is resampled like any channel (not
// premultiplied, as Pillow's RGBA) and kept in PNG output; JPEG output drops
// it (JPEG has no alpha; not composited). EXIF orientation is ignored: the
// pixels are processed as stored, as the loader's decoder does. WebP cannot
// be decoded here (no WebP decoder is a dependency): such an image is
// skipped when preprocessing is asked for.
//
// Targets (label kind target, e.g. segmentation masks) are stored as they
// came unless `resize-target` is set: then the target gets the same resize
// and crop with NEAREST-neighbour sampling (bilinear would invent label
// values between classes) and is always written as PNG (lossless: a JPEG
// mask would change labels). Its size must equal the image's.
//
// Bounded memory (decompression bombs): nothing is decoded whose header
// claims more than PreprocessLimits::max_pixels source pixels (default 2^25,
// about 33.5 Mpx: at most 128 MiB of RGBA, and libjpeg's whole-image
// coefficient buffers for progressive JPEGs stay of that order), nor
// whose output would exceed it; libjpeg reads at most 500 scans
// (TJFLAG_LIMITSCANS). Such an image is a per-sample error.
//
// Canonical text (what the catalog's `preprocess` column stores and what
// every later ingest into the dataset must match): the set steps, in this
// order, separated by ",":
//   resize-shorter=N , center-crop=N , reencode=jpeg:Q | reencode=png ,
//   resize-target
// ("" means no preprocessing; reencode=keep is the default and not written).
//
// Thread-safety: Parse/ToString are pure; Apply and ApplyToTarget may run
// on any number of threads at once (per-thread libjpeg-turbo handles).
// Ownership: value types; the caller owns the input bytes.
#ifndef CQLSTREAM_STORE_PREPROCESS_H_
#define CQLSTREAM_STORE_PREPROCESS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cqlstream/status.h"
#include "store/image_check.h"

namespace cqlstream::store {

// JPEG quality of reencode=keep when a JPEG's geometry changes.
inline constexpr int kKeepJpegQuality = 95;
// Largest N of resize-shorter and center-crop.
inline constexpr int kMaxPreprocessSide = 16384;

enum class Reencode { kKeep, kJpeg, kPng };

struct PreprocessSpec {
  int resize_shorter = 0;  // 0: no resize; else 1..kMaxPreprocessSide
  int center_crop = 0;     // 0: no crop; else 1..kMaxPreprocessSide
  Reencode reencode = Reencode::kKeep;
  int jpeg_quality = 0;    // with kJpeg: 1..100
  bool resize_target = false;  // targets get the same geometry (nearest), as PNG

  // No step set: images are stored as they came.
  bool empty() const { return resize_shorter == 0 && center_crop == 0 && reencode == Reencode::kKeep; }
  // The canonical text (see above).
  std::string ToString() const;
  // Values in range, center-crop not above resize-shorter (every image
  // would be skipped), resize-target only with a resize or a crop.
  Status Validate() const;
  // Parses canonical text; also accepts the steps in any order and
  // "reencode=keep". Each step at most once. Errors name the bad step.
  static StatusOr<PreprocessSpec> Parse(std::string_view text);
  // Parses --reencode's value: keep | png | jpeg:Q.
  static Status ParseReencode(std::string_view value, PreprocessSpec* spec);
  // From the separate options of `cqlstream ingest` (--resize-shorter,
  // --center-crop, --reencode, --resize-target) and of cqlstream.Writer
  // (resize_shorter=, center_crop=, reencode=, resize_target=): 0 and ""
  // mean not set. Validated; ToString() of the result is what
  // IngestOptions::preprocess takes.
  static StatusOr<PreprocessSpec> FromOptions(int resize_shorter, int center_crop, std::string_view reencode,
                                              bool resize_target);
};

struct PreprocessLimits {
  static constexpr uint64_t kDefaultMaxPixels = uint64_t{1} << 25;
  uint64_t max_pixels = kDefaultMaxPixels;  // source and output pixels, each
};

struct PreprocessedImage {
  std::vector<uint8_t> bytes;  // the encoded result
  ImageFormat format = ImageFormat::kUnknown;
  int width = 0, height = 0;  // of the result
  int channels = 0;           // decoded channels; 0 when the bytes were kept as they came
  int source_width = 0, source_height = 0;  // of the input (ApplyToTarget checks the target against them)
};

// Applies the spec to one image (JPEG or PNG bytes). Errors, each a
// per-sample skip reason: Corruption (undecodable data), Unsupported (WebP,
// CMYK JPEG), InvalidArgument (above the pixel limit, smaller than the crop).
StatusOr<PreprocessedImage> Apply(const PreprocessSpec& spec, std::span<const uint8_t> image,
                                  const PreprocessLimits& limits = {});

// The same geometry for a target, nearest-neighbour, always PNG; the
// target's size must be `image_w` x `image_h` (the source image's).
// REQUIRES: spec.resize_target
StatusOr<PreprocessedImage> ApplyToTarget(const PreprocessSpec& spec, std::span<const uint8_t> target, int image_w,
                                          int image_h, const PreprocessLimits& limits = {});

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_PREPROCESS_H_
