// Copyright (c) cqlstream authors.
#include "gen/tar_writer.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

namespace cqlstream::gen {
namespace {

// Writes `value` as zero-padded octal into field[0..len-2] plus a NUL.
bool PutOctal(char* field, size_t len, uint64_t value) {
  std::string s = fmt::format("{:0{}o}", value, len - 1);
  if (s.size() > len - 1) return false;
  std::memcpy(field, s.data(), len - 1);
  field[len - 1] = '\0';
  return true;
}

}  // namespace

StatusOr<std::array<char, kTarBlock>> UstarHeader(std::string_view name, uint64_t size,
                                                  uint64_t mtime) {
  std::array<char, kTarBlock> h{};
  std::string_view prefix;
  if (name.empty()) return Status::InvalidArgument("empty tar member name");
  if (name.size() > 100) {
    // Split at the last '/' that leaves <= 100 bytes of name and <= 155 of prefix.
    // (An earlier '/' would only leave a longer name.)
    const size_t cut = name.rfind('/', 155);
    if (cut == std::string_view::npos || cut == 0 || name.size() - cut - 1 > 100) {
      return Status::InvalidArgument(fmt::format("tar member name too long: '{}'", name));
    }
    prefix = name.substr(0, cut);
    name = name.substr(cut + 1);
  }
  std::memcpy(h.data() + 0, name.data(), name.size());        // name[100]
  PutOctal(h.data() + 100, 8, 0644);                           // mode
  PutOctal(h.data() + 108, 8, 0);                              // uid
  PutOctal(h.data() + 116, 8, 0);                              // gid
  if (!PutOctal(h.data() + 124, 12, size)) {                   // size
    return Status::InvalidArgument(fmt::format("tar member too large: {} bytes", size));
  }
  if (!PutOctal(h.data() + 136, 12, mtime)) return Status::InvalidArgument("mtime out of range");
  h[156] = '0';                                                // typeflag: regular file
  std::memcpy(h.data() + 257, "ustar", 6);                     // magic "ustar\0"
  std::memcpy(h.data() + 263, "00", 2);                        // version
  std::memcpy(h.data() + 345, prefix.data(), prefix.size());   // prefix[155]
  // Checksum: sum of all header bytes with the checksum field as spaces.
  std::memset(h.data() + 148, ' ', 8);
  unsigned sum = 0;
  for (char c : h) sum += static_cast<unsigned char>(c);
  std::string chk = fmt::format("{:06o}", sum);
  std::memcpy(h.data() + 148, chk.data(), 6);
  h[154] = '\0';
  h[155] = ' ';
  return h;
}

StatusOr<std::unique_ptr<TarWriter>> TarWriter::Create(const std::string& path, uint64_t mtime) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::IOError(fmt::format("{}: {}", path, std::strerror(errno)));
  std::setvbuf(f, nullptr, _IOFBF, 1 << 20);
  return std::unique_ptr<TarWriter>(new TarWriter(f, path, mtime));
}

TarWriter::~TarWriter() {
  if (f_ != nullptr) std::fclose(f_);
}

Status TarWriter::Write(const void* data, size_t n) {
  if (f_ == nullptr) return Status::Internal("tar writer already finished");
  if (n > 0 && std::fwrite(data, 1, n, f_) != n) {
    return Status::IOError(fmt::format("{}: {}", path_, std::strerror(errno)));
  }
  written_ += n;
  return Status::OK();
}

Status TarWriter::Add(std::string_view name, std::span<const uint8_t> data) {
  CQLS_ASSIGN_OR_RETURN(auto header, UstarHeader(name, data.size(), mtime_));
  CQLS_RETURN_IF_ERROR(Write(header.data(), header.size()));
  CQLS_RETURN_IF_ERROR(Write(data.data(), data.size()));
  static const char kZeros[kTarBlock] = {};
  const size_t pad = (kTarBlock - data.size() % kTarBlock) % kTarBlock;
  return Write(kZeros, pad);
}

Status TarWriter::Finish() {
  static const char kZeros[2 * kTarBlock] = {};
  CQLS_RETURN_IF_ERROR(Write(kZeros, sizeof(kZeros)));
  std::FILE* f = f_;
  f_ = nullptr;
  if (std::fclose(f) != 0) return Status::IOError(fmt::format("{}: {}", path_, std::strerror(errno)));
  return Status::OK();
}

}  // namespace cqlstream::gen
