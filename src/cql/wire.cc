// Copyright (c) cqlstream authors.
#include "cql/wire.h"

#include <fmt/format.h>

#include <cassert>
#include <cstring>
#include <limits>

namespace cqlstream::cql {

// ---------------------------------------------------------------------------
// Addresses

std::string FormatAddress(ByteView a) {
  if (a.size() == 4) return fmt::format("{}.{}.{}.{}", a[0], a[1], a[2], a[3]);
  if (a.size() != 16) return fmt::format("<address of {} bytes>", a.size());
  uint16_t g[8];
  for (int i = 0; i < 8; ++i) g[i] = LoadU16(a.data() + 2 * i);
  // RFC 5952: the longest run (>= 2) of zero groups, the first on ties, becomes "::".
  int best = -1, best_len = 0;
  for (int i = 0; i < 8;) {
    if (g[i] != 0) {
      ++i;
      continue;
    }
    int j = i;
    while (j < 8 && g[j] == 0) ++j;
    if (j - i > best_len) best = i, best_len = j - i;
    i = j;
  }
  if (best_len < 2) best = -1;
  std::string s;
  for (int i = 0; i < 8; ++i) {
    if (i == best) {
      s += "::";
      i += best_len - 1;
      continue;
    }
    if (!s.empty() && s.back() != ':') s += ':';
    s += fmt::format("{:x}", g[i]);
  }
  return s;
}

std::string Inet::ToString() const {
  if (address.size() == 16) return fmt::format("[{}]:{}", FormatAddress(address), port);
  return fmt::format("{}:{}", FormatAddress(address), port);
}

// ---------------------------------------------------------------------------
// Writer

void Writer::Byte(uint8_t v) { out_->push_back(v); }

void Writer::Short(uint16_t v) {
  uint8_t b[2];
  StoreU16(b, v);
  out_->insert(out_->end(), b, b + 2);
}

void Writer::Int(int32_t v) {
  uint8_t b[4];
  StoreU32(b, static_cast<uint32_t>(v));
  out_->insert(out_->end(), b, b + 4);
}

void Writer::Long(int64_t v) {
  uint8_t b[8];
  StoreU64(b, static_cast<uint64_t>(v));
  out_->insert(out_->end(), b, b + 8);
}

void Writer::String(std::string_view s) {
  assert(s.size() <= std::numeric_limits<uint16_t>::max());
  Short(static_cast<uint16_t>(s.size()));
  out_->insert(out_->end(), s.begin(), s.end());
}

void Writer::LongString(std::string_view s) {
  assert(s.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()));
  Int(static_cast<int32_t>(s.size()));
  out_->insert(out_->end(), s.begin(), s.end());
}

void Writer::Uuid(const std::array<uint8_t, 16>& u) { out_->insert(out_->end(), u.begin(), u.end()); }

void Writer::StringList(const std::vector<std::string>& l) {
  assert(l.size() <= std::numeric_limits<uint16_t>::max());
  Short(static_cast<uint16_t>(l.size()));
  for (const auto& s : l) String(s);
}

void Writer::BytesValue(std::optional<ByteView> b) {
  if (!b) {
    Int(-1);
    return;
  }
  assert(b->size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()));
  Int(static_cast<int32_t>(b->size()));
  Raw(*b);
}

void Writer::UnsetValue() { Int(-2); }

void Writer::ShortBytes(ByteView b) {
  assert(b.size() <= std::numeric_limits<uint16_t>::max());
  Short(static_cast<uint16_t>(b.size()));
  Raw(b);
}

void Writer::Inet(const cql::Inet& i) {
  Byte(static_cast<uint8_t>(i.address.size()));
  Raw(i.address);
  Int(i.port);
}

void Writer::StringMap(const std::map<std::string, std::string>& m) {
  assert(m.size() <= std::numeric_limits<uint16_t>::max());
  Short(static_cast<uint16_t>(m.size()));
  for (const auto& [k, v] : m) {
    String(k);
    String(v);
  }
}

void Writer::StringMultimap(const std::map<std::string, std::vector<std::string>>& m) {
  assert(m.size() <= std::numeric_limits<uint16_t>::max());
  Short(static_cast<uint16_t>(m.size()));
  for (const auto& [k, v] : m) {
    String(k);
    StringList(v);
  }
}

void Writer::Raw(ByteView b) { out_->insert(out_->end(), b.begin(), b.end()); }

void Writer::PatchInt(size_t pos, int32_t v) {
  assert(pos + 4 <= out_->size());
  StoreU32(out_->data() + pos, static_cast<uint32_t>(v));
}

// ---------------------------------------------------------------------------
// Reader

Status Reader::Need(size_t n, std::string_view what) {
  if (remaining() >= n) return Status::OK();
  return Status::ProtocolError(fmt::format("{} at offset {}: expected {} bytes, got {}", what, pos_,
                                           n, remaining()));
}

Status Reader::Byte(uint8_t* v) {
  CQLS_RETURN_IF_ERROR(Need(1, "[byte]"));
  *v = data_[pos_++];
  return Status::OK();
}

Status Reader::Short(uint16_t* v) {
  CQLS_RETURN_IF_ERROR(Need(2, "[short]"));
  *v = LoadU16(data_.data() + pos_);
  pos_ += 2;
  return Status::OK();
}

Status Reader::Int(int32_t* v) {
  CQLS_RETURN_IF_ERROR(Need(4, "[int]"));
  *v = static_cast<int32_t>(LoadU32(data_.data() + pos_));
  pos_ += 4;
  return Status::OK();
}

Status Reader::Long(int64_t* v) {
  CQLS_RETURN_IF_ERROR(Need(8, "[long]"));
  *v = static_cast<int64_t>(LoadU64(data_.data() + pos_));
  pos_ += 8;
  return Status::OK();
}

Status Reader::String(std::string_view* s) {
  uint16_t n;
  CQLS_RETURN_IF_ERROR(Short(&n));
  CQLS_RETURN_IF_ERROR(Need(n, "[string] contents"));
  *s = std::string_view(reinterpret_cast<const char*>(data_.data() + pos_), n);
  pos_ += n;
  return Status::OK();
}

Status Reader::String(std::string* s) {
  std::string_view v;
  CQLS_RETURN_IF_ERROR(String(&v));
  s->assign(v);
  return Status::OK();
}

Status Reader::LongString(std::string_view* s) {
  int32_t n;
  CQLS_RETURN_IF_ERROR(Int(&n));
  if (n < 0) {
    return Status::ProtocolError(
        fmt::format("[long string] at offset {}: negative length {}", pos_ - 4, n));
  }
  CQLS_RETURN_IF_ERROR(Need(static_cast<size_t>(n), "[long string] contents"));
  *s = std::string_view(reinterpret_cast<const char*>(data_.data() + pos_), static_cast<size_t>(n));
  pos_ += static_cast<size_t>(n);
  return Status::OK();
}

Status Reader::Uuid(std::array<uint8_t, 16>* u) {
  CQLS_RETURN_IF_ERROR(Need(16, "[uuid]"));
  std::memcpy(u->data(), data_.data() + pos_, 16);
  pos_ += 16;
  return Status::OK();
}

Status Reader::StringList(std::vector<std::string>* l) {
  uint16_t n;
  CQLS_RETURN_IF_ERROR(Short(&n));
  // Every [string] takes at least 2 bytes: reject impossible counts before
  // reserving memory for them.
  CQLS_RETURN_IF_ERROR(Need(size_t{n} * 2, "[string list] entries"));
  l->clear();
  l->reserve(n);
  for (uint16_t i = 0; i < n; ++i) {
    std::string_view s;
    CQLS_RETURN_IF_ERROR(String(&s));
    l->emplace_back(s);
  }
  return Status::OK();
}

Status Reader::BytesValue(std::optional<ByteView>* b) {
  int32_t n;
  CQLS_RETURN_IF_ERROR(Int(&n));
  if (n < 0) {
    b->reset();
    return Status::OK();
  }
  CQLS_RETURN_IF_ERROR(Need(static_cast<size_t>(n), "[bytes] contents"));
  *b = data_.subspan(pos_, static_cast<size_t>(n));
  pos_ += static_cast<size_t>(n);
  return Status::OK();
}

Status Reader::ShortBytes(ByteView* b) {
  uint16_t n;
  CQLS_RETURN_IF_ERROR(Short(&n));
  CQLS_RETURN_IF_ERROR(Need(n, "[short bytes] contents"));
  *b = data_.subspan(pos_, n);
  pos_ += n;
  return Status::OK();
}

Status Reader::InetAddr(std::vector<uint8_t>* address) {
  uint8_t n;
  CQLS_RETURN_IF_ERROR(Byte(&n));
  if (n != 4 && n != 16) {
    return Status::ProtocolError(
        fmt::format("[inet] at offset {}: address size {} is neither 4 nor 16", pos_ - 1, n));
  }
  CQLS_RETURN_IF_ERROR(Need(n, "[inet] address"));
  address->assign(data_.begin() + static_cast<ptrdiff_t>(pos_),
                  data_.begin() + static_cast<ptrdiff_t>(pos_ + n));
  pos_ += n;
  return Status::OK();
}

Status Reader::Inet(cql::Inet* i) {
  CQLS_RETURN_IF_ERROR(InetAddr(&i->address));
  return Int(&i->port);
}

Status Reader::StringMap(std::map<std::string, std::string>* m) {
  uint16_t n;
  CQLS_RETURN_IF_ERROR(Short(&n));
  m->clear();
  for (uint16_t i = 0; i < n; ++i) {
    std::string k, v;
    CQLS_RETURN_IF_ERROR(String(&k));
    CQLS_RETURN_IF_ERROR(String(&v));
    (*m)[std::move(k)] = std::move(v);
  }
  return Status::OK();
}

Status Reader::StringMultimap(std::map<std::string, std::vector<std::string>>* m) {
  uint16_t n;
  CQLS_RETURN_IF_ERROR(Short(&n));
  m->clear();
  for (uint16_t i = 0; i < n; ++i) {
    std::string k;
    std::vector<std::string> v;
    CQLS_RETURN_IF_ERROR(String(&k));
    CQLS_RETURN_IF_ERROR(StringList(&v));
    (*m)[std::move(k)] = std::move(v);
  }
  return Status::OK();
}

Status Reader::BytesMap(std::map<std::string, std::optional<Bytes>>* m) {
  uint16_t n;
  CQLS_RETURN_IF_ERROR(Short(&n));
  m->clear();
  for (uint16_t i = 0; i < n; ++i) {
    std::string k;
    std::optional<ByteView> v;
    CQLS_RETURN_IF_ERROR(String(&k));
    CQLS_RETURN_IF_ERROR(BytesValue(&v));
    auto& slot = (*m)[std::move(k)];
    if (v) {
      slot = Bytes(v->begin(), v->end());
    } else {
      slot.reset();
    }
  }
  return Status::OK();
}

Status Reader::Raw(size_t n, ByteView* b) {
  CQLS_RETURN_IF_ERROR(Need(n, "raw bytes"));
  *b = data_.subspan(pos_, n);
  pos_ += n;
  return Status::OK();
}

Status Reader::Skip(size_t n) {
  CQLS_RETURN_IF_ERROR(Need(n, "skipped bytes"));
  pos_ += n;
  return Status::OK();
}

}  // namespace cqlstream::cql
