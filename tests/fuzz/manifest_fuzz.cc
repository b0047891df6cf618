// Copyright (c) cqlstream authors.
//
// libFuzzer target for manifests: CSV (RFC 4180 reader) and JSONL (one JSON
// object per line, through ParseJson), the columns' meaning and `labels`
// cells (ParseLabelList).
//
// Input layout: byte 0 bit 0 chooses JSONL (1) or CSV (0); the rest is the
// manifest text.
//
// Invariants checked (abort on violation): a parse that succeeds names every
// row's line within the text's line count and gives every row a path; an
// error has a message naming the manifest.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "store/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cqlstream::store;
  if (size == 0) return 0;
  const bool jsonl = data[0] & 1;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
  auto m = ParseManifest(text, jsonl, "fuzz.manifest");
  if (m.ok()) {
    for (const ManifestRow& row : m->rows) {
      if (row.line == 0 || row.line > lines || row.path.empty()) std::abort();
    }
  } else if (m.status().message().find("fuzz.manifest") == std::string::npos &&
             m.status().message().find("line") == std::string::npos) {
    std::abort();
  }
  auto csv = ParseCsv(text);
  if (csv.ok()) {
    for (const CsvRecord& r : *csv) {
      if (r.line == 0 || r.line > lines) std::abort();
    }
  }
  auto labels = ParseLabelList(text);
  if (labels.ok()) {
    for (const auto& l : *labels) {
      if (l.empty()) std::abort();  // empty items are dropped
    }
  }
  return 0;
}
