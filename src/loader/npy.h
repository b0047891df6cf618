// Copyright (c) cqlstream authors.
//
// A decoder for NumPy's .npy format (format versions 1.0, 2.0 and 3.0, as
// numpy.lib.format writes them), for samples stored as .npy blobs
// (decode='npy' in Python). Layout:
//
//   npy      := magic: "\x93NUMPY", major: u8, minor: u8,
//               header_len: u16 LE (1.0) | u32 LE (2.0, 3.0),
//               header: header_len bytes, data
//   header   := a Python dict literal with exactly the keys 'descr',
//               'fortran_order' and 'shape', padded with spaces, ending in '\n'
//   data     := product(shape) x itemsize bytes, nothing more or less
//
// What is accepted (anything else fails with InvalidArgument naming the
// problem, never a crash, hang or allocation sized by the input):
//   descr          '<', '>' or '|' and one of b1 (bool), i1 i2 i4 i8,
//                  u1 u2 u4 u8, f2 f4 f8, c8 c16. Object ('O'), string,
//                  datetime, long double and structured (list) dtypes are
//                  refused by name.
//   byte order     little-endian data is a view into the input; big-endian
//                  data ('>' with more than one byte per item) is byte-swapped
//                  into a buffer the NpyArray owns (each half of a complex on
//                  its own), so data() is always native little-endian.
//   fortran_order  reported, not refused: data() keeps the file's order,
//                  column-major when fortran_order is true (numpy reads such a
//                  file into an F-contiguous array).
//   shape          0 to kNpyMaxDims dimensions, each below 2^63; the product
//                  of the non-zero dimensions times the item size must fit in
//                  int64 (as numpy requires); shape () is one item.
//   header         at most kNpyMaxHeaderBytes (numpy's own reading limit),
//                  ASCII only (all numpy writes for the dtypes above); strings
//                  in single or double quotes without escapes; integers in
//                  decimal (a Python 2 'L' suffix allowed, as numpy allows);
//                  duplicate and unknown keys refused.
//
// Why hand-written: no maintained Debian C/C++ library parses just the .npy
// header into a caller's buffer without exceptions or iostreams (xtensor's
// xnpy throws and owns the data; cnpy is not packaged and aborts on bad
// input). The header is a few hundred bytes of a fixed dict shape, so a strict
// parser of exactly that shape is smaller than adapting either. It is fuzzed
// by tests/fuzz/npy_fuzz.cc.
//
// Ownership: ParseNpy does not keep `bytes`. The returned NpyArray's data()
// points into `bytes` (little-endian and one-byte data) or into the
// NpyArray's own buffer (swapped big-endian data): it is valid while both the
// input and the NpyArray live. The data is not necessarily aligned for its
// dtype (the input may sit anywhere): read it with memcpy.
//
// Thread-safety: ParseNpy is reentrant; an NpyArray is a value (const use
// from several threads is safe).
#ifndef CQLSTREAM_LOADER_NPY_H_
#define CQLSTREAM_LOADER_NPY_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "cqlstream/status.h"

namespace cqlstream::loader {

inline constexpr size_t kNpyMaxDims = 32;
inline constexpr size_t kNpyMaxHeaderBytes = 10000;

enum class NpyDtype : uint8_t {
  kBool,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
  kFloat16,
  kFloat32,
  kFloat64,
  kComplex64,
  kComplex128,
};

// NumPy's name of the dtype ("bool", "int8", ..., "complex128").
std::string_view NpyDtypeName(NpyDtype d);
// Bytes per item (1 for bool).
size_t NpyItemSize(NpyDtype d);

class NpyArray {
 public:
  NpyDtype dtype = NpyDtype::kUInt8;
  std::vector<uint64_t> shape;  // empty: a 0-d array (one item)
  bool fortran_order = false;   // data() is column-major when true
  uint8_t version_major = 1;    // the file's format version (1, 2 or 3)
  bool byte_swapped = false;    // the file was big-endian; data() is swapped

  // product(shape) (1 for a 0-d array).
  uint64_t num_items() const;
  // The items, native little-endian, num_items() x NpyItemSize(dtype) bytes.
  std::span<const uint8_t> data() const { return byte_swapped ? std::span<const uint8_t>(owned_) : view_; }

 private:
  friend StatusOr<NpyArray> ParseNpy(std::span<const uint8_t> bytes);
  std::span<const uint8_t> view_;
  std::vector<uint8_t> owned_;
};

// Parses a whole .npy file held in `bytes` (see the top of this file).
StatusOr<NpyArray> ParseNpy(std::span<const uint8_t> bytes);

}  // namespace cqlstream::loader

#endif  // CQLSTREAM_LOADER_NPY_H_
