// Copyright (c) cqlstream authors.
//
// A minimal POSIX ustar writer for WebDataset-style shards: regular files
// only, written in the order added, with fixed metadata (mode 0644, uid/gid 0,
// mtime given once) so the same members give a byte-identical archive.
//
// Layout: per member a 512-byte ustar header, the data, zero padding to a
// multiple of 512; the archive ends with two 512-byte zero blocks.
//
// Ownership: a TarWriter owns its FILE until Finish() or destruction (which
// closes without the end blocks: an unfinished archive). Not thread-safe.
#ifndef CQLSTREAM_BENCH_GEN_TAR_WRITER_H_
#define CQLSTREAM_BENCH_GEN_TAR_WRITER_H_

#include <array>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "cqlstream/status.h"

namespace cqlstream::gen {

inline constexpr size_t kTarBlock = 512;

// The ustar header of a regular file. Names up to 100 bytes go into `name`;
// longer ones (up to 255) are split at a '/' into prefix and name.
// InvalidArgument if the name does not fit or the size needs more than 11
// octal digits (8 GiB).
StatusOr<std::array<char, kTarBlock>> UstarHeader(std::string_view name, uint64_t size,
                                                  uint64_t mtime);

class TarWriter {
 public:
  static StatusOr<std::unique_ptr<TarWriter>> Create(const std::string& path, uint64_t mtime = 0);
  ~TarWriter();
  TarWriter(const TarWriter&) = delete;
  TarWriter& operator=(const TarWriter&) = delete;

  Status Add(std::string_view name, std::span<const uint8_t> data);
  // Writes the end-of-archive blocks and closes the file.
  Status Finish();
  uint64_t bytes_written() const { return written_; }

 private:
  TarWriter(std::FILE* f, std::string path, uint64_t mtime)
      : f_(f), path_(std::move(path)), mtime_(mtime) {}
  Status Write(const void* data, size_t n);

  std::FILE* f_;
  std::string path_;
  uint64_t mtime_;
  uint64_t written_ = 0;
};

}  // namespace cqlstream::gen

#endif  // CQLSTREAM_BENCH_GEN_TAR_WRITER_H_
