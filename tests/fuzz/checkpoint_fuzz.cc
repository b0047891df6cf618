// Copyright (c) cqlstream authors.
//
// libFuzzer target for loader checkpoints (loader/checkpoint.h): the bytes
// Loader::Restore takes (a checkpoint file, a Python state_dict blob: the
// same bytes) go through Checkpoint::Decode and, when they decode, through
// RemainingFor for the rank and world of a new run, alone and merged with a
// second decoded checkpoint, as Restore does.
//
// Checked: nothing crashes, hangs or allocates without bound whatever the
// bytes say (range counts are declared by the input); a decoded checkpoint
// encodes back to bytes that decode to the same checkpoint; what
// RemainingFor returns is sorted, disjoint, non-empty ranges within [0, n).
//
// Input: byte 0: rank, byte 1: world (1 + b % 8), byte 2: split point of a
// second checkpoint (0: none); the rest: checkpoint bytes.
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "loader/checkpoint.h"
#include "fuzz_check.h"

namespace {

using cqlstream::fuzz::Check;

bool Same(const cqlstream::loader::Checkpoint& a, const cqlstream::loader::Checkpoint& b) {
  auto eq = [](const cqlstream::loader::Ranges& x, const cqlstream::loader::Ranges& y) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i].begin != y[i].begin || x[i].end != y[i].end) return false;
    }
    return true;
  };
  return a.fingerprint == b.fingerprint && a.seed == b.seed && a.shuffle == b.shuffle && a.drop_last == b.drop_last &&
         a.n == b.n && a.epoch == b.epoch && a.world == b.world && a.rank == b.rank && a.batch_size == b.batch_size &&
         a.batches_delivered == b.batches_delivered && eq(a.assigned, b.assigned) && eq(a.done, b.done);
}

void CheckRemaining(const std::vector<cqlstream::loader::Checkpoint>& cps, int rank, int world) {
  auto r = cqlstream::loader::RemainingFor(cps, rank, world);
  if (!r.ok()) {
    Check(!r.status().message().empty());
    return;
  }
  uint64_t last = 0;
  for (size_t i = 0; i < r->size(); ++i) {
    const auto& x = (*r)[i];
    Check(x.begin < x.end);
    Check(i == 0 || x.begin >= last);  // sorted and disjoint (adjacent is fine)
    Check(x.end <= cps.front().n);
    last = x.end;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using cqlstream::loader::Checkpoint;
  if (size < 3) return 0;
  const int world = 1 + data[1] % 8;
  const int rank = data[0] % world;
  const size_t split = data[2];
  const std::string_view all(reinterpret_cast<const char*>(data + 3), size - 3);
  std::vector<std::string_view> parts;
  if (split > 0 && split < all.size()) {
    parts = {all.substr(0, split), all.substr(split)};
  } else {
    parts = {all};
  }
  std::vector<Checkpoint> cps;
  for (auto p : parts) {
    auto c = Checkpoint::Decode(p);
    if (!c.ok()) {
      Check(!c.status().message().empty());
      continue;
    }
    auto again = Checkpoint::Decode(c->Encode());
    Check(again.ok() && Same(*again, *c));
    cps.push_back(std::move(*c));
  }
  if (cps.empty()) return 0;
  CheckRemaining({cps.front()}, rank, world);
  if (cps.size() == 2) CheckRemaining(cps, rank, world);
  return 0;
}
