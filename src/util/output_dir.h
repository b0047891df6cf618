// Copyright (c) cqlstream authors.
//
// OutputDir: writing files under a folder the user named, without trusting
// what is already in it or what the file names say.
//
//  * Every file is opened relative to a directory descriptor of the root,
//    walking the relative path one component at a time with O_NOFOLLOW: a
//    symbolic link already present in the tree (as a folder or as the file)
//    is refused, never followed out of the root.
//  * Files are created with O_EXCL: an existing file is never truncated or
//    overwritten (CreateExclusive reports that the name is taken).
//  * Open() refuses a root that is not empty unless `allow_non_empty` (the
//    CLI's --force); even then, existing files are left as they are.
//
// Relative paths must not be absolute or contain "..", "." or empty
// components (callers make names safe first; a violation is InvalidArgument).
//
// Thread-safety: after Open(), the methods may be called from several threads
// at once (each opens its own descriptors). Not movable while in use.
#ifndef CQLSTREAM_UTIL_OUTPUT_DIR_H_
#define CQLSTREAM_UTIL_OUTPUT_DIR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "cqlstream/status.h"

namespace cqlstream {

class OutputDir {
 public:
  // Creates `path` (and its parents) if missing, then opens it.
  static StatusOr<std::unique_ptr<OutputDir>> Open(const std::string& path, bool allow_non_empty);
  ~OutputDir();
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;

  // Creates the empty file `rel` (and missing folders on the way). Returns
  // false when the name already exists (nothing is changed then).
  StatusOr<bool> CreateExclusive(const std::string& rel) const;
  // Writes `n` bytes at the end of `rel`, a file this process created with
  // CreateExclusive (opened without O_CREAT, O_TRUNC or following links).
  Status Append(const std::string& rel, const uint8_t* data, size_t n) const;
  // Removes `rel` (a file); missing is not an error.
  Status Remove(const std::string& rel) const;

  const std::string& path() const { return path_; }

 private:
  OutputDir(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  // Opens the folder holding `rel` (creating missing ones when `create`),
  // returning its descriptor and the file name in *leaf.
  StatusOr<int> OpenParent(const std::string& rel, bool create, std::string* leaf) const;

  int fd_;
  std::string path_;
};

}  // namespace cqlstream

#endif  // CQLSTREAM_UTIL_OUTPUT_DIR_H_
