// Copyright (c) cqlstream authors.
//
// Resampling of 8-bit interleaved pixels (HWC, any channel count): the one
// resampler of the project, shared by the loader's decoder
// (loader/decode.h) and ingest-time preprocessing (store/preprocess.h).
//
// Bilinear (ResampleWindow) is antialiased: a triangle filter whose support
// grows with the downscale factor, computed as Pillow's libImaging/Resample.c
// does for Image.resize(..., Image.BILINEAR) — same coefficients, same
// 22-bit fixed point, a horizontal then a vertical pass with 8-bit rounding
// in between. Channels are filtered independently (alpha is not
// premultiplied, as Pillow's RGBA mode). It is ours rather than a library's
// because no Debian library gives these exact coefficients (so that what is
// resized at ingest or in the loader equals what torchvision's PIL path
// gives), and it is about 150 lines.
//
// Nearest (NearestWindow) picks, for output pixel x, the source pixel
// floor((x + 0.5) * in / out) (Pillow's Image.NEAREST): no new values are
// made, which is what label images (segmentation masks) need.
//
// Both compute only a window [top, top + out_h) x [left, left + out_w) of the
// virtual resized image (resized_h, resized_w), so resize + crop never
// materialises the whole resized image.
//
// Thread-safety: reentrant (each thread keeps its own scratch memory).
// Ownership: the caller owns src and out; nothing is retained.
#ifndef CQLSTREAM_STORE_RESAMPLE_H_
#define CQLSTREAM_STORE_RESAMPLE_H_

#include <cstdint>

namespace cqlstream::store {

// A view of interleaved 8-bit pixels, rows packed (stride = width * channels).
struct PixelView {
  const uint8_t* pixels = nullptr;
  int height = 0, width = 0, channels = 0;
};

// Pillow-exact bilinear resampling of `src` to (resized_h, resized_w),
// writing the window to `out` (out_h * out_w * src.channels bytes, rows
// packed). A window of an unresized image is a plain copy.
// REQUIRES: the window lies inside the resized image; all sizes >= 1.
void ResampleWindow(const PixelView& src, int resized_h, int resized_w, int top, int left, int out_h, int out_w,
                    uint8_t* out);

// Nearest-neighbour resampling, same window contract as ResampleWindow.
void NearestWindow(const PixelView& src, int resized_h, int resized_w, int top, int left, int out_h, int out_w,
                   uint8_t* out);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_RESAMPLE_H_
