// Copyright (c) cqlstream authors.
//
// Tar shards in WebDataset layout. The index of an archive is read from its
// headers only (member data is skipped with seeks): POSIX ustar and old-style
// v7 headers, GNU long names ('L'), pax extended headers ('x': the "path"
// record), base-256 sizes; directories, links and other special members are
// left out. Each header's checksum is verified.
//
// Samples: members are grouped by key, the member name up to the first dot
// of its base name ("a/b/x1.seg.png" -> key "a/b/x1", extension "seg.png").
// Extensions: jpg/jpeg/png/webp -> the image; cls -> the label (integer
// text); json -> an object whose "label"/"labels" give the label(s) and whose
// other fields go to extra; mask.png/seg.png -> the target; any other member
// of at most 4 KiB of text -> extra[extension].
//
// Thread-safety: pure functions over the reader given.
#ifndef CQLSTREAM_STORE_TAR_H_
#define CQLSTREAM_STORE_TAR_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "cqlstream/status.h"

namespace cqlstream::store {

struct TarMember {
  std::string name;     // full member name (prefix/name, or the long/pax name)
  uint64_t offset = 0;  // of the data in the archive
  uint64_t size = 0;
};

// Reads exactly n bytes at `offset` into dst; false at end of file or error.
using ReadAtFn = std::function<bool(uint64_t offset, size_t n, uint8_t* dst)>;

// The regular-file members of an archive of `size` bytes, in archive order.
// Errors (Corruption, naming `name` and the offset): a bad header checksum, a
// member running past the end of the archive, a bad size field.
StatusOr<std::vector<TarMember>> ReadTarIndex(const ReadAtFn& read, uint64_t size, std::string_view name);
// Splits a member name into WebDataset key and lowercase extension.
void SplitTarKey(std::string_view member, std::string* key, std::string* ext);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_TAR_H_
