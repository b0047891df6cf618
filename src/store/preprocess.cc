// Copyright (c) cqlstream authors.
#include "store/preprocess.h"

#include <fmt/format.h>
#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string>

#include "store/resample.h"

namespace cqlstream::store {
namespace {

// Decoded pixels, HWC, 8 bits per sample.
struct Pixels {
  std::vector<uint8_t> data;
  int width = 0, height = 0, channels = 0;
  PixelView view() const { return {data.data(), height, width, channels}; }
};

// Where the output comes from: the window [top, top + out_h) x
// [left, left + out_w) of the image resized to (resized_h, resized_w).
struct Geometry {
  int resized_w = 0, resized_h = 0;
  int top = 0, left = 0;
  int out_w = 0, out_h = 0;
  bool identity(int w, int h) const { return resized_w == w && resized_h == h && out_w == w && out_h == h; }
};

// One compressor per thread, freed at thread exit (decompression uses the
// ingest check's per-thread handle, store/image_check.h).
struct TjCompressor {
  tjhandle h = tjInitCompress();
  TjCompressor() = default;
  TjCompressor(const TjCompressor&) = delete;
  TjCompressor& operator=(const TjCompressor&) = delete;
  ~TjCompressor() {
    if (h != nullptr) tjDestroy(h);
  }
  void Reset() {
    if (h != nullptr) tjDestroy(h);
    h = tjInitCompress();
  }
};

Status ParseInt(std::string_view step, std::string_view v, int lo, int hi, int* out) {
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size() || *out < lo || *out > hi) {
    return Status::InvalidArgument(fmt::format("preprocessing '{}': '{}' is not an integer in {}..{}", step, v, lo, hi));
  }
  return Status::OK();
}

Status TooLarge(std::string_view what, uint64_t w, uint64_t h, uint64_t max) {
  return Status::InvalidArgument(
      fmt::format("{} of {}x{} pixels exceeds the preprocessing bound of {} pixels", what, w, h, max));
}

// --- geometry ----------------------------------------------------------------

StatusOr<Geometry> Plan(const PreprocessSpec& spec, int w, int h, uint64_t max_pixels) {
  Geometry g{w, h, 0, 0, w, h};
  if (spec.resize_shorter > 0) {
    const int64_t n = spec.resize_shorter;
    const int64_t shorter = std::min(w, h), longer = std::max(w, h);
    const int64_t other = std::max<int64_t>(1, n * longer / shorter);  // torchvision: int(N * long / short)
    if (other > int64_t{1} << 30) return TooLarge("resized image", static_cast<uint64_t>(other), n, max_pixels);
    g.resized_w = static_cast<int>(w <= h ? n : other);
    g.resized_h = static_cast<int>(w <= h ? other : n);
  }
  g.out_w = g.resized_w;
  g.out_h = g.resized_h;
  if (spec.center_crop > 0) {
    const int c = spec.center_crop;
    if (g.resized_w < c || g.resized_h < c) {
      return Status::InvalidArgument(fmt::format("image of {}x{} pixels{} is smaller than center-crop {}", w, h,
                                                 spec.resize_shorter > 0
                                                     ? fmt::format(" (resized to {}x{})", g.resized_w, g.resized_h)
                                                     : "",
                                                 c));
    }
    g.top = (g.resized_h - c) / 2;
    g.left = (g.resized_w - c) / 2;
    g.out_w = g.out_h = c;
  }
  const uint64_t out = static_cast<uint64_t>(g.out_w) * static_cast<uint64_t>(g.out_h);
  if (out > max_pixels) return TooLarge("output", static_cast<uint64_t>(g.out_w), static_cast<uint64_t>(g.out_h), max_pixels);
  return g;
}

// --- decoding ----------------------------------------------------------------

struct Header {
  ImageFormat format = ImageFormat::kUnknown;
  int width = 0, height = 0;
};

StatusOr<Header> ReadHeader(std::span<const uint8_t> b, uint64_t max_pixels) {
  Header hd;
  hd.format = SniffImage(b);
  if (hd.format == ImageFormat::kJpeg) {
    CQLS_ASSIGN_OR_RETURN(const JpegHeader jh, ReadJpegHeader(b));
    if (jh.cmyk()) return Status::Unsupported("CMYK JPEG images cannot be preprocessed");
    hd.width = jh.width;
    hd.height = jh.height;
  } else if (hd.format == ImageFormat::kPng) {
    png_image img;
    std::memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    const bool ok = png_image_begin_read_from_memory(&img, b.data(), b.size()) != 0;
    const std::string msg = img.message;
    png_image_free(&img);
    if (!ok) return Status::Corruption(fmt::format("corrupt PNG header: {}", msg));
    hd.width = static_cast<int>(std::min<png_uint_32>(img.width, 0x7fffffff));
    hd.height = static_cast<int>(std::min<png_uint_32>(img.height, 0x7fffffff));
  } else if (hd.format == ImageFormat::kWebp) {
    return Status::Unsupported("WebP images cannot be preprocessed (no WebP decoder)");
  } else {
    return Status::Corruption("not a JPEG or PNG image (unknown signature)");
  }
  if (hd.width <= 0 || hd.height <= 0) return Status::Corruption("image header with an empty size");
  if (static_cast<uint64_t>(hd.width) * static_cast<uint64_t>(hd.height) > max_pixels) {
    return TooLarge("image", static_cast<uint64_t>(hd.width), static_cast<uint64_t>(hd.height), max_pixels);
  }
  return hd;
}

// JPEG at 1/scale (scale 1, 2, 4, 8), grayscale or RGB as its colour space.
Status DecodeJpeg(std::span<const uint8_t> b, int scale, Pixels* out) {
  CQLS_ASSIGN_OR_RETURN(const JpegHeader jh, ReadJpegHeader(b));
  const tjscalingfactor sf{1, scale};
  out->width = TJSCALED(jh.width, sf);
  out->height = TJSCALED(jh.height, sf);
  out->channels = jh.components == 1 ? 1 : 3;
  out->data.resize(static_cast<size_t>(out->width) * static_cast<size_t>(out->height) *
                   static_cast<size_t>(out->channels));
  const int pf = out->channels == 1 ? TJPF_GRAY : TJPF_RGB;
  // Warnings leave a usable image, which the loader's decoder accepts too.
  return DecompressJpeg(b, out->data.data(), out->width, out->height, pf, TJFLAG_LIMITSCANS);
}

// PNG with libpng's simplified reader, keeping gray / gray+alpha / RGB / RGBA.
Status DecodePng(std::span<const uint8_t> b, Pixels* out) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  if (png_image_begin_read_from_memory(&img, b.data(), b.size()) == 0) {
    const std::string msg = img.message;
    png_image_free(&img);
    return Status::Corruption(fmt::format("corrupt PNG header: {}", msg));
  }
  img.format &= PNG_FORMAT_FLAG_COLOR | PNG_FORMAT_FLAG_ALPHA;  // 8-bit, no colour map, RGB(A) order
  out->width = static_cast<int>(img.width);
  out->height = static_cast<int>(img.height);
  out->channels = static_cast<int>(PNG_IMAGE_SAMPLE_CHANNELS(img.format));
  out->data.resize(PNG_IMAGE_SIZE(img));
  if (png_image_finish_read(&img, nullptr, out->data.data(), 0, nullptr) == 0) {
    const std::string msg = img.message;
    png_image_free(&img);
    return Status::Corruption(fmt::format("corrupt PNG data: {}", msg));
  }
  png_image_free(&img);
  return Status::OK();
}

// --- encoding ----------------------------------------------------------------

StatusOr<std::vector<uint8_t>> EncodeJpeg(const Pixels& px, int quality) {
  thread_local TjCompressor tj;
  if (tj.h == nullptr) return Status::Internal("cannot create a TurboJPEG compressor");
  const uint8_t* src = px.data.data();
  std::vector<uint8_t> gray;
  int pf = TJPF_GRAY;
  if (px.channels == 2) {  // gray + alpha: the gray plane (JPEG has no alpha)
    gray.resize(px.data.size() / 2);
    for (size_t i = 0; i < gray.size(); ++i) gray[i] = px.data[2 * i];
    src = gray.data();
  } else if (px.channels == 3) {
    pf = TJPF_RGB;
  } else if (px.channels == 4) {
    pf = TJPF_RGBX;  // the alpha byte is skipped
  }
  const int subsamp = pf == TJPF_GRAY ? TJSAMP_GRAY : TJSAMP_420;
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  if (tjCompress2(tj.h, src, px.width, 0, px.height, pf, &buf, &size, subsamp, quality, 0) != 0) {
    tjFree(buf);
    const std::string err = tjGetErrorStr2(tj.h);
    tj.Reset();  // as for the decompressor (store/image_check.h): no state carried to the next image
    return Status::Internal(fmt::format("JPEG encoding failed: {}", err));
  }
  std::vector<uint8_t> out(buf, buf + size);
  tjFree(buf);
  return out;
}

StatusOr<std::vector<uint8_t>> EncodePng(const Pixels& px) {
  static constexpr png_uint_32 kFormats[5] = {0, PNG_FORMAT_GRAY, PNG_FORMAT_GA, PNG_FORMAT_RGB, PNG_FORMAT_RGBA};
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  img.width = static_cast<png_uint_32>(px.width);
  img.height = static_cast<png_uint_32>(px.height);
  img.format = kFormats[px.channels];
  // Most images compress: start at half the raw size; libpng says how much
  // it needs when that is too small, and the second try fits.
  std::vector<uint8_t> out(px.data.size() / 2 + 1024);
  for (int attempt = 0; attempt < 2; ++attempt) {
    png_alloc_size_t n = out.size();
    if (png_image_write_to_memory(&img, out.data(), &n, 0, px.data.data(), 0, nullptr) != 0) {
      out.resize(n);
      png_image_free(&img);
      return out;
    }
    if (n <= out.size()) break;  // an error, not a short buffer
    out.resize(n);
    img.warning_or_error = 0;
  }
  const std::string msg = img.message;
  png_image_free(&img);
  return Status::Internal(fmt::format("PNG encoding failed: {}", msg));
}

// The window of `g` from `src` (decoded at src.width x src.height, which
// DCT scaling may have made smaller than the header's size).
Pixels Resample(const Pixels& src, const Geometry& g, bool nearest) {
  Pixels out;
  out.width = g.out_w;
  out.height = g.out_h;
  out.channels = src.channels;
  out.data.resize(static_cast<size_t>(g.out_w) * static_cast<size_t>(g.out_h) * static_cast<size_t>(src.channels));
  if (nearest) {
    NearestWindow(src.view(), g.resized_h, g.resized_w, g.top, g.left, g.out_h, g.out_w, out.data.data());
  } else {
    ResampleWindow(src.view(), g.resized_h, g.resized_w, g.top, g.left, g.out_h, g.out_w, out.data.data());
  }
  return out;
}

// JPEG DCT scaling for a resize (see the header): 8, 4, 2 or 1.
int JpegScale(const Header& hd, const Geometry& g, const PreprocessSpec& spec) {
  if (hd.format != ImageFormat::kJpeg || spec.resize_shorter == 0) return 1;
  const int s = std::min(hd.width / g.resized_w, hd.height / g.resized_h);
  return s >= 8 ? 8 : s >= 4 ? 4 : s >= 2 ? 2 : 1;
}

}  // namespace

std::string PreprocessSpec::ToString() const {
  std::string s;
  auto add = [&](const std::string& step) { s += (s.empty() ? "" : ",") + step; };
  if (resize_shorter > 0) add(fmt::format("resize-shorter={}", resize_shorter));
  if (center_crop > 0) add(fmt::format("center-crop={}", center_crop));
  if (reencode == Reencode::kJpeg) add(fmt::format("reencode=jpeg:{}", jpeg_quality));
  if (reencode == Reencode::kPng) add("reencode=png");
  if (resize_target) add("resize-target");
  return s;
}

Status PreprocessSpec::Validate() const {
  auto side = [](std::string_view name, int v) {
    if (v < 0 || v > kMaxPreprocessSide) {
      return Status::InvalidArgument(fmt::format("{} {} is out of range (1..{})", name, v, kMaxPreprocessSide));
    }
    return Status::OK();
  };
  CQLS_RETURN_IF_ERROR(side("resize-shorter", resize_shorter));
  CQLS_RETURN_IF_ERROR(side("center-crop", center_crop));
  if (reencode == Reencode::kJpeg && (jpeg_quality < 1 || jpeg_quality > 100)) {
    return Status::InvalidArgument(fmt::format("JPEG quality {} is out of range (1..100)", jpeg_quality));
  }
  if (reencode != Reencode::kJpeg && jpeg_quality != 0) {
    return Status::InvalidArgument("a JPEG quality is only meaningful with reencode=jpeg:Q");
  }
  if (resize_shorter > 0 && center_crop > resize_shorter) {
    return Status::InvalidArgument(fmt::format(
        "center-crop {} is larger than resize-shorter {}: every image would be too small to crop", center_crop,
        resize_shorter));
  }
  if (resize_target && resize_shorter == 0 && center_crop == 0) {
    return Status::InvalidArgument("resize-target needs resize-shorter or center-crop (it gives targets their geometry)");
  }
  return Status::OK();
}

Status PreprocessSpec::ParseReencode(std::string_view v, PreprocessSpec* spec) {
  spec->jpeg_quality = 0;
  if (v == "keep") {
    spec->reencode = Reencode::kKeep;
  } else if (v == "png") {
    spec->reencode = Reencode::kPng;
  } else if (v.starts_with("jpeg:")) {
    spec->reencode = Reencode::kJpeg;
    CQLS_RETURN_IF_ERROR(ParseInt("reencode", v.substr(5), 1, 100, &spec->jpeg_quality));
  } else {
    return Status::InvalidArgument(fmt::format("reencode '{}': use keep, png or jpeg:Q (Q in 1..100)", v));
  }
  return Status::OK();
}

StatusOr<PreprocessSpec> PreprocessSpec::FromOptions(int resize_shorter, int center_crop, std::string_view reencode,
                                                     bool resize_target) {
  PreprocessSpec spec;
  spec.resize_shorter = resize_shorter;
  spec.center_crop = center_crop;
  spec.resize_target = resize_target;
  if (!reencode.empty()) CQLS_RETURN_IF_ERROR(ParseReencode(reencode, &spec));
  CQLS_RETURN_IF_ERROR(spec.Validate());
  return spec;
}

StatusOr<PreprocessSpec> PreprocessSpec::Parse(std::string_view text) {
  PreprocessSpec spec;
  bool seen[4] = {false, false, false, false};
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view step = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (comma != std::string_view::npos && text.empty()) {
      return Status::InvalidArgument("preprocessing ends with ','");
    }
    const size_t eq = step.find('=');
    const std::string_view key = step.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? std::string_view() : step.substr(eq + 1);
    const int which = key == "resize-shorter" ? 0 : key == "center-crop" ? 1 : key == "reencode" ? 2
                      : key == "resize-target" ? 3 : -1;
    if (which < 0) {
      return Status::InvalidArgument(fmt::format(
          "unknown preprocessing step '{}' (resize-shorter=N, center-crop=N, reencode=jpeg:Q|png|keep, resize-target)",
          step));
    }
    if (seen[which]) return Status::InvalidArgument(fmt::format("preprocessing step '{}' given twice", key));
    seen[which] = true;
    if ((which == 3) != (eq == std::string_view::npos)) {
      return Status::InvalidArgument(fmt::format("preprocessing step '{}': {}", step,
                                                 which == 3 ? "takes no value" : "needs a value (key=value)"));
    }
    if (which == 0) CQLS_RETURN_IF_ERROR(ParseInt(key, value, 1, kMaxPreprocessSide, &spec.resize_shorter));
    if (which == 1) CQLS_RETURN_IF_ERROR(ParseInt(key, value, 1, kMaxPreprocessSide, &spec.center_crop));
    if (which == 2) CQLS_RETURN_IF_ERROR(ParseReencode(value, &spec));
    if (which == 3) spec.resize_target = true;
  }
  CQLS_RETURN_IF_ERROR(spec.Validate());
  return spec;
}

StatusOr<PreprocessedImage> Apply(const PreprocessSpec& spec, std::span<const uint8_t> image,
                                  const PreprocessLimits& limits) {
  CQLS_ASSIGN_OR_RETURN(const Header hd, ReadHeader(image, limits.max_pixels));
  CQLS_ASSIGN_OR_RETURN(const Geometry g, Plan(spec, hd.width, hd.height, limits.max_pixels));
  PreprocessedImage r;
  r.source_width = hd.width;
  r.source_height = hd.height;
  r.width = g.out_w;
  r.height = g.out_h;
  const bool same_format = spec.reencode == Reencode::kKeep ||
                           (spec.reencode == Reencode::kPng && hd.format == ImageFormat::kPng);
  if (g.identity(hd.width, hd.height) && same_format) {
    r.bytes.assign(image.begin(), image.end());
    r.format = hd.format;
    return r;
  }
  Pixels px;
  if (hd.format == ImageFormat::kJpeg) {
    CQLS_RETURN_IF_ERROR(DecodeJpeg(image, JpegScale(hd, g, spec), &px));
  } else {
    CQLS_RETURN_IF_ERROR(DecodePng(image, &px));
  }
  if (!g.identity(px.width, px.height)) px = Resample(px, g, /*nearest=*/false);
  r.channels = px.channels;
  const bool jpeg = spec.reencode == Reencode::kJpeg ||
                    (spec.reencode == Reencode::kKeep && hd.format == ImageFormat::kJpeg);
  r.format = jpeg ? ImageFormat::kJpeg : ImageFormat::kPng;
  if (jpeg) {
    const int q = spec.reencode == Reencode::kJpeg ? spec.jpeg_quality : kKeepJpegQuality;
    CQLS_ASSIGN_OR_RETURN(r.bytes, EncodeJpeg(px, q));
  } else {
    CQLS_ASSIGN_OR_RETURN(r.bytes, EncodePng(px));
  }
  return r;
}

StatusOr<PreprocessedImage> ApplyToTarget(const PreprocessSpec& spec, std::span<const uint8_t> target, int image_w,
                                          int image_h, const PreprocessLimits& limits) {
  CQLS_ASSIGN_OR_RETURN(const Header hd, ReadHeader(target, limits.max_pixels));
  if (hd.width != image_w || hd.height != image_h) {
    return Status::InvalidArgument(fmt::format("target of {}x{} pixels does not match its image's {}x{} (resize-target)",
                                               hd.width, hd.height, image_w, image_h));
  }
  CQLS_ASSIGN_OR_RETURN(const Geometry g, Plan(spec, hd.width, hd.height, limits.max_pixels));
  Pixels px;
  if (hd.format == ImageFormat::kJpeg) {
    CQLS_RETURN_IF_ERROR(DecodeJpeg(target, 1, &px));
  } else {
    CQLS_RETURN_IF_ERROR(DecodePng(target, &px));
  }
  if (!g.identity(px.width, px.height)) px = Resample(px, g, /*nearest=*/true);
  PreprocessedImage r;
  r.source_width = hd.width;
  r.source_height = hd.height;
  r.width = px.width;
  r.height = px.height;
  r.channels = px.channels;
  r.format = ImageFormat::kPng;
  CQLS_ASSIGN_OR_RETURN(r.bytes, EncodePng(px));
  return r;
}

}  // namespace cqlstream::store
