// Copyright (c) cqlstream authors.
//
// cqlstream._core.Batch: see bind_batch.h.
#include "bind_batch.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "bind_npy.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace cqlstream::python {
namespace {

using loader::DecodedBatch;
using loader::Item;

[[noreturn]] void Released() {
  throw nb::value_error(
      "this Batch was released (Batch.release()); arrays and tensors taken from it before stay valid");
}

const uint8_t kEmpty[1] = {0};
alignas(16) const uint64_t kZero[2] = {0, 0};

template <typename T>
nb::capsule Keep(const std::shared_ptr<const T>& p) {
  return nb::capsule(new std::shared_ptr<const T>(p),
                     [](void* v) noexcept { delete static_cast<std::shared_ptr<const T>*>(v); });
}

template <typename T>
using Vec = nb::ndarray<nb::numpy, const T, nb::ndim<1>, nb::c_contig>;

template <typename T>
Vec<T> VecOf(const std::vector<T>& v, size_t n, nb::capsule owner) {
  const T* p = v.empty() ? reinterpret_cast<const T*>(&kZero) : v.data();
  return Vec<T>(p, {std::min(n, v.size())}, owner);
}

using Images = nb::ndarray<nb::numpy, uint8_t, nb::ndim<4>, nb::c_contig>;

Images ImagesOf(const PyBatch& b) {
  const DecodedBatch& d = b.Decoded();
  if (d.npy()) throw nb::value_error("images are not available: this batch holds .npy arrays (decode='npy'): use .arrays or .array");
  const size_t shape[4] = {d.size(), static_cast<size_t>(d.height), static_cast<size_t>(d.width),
                           static_cast<size_t>(d.channels)};
  return Images(d.pixels, 4, shape, b.Owner());
}

nb::object TorchOf(const PyBatch& b, const std::string& layout) {
  if (layout != "NHWC" && layout != "NCHW") throw nb::value_error("layout must be 'NHWC' or 'NCHW'");
  if (b.item.raw || b.released) {
    if (layout != "NHWC") b.Decoded();  // raises the explanation
    const auto& raw = b.Raw("torch()");
    const size_t shape[1] = {raw.data().size()};
    return nb::cast(nb::ndarray<nb::pytorch, const uint8_t, nb::ndim<1>>(b.DataPtr(), 1, shape, b.Owner()));
  }
  const DecodedBatch& d = b.Decoded();
  if (d.npy()) {  // the stacked arrays (ValueError when they do not stack)
    if (layout != "NHWC") throw nb::value_error("layout applies to images; a batch of .npy arrays has none");
    return nb::module_::import_("torch").attr("from_numpy")(NpyStackedOf(b));
  }
  const size_t n = d.size(), h = static_cast<size_t>(d.height), w = static_cast<size_t>(d.width),
               c = static_cast<size_t>(d.channels);
  if (layout == "NHWC") {
    const size_t shape[4] = {n, h, w, c};
    return nb::cast(nb::ndarray<nb::pytorch, uint8_t>(d.pixels, 4, shape, b.Owner()));
  }
  // NCHW as a strided view of the same memory.
  const size_t shape[4] = {n, c, h, w};
  const int64_t strides[4] = {static_cast<int64_t>(h * w * c), 1, static_cast<int64_t>(w * c),
                              static_cast<int64_t>(c)};
  return nb::cast(nb::ndarray<nb::pytorch, uint8_t>(d.pixels, 4, shape, b.Owner(), strides));
}

// Sample i of the batch: its payload bytes or its (H, W, C) frame.
nb::object SampleOf(const PyBatch& b, int64_t i) {
  const int64_t n = static_cast<int64_t>(b.size());
  if (i < 0) i += n;
  if (i < 0 || i >= n) throw nb::index_error("sample index out of range");
  const size_t k = static_cast<size_t>(i);
  if (b.item.raw) {
    const Batch& r = *b.item.raw;
    return nb::cast(Vec<uint8_t>(b.DataPtr() + r.offsets[k], {static_cast<size_t>(r.sizes[k])}, b.Owner()));
  }
  const DecodedBatch& d = *b.item.decoded;
  if (d.npy()) return NpySampleOf(b, k);
  const size_t shape[3] = {static_cast<size_t>(d.height), static_cast<size_t>(d.width),
                           static_cast<size_t>(d.channels)};
  return nb::cast(nb::ndarray<nb::numpy, uint8_t, nb::ndim<3>, nb::c_contig>(d.pixels + k * d.frame_bytes(), 3,
                                                                             shape, b.Owner()));
}

// The per-sample arrays of a raw batch (offsets, sizes, image_sizes).
template <std::vector<uint64_t> Batch::*Field>
Vec<uint64_t> RawColumn(const PyBatch& b, const char* what) {
  const Batch& r = b.Raw(what);
  return VecOf<uint64_t>(r.*Field, r.size(), b.Owner());
}

}  // namespace

void PyBatch::CheckLive() const {
  if (released) Released();
}

const Batch& PyBatch::Raw(const char* what) const {
  CheckLive();
  if (!item.raw) {
    throw nb::value_error((std::string(what) +
                           " is not available on a decoded batch (the loader was opened with decode=...); "
                           "use .images (.arrays with decode='npy')")
                              .c_str());
  }
  return *item.raw;
}

const DecodedBatch& PyBatch::Decoded() const {
  CheckLive();
  if (!item.decoded) {
    throw nb::value_error(
        "images are only available when the loader decodes (decode=(H, W)); this batch holds raw bytes: .data");
  }
  return *item.decoded;
}

nb::capsule PyBatch::Owner() const {
  return item.raw ? Keep<Batch>(item.raw) : Keep<DecodedBatch>(item.decoded);
}

size_t PyBatch::size() const {
  CheckLive();
  return item.raw ? item.raw->size() : item.decoded->size();
}

const uint8_t* PyBatch::DataPtr() const {
  const auto d = Raw("data").data();
  return d.data() != nullptr ? d.data() : kEmpty;
}

void BindBatch(nb::module_& m) {
  nb::class_<PyBatch>(m, "Batch",
                      "One batch. Arrays are zero-copy views that keep the batch memory alive on their own.")
      .def("__len__", &PyBatch::size)
      .def_prop_ro("epoch", [](const PyBatch& b) {
        b.CheckLive();
        return b.item.raw ? b.item.raw->epoch : b.item.decoded->epoch;
      })
      .def_prop_ro("index", [](const PyBatch& b) {
        b.CheckLive();
        return b.item.raw ? b.item.raw->index : b.item.decoded->index;
      })
      .def_prop_ro("decoded", [](const PyBatch& b) {
        b.CheckLive();
        return static_cast<bool>(b.item.decoded);
      })
      .def_prop_ro("released", [](const PyBatch& b) { return b.released; })
      .def_prop_ro(
          "data",
          [](const PyBatch& b) {
            const Batch& r = b.Raw("data");
            return Vec<uint8_t>(b.DataPtr(), {r.data().size()}, b.Owner());
          },
          nb::rv_policy::automatic,
          "All samples' bytes: one read-only uint8 array over the batch buffer (raw mode).")
      .def_prop_ro(
          "address", [](const PyBatch& b) { return reinterpret_cast<uintptr_t>(b.item.raw ? b.DataPtr() : b.Decoded().pixels); },
          "Address of the batch memory (raw bytes or decoded frames), for zero-copy checks.")
      .def_prop_ro("offsets", [](const PyBatch& b) { return RawColumn<&Batch::offsets>(b, "offsets"); },
                   nb::rv_policy::automatic)
      .def_prop_ro("sizes", [](const PyBatch& b) { return RawColumn<&Batch::sizes>(b, "sizes"); },
                   nb::rv_policy::automatic)
      .def_prop_ro("image_sizes", [](const PyBatch& b) { return RawColumn<&Batch::image_sizes>(b, "image_sizes"); },
                   nb::rv_policy::automatic)
      .def_prop_ro("labels", [](const PyBatch& b) {
        b.CheckLive();
        const auto& v = b.item.raw ? b.item.raw->labels : b.item.decoded->labels;
        return VecOf<int32_t>(v, b.size(), b.Owner());
      }, nb::rv_policy::automatic, "Class labels (int32; -1 where a sample has none).")
      .def_prop_ro("keys", [](const PyBatch& b) {
        b.CheckLive();
        const auto& v = b.item.raw ? b.item.raw->keys : b.item.decoded->keys;
        return VecOf<uint64_t>(v, b.size(), b.Owner());
      }, nb::rv_policy::automatic, "Sample keys (uint64, (seg << 32) | idx).")
      .def_prop_ro("multilabels", [](const PyBatch& b) {
        b.CheckLive();
        return b.item.raw ? b.item.raw->multilabels : b.item.decoded->multilabels;
      }, "Label lists (multilabel datasets; empty otherwise).")
      .def_prop_ro("images", &ImagesOf, nb::rv_policy::automatic, "Decoded frames, (N, H, W, C) uint8 (decode mode).")
      .def_prop_ro("arrays", &NpyArraysOf, "decode='npy': one typed numpy array per sample (zero-copy).")
      .def_prop_ro("array", &NpyStackedOf,
                   "decode='npy': the (N, ...) stack of the arrays (zero-copy); ValueError naming the first sample "
                   "whose dtype or shape differs.")
      .def_prop_ro("stacked", &NpyIsStacked, "decode='npy': whether every sample shares dtype and shape (.array works).")
      .def_prop_ro("targets", &NpyTargetsOf,
                   "decode='npy': one target per sample (label kind 'target'): a numpy array with targets='npy', "
                   "else the target's bytes as uint8; empty without targets.")
      .def("__getitem__", &SampleOf, "i"_a,
           "Sample i: its payload bytes (raw mode) or its (H, W, C) frame (decode mode), zero-copy.")
      .def("torch", &TorchOf, "layout"_a = "NHWC",
           "A torch tensor over the same memory: the uint8 bytes (raw mode) or the frames as NHWC, or NCHW as a "
           "strided view (decode mode).")
      .def(
          "release", [](PyBatch& b) {
            b.item = Item{};
            b.released = true;
          },
          "Drops this object's reference to the batch memory. Arrays taken before keep theirs; any later use of "
          "this object raises ValueError.");
}

}  // namespace cqlstream::python
