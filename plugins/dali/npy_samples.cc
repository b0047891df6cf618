// Copyright (c) cqlstream authors.
#include "npy_samples.h"

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace cqlstream::dali_plugin {
namespace {

using loader::NpyArray;
using loader::NpyDtype;

std::string Name(const SampleRef& r, size_t i) {
  return fmt::format("sample {} (position {} in the batch)", FormatKey(r.batch->keys[r.index]), i);
}

// Checks arrays[i] against arrays[0] and DALI's limits; `what` is "" or "target of ".
Status Fits(const std::vector<SampleRef>& samples, const std::vector<NpyArray>& arrays, size_t i,
            std::string_view what) {
  const NpyArray& a = arrays[i];
  if (a.dtype == NpyDtype::kComplex64 || a.dtype == NpyDtype::kComplex128) {
    return Status::InvalidArgument(fmt::format("the {}{} is a {} array: DALI has no complex type", what,
                                               Name(samples[i], i), loader::NpyDtypeName(a.dtype)));
  }
  if (a.fortran_order) {
    return Status::InvalidArgument(fmt::format(
        "the {}{} is stored in Fortran (column-major) order: DALI tensors are row-major; write it with "
        "np.ascontiguousarray",
        what, Name(samples[i], i)));
  }
  const NpyArray& first = arrays.front();
  if (a.dtype != first.dtype || a.shape.size() != first.shape.size()) {
    return Status::InvalidArgument(fmt::format(
        "the samples of one batch must share dtype and number of dimensions (one DALI output has one type and "
        "dimensionality): the {}{} is {} with {} dimensions, the {}{} is {} with {}",
        what, Name(samples[0], 0), loader::NpyDtypeName(first.dtype), first.shape.size(), what,
        Name(samples[i], i), loader::NpyDtypeName(a.dtype), a.shape.size()));
  }
  return Status::OK();
}

}  // namespace

StatusOr<NpySamples> ParseNpySamples(const std::vector<SampleRef>& samples, bool data, bool targets) {
  NpySamples out;
  for (size_t i = 0; i < samples.size(); ++i) {
    const Batch& b = *samples[i].batch;
    const size_t k = samples[i].index;
    const auto payload = b.data().subspan(b.offsets[k], b.sizes[k]);
    if (data) {
      auto a = loader::ParseNpy(payload.first(b.image_sizes[k]));
      if (!a.ok()) {
        return Status::InvalidArgument(
            fmt::format("{} is not a valid .npy array: {}", Name(samples[i], i), a.status().message()));
      }
      out.data.push_back(std::move(a).value());
      CQLS_RETURN_IF_ERROR(Fits(samples, out.data, i, ""));
    }
    if (!targets) continue;
    auto t = loader::ParseNpy(payload.subspan(b.image_sizes[k]));
    if (!t.ok()) {
      return Status::InvalidArgument(
          fmt::format("the target of {} is not a valid .npy array: {}", Name(samples[i], i), t.status().message()));
    }
    out.target.push_back(std::move(t).value());
    CQLS_RETURN_IF_ERROR(Fits(samples, out.target, i, "target of "));
  }
  return out;
}

}  // namespace cqlstream::dali_plugin
