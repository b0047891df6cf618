// Copyright (c) cqlstream authors.
//
// Tar shards in WebDataset layout. The index of an archive is read by
// libarchive (POSIX ustar, pax, GNU and v7 tar with their extensions: long
// names, pax paths, base-256 sizes), from the headers only: member data is
// skipped, not read. Only uncompressed tar is accepted (member offsets must
// be offsets in the file). The archive must be whole: it must end with the
// end-of-archive marker (zero blocks) and nothing but zero blocks may follow
// it; a member that runs past the end, a header cut short, a missing end
// marker or trailing bytes are errors naming the archive and the member, so
// a truncated shard is never taken as complete. Regular files of at most
// kMaxTarMemberBytes are indexed; links, devices, sparse files and larger
// members are skipped and reported (TarSkip); directories are left out.
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

// A member left out of the index, and why ("symbolic link", "sparse file",
// "larger than the 1 GiB limit", ...).
struct TarSkip {
  std::string member;
  std::string reason;
};

// The largest member indexed: the largest payload an item may have.
inline constexpr uint64_t kMaxTarMemberBytes = 1ull << 30;

// Reads exactly n bytes at `offset` into dst; false at end of file or error.
using ReadAtFn = std::function<bool(uint64_t offset, size_t n, uint8_t* dst)>;

// The regular-file members of an archive of `size` bytes, in archive order;
// members left out go to *skipped (when given). Errors name `name`, the
// offset and the member concerned: Corruption for a damaged or truncated
// archive (bad checksum, a member running past the end, a header cut short,
// trailing bytes that are not zero blocks), and -- distinguishable by
// IsMissingEndOfArchive() -- a Corruption for an archive that ends at a member
// boundary without its end-of-archive marker (a copy cut between members
// looks exactly like that). Something that is not an uncompressed tar
// archive is a Corruption too. Memory: one 64 KiB read buffer plus the index.
StatusOr<std::vector<TarMember>> ReadTarIndex(const ReadAtFn& read, uint64_t size, std::string_view name,
                                              std::vector<TarSkip>* skipped = nullptr);
// True for ReadTarIndex's "no end-of-archive marker" error.
bool IsMissingEndOfArchive(const Status& s);

struct SourceItem;
// Lists the samples of one archive of `size` bytes read through `read` (what
// ListTars does for each shard file; the fuzz target calls it on memory).
// `file` is the archive's path (ByteRefs and messages), items are appended
// in key order of first appearance; skipped members become *notes.
// Sets *any_label / *any_multi / *any_target when an item carries one.
struct TarListFlags {
  bool any_label = false, any_multi = false, any_target = false;
};
Status ListTarArchive(const ReadAtFn& read, uint64_t size, const std::string& file, const std::string& split,
                      int64_t mtime_ns, std::vector<SourceItem>* items, TarListFlags* flags,
                      std::vector<std::string>* notes);
// Splits a member name into WebDataset key and lowercase extension.
void SplitTarKey(std::string_view member, std::string* key, std::string* ext);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_TAR_H_
