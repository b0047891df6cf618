// Copyright (c) cqlstream authors.
//
// The CQL value model: type names, UUIDs, values and their text form; the
// cell encoder and decoder are value_encode.cc and value_decode.cc.
#include "cqlstream/value.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <limits>

#include "cql/value_internal.h"
#include "cql/wire.h"

namespace cqlstream {

using value_internal::IsBlobKind;
using value_internal::KindName;

// ---------------------------------------------------------------------------
// DataType

namespace {

std::string_view SimpleTypeName(TypeId id) {
  switch (id) {
    case TypeId::kCustom: return "custom";
    case TypeId::kAscii: return "ascii";
    case TypeId::kBigint: return "bigint";
    case TypeId::kBlob: return "blob";
    case TypeId::kBoolean: return "boolean";
    case TypeId::kCounter: return "counter";
    case TypeId::kDecimal: return "decimal";
    case TypeId::kDouble: return "double";
    case TypeId::kFloat: return "float";
    case TypeId::kInt: return "int";
    case TypeId::kTimestamp: return "timestamp";
    case TypeId::kUuid: return "uuid";
    case TypeId::kVarchar: return "text";
    case TypeId::kVarint: return "varint";
    case TypeId::kTimeuuid: return "timeuuid";
    case TypeId::kInet: return "inet";
    case TypeId::kDate: return "date";
    case TypeId::kTime: return "time";
    case TypeId::kSmallint: return "smallint";
    case TypeId::kTinyint: return "tinyint";
    case TypeId::kDuration: return "duration";
    case TypeId::kList: return "list";
    case TypeId::kMap: return "map";
    case TypeId::kSet: return "set";
    case TypeId::kUdt: return "udt";
    case TypeId::kTuple: return "tuple";
  }
  return {};
}

void AppendTypeName(const DataType& t, std::string* s, int depth) {
  if (depth > kMaxTypeDepth) {
    *s += "...";
    return;
  }
  switch (t.id) {
    case TypeId::kCustom:
      *s += '\'';
      *s += t.custom_class;
      *s += '\'';
      return;
    case TypeId::kUdt:
      if (!t.udt_keyspace.empty()) {
        *s += t.udt_keyspace;
        *s += '.';
      }
      *s += t.udt_name;
      return;
    case TypeId::kList:
    case TypeId::kSet:
    case TypeId::kMap:
    case TypeId::kTuple: {
      *s += SimpleTypeName(t.id);
      *s += '<';
      for (size_t i = 0; i < t.params.size(); ++i) {
        if (i) *s += ", ";
        AppendTypeName(t.params[i], s, depth + 1);
      }
      *s += '>';
      return;
    }
    default: {
      std::string_view n = SimpleTypeName(t.id);
      if (n.empty()) {
        *s += fmt::format("type(0x{:04x})", static_cast<unsigned>(t.id));
      } else {
        *s += n;
      }
      return;
    }
  }
}

}  // namespace

std::string DataType::ToString() const {
  std::string s;
  AppendTypeName(*this, &s, 0);
  return s;
}

// ---------------------------------------------------------------------------
// Uuid

namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

StatusOr<Uuid> Uuid::Parse(std::string_view text) {
  if (text.size() != 36) {
    return Status::InvalidArgument(
        fmt::format("uuid '{}': expected 36 characters, got {}", text.substr(0, 64), text.size()));
  }
  Uuid u;
  size_t out = 0;
  for (size_t i = 0; i < 36;) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (text[i] != '-') {
        return Status::InvalidArgument(
            fmt::format("uuid '{}': expected '-' at position {}", text, i));
      }
      ++i;
      continue;
    }
    int hi = HexDigit(text[i]), lo = HexDigit(text[i + 1]);
    if (hi < 0 || lo < 0) {
      return Status::InvalidArgument(
          fmt::format("uuid '{}': not a hex digit at position {}", text, hi < 0 ? i : i + 1));
    }
    u.bytes[out++] = static_cast<uint8_t>(hi << 4 | lo);
    i += 2;
  }
  return u;
}

std::string Uuid::ToString() const {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(36);
  for (size_t i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += kHex[bytes[i] >> 4];
    s += kHex[bytes[i] & 0xf];
  }
  return s;
}

// ---------------------------------------------------------------------------
// Value

namespace {

// Proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's
// civil_from_days).
void CivilFromDays(int64_t z, int64_t* y, unsigned* m, unsigned* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = static_cast<int64_t>(yoe) + era * 400 + (*m <= 2);
}

std::string FormatTimestamp(int64_t millis) {
  constexpr int64_t kDay = 86'400'000;
  int64_t days = millis / kDay, rem = millis % kDay;
  if (rem < 0) rem += kDay, --days;
  int64_t y;
  unsigned m, d;
  CivilFromDays(days, &y, &m, &d);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", y, m, d, rem / 3'600'000,
                     rem / 60'000 % 60, rem / 1000 % 60, rem % 1000);
}

void AppendValue(const Value& v, std::string* s, int depth) {
  if (depth > kMaxTypeDepth) {
    *s += "...";
    return;
  }
  switch (v.kind()) {
    case Value::Kind::kNull: *s += "null"; return;
    case Value::Kind::kUnset: *s += "unset"; return;
    case Value::Kind::kBoolean: *s += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::kInt: *s += fmt::format("{}", v.as_int()); return;
    case Value::Kind::kBigint: *s += fmt::format("{}", v.as_bigint()); return;
    case Value::Kind::kDouble: *s += fmt::format("{}", v.as_double()); return;
    case Value::Kind::kText: {
      constexpr size_t kMax = 64;
      const std::string& t = v.as_text();
      *s += '\'';
      s->append(t, 0, kMax);
      if (t.size() > kMax) *s += fmt::format("...({} bytes)", t.size());
      *s += '\'';
      return;
    }
    case Value::Kind::kBlob:
    case Value::Kind::kBlobRef: {
      constexpr size_t kMax = 32;
      auto b = v.as_blob();
      *s += "0x";
      for (size_t i = 0; i < b.size() && i < kMax; ++i) *s += fmt::format("{:02x}", b[i]);
      if (b.size() > kMax) *s += fmt::format("...({} bytes)", b.size());
      return;
    }
    case Value::Kind::kUuid: *s += v.as_uuid().ToString(); return;
    case Value::Kind::kTimestamp: *s += FormatTimestamp(v.as_timestamp().millis); return;
    case Value::Kind::kList: {
      *s += '[';
      bool first = true;
      for (const auto& e : v.as_list()) {
        if (!first) *s += ", ";
        first = false;
        AppendValue(e, s, depth + 1);
      }
      *s += ']';
      return;
    }
    case Value::Kind::kMap: {
      *s += '{';
      bool first = true;
      for (const auto& [k, e] : v.as_map()) {
        if (!first) *s += ", ";
        first = false;
        AppendValue(k, s, depth + 1);
        *s += ": ";
        AppendValue(e, s, depth + 1);
      }
      *s += '}';
      return;
    }
  }
}

}  // namespace

std::string Value::ToString() const {
  std::string s;
  AppendValue(*this, &s, 0);
  return s;
}

bool Value::operator==(const Value& o) const {
  // An owned blob and a referenced blob with the same bytes are equal.
  if (IsBlobKind(kind()) && IsBlobKind(o.kind())) {
    auto a = as_blob(), b = o.as_blob();
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
  }
  if (kind() != o.kind()) return false;
  switch (kind()) {
    case Kind::kNull:
    case Kind::kUnset: return true;
    case Kind::kBoolean: return as_bool() == o.as_bool();
    case Kind::kInt: return as_int() == o.as_int();
    case Kind::kBigint: return as_bigint() == o.as_bigint();
    // Bitwise, so that a value equals itself even when it is a NaN.
    case Kind::kDouble:
      return std::bit_cast<uint64_t>(as_double()) == std::bit_cast<uint64_t>(o.as_double());
    case Kind::kText: return as_text() == o.as_text();
    case Kind::kUuid: return as_uuid() == o.as_uuid();
    case Kind::kTimestamp: return as_timestamp() == o.as_timestamp();
    case Kind::kList: return as_list() == o.as_list();
    case Kind::kMap: return as_map() == o.as_map();
    case Kind::kBlob:
    case Kind::kBlobRef: break;  // handled above
  }
  return false;
}

// ---------------------------------------------------------------------------
// Shared by the encoder and the decoder (value_internal.h)

namespace value_internal {

bool IsBlobKind(Value::Kind k) { return k == Value::Kind::kBlob || k == Value::Kind::kBlobRef; }

std::string_view KindName(Value::Kind k) {
  switch (k) {
    case Value::Kind::kNull: return "null";
    case Value::Kind::kUnset: return "unset";
    case Value::Kind::kBoolean: return "boolean";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kBigint: return "bigint";
    case Value::Kind::kDouble: return "double";
    case Value::Kind::kText: return "text";
    case Value::Kind::kBlob: return "blob";
    case Value::Kind::kBlobRef: return "blob";
    case Value::Kind::kUuid: return "uuid";
    case Value::Kind::kTimestamp: return "timestamp";
    case Value::Kind::kList: return "list";
    case Value::Kind::kMap: return "map";
  }
  return "unknown";
}

int FixedSize(TypeId id) {
  switch (id) {
    case TypeId::kBoolean:
    case TypeId::kTinyint: return 1;
    case TypeId::kSmallint: return 2;
    case TypeId::kInt:
    case TypeId::kFloat:
    case TypeId::kDate: return 4;
    case TypeId::kBigint:
    case TypeId::kCounter:
    case TypeId::kDouble:
    case TypeId::kTimestamp:
    case TypeId::kTime: return 8;
    case TypeId::kUuid:
    case TypeId::kTimeuuid: return 16;
    default: return -1;
  }
}

}  // namespace value_internal

}  // namespace cqlstream
