// Copyright (c) cqlstream authors.
//
// Cheap validation of image bytes before they are ingested: the format is
// recognised from its signature (JPEG, PNG, WebP) and the header is decoded
// to its dimensions — JPEG with libjpeg-turbo (tjDecompressHeader3, which
// parses the markers up to the first scan), PNG with libpng's simplified API
// (signature, IHDR and its CRC), WebP by parsing the RIFF/VP8/VP8L/VP8X
// header. Pixels are not decoded.
//
// This is the one place of image format knowledge: the loader's decoder
// (loader/decode.h) sniffs with SniffImage and decompresses with the same
// per-thread TurboJPEG handle (ReadJpegHeader, DecompressJpeg).
//
// Thread-safety: CheckImage and ReadJpegHeader may be called from any number of threads at once
// (each thread keeps its own libjpeg-turbo handle).
#ifndef CQLSTREAM_STORE_IMAGE_CHECK_H_
#define CQLSTREAM_STORE_IMAGE_CHECK_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "cqlstream/status.h"

namespace cqlstream::store {

enum class ImageFormat { kUnknown, kJpeg, kPng, kWebp };
std::string_view ImageFormatName(ImageFormat f);  // "jpeg", "png", "webp", "unknown"

// The format named by the signature only (first bytes).
ImageFormat SniffImage(std::span<const uint8_t> bytes);

struct ImageInfo {
  ImageFormat format = ImageFormat::kUnknown;
  int width = 0;
  int height = 0;
};

// Returns "" when `bytes` hold an image whose header decodes to positive
// dimensions (and fills *info), else the skip reason: "empty file",
// "not an image (unknown signature)", "corrupt JPEG header", "corrupt PNG
// header", "corrupt WebP header".
std::string CheckImage(std::span<const uint8_t> bytes, ImageInfo* info);

// A JPEG's frame as its header declares it.
struct JpegHeader {
  int width = 0;
  int height = 0;
  int components = 0;  // 1 grayscale, 3 colour (YCbCr or RGB), 4 CMYK/YCCK
  // Several scans (progressive, or sequential with fewer components in its
  // first scan than in the frame), or markers this check could not follow:
  // libjpeg then keeps the coefficients of the whole full-size image (2
  // bytes per sample) whatever the DCT scaling, so a decoder must bound
  // such an image by its full size.
  bool multi_scan = true;
  bool cmyk() const { return components == 4; }
};

// The header of a JPEG, parsed by libjpeg-turbo (tjDecompressHeader3), which
// reads the markers up to the first scan. libjpeg-turbo 2.1 refuses to
// classify chroma subsampling other than 4:4:4, 4:2:2, 4:2:0, 4:4:0 and
// 4:1:1 (e.g. 4:1:0 or 3x1, written by some cameras and encoders) although
// it decodes such images: then the size and component count come from the
// first frame header (SOFn) instead. Corruption "corrupt JPEG header: ..."
// naming libjpeg-turbo's reason otherwise; Internal when no decompressor can
// be created. Used by the ingest check, preprocessing and the loader's
// decoder, so that an image ingest accepts is one they can read.
StatusOr<JpegHeader> ReadJpegHeader(std::span<const uint8_t> bytes);

// Decompresses the JPEG `bytes` into `dst`: `height` rows of `width`
// pixels of the TurboJPEG pixel format `pixel_format` (TJPF_*), packed;
// width x height may be a scaled size (TJSCALED), `flags` are TJFLAG_*.
// Uses this thread's decompressor, the one ReadJpegHeader uses. Warnings
// (extraneous bytes, a truncated last scan) leave a usable image, as Pillow
// and DALI accept them: OK. Corruption "corrupt JPEG data: ..." for a fatal
// error; Internal when no decompressor can be created. After any failed
// call the thread's decompressor is replaced, so no state reaches the next
// image. Used by preprocessing and the loader's decoder.
Status DecompressJpeg(std::span<const uint8_t> bytes, uint8_t* dst, int width, int height, int pixel_format,
                      int flags);

// Image file extensions recognised in folders and tar shards (lowercase,
// without the dot): jpg, jpeg, png, webp.
bool IsImageExtension(std::string_view ext);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_IMAGE_CHECK_H_
