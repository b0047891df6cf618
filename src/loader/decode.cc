// Copyright (c) cqlstream authors.
#include "loader/decode.h"

#include <fmt/format.h>
#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <atomic>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "store/resample.h"

namespace cqlstream::loader {
namespace {

constexpr int kMaxSide = 16384;

Status TooLarge(uint64_t w, uint64_t h, int scale, uint64_t decoded, uint64_t max_pixels) {
  const std::string at = scale > 1 ? fmt::format(" (decoded at 1/{}: {} pixels)", scale, decoded) : "";
  if (scale <= 1) (void)decoded;
  return Status::InvalidArgument(fmt::format(
      "image of {}x{} pixels{} exceeds the decode bound of {} pixels (decode option max_decode_pixels)", w, h, at,
      max_pixels));
}

// ---------------------------------------------------------------------------
// JPEG

Status DecodeJpeg(std::span<const uint8_t> b, int channels, int scale, uint64_t max_pixels, Image* out) {
  // The header as the ingest check reads it (store::ReadJpegHeader), so that
  // every JPEG the ingest accepted is one this decoder reads.
  CQLS_ASSIGN_OR_RETURN(const store::JpegHeader hd, store::ReadJpegHeader(b));
  if (hd.cmyk()) return Status::Unsupported("CMYK JPEG images cannot be decoded to RGB or grayscale");
  const int w = hd.width, h = hd.height;
  if (hd.multi_scan && scale > 1 && static_cast<uint64_t>(w) * static_cast<uint64_t>(h) > max_pixels) {
    // libjpeg keeps a multi-scan image's coefficients at full size whatever
    // the scaling (2 bytes per sample): a crafted 43077x16976 progressive
    // JPEG took 2.2 GB for a 1/8 decode.
    return Status::InvalidArgument(fmt::format(
        "progressive (multi-scan) JPEG of {}x{} pixels exceeds the decode bound of {} pixels (decode option "
        "max_decode_pixels): its decoder holds the full-size image whatever the scaling",
        w, h, max_pixels));
  }
  const tjscalingfactor sf{1, scale};
  const int sw = TJSCALED(w, sf), sh = TJSCALED(h, sf);
  if (static_cast<uint64_t>(sw) * static_cast<uint64_t>(sh) > max_pixels) {
    return TooLarge(static_cast<uint64_t>(w), static_cast<uint64_t>(h), scale,
                    static_cast<uint64_t>(sw) * static_cast<uint64_t>(sh), max_pixels);
  }
  out->width = sw;
  out->height = sh;
  out->channels = channels;
  out->pixels.resize(static_cast<size_t>(sw) * static_cast<size_t>(sh) * static_cast<size_t>(channels));
  const int pf = channels == 1 ? TJPF_GRAY : TJPF_RGB;
  // The thread's decompressor, shared with the ingest check; warnings leave
  // a usable image (store::DecompressJpeg).
  return store::DecompressJpeg(b, out->pixels.data(), sw, sh, pf, TJFLAG_ACCURATEDCT);
}

// ---------------------------------------------------------------------------
// PNG (the classic API: the simplified one composites alpha and converts to
// grayscale in linear light, which is not what Pillow does)

struct PngSource {
  const uint8_t* data;
  size_t size;
  size_t pos;
};

struct PngError {
  char message[200];
};

void PngRead(png_structp png, png_bytep out, size_t len) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (src->size - src->pos < len) png_error(png, "truncated PNG data");
  std::memcpy(out, src->data + src->pos, len);
  src->pos += len;
}

[[noreturn]] void PngFail(png_structp png, png_const_charp msg) {
  auto* e = static_cast<PngError*>(png_get_error_ptr(png));
  std::snprintf(e->message, sizeof e->message, "%s", msg);
  png_longjmp(png, 1);
}

void PngWarn(png_structp, png_const_charp) {}

// Reads the PNG into `pixels` as 8-bit gray (1) or RGB (3) per the source;
// returns the source's channel count, 0 on error (message in `err`). No
// object with a destructor lives between setjmp and a longjmp.
// A header above `max_pixels` returns 0 with *w_out, *h_out set and an
// empty err->message (the caller reports the sizes).
int ReadPng(std::span<const uint8_t> b, uint64_t max_pixels, std::vector<uint8_t>* pixels,
            std::vector<png_bytep>* rows, int* w_out, int* h_out, PngError* err) {
  PngSource src{b.data(), b.size(), 0};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, err, PngFail, PngWarn);
  if (png == nullptr) {
    std::snprintf(err->message, sizeof err->message, "cannot create a libpng reader");
    return 0;
  }
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    std::snprintf(err->message, sizeof err->message, "cannot create a libpng reader");
    return 0;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return 0;
  }
  png_set_read_fn(png, &src, PngRead);
  png_read_info(png, info);
  const png_uint_32 w = png_get_image_width(png, info);
  const png_uint_32 h = png_get_image_height(png, info);
  if (w == 0 || h == 0) png_error(png, "image size out of range");
  if (static_cast<uint64_t>(w) * h > max_pixels) {
    *w_out = static_cast<int>(std::min<png_uint_32>(w, 0x7fffffff));
    *h_out = static_cast<int>(std::min<png_uint_32>(h, 0x7fffffff));
    err->message[0] = '\0';
    png_destroy_read_struct(&png, &info, nullptr);
    return 0;
  }
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  if (depth == 16) png_set_strip_16(png);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (color & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const int ch = png_get_channels(png, info);
  if (ch != 1 && ch != 3) png_error(png, "unexpected channel count");
  const size_t stride = static_cast<size_t>(w) * static_cast<size_t>(ch);
  pixels->resize(stride * h);
  rows->resize(h);
  for (png_uint_32 y = 0; y < h; ++y) (*rows)[y] = pixels->data() + stride * y;
  png_read_image(png, rows->data());
  png_destroy_read_struct(&png, &info, nullptr);
  *w_out = static_cast<int>(w);
  *h_out = static_cast<int>(h);
  return ch;
}

Status DecodePng(std::span<const uint8_t> b, int channels, uint64_t max_pixels, Image* out) {
  thread_local std::vector<uint8_t> scratch;
  thread_local std::vector<png_bytep> rows;
  PngError err{};
  int w = 0, h = 0;
  const int src_ch = ReadPng(b, max_pixels, &scratch, &rows, &w, &h, &err);
  if (src_ch == 0 && err.message[0] == '\0' && w > 0 && h > 0) {
    return TooLarge(static_cast<uint64_t>(w), static_cast<uint64_t>(h), 1,
                    static_cast<uint64_t>(w) * static_cast<uint64_t>(h), max_pixels);
  }
  if (src_ch == 0) return Status::Corruption(fmt::format("corrupt PNG data: {}", err.message));
  out->width = w;
  out->height = h;
  out->channels = channels;
  const size_t n = static_cast<size_t>(w) * static_cast<size_t>(h);
  out->pixels.resize(n * static_cast<size_t>(channels));
  uint8_t* d = out->pixels.data();
  const uint8_t* s = scratch.data();
  if (src_ch == channels) {
    std::memcpy(d, s, n * static_cast<size_t>(channels));
  } else if (channels == 3) {  // gray -> RGB
    for (size_t i = 0; i < n; ++i) d[3 * i] = d[3 * i + 1] = d[3 * i + 2] = s[i];
  } else {  // RGB -> L, as Pillow's rgb2l
    for (size_t i = 0; i < n; ++i) {
      const uint32_t l = s[3 * i] * 19595u + s[3 * i + 1] * 38470u + s[3 * i + 2] * 7471u + 0x8000u;
      d[i] = static_cast<uint8_t>(l >> 16);
    }
  }
  return Status::OK();
}

}  // namespace

std::string_view ResizeModeName(ResizeMode m) { return m == ResizeMode::kCrop ? "crop" : "stretch"; }

Status DecodeOptions::Validate() const {
  if (height < 1 || height > kMaxSide || width < 1 || width > kMaxSide) {
    return Status::InvalidArgument(
        fmt::format("decode size ({}, {}) must be within 1..{} on both sides", height, width, kMaxSide));
  }
  if (channels != 1 && channels != 3) {
    return Status::InvalidArgument(fmt::format("decode channels must be 1 or 3, got {}", channels));
  }
  if (max_decode_pixels > kDecodePixelsMax) {
    return Status::InvalidArgument(fmt::format("max_decode_pixels must be at most {} (2^28), got {}",
                                               kDecodePixelsMax, max_decode_pixels));
  }
  return Status::OK();
}

uint64_t DecodeOptions::MaxPixels() const {
  if (max_decode_pixels != 0) return std::min(max_decode_pixels, kDecodePixelsMax);
  const uint64_t relative = 64 * static_cast<uint64_t>(std::max(height, 0)) * static_cast<uint64_t>(std::max(width, 0));
  return std::min(std::max(kDecodePixelsFloor, relative), kDecodePixelsMax);
}

ResizePlan PlanResize(int src_h, int src_w, const DecodeOptions& o) {
  ResizePlan p;
  const int64_t H = o.height, W = o.width, h = src_h, w = src_w;
  if (o.mode == ResizeMode::kStretch) {
    p.resized_h = o.height;
    p.resized_w = o.width;
  } else if (H * w >= W * h) {  // H / h >= W / w: the height fits
    p.resized_h = o.height;
    p.resized_w = static_cast<int>(std::max<int64_t>(W, (2 * w * H + h) / (2 * h)));
  } else {
    p.resized_w = o.width;
    p.resized_h = static_cast<int>(std::max<int64_t>(H, (2 * h * W + w) / (2 * w)));
  }
  p.top = (p.resized_h - o.height) / 2;
  p.left = (p.resized_w - o.width) / 2;
  if (o.jpeg_scaling) {
    const int s = std::min(src_w / p.resized_w, src_h / p.resized_h);
    p.jpeg_scale = s >= 8 ? 8 : s >= 4 ? 4 : s >= 2 ? 2 : 1;
  }
  return p;
}

Status DecodeImage(std::span<const uint8_t> bytes, int channels, int scale, Image* out, uint64_t max_pixels) {
  if (channels != 1 && channels != 3) return Status::InvalidArgument("channels must be 1 or 3");
  switch (SniffFormat(bytes)) {
    case ImageFormat::kJpeg:
      return DecodeJpeg(bytes, channels, scale, max_pixels, out);
    case ImageFormat::kPng:
      return DecodePng(bytes, channels, max_pixels, out);
    case ImageFormat::kWebp:
      return Status::Unsupported("WebP images cannot be decoded here (read raw bytes with decode=None)");
    case ImageFormat::kUnknown:
      break;
  }
  return Status::Unsupported(
      fmt::format("not a JPEG or PNG image ({} bytes{})", bytes.size(), bytes.empty() ? "" : ", unknown signature"));
}

void ResizeWindow(const Image& src, int resized_h, int resized_w, int top, int left, int out_h, int out_w,
                  uint8_t* out) {
  const store::PixelView view{src.pixels.data(), src.height, src.width, src.channels};
  store::ResampleWindow(view, resized_h, resized_w, top, left, out_h, out_w, out);
}

Status DecodeTo(std::span<const uint8_t> bytes, const DecodeOptions& o, std::span<uint8_t> out) {
  if (out.size() < o.frame_bytes()) return Status::InvalidArgument("decode output buffer too small");
  thread_local Image img;
  int scale = 1;
  if (o.jpeg_scaling && SniffFormat(bytes) == ImageFormat::kJpeg) {
    // The plan needs the full size, which the header gives cheaply.
    const StatusOr<store::JpegHeader> hd = store::ReadJpegHeader(bytes);
    if (hd.ok()) {
      const int w = hd->width, h = hd->height;
      scale = PlanResize(h, w, o).jpeg_scale;
      if (scale > 1) {
        // The geometry is planned on the full size; resample from the scaled decode.
        CQLS_RETURN_IF_ERROR(DecodeImage(bytes, o.channels, scale, &img, o.MaxPixels()));
        const ResizePlan p = PlanResize(h, w, o);
        ResizeWindow(img, p.resized_h, p.resized_w, p.top, p.left, o.height, o.width, out.data());
        return Status::OK();
      }
    }
  }
  CQLS_RETURN_IF_ERROR(DecodeImage(bytes, o.channels, 1, &img, o.MaxPixels()));
  const ResizePlan p = PlanResize(img.height, img.width, o);
  ResizeWindow(img, p.resized_h, p.resized_w, p.top, p.left, o.height, o.width, out.data());
  return Status::OK();
}

// ---------------------------------------------------------------------------
// DecodePool

struct DecodePool::Job {
  size_t n = 0;
  const std::function<Status(size_t)>* fn = nullptr;
  std::atomic<size_t> next{0};
  Mutex mu;
  CondVar cv;
  size_t finished GUARDED_BY(mu) = 0;
  size_t error_index GUARDED_BY(mu) = std::numeric_limits<size_t>::max();
  Status error GUARDED_BY(mu);
};

DecodePool::DecodePool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

DecodePool::~DecodePool() {
  {
    MutexLock l(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  for (auto& t : workers_) t.join();
}

void DecodePool::Work(Job& job) {
  for (;;) {
    const size_t i = job.next.fetch_add(1);
    if (i >= job.n) return;
    Status s = (*job.fn)(i);
    MutexLock l(&job.mu);
    if (!s.ok() && i < job.error_index) {
      job.error_index = i;
      job.error = std::move(s);
    }
    if (++job.finished == job.n) job.cv.SignalAll();
  }
}

void DecodePool::WorkerLoop() {
  MutexLock l(&mu_);
  for (;;) {
    while (!stop_ && jobs_.empty()) cv_.Wait(&mu_);
    if (stop_) return;
    std::shared_ptr<Job> job = jobs_.front();
    if (job->next.load() >= job->n) {  // every index taken: retire it
      jobs_.pop_front();
      continue;
    }
    l.Unlock();
    Work(*job);
    l.Lock();
    if (!jobs_.empty() && jobs_.front() == job) jobs_.pop_front();
  }
}

Status DecodePool::ParallelFor(size_t n, const std::function<Status(size_t)>& fn) {
  if (n == 0) return Status::OK();
  auto job = std::make_shared<Job>();
  job->n = n;
  job->fn = &fn;
  if (!workers_.empty() && n > 1) {
    {
      MutexLock l(&mu_);
      jobs_.push_back(job);
    }
    cv_.SignalAll();
  }
  Work(*job);
  MutexLock l(&job->mu);
  while (job->finished != job->n) job->cv.Wait(&job->mu);
  // Workers may still hold the shared_ptr; they never touch `fn` again since
  // every index is taken.
  return job->error;
}

Status DecodeBatch(DecodePool& pool, const Batch& batch, const DecodeOptions& o, std::span<uint8_t> out,
                   std::vector<Status>* per_sample, const std::atomic<bool>* stop) {
  CQLS_RETURN_IF_ERROR(o.Validate());
  const size_t frame = o.frame_bytes();
  if (out.size() < batch.size() * frame) return Status::InvalidArgument("decode output buffer too small");
  if (per_sample != nullptr) per_sample->assign(batch.size(), Status::OK());
  const auto data = batch.data();
  return pool.ParallelFor(batch.size(), [&](size_t i) -> Status {
    const auto bytes = data.subspan(batch.offsets[i], batch.image_sizes[i]);
    const bool stopped = stop != nullptr && stop->load(std::memory_order_relaxed);
    Status s = stopped ? Status::Cancelled("interrupted") : DecodeTo(bytes, o, out.subspan(i * frame, frame));
    if (!s.ok()) s = s.WithContext(fmt::format("sample {}", FormatKey(batch.keys[i])));
    if (per_sample != nullptr) (*per_sample)[i] = s;  // distinct elements per index
    return s;
  });
}

}  // namespace cqlstream::loader
