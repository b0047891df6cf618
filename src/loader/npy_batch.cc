// Copyright (c) cqlstream authors.
#include "loader/npy_batch.h"

#include <fmt/format.h>

#include <cstring>
#include <utility>

namespace cqlstream::loader {
namespace {

size_t AlignUp(size_t v) { return (v + kNpyAlign - 1) / kNpyAlign * kNpyAlign; }

NpyItem ItemOf(const NpyArray& a) {
  NpyItem it;
  it.dtype = a.dtype;
  it.shape = a.shape;
  it.fortran_order = a.fortran_order;
  it.bytes = a.data().size();
  return it;
}

// The parsed arrays (and targets) of one batch, with each sample's Status.
struct Parsed {
  std::vector<NpyArray> arrays, targets;
  std::vector<Status> status;
};

Status ParseAll(DecodePool& pool, const Batch& batch, NpyTargets targets, Parsed* p) {
  const size_t n = batch.size();
  p->arrays.resize(n);
  p->status.assign(n, Status::OK());
  if (targets == NpyTargets::kNpy) p->targets.resize(n);
  const auto data = batch.data();
  return pool.ParallelFor(n, [&](size_t i) -> Status {
    const auto key = FormatKey(batch.keys[i]);
    const auto bytes = data.subspan(batch.offsets[i], batch.image_sizes[i]);
    auto a = ParseNpy(bytes);
    Status s;
    if (!a.ok()) {
      s = Status::InvalidArgument(fmt::format("sample {}: not a valid .npy array: {}", key, a.status().message()));
    } else {
      p->arrays[i] = std::move(a).value();
    }
    if (s.ok() && targets == NpyTargets::kNpy) {
      const auto t = data.subspan(batch.offsets[i] + batch.image_sizes[i], batch.sizes[i] - batch.image_sizes[i]);
      auto ta = ParseNpy(t);
      if (!ta.ok()) {
        s = Status::InvalidArgument(
            fmt::format("sample {}: its target is not a valid .npy array: {}", key, ta.status().message()));
      } else {
        p->targets[i] = std::move(ta).value();
      }
    }
    p->status[i] = s;  // distinct elements per index
    return s;
  });
}

// Offsets of the kept samples' arrays and targets (see the header).
void Lay(const Batch& batch, const Parsed& p, NpyTargets targets, NpyBatchLayout* l) {
  for (size_t i : l->kept) l->arrays.push_back(ItemOf(p.arrays[i]));
  l->stacked = true;
  for (const NpyItem& it : l->arrays) l->stacked = l->stacked && it.SameKind(l->arrays.front());
  size_t at = 0;
  for (NpyItem& it : l->arrays) {
    if (!l->stacked) at = AlignUp(at);
    it.offset = at;
    at += it.bytes;
  }
  for (size_t i : l->kept) {
    NpyItem t;
    if (targets == NpyTargets::kNpy) {
      t = ItemOf(p.targets[i]);
    } else if (targets == NpyTargets::kBytes) {
      t.bytes = batch.sizes[i] - batch.image_sizes[i];
      t.shape = {t.bytes};
    } else {
      break;
    }
    at = AlignUp(at);
    t.offset = at;
    at += t.bytes;
    l->targets.push_back(std::move(t));
  }
  l->total_bytes = at;
}

}  // namespace

Status DecodeNpyBatch(DecodePool& pool, const Batch& batch, NpyTargets targets, bool skip_bad,
                      const std::function<uint8_t*(size_t)>& alloc, NpyBatchLayout* layout, uint8_t** buffer,
                      int64_t* skipped) {
  *layout = NpyBatchLayout{};
  *buffer = nullptr;
  Parsed p;
  Status first = ParseAll(pool, batch, targets, &p);
  if (!first.ok() && !skip_bad) return first;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (p.status[i].ok()) {
      layout->kept.push_back(i);
    } else {
      ++*skipped;
    }
  }
  Lay(batch, p, targets, layout);
  *buffer = alloc(layout->total_bytes);
  if (*buffer == nullptr) {
    return Status::Overloaded(fmt::format("out of memory for {} bytes of decoded .npy arrays", layout->total_bytes));
  }
  uint8_t* out = *buffer;
  const auto data = batch.data();
  return pool.ParallelFor(layout->kept.size(), [&](size_t k) -> Status {
    const size_t i = layout->kept[k];
    const NpyItem& a = layout->arrays[k];
    if (a.bytes > 0) std::memcpy(out + a.offset, p.arrays[i].data().data(), a.bytes);
    if (k < layout->targets.size() && layout->targets[k].bytes > 0) {
      const NpyItem& t = layout->targets[k];
      const uint8_t* src = targets == NpyTargets::kNpy ? p.targets[i].data().data()
                                                        : data.data() + batch.offsets[i] + batch.image_sizes[i];
      std::memcpy(out + t.offset, src, t.bytes);
    }
    return Status::OK();
  });
}

}  // namespace cqlstream::loader
