// Copyright (c) cqlstream authors.
//
// libFuzzer target for selection files (Selection::Parse: magic, JSON header
// through ParseJson, per-segment varint-coded key lists; CQLSSEL1 sorted
// bodies and CQLSSEL2 ordered bodies with zigzag deltas and repeats).
//
// Invariants checked (abort on violation): a selection that parses has as
// many keys as the file has bytes at most, keys with non-negative segment and
// index, the layout version this cqlstream reads, sorted unique keys when
// the magic is CQLSSEL1, and it round-trips (Encode, then Parse gives the
// same keys in the same order); an error names the file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "cqlstream/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cqlstream;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto sel = Selection::Parse(bytes, "fuzz.sel");
  if (!sel.ok()) {
    if (sel.status().message().find("fuzz.sel") == std::string::npos) std::abort();
    return 0;
  }
  if (sel->layout_version != kLayoutVersion) std::abort();
  if (sel->keys.size() > size) std::abort();
  for (SampleKey k : sel->keys) {
    if (KeySegment(k) < 0 || KeyIndex(k) < 0) std::abort();
  }
  const bool sorted_magic = size >= 8 && std::memcmp(data, "CQLSSEL1", 8) == 0;
  if (sorted_magic && !sel->SortedUnique()) std::abort();
  auto again = Selection::Parse(sel->Encode(), "fuzz.sel");
  if (!again.ok() || again->keys != sel->keys || again->dataset != sel->dataset || again->query != sel->query) {
    std::abort();
  }
  return 0;
}
