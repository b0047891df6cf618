// Copyright (c) cqlstream authors.
//
// libFuzzer target for decoding a batch of .npy samples
// (loader::DecodeNpyBatch: per-sample parsing, skip or raise, the stacked or
// aligned layout, targets as bytes or as .npy).
//
// Input: flags: u8 (bits 0-1: targets none/bytes/npy, bit 2: skip bad
// samples), then samples, each: length: u16 LE, data length: u16 LE
// (clamped to length; the rest is the target), the sample's bytes (clamped
// to what is left).
//
// Checked beyond "no crash, no leak, no UB":
//  - an error is InvalidArgument naming a sample ("sample ..."), with
//    nothing allocated, or Overloaded from the allocator (never here);
//  - kept lists each good sample once, in order; skipped + kept = samples;
//  - every item lies inside total_bytes; without `stacked` each starts at a
//    multiple of kNpyAlign; with `stacked` the arrays share dtype, shape and
//    order and lie back to back from 0;
//  - every array's bytes equal ParseNpy's data() of its sample, every raw
//    target equals the sample's target bytes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "loader/npy_batch.h"
#include "fuzz_check.h"

namespace {

using namespace cqlstream;
using namespace cqlstream::loader;

struct VectorBatch final : Batch {
  std::vector<uint8_t> bytes;
  std::span<const uint8_t> data() const override { return bytes; }
};

uint16_t U16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

using cqlstream::fuzz::Check;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto targets = static_cast<NpyTargets>(std::min(data[0] & 3, 2));
  const bool skip_bad = (data[0] & 4) != 0;
  VectorBatch b;
  size_t at = 1;
  while (at + 4 <= size && b.size() < 64) {
    size_t len = U16(data + at), dlen = U16(data + at + 2);
    at += 4;
    len = std::min(len, size - at);
    dlen = std::min(dlen, len);
    if (targets == NpyTargets::kNone) dlen = len;
    b.offsets.push_back(b.bytes.size());
    b.sizes.push_back(len);
    b.image_sizes.push_back(dlen);
    b.labels.push_back(-1);
    b.keys.push_back(MakeKey(0, static_cast<int32_t>(b.keys.size())));
    b.bytes.insert(b.bytes.end(), data + at, data + at + len);
    at += len;
  }

  static DecodePool pool(2);
  NpyBatchLayout l;
  uint8_t* buffer = nullptr;
  int64_t skipped = 0;
  const Status s = DecodeNpyBatch(
      pool, b, targets, skip_bad,
      [](size_t n) { return static_cast<uint8_t*>(std::aligned_alloc(kNpyAlign, (n / kNpyAlign + 1) * kNpyAlign)); },
      &l, &buffer, &skipped);
  if (!s.ok()) {
    Check(s.code() == Status::Code::kInvalidArgument && s.message().rfind("sample ", 0) == 0);
    Check(!skip_bad && buffer == nullptr);
    return 0;
  }
  Check(buffer != nullptr);
  Check(static_cast<size_t>(skipped) + l.kept.size() == b.size());
  Check(l.arrays.size() == l.kept.size());
  Check(targets == NpyTargets::kNone ? l.targets.empty() : l.targets.size() == l.kept.size());
  for (size_t k = 0; k < l.kept.size(); ++k) {
    const size_t i = l.kept[k];
    Check(k == 0 || l.kept[k - 1] < i);
    const NpyItem& a = l.arrays[k];
    Check(a.offset + a.bytes <= l.total_bytes);
    if (l.stacked) {
      Check(a.SameKind(l.arrays[0]) && a.offset == k * a.bytes);
    } else {
      Check(a.offset % kNpyAlign == 0);
    }
    auto parsed = ParseNpy(b.sample(i).first(b.image_sizes[i]));
    Check(parsed.ok() && parsed->data().size() == a.bytes);
    Check(a.bytes == 0 || std::memcmp(buffer + a.offset, parsed->data().data(), a.bytes) == 0);
    if (targets == NpyTargets::kNone) continue;
    const NpyItem& t = l.targets[k];
    Check(t.offset % kNpyAlign == 0 && t.offset + t.bytes <= l.total_bytes);
    const auto tb = b.sample(i).subspan(b.image_sizes[i]);
    if (targets == NpyTargets::kBytes) {
      Check(t.bytes == tb.size() && (t.bytes == 0 || std::memcmp(buffer + t.offset, tb.data(), t.bytes) == 0));
    } else {
      auto pt = ParseNpy(tb);
      Check(pt.ok() && pt->data().size() == t.bytes);
    }
  }
  std::free(buffer);
  return 0;
}
