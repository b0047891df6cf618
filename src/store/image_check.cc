// Copyright (c) cqlstream authors.
#include "store/image_check.h"

#include <png.h>
#include <turbojpeg.h>

#include <cstring>
#include <memory>

namespace cqlstream::store {
namespace {

// One decompressor per thread, freed at thread exit.
struct TjHandle {
  tjhandle h = tjInitDecompress();
  ~TjHandle() {
    if (h != nullptr) tjDestroy(h);
  }
};

uint32_t Le16(const uint8_t* p) { return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8); }
uint32_t Le24(const uint8_t* p) { return Le16(p) | (static_cast<uint32_t>(p[2]) << 16); }
uint32_t Le32(const uint8_t* p) { return Le24(p) | (static_cast<uint32_t>(p[3]) << 24); }

// Frame dimensions from the first SOFn marker; false when none is found.
// Used when libjpeg-turbo 2.1 parses the header but refuses to classify an
// unusual chroma subsampling (e.g. 4:1:1 from old cameras), which is valid.
bool JpegSofDimensions(std::span<const uint8_t> b, int* w, int* h) {
  size_t i = 2;
  while (i + 4 <= b.size()) {
    if (b[i] != 0xFF) return false;
    const uint8_t m = b[i + 1];
    if (m == 0xFF) {
      ++i;
      continue;
    }
    if (m == 0xD8 || (m >= 0xD0 && m <= 0xD7) || m == 0x01) {
      i += 2;
      continue;
    }
    const size_t len = (static_cast<size_t>(b[i + 2]) << 8) | b[i + 3];
    if (len < 2) return false;
    const bool sof = m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
    if (sof) {
      if (i + 9 > b.size()) return false;
      *h = (b[i + 5] << 8) | b[i + 6];
      *w = (b[i + 7] << 8) | b[i + 8];
      return true;
    }
    if (m == 0xDA) return false;  // a scan before any frame header
    i += 2 + len;
  }
  return false;
}

std::string CheckJpeg(std::span<const uint8_t> b, ImageInfo* info) {
  tjhandle tj = ThreadTurboJpeg();
  if (tj == nullptr) return "corrupt JPEG header (libjpeg-turbo unavailable)";
  int w = 0, h = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj, b.data(), static_cast<unsigned long>(b.size()), &w, &h, &subsamp, &colorspace) != 0) {
    const char* err = tjGetErrorStr2(tj);
    if (err == nullptr || std::strstr(err, "subsampling") == nullptr || !JpegSofDimensions(b, &w, &h)) {
      return "corrupt JPEG header";
    }
  }
  if (w <= 0 || h <= 0) return "corrupt JPEG header";
  info->width = w;
  info->height = h;
  return "";
}

std::string CheckPng(std::span<const uint8_t> b, ImageInfo* info) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  // The simplified API reads the signature and IHDR (with its CRC) and
  // reports errors through its return value (no longjmp reaches us).
  if (png_image_begin_read_from_memory(&image, b.data(), b.size()) == 0) {
    png_image_free(&image);
    return "corrupt PNG header";
  }
  info->width = static_cast<int>(image.width);
  info->height = static_cast<int>(image.height);
  png_image_free(&image);
  if (info->width <= 0 || info->height <= 0) return "corrupt PNG header";
  return "";
}

std::string CheckWebp(std::span<const uint8_t> b, ImageInfo* info) {
  // RIFF <size:le32> WEBP <chunk fourcc> <chunk size:le32> <chunk data>
  if (b.size() < 30) return "corrupt WebP header";
  const uint32_t riff = Le32(b.data() + 4);
  if (riff < 4 || static_cast<uint64_t>(riff) + 8 > b.size()) return "corrupt WebP header (truncated)";
  const uint8_t* c = b.data() + 12;
  const uint8_t* d = c + 8;
  int w = 0, h = 0;
  if (std::memcmp(c, "VP8 ", 4) == 0) {
    // frame tag (3 bytes), start code 9d 01 2a, width/height 14 bits each
    if (d[3] != 0x9d || d[4] != 0x01 || d[5] != 0x2a) return "corrupt WebP header";
    w = static_cast<int>(Le16(d + 6) & 0x3FFF);
    h = static_cast<int>(Le16(d + 8) & 0x3FFF);
  } else if (std::memcmp(c, "VP8L", 4) == 0) {
    if (d[0] != 0x2f) return "corrupt WebP header";
    const uint32_t bits = Le32(d + 1);
    w = static_cast<int>((bits & 0x3FFF) + 1);
    h = static_cast<int>(((bits >> 14) & 0x3FFF) + 1);
  } else if (std::memcmp(c, "VP8X", 4) == 0) {
    w = static_cast<int>(Le24(d + 4) + 1);
    h = static_cast<int>(Le24(d + 7) + 1);
  } else {
    return "corrupt WebP header";
  }
  if (w <= 0 || h <= 0) return "corrupt WebP header";
  info->width = w;
  info->height = h;
  return "";
}

}  // namespace

std::string_view ImageFormatName(ImageFormat f) {
  switch (f) {
    case ImageFormat::kJpeg: return "jpeg";
    case ImageFormat::kPng: return "png";
    case ImageFormat::kWebp: return "webp";
    case ImageFormat::kUnknown: break;
  }
  return "unknown";
}

ImageFormat SniffImage(std::span<const uint8_t> b) {
  static constexpr uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return ImageFormat::kJpeg;
  if (b.size() >= 8 && std::memcmp(b.data(), kPng, 8) == 0) return ImageFormat::kPng;
  if (b.size() >= 12 && std::memcmp(b.data(), "RIFF", 4) == 0 && std::memcmp(b.data() + 8, "WEBP", 4) == 0) {
    return ImageFormat::kWebp;
  }
  return ImageFormat::kUnknown;
}

std::string CheckImage(std::span<const uint8_t> bytes, ImageInfo* info) {
  *info = ImageInfo();
  if (bytes.empty()) return "empty file";
  info->format = SniffImage(bytes);
  switch (info->format) {
    case ImageFormat::kJpeg: return CheckJpeg(bytes, info);
    case ImageFormat::kPng: return CheckPng(bytes, info);
    case ImageFormat::kWebp: return CheckWebp(bytes, info);
    case ImageFormat::kUnknown: break;
  }
  return "not an image (unknown signature)";
}

void* ThreadTurboJpeg() {
  thread_local TjHandle tj;
  return tj.h;
}

bool IsImageExtension(std::string_view ext) {
  return ext == "jpg" || ext == "jpeg" || ext == "png" || ext == "webp";
}

}  // namespace cqlstream::store
