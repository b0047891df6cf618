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
// per-thread TurboJPEG handle (ThreadTurboJpeg).
//
// Thread-safety: CheckImage may be called from any number of threads at once
// (each thread keeps its own libjpeg-turbo handle).
#ifndef CQLSTREAM_STORE_IMAGE_CHECK_H_
#define CQLSTREAM_STORE_IMAGE_CHECK_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

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

// This thread's TurboJPEG decompressor (a tjhandle), created on first use and
// destroyed at thread exit; nullptr when libjpeg-turbo cannot create one.
// Only for use on the calling thread.
void* ThreadTurboJpeg();

// Image file extensions recognised in folders and tar shards (lowercase,
// without the dot): jpg, jpeg, png, webp.
bool IsImageExtension(std::string_view ext);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_IMAGE_CHECK_H_
