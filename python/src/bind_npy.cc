// Copyright (c) cqlstream authors.
//
// decode_npy: parses a .npy blob with loader::ParseNpy and returns a numpy
// array of its dtype and shape. The items are copied into memory the array
// owns (a capsule frees it with the last reference), so the array is
// writable and independent of the bytes object; big-endian files come back
// in native byte order (ParseNpy swaps them), Fortran-order files as
// F-contiguous arrays (as numpy.load gives them). The GIL is released while
// parsing and copying (bytes objects are immutable and the argument keeps
// this one alive). A malformed or unsupported file raises
// cqlstream.InvalidArgumentError, a ValueError, naming the problem.
//
// The npy accessors of cqlstream._core.Batch (decode='npy'): zero-copy numpy
// arrays over a decoded batch's buffer (loader/npy_batch.h), each owning a
// capsule that keeps the decoded batch alive.
#include "bind_npy.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bind_batch.h"
#include "loader/npy.h"
#include "status_error.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace cqlstream::python {
namespace {

using loader::NpyArray;
using loader::NpyDtype;
using Array = nb::ndarray<nb::numpy>;

nb::dlpack::dtype DlpackDtype(NpyDtype d) {
  using Code = nb::dlpack::dtype_code;
  Code code = Code::Float;
  switch (d) {
    case NpyDtype::kBool: code = Code::Bool; break;
    case NpyDtype::kInt8: case NpyDtype::kInt16: case NpyDtype::kInt32: case NpyDtype::kInt64:
      code = Code::Int;
      break;
    case NpyDtype::kUInt8: case NpyDtype::kUInt16: case NpyDtype::kUInt32: case NpyDtype::kUInt64:
      code = Code::UInt;
      break;
    case NpyDtype::kFloat16: case NpyDtype::kFloat32: case NpyDtype::kFloat64: code = Code::Float; break;
    case NpyDtype::kComplex64: case NpyDtype::kComplex128: code = Code::Complex; break;
  }
  return {static_cast<uint8_t>(code), static_cast<uint8_t>(8 * loader::NpyItemSize(d)), 1};
}

// Strides in items: C order (last axis fastest) or Fortran order (first).
std::vector<int64_t> ItemStrides(const std::vector<size_t>& shape, bool fortran_order) {
  const size_t ndim = shape.size();
  std::vector<int64_t> strides(ndim);
  int64_t step = 1;
  for (size_t i = 0; i < ndim; ++i) {
    const size_t axis = fortran_order ? i : ndim - 1 - i;
    strides[axis] = step;
    step *= static_cast<int64_t>(shape[axis] == 0 ? 1 : shape[axis]);
  }
  return strides;
}

Array DecodeNpy(const nb::bytes& data) {
  std::unique_ptr<uint8_t[]> items;
  NpyArray a;
  Status status;
  {
    nb::gil_scoped_release release;
    auto parsed = loader::ParseNpy({static_cast<const uint8_t*>(data.data()), data.size()});
    if (parsed.ok()) {
      a = std::move(parsed).value();
      const auto src = a.data();
      items.reset(new uint8_t[src.empty() ? 1 : src.size()]);
      if (!src.empty()) std::memcpy(items.get(), src.data(), src.size());
    } else {
      status = parsed.status();
    }
  }
  Check(status);
  const size_t ndim = a.shape.size();
  std::vector<size_t> shape(a.shape.begin(), a.shape.end());
  const std::vector<int64_t> strides = ItemStrides(shape, a.fortran_order);
  nb::capsule owner(items.get(), [](void* p) noexcept { delete[] static_cast<uint8_t*>(p); });
  uint8_t* raw = items.release();
  return Array(raw, ndim, shape.data(), owner, strides.data(), DlpackDtype(a.dtype));
}

using loader::DecodedBatch;
using loader::NpyItem;

// An npy-mode decoded batch, or ValueError explaining what the batch holds.
const DecodedBatch& NpyBatchOf(const PyBatch& b, const char* what) {
  b.CheckLive();
  if (!b.item.decoded || !b.item.decoded->npy()) {
    throw nb::value_error(fmt::format("{} is only available when the loader decodes .npy arrays (decode='npy'); "
                                      "this batch holds {}",
                                      what, b.item.raw ? "raw bytes: .data" : "decoded images: .images")
                              .c_str());
  }
  return *b.item.decoded;
}

// An array over item `it` of `d` (extra: leading axes, e.g. {n} for a stack).
nb::object ItemArray(const DecodedBatch& d, const NpyItem& it, const PyBatch& b, std::vector<size_t> lead = {}) {
  std::vector<size_t> shape(std::move(lead));
  shape.insert(shape.end(), it.shape.begin(), it.shape.end());
  std::vector<int64_t> strides = ItemStrides(shape, it.fortran_order);
  if (it.fortran_order && shape.size() > it.shape.size()) {
    // A stack of Fortran-order arrays: the leading axis steps a whole array.
    strides = ItemStrides({shape.begin() + 1, shape.end()}, true);
    strides.insert(strides.begin(), static_cast<int64_t>(it.bytes / loader::NpyItemSize(it.dtype)));
  }
  return nb::cast(Array(d.pixels + it.offset, shape.size(), shape.data(), b.Owner(), strides.data(),
                        DlpackDtype(it.dtype)));
}

std::string Describe(const NpyItem& it) {
  return fmt::format("{} ({}){}", loader::NpyDtypeName(it.dtype), fmt::join(it.shape, ", "),
                     it.fortran_order ? " in Fortran order" : "");
}

}  // namespace

nb::list NpyArraysOf(const PyBatch& b) {
  const DecodedBatch& d = NpyBatchOf(b, "arrays");
  nb::list out;
  for (const NpyItem& it : d.arrays) out.append(ItemArray(d, it, b));
  return out;
}

nb::object NpyStackedOf(const PyBatch& b) {
  const DecodedBatch& d = NpyBatchOf(b, "array");
  if (d.arrays.empty()) throw nb::value_error("the batch is empty: it has no stacked array");
  if (!d.stacked) {
    const NpyItem& first = d.arrays.front();
    for (size_t i = 1; i < d.arrays.size(); ++i) {
      if (!d.arrays[i].SameKind(first)) {
        throw nb::value_error(fmt::format("the samples of this batch do not stack: sample {} ({}) is {}, sample {} "
                                          "({}) is {}; use .arrays (one array per sample)",
                                          0, FormatKey(d.keys[0]), Describe(first), i, FormatKey(d.keys[i]),
                                          Describe(d.arrays[i]))
                                  .c_str());
      }
    }
  }
  return ItemArray(d, d.arrays.front(), b, {d.arrays.size()});
}

bool NpyIsStacked(const PyBatch& b) { return NpyBatchOf(b, "stacked").stacked; }

nb::list NpyTargetsOf(const PyBatch& b) {
  const DecodedBatch& d = NpyBatchOf(b, "targets");
  nb::list out;
  for (const NpyItem& it : d.targets) out.append(ItemArray(d, it, b));
  return out;
}

nb::object NpySampleOf(const PyBatch& b, size_t i) {
  const DecodedBatch& d = NpyBatchOf(b, "a sample");
  return ItemArray(d, d.arrays.at(i), b);
}

void BindNpy(nb::module_& m) {
  m.def("decode_npy", &DecodeNpy, "data"_a,
        "Decodes a .npy file (format 1.0, 2.0 or 3.0; bool, int, uint, float16/32/64 or complex64/128 items) "
        "to a numpy array of its dtype and shape, in native byte order, F-contiguous when the file is in "
        "Fortran order. Raises InvalidArgumentError (a ValueError) naming the problem for anything else.");
}

}  // namespace cqlstream::python
