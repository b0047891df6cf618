// Copyright (c) cqlstream authors.
//
// Primitive notations of the CQL native protocol v4 (spec section 3):
// [byte] [short] [int] [long] [string] [long string] [uuid] [string list]
// [bytes] [value] [short bytes] [inet] [consistency] [string map]
// [string multimap] [bytes map]. All integers are big-endian.
//
// Writer appends to a caller-owned byte vector. Reader decodes from a
// caller-owned span and never reads past its end: every failure is a
// Status::ProtocolError that names the notation, the offset, how many bytes
// it expected and how many were left.
//
// Thread-safety: not thread-safe; use one Reader/Writer per thread.
// Ownership: Reader returns views (std::span / std::string_view) into the
// span it was given; they are valid while that memory is.
#ifndef CQLSTREAM_CQL_WIRE_H_
#define CQLSTREAM_CQL_WIRE_H_

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cqlstream/status.h"

namespace cqlstream::cql {

using Bytes = std::vector<uint8_t>;
using ByteView = std::span<const uint8_t>;

// [inet]: an address (4 or 16 bytes) and a port.
struct Inet {
  std::vector<uint8_t> address;  // 4 (IPv4) or 16 (IPv6) bytes
  int32_t port = 0;
  std::string ToString() const;  // "127.0.0.1:9042" / "[::1]:9042"
  bool operator==(const Inet&) const = default;
};

// Formats a 4- or 16-byte address as text ("127.0.0.1", "::1").
std::string FormatAddress(ByteView address);

class Writer {
 public:
  explicit Writer(Bytes* out) : out_(out) {}

  void Byte(uint8_t v);
  void Short(uint16_t v);
  void Int(int32_t v);
  void Long(int64_t v);
  void String(std::string_view s);          // [string]: [short] n + n bytes; REQUIRES: n <= 65535
  void LongString(std::string_view s);      // [long string]
  void Uuid(const std::array<uint8_t, 16>& u);
  void StringList(const std::vector<std::string>& l);
  void BytesValue(std::optional<ByteView> b);  // [bytes]; nullopt -> length -1 (null)
  void UnsetValue();                           // [value] "not set": length -2
  void ShortBytes(ByteView b);
  void Inet(const cql::Inet& i);
  void Consistency(uint16_t c) { Short(c); }
  void StringMap(const std::map<std::string, std::string>& m);
  void StringMultimap(const std::map<std::string, std::vector<std::string>>& m);
  void Raw(ByteView b);                        // bytes without a length prefix

  size_t size() const { return out_->size(); }
  // Overwrites a 4-byte big-endian int previously written at `pos`.
  void PatchInt(size_t pos, int32_t v);

 private:
  Bytes* out_;
};

class Reader {
 public:
  explicit Reader(ByteView data) : data_(data) {}

  size_t offset() const { return pos_; }
  size_t remaining() const { return data_.size() - pos_; }
  bool empty() const { return remaining() == 0; }

  Status Byte(uint8_t* v);
  Status Short(uint16_t* v);
  Status Int(int32_t* v);
  Status Long(int64_t* v);
  Status String(std::string_view* s);
  Status String(std::string* s);
  Status LongString(std::string_view* s);
  Status Uuid(std::array<uint8_t, 16>* u);
  Status StringList(std::vector<std::string>* l);
  // [bytes]: nullopt for a null value (negative length).
  Status BytesValue(std::optional<ByteView>* b);
  Status ShortBytes(ByteView* b);
  Status Inet(cql::Inet* i);
  Status InetAddr(std::vector<uint8_t>* address);  // [inetaddr]: no port (EVENT bodies)
  Status Consistency(uint16_t* c) { return Short(c); }
  Status StringMap(std::map<std::string, std::string>* m);
  Status StringMultimap(std::map<std::string, std::vector<std::string>>* m);
  Status BytesMap(std::map<std::string, std::optional<Bytes>>* m);
  // Exactly n bytes without a length prefix.
  Status Raw(size_t n, ByteView* b);
  Status Skip(size_t n);

 private:
  Status Need(size_t n, std::string_view what);
  ByteView data_;
  size_t pos_ = 0;
};

// Big-endian helpers on raw memory.
inline uint16_t LoadU16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
inline uint32_t LoadU32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}
inline uint64_t LoadU64(const uint8_t* p) {
  return (uint64_t{LoadU32(p)} << 32) | LoadU32(p + 4);
}
inline void StoreU16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void StoreU32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}
inline void StoreU64(uint8_t* p, uint64_t v) {
  StoreU32(p, static_cast<uint32_t>(v >> 32));
  StoreU32(p + 4, static_cast<uint32_t>(v));
}

}  // namespace cqlstream::cql

#endif  // CQLSTREAM_CQL_WIRE_H_
