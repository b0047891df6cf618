// Copyright (c) cqlstream authors.
//
// decode_image, decode_images: see bind_decode.h.
#include "bind_decode.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cqlstream/loader.h"
#include "interruptible.h"
#include "status_error.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace cqlstream::python {
namespace {

StatusOr<loader::ResizeMode> ParseMode(const std::string& m) {
  if (m == "crop") return loader::ResizeMode::kCrop;
  if (m == "stretch") return loader::ResizeMode::kStretch;
  return Status::InvalidArgument("decode mode must be 'crop' or 'stretch', got '" + m + "'");
}

// A batch over bytes owned by Python-side copies (decode_images).
struct CopiedBatch final : Batch {
  std::vector<uint8_t> bytes;
  std::span<const uint8_t> data() const override { return bytes; }
};

using Frames = nb::ndarray<nb::numpy, uint8_t, nb::ndim<4>, nb::c_contig>;

Frames DecodeImages(const std::vector<nb::bytes>& blobs, std::pair<int, int> size, int channels,
                    const std::string& mode, bool jpeg_scaling, int threads) {
  const auto o = Unwrap(MakeDecode(size, channels, mode, jpeg_scaling));
  auto batch = std::make_shared<CopiedBatch>();
  size_t total = 0;
  for (const auto& b : blobs) total += b.size();
  batch->bytes.reserve(total);  // one copy in, no regrowth (the GIL is held here)
  for (size_t i = 0; i < blobs.size(); ++i) {
    const auto* p = reinterpret_cast<const uint8_t*>(blobs[i].c_str());
    batch->offsets.push_back(batch->bytes.size());
    batch->sizes.push_back(blobs[i].size());
    batch->image_sizes.push_back(blobs[i].size());
    batch->labels.push_back(-1);
    batch->keys.push_back(i);
    batch->bytes.insert(batch->bytes.end(), p, p + blobs[i].size());
  }
  auto out = std::make_shared<std::vector<uint8_t>>(std::max<size_t>(1, blobs.size() * o.frame_bytes()));
  // On a thread of its own while Python runs its signal handlers: Ctrl-C
  // ends it within the images being decoded (python/src/interruptible.h).
  std::atomic<bool> stop{false};
  Check(RunInterruptibly(
      [&] {
        loader::DecodePool pool(threads);
        return loader::DecodeBatch(pool, *batch, o, *out, nullptr, &stop);
      },
      &stop));
  const size_t shape[4] = {blobs.size(), static_cast<size_t>(o.height), static_cast<size_t>(o.width),
                           static_cast<size_t>(o.channels)};
  nb::capsule owner(new std::shared_ptr<std::vector<uint8_t>>(out),
                    [](void* v) noexcept { delete static_cast<std::shared_ptr<std::vector<uint8_t>>*>(v); });
  return Frames(out->data(), 4, shape, owner);
}

}  // namespace

StatusOr<loader::DecodeOptions> MakeDecode(std::pair<int, int> size, int channels, const std::string& mode,
                                           bool jpeg_scaling, uint64_t max_decode_pixels) {
  loader::DecodeOptions d;
  d.height = size.first;
  d.width = size.second;
  d.channels = channels;
  CQLS_ASSIGN_OR_RETURN(d.mode, ParseMode(mode));
  d.jpeg_scaling = jpeg_scaling;
  d.max_decode_pixels = max_decode_pixels;
  CQLS_RETURN_IF_ERROR(d.Validate());
  return d;
}

void BindDecode(nb::module_& m) {
  m.def(
      "decode_image",
      [](const nb::bytes& data, std::pair<int, int> size, int channels, const std::string& mode, bool jpeg_scaling) {
        return DecodeImages({data}, size, channels, mode, jpeg_scaling, 1);
      },
      "data"_a, "size"_a, "channels"_a = 3, "mode"_a = "crop", "jpeg_scaling"_a = true,
      "Decodes one JPEG or PNG to a (1, H, W, C) uint8 array, as the loader's decode= does.");
  m.def("decode_images", &DecodeImages, "blobs"_a, "size"_a, "channels"_a = 3, "mode"_a = "crop",
        "jpeg_scaling"_a = true, "threads"_a = 0,
        "Decodes JPEG/PNG blobs in parallel into one (N, H, W, C) uint8 array.");
}

}  // namespace cqlstream::python
