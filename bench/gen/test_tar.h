// Copyright (c) cqlstream authors.
//
// Test helper: a strict reader of the ustar archives TarWriter produces
// (regular files only), checking header checksums, magic, padding and the
// end-of-archive blocks. Header-only; for tests.
#ifndef CQLSTREAM_BENCH_GEN_TEST_TAR_H_
#define CQLSTREAM_BENCH_GEN_TEST_TAR_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "cqlstream/status.h"

namespace cqlstream::gen::testing {

struct TarMember {
  std::string name;
  std::string data;
  uint64_t mtime = 0;
};

inline uint64_t ParseOctal(const char* p, size_t len) {
  uint64_t v = 0;
  for (size_t i = 0; i < len && p[i] >= '0' && p[i] <= '7'; ++i) v = v * 8 + static_cast<uint64_t>(p[i] - '0');
  return v;
}

inline StatusOr<std::vector<TarMember>> ParseTar(const std::string& tar) {
  std::vector<TarMember> out;
  if (tar.size() % 512 != 0) return Status::Corruption("archive size not a multiple of 512");
  size_t pos = 0;
  while (true) {
    if (pos + 512 > tar.size()) return Status::Corruption("missing end-of-archive blocks");
    const char* h = tar.data() + pos;
    bool zero = true;
    for (size_t i = 0; i < 512; ++i) zero = zero && h[i] == 0;
    if (zero) {
      if (pos + 1024 != tar.size()) return Status::Corruption("end blocks not at the end");
      for (size_t i = 512; i < 1024; ++i) {
        if (h[i] != 0) return Status::Corruption("second end block not zero");
      }
      return out;
    }
    unsigned sum = 0;
    for (size_t i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
    if (ParseOctal(h + 148, 8) != sum) return Status::Corruption("bad header checksum");
    if (std::memcmp(h + 257, "ustar\0" "00", 8) != 0) return Status::Corruption("not ustar");
    if (h[156] != '0') return Status::Corruption("not a regular file");
    TarMember m;
    std::string prefix(h + 345, strnlen(h + 345, 155));
    m.name = std::string(h, strnlen(h, 100));
    if (!prefix.empty()) m.name = prefix + "/" + m.name;
    m.mtime = ParseOctal(h + 136, 12);
    const uint64_t size = ParseOctal(h + 124, 12);
    pos += 512;
    if (pos + size > tar.size()) return Status::Corruption("member runs past the end");
    m.data = tar.substr(pos, size);
    pos += (size + 511) / 512 * 512;
    for (size_t i = size; i < (size + 511) / 512 * 512; ++i) {
      if (tar[pos - (size + 511) / 512 * 512 + i] != 0) return Status::Corruption("padding not zero");
    }
    out.push_back(std::move(m));
  }
}

}  // namespace cqlstream::gen::testing

#endif  // CQLSTREAM_BENCH_GEN_TEST_TAR_H_
