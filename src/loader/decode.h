// Copyright (c) cqlstream authors.
//
// Image decoding for users without DALI: JPEG (TurboJPEG API of
// libjpeg-turbo) and PNG (libpng), grayscale or RGB, into uint8 HWC frames of
// one fixed size, so that a batch stacks into one contiguous NHWC buffer.
//
// Geometry (see PlanResize):
//   kCrop     the shorter side is resized to fit (H, W), the other side keeps
//             the aspect ratio, then the centre (H, W) is cut out
//             (torchvision's Resize + CenterCrop);
//   kStretch  the image is resized to exactly (H, W).
// Resampling is antialiased bilinear (a triangle filter whose support grows
// with the downscale factor), computed as Pillow's libImaging/Resample.c does
// for Image.resize(..., Image.BILINEAR): same coefficients, same 22-bit fixed
// point, a horizontal then a vertical pass with 8-bit rounding in between
// (store/resample.h, shared with ingest-time preprocessing).
// Pillow 13 runs the vertical pass first for some shapes, which moves a few
// pixels by one level; otherwise results equal Pillow's on the same decoded
// pixels. Frames whose decoded size already equals the output are copied
// unchanged.
//
// JPEG scaling: when the image is at least twice as large as the resized
// size on both axes, libjpeg decodes it at 1/2, 1/4 or 1/8 size directly (DCT
// scaling: much less work, and a proper low-pass), choosing the factor as
// Pillow's Image.draft() does: the largest of 8, 4, 2 not above
// min(w / resized_w, h / resized_h).
//
// Decoded-pixel bound: a header may claim any size up to 65535 x 65535
// (JPEG) or 2^31 x 2^31 (PNG), and the decoder would allocate for it before
// reading a single pixel. An image is only decoded when its decoded size
// (after JPEG DCT scaling, which never needs more than about 8x the output
// per side) is at most DecodeOptions::MaxPixels(): max_decode_pixels when
// set, else max(2^25, 64 x H x W), never above 2^28. Larger images fail
// with InvalidArgument naming both sizes (a per-sample error: the loader
// skips or raises as on_missing says), before any pixel memory is taken.
//
// Channels: 3 gives RGB (grayscale sources replicated), 1 gives luma: the Y
// plane of a colour JPEG (as libjpeg's grayscale output), or for colour PNGs
// Pillow's convert("L") (ITU-R 601-2: (19595 R + 38470 G + 7471 B + 2^15) >> 16).
// Alpha is dropped (not composited); palettes are expanded; 16-bit PNG
// samples keep their high byte.
//
// Thread-safety: the free functions are reentrant (each thread keeps its own
// decompressor and scratch memory). A DecodePool may be used from several
// threads at once (ParallelFor calls from different threads share the
// pool's workers). Ownership: callers own every input and output buffer;
// nothing is retained after a call returns.
#ifndef CQLSTREAM_LOADER_DECODE_H_
#define CQLSTREAM_LOADER_DECODE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "cqlstream/loader.h"
#include "cqlstream/status.h"
#include "store/image_check.h"
#include "util/mutex.h"

namespace cqlstream::loader {

enum class ResizeMode { kCrop, kStretch };
std::string_view ResizeModeName(ResizeMode m);  // "crop", "stretch"

struct DecodeOptions {
  int height = 0;    // output frame size, both >= 1
  int width = 0;
  int channels = 3;  // 1 (grayscale) or 3 (RGB)
  ResizeMode mode = ResizeMode::kCrop;
  bool jpeg_scaling = true;  // decode large JPEGs at 1/2, 1/4 or 1/8 size when it covers the output
  // Most pixels one image may decode to (after JPEG scaling); 0: automatic,
  // max(kDecodePixelsFloor, 64 x height x width), capped at kDecodePixelsMax.
  uint64_t max_decode_pixels = 0;

  static constexpr uint64_t kDecodePixelsFloor = uint64_t{1} << 25;  // 32 Mpx: 96 MiB RGB
  static constexpr uint64_t kDecodePixelsMax = uint64_t{1} << 28;

  size_t frame_bytes() const {
    return static_cast<size_t>(height) * static_cast<size_t>(width) * static_cast<size_t>(channels);
  }
  // The decoded-pixel bound in effect (see max_decode_pixels).
  uint64_t MaxPixels() const;
  // Sizes in [1, 16384], channels 1 or 3, max_decode_pixels 0 or in
  // [1, kDecodePixelsMax]. The error names the bad field.
  Status Validate() const;
};

// Formats and sniffing have one home, store/image_check.h (the ingest check
// and the decoder must never disagree on what an image is).
using ImageFormat = store::ImageFormat;
// From the file signature (store::SniffImage).
inline ImageFormat SniffFormat(std::span<const uint8_t> bytes) { return store::SniffImage(bytes); }

// A decoded image, HWC uint8.
struct Image {
  int height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;
};

// How one image of (src_h, src_w) becomes an output frame.
struct ResizePlan {
  int resized_h = 0, resized_w = 0;  // size of the (virtual) resized image
  int top = 0, left = 0;             // where the frame is cut out of it
  int jpeg_scale = 1;                // 1, 2, 4 or 8: JPEG decoded at 1/jpeg_scale
};
// kCrop: if H * w >= W * h the height fits (resized_h = H,
// resized_w = max(W, round(w * H / h))), else the width fits (likewise);
// round(a / b) is (2a + b) / (2b) in integers. top = (resized_h - H) / 2,
// left = (resized_w - W) / 2. kStretch: resized = (H, W), no cut.
// REQUIRES: src sizes >= 1, o.Validate().ok()
ResizePlan PlanResize(int src_h, int src_w, const DecodeOptions& o);

// Decodes a JPEG or PNG at full size (JPEG: at 1/scale, scale in {1,2,4,8},
// size ceil(w / scale) x ceil(h / scale)) into `channels` (1 or 3).
// Errors: Corruption (undecodable data), Unsupported (WebP, CMYK JPEG, an
// unknown format), InvalidArgument (a decoded size above max_pixels, checked
// on the header before any pixel memory is allocated).
Status DecodeImage(std::span<const uint8_t> bytes, int channels, int scale, Image* out,
                   uint64_t max_pixels = DecodeOptions::kDecodePixelsMax);

// Pillow-exact bilinear resampling of `src` to (resized_h, resized_w),
// writing only the window [top, top + out_h) x [left, left + out_w) to `out`
// (out_h * out_w * src.channels bytes, HWC, rows packed).
// REQUIRES: the window lies inside the resized image.
void ResizeWindow(const Image& src, int resized_h, int resized_w, int top, int left, int out_h, int out_w,
                  uint8_t* out);

// Decode + resize + crop of one image into `out` (o.frame_bytes() bytes).
Status DecodeTo(std::span<const uint8_t> bytes, const DecodeOptions& o, std::span<uint8_t> out);

// A fixed set of threads that run index ranges in parallel; the calling
// thread works too, so a pool of N threads starts N - 1 workers and a pool
// of 1 runs everything on the caller.
class DecodePool {
 public:
  // threads <= 0: std::thread::hardware_concurrency().
  explicit DecodePool(int threads = 0);
  ~DecodePool();  // joins the workers; REQUIRES: no ParallelFor running
  DecodePool(const DecodePool&) = delete;
  DecodePool& operator=(const DecodePool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(i) for every i in [0, n) and returns when all have run. Every
  // index runs even when some fail; the error of the smallest failing index
  // is returned.
  Status ParallelFor(size_t n, const std::function<Status(size_t)>& fn);

 private:
  struct Job;
  static void Work(Job& job);
  void WorkerLoop();

  Mutex mu_;
  CondVar cv_;
  std::deque<std::shared_ptr<Job>> jobs_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

// Decodes the images of a batch (for each sample its image bytes, i.e. the
// payload prefix of image_sizes[i]) into `out`, batch.size() frames of
// o.frame_bytes() bytes, in sample order. Errors name the sample key
// ("sample 0:17: corrupt JPEG data: ..."); the first failing sample's error
// is returned. With `per_sample`, it receives every sample's Status (the
// frames of failed samples are left undefined). `stop` (may be null;
// borrowed for the call): once it is set, the samples not yet begun are not
// decoded and fail with Cancelled("interrupted").
// REQUIRES: out.size() >= batch.size() * o.frame_bytes()
Status DecodeBatch(DecodePool& pool, const Batch& batch, const DecodeOptions& o, std::span<uint8_t> out,
                   std::vector<Status>* per_sample = nullptr, const std::atomic<bool>* stop = nullptr);

}  // namespace cqlstream::loader

#endif  // CQLSTREAM_LOADER_DECODE_H_
