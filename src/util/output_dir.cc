// Copyright (c) cqlstream authors.
#include "util/output_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace cqlstream {
namespace {

std::string Errno(int e) { return std::strerror(e); }

// Whether the folder open at `fd` has an entry other than "." and "..".
StatusOr<bool> HasEntries(int fd, const std::string& path) {
  const int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return Status::IOError(fmt::format("cannot read folder '{}': {}", path, Errno(errno)));
  DIR* d = ::fdopendir(dup);
  if (d == nullptr) {
    const int e = errno;
    ::close(dup);
    return Status::IOError(fmt::format("cannot read folder '{}': {}", path, Errno(e)));
  }
  bool any = false;
  while (const dirent* ent = ::readdir(d)) {
    if (std::strcmp(ent->d_name, ".") != 0 && std::strcmp(ent->d_name, "..") != 0) {
      any = true;
      break;
    }
  }
  ::closedir(d);
  return any;
}

Status WriteAll(int fd, const uint8_t* data, size_t n, const std::string& what) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::IOError(fmt::format("write to '{}' failed: {}", what, Errno(errno)));
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

}  // namespace

StatusOr<std::unique_ptr<OutputDir>> OutputDir::Open(const std::string& path, bool allow_non_empty) {
  if (path.empty()) return Status::InvalidArgument("no output folder given");
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return Status::IOError(fmt::format("cannot create the output folder '{}': {}", path, ec.message()));
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::IOError(fmt::format("cannot open the output folder '{}': {}", path, Errno(errno)));
  std::unique_ptr<OutputDir> out(new OutputDir(fd, path));
  if (!allow_non_empty) {
    CQLS_ASSIGN_OR_RETURN(bool any, HasEntries(fd, path));
    if (any) {
      return Status::InvalidArgument(fmt::format(
          "the output folder '{}' is not empty (use --force to write into it; existing files are never "
          "overwritten)",
          path));
    }
  }
  return out;
}

OutputDir::~OutputDir() { ::close(fd_); }

StatusOr<int> OutputDir::OpenParent(const std::string& rel, bool create, std::string* leaf) const {
  if (rel.empty() || rel.front() == '/' || rel.find('\0') != std::string::npos) {
    return Status::InvalidArgument(fmt::format("unsafe output name '{}'", rel));
  }
  int dir = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (dir < 0) return Status::IOError(fmt::format("cannot use folder '{}': {}", path_, Errno(errno)));
  size_t i = 0;
  for (;;) {
    const size_t slash = rel.find('/', i);
    const std::string comp = rel.substr(i, slash == std::string::npos ? std::string::npos : slash - i);
    if (comp.empty() || comp == "." || comp == "..") {
      ::close(dir);
      return Status::InvalidArgument(fmt::format("unsafe output name '{}'", rel));
    }
    if (slash == std::string::npos) {
      *leaf = comp;
      return dir;
    }
    if (create && ::mkdirat(dir, comp.c_str(), 0755) != 0 && errno != EEXIST) {
      const int e = errno;
      ::close(dir);
      return Status::IOError(fmt::format("cannot create folder '{}' in '{}': {}", rel.substr(0, slash), path_,
                                         Errno(e)));
    }
    const int next = ::openat(dir, comp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const int e = errno;
    ::close(dir);
    if (next < 0) {
      return Status::IOError(fmt::format("cannot open folder '{}' in '{}'{}: {}", rel.substr(0, slash), path_,
                                         e == ELOOP || e == ENOTDIR ? " (a symbolic link or not a folder: refused)"
                                                                    : "",
                                         Errno(e)));
    }
    dir = next;
    i = slash + 1;
  }
}

StatusOr<bool> OutputDir::CreateExclusive(const std::string& rel) const {
  std::string leaf;
  CQLS_ASSIGN_OR_RETURN(int dir, OpenParent(rel, true, &leaf));
  const int fd = ::openat(dir, leaf.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  const int e = errno;
  ::close(dir);
  if (fd < 0) {
    if (e == EEXIST) return false;
    return Status::IOError(fmt::format("cannot create '{}' in '{}': {}", rel, path_, Errno(e)));
  }
  if (::close(fd) != 0) return Status::IOError(fmt::format("closing '{}' failed: {}", rel, Errno(errno)));
  return true;
}

Status OutputDir::Append(const std::string& rel, const uint8_t* data, size_t n) const {
  std::string leaf;
  CQLS_ASSIGN_OR_RETURN(int dir, OpenParent(rel, false, &leaf));
  const int fd = ::openat(dir, leaf.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
  const int e = errno;
  ::close(dir);
  if (fd < 0) return Status::IOError(fmt::format("cannot write '{}' in '{}': {}", rel, path_, Errno(e)));
  Status st = WriteAll(fd, data, n, rel);
  if (::close(fd) != 0 && st.ok()) st = Status::IOError(fmt::format("closing '{}' failed: {}", rel, Errno(errno)));
  return st;
}

Status OutputDir::Remove(const std::string& rel) const {
  std::string leaf;
  CQLS_ASSIGN_OR_RETURN(int dir, OpenParent(rel, false, &leaf));
  const int r = ::unlinkat(dir, leaf.c_str(), 0);
  const int e = errno;
  ::close(dir);
  if (r != 0 && e != ENOENT) return Status::IOError(fmt::format("cannot remove '{}': {}", rel, Errno(e)));
  return Status::OK();
}

}  // namespace cqlstream
