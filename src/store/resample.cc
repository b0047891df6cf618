// Copyright (c) cqlstream authors.
#include "store/resample.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

namespace cqlstream::store {
namespace {

// After Pillow's libImaging/Resample.c (bilinear filter, 8 bits per channel).
constexpr int kPrecisionBits = 32 - 8 - 2;

double Triangle(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

struct Coeffs {
  int ksize = 0;
  std::vector<int> first;    // first input index of output i (relative to the window)
  std::vector<int> count;    // input taps of output i
  std::vector<int32_t> k;    // ksize fixed-point weights per output
};

// Coefficients for outputs [from, from + n) of a resize of in_size -> out_size.
Coeffs Precompute(int in_size, int out_size, int from, int n) {
  Coeffs c;
  const double scale = static_cast<double>(in_size) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = 1.0 * filterscale;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(static_cast<size_t>(n));
  c.count.resize(static_cast<size_t>(n));
  c.k.assign(static_cast<size_t>(n) * static_cast<size_t>(c.ksize), 0);
  std::vector<double> w(static_cast<size_t>(c.ksize));
  for (int i = 0; i < n; ++i) {
    const int xx = from + i;
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    xmax = std::min(xmax, c.ksize);
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      w[static_cast<size_t>(x)] = Triangle((x + xmin - center + 0.5) * ss);
      ww += w[static_cast<size_t>(x)];
    }
    int32_t* k = &c.k[static_cast<size_t>(i) * static_cast<size_t>(c.ksize)];
    for (int x = 0; x < xmax; ++x) {
      const double v = ww != 0.0 ? w[static_cast<size_t>(x)] / ww : w[static_cast<size_t>(x)];
      k[x] = v < 0 ? static_cast<int32_t>(-0.5 + v * (1 << kPrecisionBits))
                   : static_cast<int32_t>(0.5 + v * (1 << kPrecisionBits));
    }
    c.first[static_cast<size_t>(i)] = xmin;
    c.count[static_cast<size_t>(i)] = xmax;
  }
  return c;
}

inline uint8_t Clip8(int32_t v) {
  if (v >= (1 << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return static_cast<uint8_t>(v >> kPrecisionBits);
}

// Horizontal pass: rows [y0, y0 + rows) of src (width sw) into dst (width n).
void Horizontal(const uint8_t* src, int sw, int y0, int rows, int ch, const Coeffs& c, uint8_t* dst) {
  const int n = static_cast<int>(c.first.size());
  for (int y = 0; y < rows; ++y) {
    const uint8_t* in = src + (static_cast<size_t>(y0 + y) * static_cast<size_t>(sw)) * static_cast<size_t>(ch);
    uint8_t* out = dst + static_cast<size_t>(y) * static_cast<size_t>(n) * static_cast<size_t>(ch);
    for (int i = 0; i < n; ++i) {
      const int32_t* k = &c.k[static_cast<size_t>(i) * static_cast<size_t>(c.ksize)];
      const uint8_t* p = in + static_cast<size_t>(c.first[static_cast<size_t>(i)]) * static_cast<size_t>(ch);
      const int cnt = c.count[static_cast<size_t>(i)];
      for (int b = 0; b < ch; ++b) {
        int32_t ss = 1 << (kPrecisionBits - 1);
        for (int x = 0; x < cnt; ++x) ss += p[x * ch + b] * k[x];
        out[i * ch + b] = Clip8(ss);
      }
    }
  }
}

// Vertical pass: src rows (width w, first row = input row `y0`) into dst.
void Vertical(const uint8_t* src, int w, int y0, int ch, const Coeffs& c, uint8_t* dst) {
  const int n = static_cast<int>(c.first.size());
  const size_t stride = static_cast<size_t>(w) * static_cast<size_t>(ch);
  for (int i = 0; i < n; ++i) {
    const int32_t* k = &c.k[static_cast<size_t>(i) * static_cast<size_t>(c.ksize)];
    const uint8_t* base = src + static_cast<size_t>(c.first[static_cast<size_t>(i)] - y0) * stride;
    const int cnt = c.count[static_cast<size_t>(i)];
    uint8_t* out = dst + static_cast<size_t>(i) * stride;
    for (size_t x = 0; x < stride; ++x) {
      int32_t ss = 1 << (kPrecisionBits - 1);
      for (int y = 0; y < cnt; ++y) ss += base[static_cast<size_t>(y) * stride + x] * k[y];
      out[x] = Clip8(ss);
    }
  }
}

// Rows [y0, y0 + rows) of columns [left, left + out_w) of src into dst.
void CopyWindow(const PixelView& src, int y0, int rows, int left, int out_w, uint8_t* dst) {
  const size_t ch = static_cast<size_t>(src.channels);
  const size_t out_stride = static_cast<size_t>(out_w) * ch;
  for (int y = 0; y < rows; ++y) {
    const uint8_t* in =
        src.pixels + (static_cast<size_t>(y0 + y) * static_cast<size_t>(src.width) + static_cast<size_t>(left)) * ch;
    std::memcpy(dst + static_cast<size_t>(y) * out_stride, in, out_stride);
  }
}

}  // namespace

void ResampleWindow(const PixelView& src, int resized_h, int resized_w, int top, int left, int out_h, int out_w,
                    uint8_t* out) {
  const int ch = src.channels;
  const bool need_h = resized_w != src.width;
  const bool need_v = resized_h != src.height;
  const size_t out_stride = static_cast<size_t>(out_w) * static_cast<size_t>(ch);
  thread_local std::vector<uint8_t> tmp;

  if (!need_h && !need_v) {
    CopyWindow(src, top, out_h, left, out_w, out);
    return;
  }
  Coeffs cv;
  int y0 = top, rows = out_h;  // input rows the vertical pass reads
  if (need_v) {
    cv = Precompute(src.height, resized_h, top, out_h);
    y0 = cv.first.front();
    const int last = cv.first.back() + cv.count.back();
    rows = last - y0;
  }
  if (need_h) {
    const Coeffs c = Precompute(src.width, resized_w, left, out_w);
    uint8_t* dst = out;
    if (need_v) {
      tmp.resize(static_cast<size_t>(rows) * out_stride);
      dst = tmp.data();
    }
    Horizontal(src.pixels, src.width, y0, rows, ch, c, dst);
    if (!need_v) return;
  } else {
    // Only a vertical resize: the columns of the window, rows [y0, y0 + rows).
    tmp.resize(static_cast<size_t>(rows) * out_stride);
    CopyWindow(src, y0, rows, left, out_w, tmp.data());
  }
  Vertical(tmp.data(), out_w, y0, ch, cv, out);
}

void NearestWindow(const PixelView& src, int resized_h, int resized_w, int top, int left, int out_h, int out_w,
                   uint8_t* out) {
  const size_t ch = static_cast<size_t>(src.channels);
  // Source column of each output column (in 64 bits: in * (x + 0.5) may pass 2^31).
  std::vector<size_t> cols(static_cast<size_t>(out_w));
  for (int x = 0; x < out_w; ++x) {
    const int64_t sx = ((2 * int64_t{left + x} + 1) * src.width) / (2 * int64_t{resized_w});
    cols[static_cast<size_t>(x)] = static_cast<size_t>(std::min<int64_t>(sx, src.width - 1));
  }
  for (int y = 0; y < out_h; ++y) {
    const int64_t sy = std::min<int64_t>(((2 * int64_t{top + y} + 1) * src.height) / (2 * int64_t{resized_h}),
                                         src.height - 1);
    const uint8_t* row = src.pixels + static_cast<size_t>(sy) * static_cast<size_t>(src.width) * ch;
    uint8_t* o = out + static_cast<size_t>(y) * static_cast<size_t>(out_w) * ch;
    for (int x = 0; x < out_w; ++x) std::memcpy(o + static_cast<size_t>(x) * ch, row + cols[static_cast<size_t>(x)] * ch, ch);
  }
}

}  // namespace cqlstream::store
