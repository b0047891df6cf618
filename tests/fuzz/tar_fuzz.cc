// Copyright (c) cqlstream authors.
//
// libFuzzer target for tar shards, through the entry point the ingest uses
// for each shard (ListTarArchive: libarchive's index, the end-of-archive and
// tail checks, WebDataset grouping, .cls/.json/extra members), reading from
// memory instead of a file.
//
// Invariants checked (abort on violation): every indexed member lies inside
// the archive and within kMaxTarMemberBytes, and every ByteRef of a listed
// item does too; a listing that succeeds has no member data past the end.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "store/source.h"
#include "store/tar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cqlstream::store;
  const ReadAtFn read = [data, size](uint64_t off, size_t n, uint8_t* dst) {
    if (off > size || n > size - off) return false;
    std::memcpy(dst, data + off, n);
    return true;
  };
  auto inside = [size](uint64_t off, uint64_t n) { return off <= size && n <= size - off; };

  std::vector<TarSkip> skipped;
  auto index = ReadTarIndex(read, size, "fuzz.tar", &skipped);
  if (index.ok()) {
    for (const TarMember& m : *index) {
      if (!inside(m.offset, m.size) || m.size > kMaxTarMemberBytes || m.name.empty()) std::abort();
    }
  } else if (index.status().message().empty()) {
    std::abort();  // every error must say what went wrong
  }

  std::vector<SourceItem> items;
  TarListFlags flags;
  std::vector<std::string> notes;
  const auto s = ListTarArchive(read, size, "shards/fuzz.tar", "train", 0, &items, &flags, &notes);
  if (s.ok() != index.ok()) std::abort();
  for (const SourceItem& it : items) {
    if (it.skip.empty() && !inside(it.image.offset, it.image.size)) std::abort();
    if (it.target && !inside(it.target->offset, it.target->size)) std::abort();
  }
  return 0;
}
