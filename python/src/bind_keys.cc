// Copyright (c) cqlstream authors.
//
// format_key, make_key, describe_state: see bind_keys.h.
#include "bind_keys.h"

#include <nanobind/stl/string.h>

#include <cstdint>
#include <string_view>

#include "cqlstream/dataset.h"
#include "loader/checkpoint.h"
#include "status_error.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace cqlstream::python {
namespace {

nb::dict DescribeState(const nb::bytes& state) {
  auto cp = Unwrap(loader::Checkpoint::Decode(std::string_view(state.c_str(), state.size())));
  nb::dict d;
  d["epoch"] = cp.epoch;
  d["rank"] = cp.rank;
  d["world_size"] = cp.world;
  d["batch_size"] = cp.batch_size;
  d["seed"] = cp.seed;
  d["shuffle"] = cp.shuffle;
  d["drop_last"] = cp.drop_last;
  d["samples"] = cp.n;
  d["batches_delivered"] = cp.batches_delivered;
  const uint64_t assigned = loader::CountPositions(cp.assigned);
  const auto left = loader::Subtract(cp.assigned, loader::Normalize(cp.done));
  d["samples_assigned"] = assigned;
  d["samples_remaining"] = loader::CountPositions(left);
  return d;
}

}  // namespace

void BindKeys(nb::module_& m) {
  m.def("format_key", [](uint64_t k) { return FormatKey(k); }, "key"_a, "A sample key as 'seg:idx'.");
  m.def("make_key", [](int32_t seg, int32_t idx) { return MakeKey(seg, idx); }, "seg"_a, "idx"_a,
        "The 64-bit key of sample (seg, idx): (seg << 32) | idx.");
  m.def("describe_state", &DescribeState, "state"_a,
        "The human-readable fields of a loader checkpoint (epoch, rank, world_size, progress).");
}

}  // namespace cqlstream::python
