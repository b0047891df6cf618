// Copyright (c) cqlstream authors.
//
// libFuzzer target for AttachedTable::FromSource (store/attached.h): the
// catalog's `source` map of an attached dataset, which anyone with write
// access to the catalog can change.
//
// Input: entries separated by '\n', each "key=value" (a line without '='
// is a key with an empty value), so the fuzzer reaches every entry name.
//
// Invariants checked (abort on violation): an error is Corruption with a
// message naming the dataset; a map that parses has identifiers that are
// safe in CQL text (Validate passes), its ToSource parses again to the same
// table, and the generated statements quote every identifier.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

#include "store/attached.h"
#include "store/key_snapshot.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cqlstream;
  using namespace cqlstream::store;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  DatasetInfo d;
  d.name = "fz";
  size_t pos = 0;
  while (pos <= text.size() && d.source.size() < 256) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(pos, nl - pos);
    const size_t eq = line.find('=');
    d.source[std::string(line.substr(0, eq))] = eq == std::string_view::npos ? "" : std::string(line.substr(eq + 1));
    pos = nl + 1;
  }
  auto a = AttachedTable::FromSource(d);
  if (!a.ok()) {
    if (a.status().code() != Status::Code::kCorruption) std::abort();
    if (a.status().message().find("dataset fz") == std::string::npos) std::abort();
    return 0;
  }
  if (!a->Validate().ok()) std::abort();
  DatasetInfo again = d;
  again.source = a->ToSource();
  auto b = AttachedTable::FromSource(again);
  if (!b.ok() || b->ToSource() != again.source) std::abort();
  for (const auto& [split, table] : a->tables) {
    const std::string read = a->DataReadCql(split);
    const std::string scan = KeyScanCql(*a, split);
    // Identifiers are [A-Za-z0-9_]: no quote, semicolon or comment can appear.
    for (const std::string& q : {read, scan}) {
      if (q.find(';') != std::string::npos || q.find("--") != std::string::npos) std::abort();
    }
    if (a->QuotedTable(split).empty()) std::abort();
  }
  return 0;
}
