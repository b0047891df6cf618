// Copyright (c) cqlstream authors.
//
// libFuzzer target for the .npy decoder (loader::ParseNpy: magic, version,
// header length, the header's dict literal, dtype, shape, data size,
// big-endian swapping).
//
// Checked beyond "no crash, no leak, no UB":
//  - an error is InvalidArgument and its message starts with ".npy: ";
//  - an accepted file has a version of 1, 2 or 3, at most kNpyMaxDims
//    dimensions, and data() of exactly num_items() x item size bytes, which
//    lies inside the input (little-endian) or has the input's data size
//    (byte-swapped); swapping it back gives the input's data tail;
//  - the same array written out again in numpy's canonical layout parses to
//    the same dtype, shape, order and bytes (the parser reads what numpy
//    writes for everything it accepts).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "loader/npy.h"

namespace {

using cqlstream::loader::NpyArray;

std::vector<uint8_t> Canonical(const NpyArray& a) {
  static const char* kDescr[] = {"|b1", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2",
                                 "<u4", "<u8", "<f2", "<f4", "<f8", "<c8", "<c16"};
  std::string h = std::string("{'descr': '") + kDescr[static_cast<int>(a.dtype)] +
                  "', 'fortran_order': " + (a.fortran_order ? "True" : "False") + ", 'shape': (";
  for (uint64_t d : a.shape) h += std::to_string(d) + ", ";
  h += "), }";
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(h.size() & 0xff);
  out += static_cast<char>(h.size() >> 8);
  out += h;
  out.append(reinterpret_cast<const char*>(a.data().data()), a.data().size());
  return {out.begin(), out.end()};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cqlstream;
  using namespace cqlstream::loader;
  const std::span<const uint8_t> in(data, size);
  auto a = ParseNpy(in);
  if (!a.ok()) {
    if (a.status().code() != Status::Code::kInvalidArgument) std::abort();
    if (a.status().message().rfind(".npy: ", 0) != 0) std::abort();
    return 0;
  }
  if (a->version_major < 1 || a->version_major > 3) std::abort();
  if (a->shape.size() > kNpyMaxDims) std::abort();
  const size_t item = NpyItemSize(a->dtype);
  const std::span<const uint8_t> items = a->data();
  if (items.size() != a->num_items() * item || items.size() > size) std::abort();
  const std::span<const uint8_t> tail = in.subspan(size - items.size());
  if (a->byte_swapped) {
    if (item == 1) std::abort();
    const size_t unit = (a->dtype == NpyDtype::kComplex64 || a->dtype == NpyDtype::kComplex128) ? item / 2 : item;
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i] != tail[(i / unit) * unit + unit - 1 - i % unit]) std::abort();
    }
  } else if (items.data() != tail.data() && !items.empty()) {
    std::abort();
  }
  const std::vector<uint8_t> again_bytes = Canonical(*a);
  auto again = ParseNpy(again_bytes);
  if (!again.ok() || again->dtype != a->dtype || again->shape != a->shape ||
      again->fortran_order != a->fortran_order || again->byte_swapped ||
      !std::equal(again->data().begin(), again->data().end(), items.begin(), items.end())) {
    std::abort();
  }
  return 0;
}
