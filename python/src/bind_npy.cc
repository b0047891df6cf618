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
#include "bind_npy.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

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
  // Strides in items: C order (last axis fastest) or Fortran order (first).
  std::vector<int64_t> strides(ndim);
  int64_t step = 1;
  for (size_t i = 0; i < ndim; ++i) {
    const size_t axis = a.fortran_order ? i : ndim - 1 - i;
    strides[axis] = step;
    step *= static_cast<int64_t>(shape[axis] == 0 ? 1 : shape[axis]);
  }
  nb::capsule owner(items.get(), [](void* p) noexcept { delete[] static_cast<uint8_t*>(p); });
  uint8_t* raw = items.release();
  return Array(raw, ndim, shape.data(), owner, strides.data(), DlpackDtype(a.dtype));
}

}  // namespace

void BindNpy(nb::module_& m) {
  m.def("decode_npy", &DecodeNpy, "data"_a,
        "Decodes a .npy file (format 1.0, 2.0 or 3.0; bool, int, uint, float16/32/64 or complex64/128 items) "
        "to a numpy array of its dtype and shape, in native byte order, F-contiguous when the file is in "
        "Fortran order. Raises InvalidArgumentError (a ValueError) naming the problem for anything else.");
}

}  // namespace cqlstream::python
