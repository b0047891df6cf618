// Copyright (c) cqlstream authors.
#include "store/image_check.h"

#include <png.h>
#include <turbojpeg.h>

#include <cstring>
#include <memory>
#include <string>

namespace cqlstream::store {
namespace {

// One decompressor per thread, freed at thread exit. Replaced after any
// failed call (Reset): libjpeg-turbo 2.1's tjDecompressHeader3 returns from
// an error without aborting the decompressor, and the next header read on
// the same handle continued the broken one ("two SOF markers", an empty
// image), so one corrupt file failed every later valid one on the thread.
struct TjHandle {
  tjhandle h = tjInitDecompress();
  TjHandle() = default;
  TjHandle(const TjHandle&) = delete;
  TjHandle& operator=(const TjHandle&) = delete;
  ~TjHandle() {
    if (h != nullptr) tjDestroy(h);
  }
  void Reset() {
    if (h != nullptr) tjDestroy(h);
    h = tjInitDecompress();
  }
};

TjHandle& ThreadTurboJpeg() {
  thread_local TjHandle tj;
  return tj;
}

uint32_t Le16(const uint8_t* p) { return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8); }
uint32_t Le24(const uint8_t* p) { return Le16(p) | (static_cast<uint32_t>(p[2]) << 16); }
uint32_t Le32(const uint8_t* p) { return Le24(p) | (static_cast<uint32_t>(p[3]) << 24); }

// What the markers up to the first scan say: the first frame header (SOFn)
// and the first scan header (SOS). One walk serves both JpegSof and
// JpegMultiScan; it stops at the first scan, at a marker it cannot follow
// or at the end of the bytes.
struct JpegMarkers {
  bool sof = false;          // a whole first frame header was read
  bool progressive = false;  // ... and it is SOF2, 6, 10 or 14
  int height = 0, width = 0, components = 0;
  bool sos = false;  // the first scan header was reached after the frame header
  int scan_components = 0;
};

JpegMarkers WalkJpegMarkers(std::span<const uint8_t> b) {
  JpegMarkers out;
  size_t i = 2;
  while (i + 4 <= b.size()) {
    if (b[i] != 0xFF) break;
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
    if (len < 2) break;
    const bool sof = m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
    if (sof && !out.sof) {
      // FF Cn <len:2> <precision:1> <height:2> <width:2> <components:1>
      if (i + 10 > b.size()) break;
      out.sof = true;
      out.progressive = m == 0xC2 || m == 0xC6 || m == 0xCA || m == 0xCE;
      out.height = (b[i + 5] << 8) | b[i + 6];
      out.width = (b[i + 7] << 8) | b[i + 8];
      out.components = b[i + 9];
    }
    if (m == 0xDA) {  // FF DA <len:2> <components in scan:1>; a scan before any frame header ends the walk
      if (out.sof && i + 5 <= b.size()) {
        out.sos = true;
        out.scan_components = b[i + 4];
      }
      break;
    }
    i += 2 + len;
  }
  return out;
}

// The first frame header: dimensions and component count; false when none
// is found before the first scan or it is cut short.
bool JpegSof(std::span<const uint8_t> b, JpegHeader* out) {
  const JpegMarkers mk = WalkJpegMarkers(b);
  if (!mk.sof) return false;
  out->height = mk.height;
  out->width = mk.width;
  out->components = mk.components;
  return true;
}

// Whether the JPEG has several scans (JpegHeader::multi_scan): its first
// frame header is progressive, or its first scan holds fewer components
// than the frame. True when the markers cannot be followed to the first
// scan.
bool JpegMultiScan(std::span<const uint8_t> b) {
  const JpegMarkers mk = WalkJpegMarkers(b);
  if (!mk.sof || mk.progressive || !mk.sos) return true;
  return mk.scan_components < mk.components;
}

std::string CheckJpeg(std::span<const uint8_t> b, ImageInfo* info) {
  auto hd = ReadJpegHeader(b);
  if (!hd.ok()) return "corrupt JPEG header";
  info->width = hd->width;
  info->height = hd->height;
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

StatusOr<JpegHeader> ReadJpegHeader(std::span<const uint8_t> b) {
  TjHandle& handle = ThreadTurboJpeg();
  const tjhandle tj = handle.h;
  if (tj == nullptr) return Status::Internal("cannot create a TurboJPEG decompressor");
  int w = 0, h = 0, subsamp = 0, colorspace = 0;
  JpegHeader hd;
  if (tjDecompressHeader3(tj, b.data(), static_cast<unsigned long>(b.size()), &w, &h, &subsamp, &colorspace) == 0) {
    hd.width = w;
    hd.height = h;
    hd.components = colorspace == TJCS_GRAY ? 1 : (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) ? 4 : 3;
  } else {
    const std::string err = tjGetErrorStr2(tj);
    handle.Reset();
    // The one refusal of a well-formed header: an unclassified subsampling.
    if (err.find("subsampling") == std::string::npos || !JpegSof(b, &hd)) {
      return Status::Corruption("corrupt JPEG header: " + err);
    }
    if (hd.components != 1 && hd.components != 3 && hd.components != 4) {
      return Status::Corruption("corrupt JPEG header: " + std::to_string(hd.components) + " colour components");
    }
  }
  if (hd.width <= 0 || hd.height <= 0) return Status::Corruption("corrupt JPEG header: empty image");
  hd.multi_scan = JpegMultiScan(b);
  return hd;
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

Status DecompressJpeg(std::span<const uint8_t> b, uint8_t* dst, int width, int height, int pixel_format,
                      int flags) {
  TjHandle& handle = ThreadTurboJpeg();
  const tjhandle tj = handle.h;
  if (tj == nullptr) return Status::Internal("cannot create a TurboJPEG decompressor");
  if (tjDecompress2(tj, b.data(), static_cast<unsigned long>(b.size()), dst, width, 0, height, pixel_format, flags) ==
      0) {
    return Status::OK();
  }
  const bool fatal = tjGetErrorCode(tj) != TJERR_WARNING;
  const std::string err = tjGetErrorStr2(tj);
  handle.Reset();
  if (fatal) return Status::Corruption("corrupt JPEG data: " + err);
  return Status::OK();
}

bool IsImageExtension(std::string_view ext) {
  return ext == "jpg" || ext == "jpeg" || ext == "png" || ext == "webp";
}

}  // namespace cqlstream::store
