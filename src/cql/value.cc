// Copyright (c) cqlstream authors.
//
// Cell serialization of the CQL types cqlstream models (spec section 6).
#include "cqlstream/value.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <limits>

#include "cql/wire.h"

namespace cqlstream {

using cql::LoadU16;
using cql::LoadU32;
using cql::LoadU64;
using cql::StoreU32;
using cql::StoreU64;

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

bool IsBlobKind(Value::Kind k) { return k == Value::Kind::kBlob || k == Value::Kind::kBlobRef; }

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
// Encoding

namespace {

Status Mismatch(const Value& v, const DataType& type) {
  return Status::InvalidArgument(
      fmt::format("cannot encode a {} value as CQL type {}", KindName(v.kind()), type.ToString()));
}

Status DepthError(const DataType& type) {
  return Status::InvalidArgument(
      fmt::format("CQL type {} nests deeper than {} levels", type.ToString(), kMaxTypeDepth));
}

void PutU32(std::vector<uint8_t>* out, uint32_t v) {
  uint8_t b[4];
  StoreU32(b, v);
  out->insert(out->end(), b, b + 4);
}

void PutU64(std::vector<uint8_t>* out, uint64_t v) {
  uint8_t b[8];
  StoreU64(b, v);
  out->insert(out->end(), b, b + 8);
}

void PutBytes(std::vector<uint8_t>* out, std::span<const uint8_t> b) {
  out->insert(out->end(), b.begin(), b.end());
}

// Returns the offset of the first byte that is not part of valid UTF-8, or
// npos.
size_t InvalidUtf8At(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  size_t i = 0, n = s.size();
  while (i < n) {
    uint8_t c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07;
    } else {
      return i;
    }
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return i;
      cp = cp << 6 | (p[i + k] & 0x3f);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += len;
  }
  return std::string_view::npos;
}

// The size a cell of a fixed-size type must have, or -1.
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

Status EncodeImpl(const Value& v, const DataType& type, std::vector<uint8_t>* out, int depth);

// Encodes `elements` ([int] n, then n [bytes]) of a list/set/map cell.
Status EncodeElement(const Value& e, const DataType& collection, const DataType& elem_type,
                     std::vector<uint8_t>* out, int depth) {
  if (e.kind() == Value::Kind::kNull || e.kind() == Value::Kind::kUnset) {
    return Status::InvalidArgument(
        fmt::format("{} element in a value of CQL type {}: collections cannot hold nulls",
                    KindName(e.kind()), collection.ToString()));
  }
  size_t at = out->size();
  PutU32(out, 0);
  CQLS_RETURN_IF_ERROR(EncodeImpl(e, elem_type, out, depth + 1));
  size_t n = out->size() - at - 4;
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Status::InvalidArgument(fmt::format("element of {} bytes is too large", n));
  }
  StoreU32(out->data() + at, static_cast<uint32_t>(n));
  return Status::OK();
}

Status CheckCount(size_t n, const DataType& type) {
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Status::InvalidArgument(fmt::format("{} elements are too many for {}", n, type.ToString()));
  }
  return Status::OK();
}

Status EncodeImpl(const Value& v, const DataType& type, std::vector<uint8_t>* out, int depth) {
  if (depth > kMaxTypeDepth) return DepthError(type);
  const Value::Kind k = v.kind();
  if (k == Value::Kind::kNull || k == Value::Kind::kUnset) {
    return Status::InvalidArgument(fmt::format(
        "a {} value has no cell bytes (CQL type {}): encode it as a length of {}", KindName(k),
        type.ToString(), k == Value::Kind::kNull ? -1 : -2));
  }
  switch (type.id) {
    case TypeId::kAscii: {
      if (k != Value::Kind::kText) return Mismatch(v, type);
      const std::string& s = v.as_text();
      for (size_t i = 0; i < s.size(); ++i) {
        if (static_cast<uint8_t>(s[i]) >= 0x80) {
          return Status::InvalidArgument(fmt::format(
              "text value is not valid for CQL type ascii: byte 0x{:02x} at offset {}",
              static_cast<uint8_t>(s[i]), i));
        }
      }
      out->insert(out->end(), s.begin(), s.end());
      return Status::OK();
    }
    case TypeId::kVarchar: {
      if (k != Value::Kind::kText) return Mismatch(v, type);
      const std::string& s = v.as_text();
      if (size_t bad = InvalidUtf8At(s); bad != std::string_view::npos) {
        return Status::InvalidArgument(fmt::format(
            "text value is not valid UTF-8 for CQL type text: bad sequence at offset {}", bad));
      }
      out->insert(out->end(), s.begin(), s.end());
      return Status::OK();
    }
    case TypeId::kBlob:
      if (!IsBlobKind(k)) return Mismatch(v, type);
      PutBytes(out, v.as_blob());
      return Status::OK();
    case TypeId::kBoolean:
      if (k != Value::Kind::kBoolean) return Mismatch(v, type);
      out->push_back(v.as_bool() ? 1 : 0);
      return Status::OK();
    case TypeId::kInt:
      if (k != Value::Kind::kInt) return Mismatch(v, type);
      PutU32(out, static_cast<uint32_t>(v.as_int()));
      return Status::OK();
    case TypeId::kBigint:
    case TypeId::kCounter:
      // An int widens to bigint without loss.
      if (k == Value::Kind::kInt) {
        PutU64(out, static_cast<uint64_t>(int64_t{v.as_int()}));
        return Status::OK();
      }
      if (k != Value::Kind::kBigint) return Mismatch(v, type);
      PutU64(out, static_cast<uint64_t>(v.as_bigint()));
      return Status::OK();
    case TypeId::kDouble:
      if (k != Value::Kind::kDouble) return Mismatch(v, type);
      PutU64(out, std::bit_cast<uint64_t>(v.as_double()));
      return Status::OK();
    case TypeId::kTimestamp:
      if (k != Value::Kind::kTimestamp) return Mismatch(v, type);
      PutU64(out, static_cast<uint64_t>(v.as_timestamp().millis));
      return Status::OK();
    case TypeId::kUuid:
      if (k != Value::Kind::kUuid) return Mismatch(v, type);
      PutBytes(out, v.as_uuid().bytes);
      return Status::OK();
    case TypeId::kTimeuuid:
      if (k != Value::Kind::kUuid) return Mismatch(v, type);
      if (v.as_uuid().Version() != 1) {
        return Status::InvalidArgument(fmt::format(
            "uuid {} (version {}) is not valid for CQL type timeuuid, which needs version 1",
            v.as_uuid().ToString(), v.as_uuid().Version()));
      }
      PutBytes(out, v.as_uuid().bytes);
      return Status::OK();
    case TypeId::kSmallint:
    case TypeId::kTinyint:
      // An int narrows when it fits; raw bytes are accepted below.
      if (k == Value::Kind::kInt) {
        int32_t i = v.as_int();
        bool small = type.id == TypeId::kSmallint;
        int32_t lo = small ? -32768 : -128, hi = small ? 32767 : 127;
        if (i < lo || i > hi) {
          return Status::InvalidArgument(
              fmt::format("int value {} is out of range for CQL type {}", i, type.ToString()));
        }
        if (small) out->push_back(static_cast<uint8_t>(static_cast<uint16_t>(i) >> 8));
        out->push_back(static_cast<uint8_t>(i));
        return Status::OK();
      }
      break;
    case TypeId::kList:
    case TypeId::kSet: {
      if (k != Value::Kind::kList) return Mismatch(v, type);
      if (type.params.size() != 1) {
        return Status::InvalidArgument(fmt::format("CQL type {} needs 1 element type, has {}",
                                                   type.ToString(), type.params.size()));
      }
      const ValueList& l = v.as_list();
      CQLS_RETURN_IF_ERROR(CheckCount(l.size(), type));
      PutU32(out, static_cast<uint32_t>(l.size()));
      for (const Value& e : l) CQLS_RETURN_IF_ERROR(EncodeElement(e, type, type.params[0], out, depth));
      return Status::OK();
    }
    case TypeId::kMap: {
      if (k != Value::Kind::kMap) return Mismatch(v, type);
      if (type.params.size() != 2) {
        return Status::InvalidArgument(fmt::format("CQL type {} needs 2 parameter types, has {}",
                                                   type.ToString(), type.params.size()));
      }
      const ValueMap& m = v.as_map();
      CQLS_RETURN_IF_ERROR(CheckCount(m.size(), type));
      PutU32(out, static_cast<uint32_t>(m.size()));
      for (const auto& [key, val] : m) {
        CQLS_RETURN_IF_ERROR(EncodeElement(key, type, type.params[0], out, depth));
        CQLS_RETURN_IF_ERROR(EncodeElement(val, type, type.params[1], out, depth));
      }
      return Status::OK();
    }
    default:
      break;
  }
  // Types cqlstream does not model take their serialized bytes as a blob.
  if (!IsBlobKind(k)) return Mismatch(v, type);
  auto b = v.as_blob();
  int fixed = FixedSize(type.id);
  bool ok_size = fixed < 0 || b.size() == static_cast<size_t>(fixed);
  if (type.id == TypeId::kInet) ok_size = b.size() == 4 || b.size() == 16;
  if (!ok_size) {
    return Status::InvalidArgument(
        fmt::format("a blob of {} bytes is not a valid {} cell (expected {} bytes)", b.size(),
                    type.ToString(), type.id == TypeId::kInet ? "4 or 16" : fmt::format("{}", fixed)));
  }
  PutBytes(out, b);
  return Status::OK();
}

// The natural CQL type of a value kind, for unprepared statements.
Status EncodeNaturalImpl(const Value& v, std::vector<uint8_t>* out, int depth) {
  if (depth > kMaxTypeDepth) {
    return Status::InvalidArgument(fmt::format("value nests deeper than {} levels", kMaxTypeDepth));
  }
  auto element = [&](const Value& e) -> Status {
    if (e.kind() == Value::Kind::kNull || e.kind() == Value::Kind::kUnset) {
      return Status::InvalidArgument(fmt::format(
          "{} element in a collection value: collections cannot hold nulls", KindName(e.kind())));
    }
    size_t at = out->size();
    PutU32(out, 0);
    CQLS_RETURN_IF_ERROR(EncodeNaturalImpl(e, out, depth + 1));
    StoreU32(out->data() + at, static_cast<uint32_t>(out->size() - at - 4));
    return Status::OK();
  };
  switch (v.kind()) {
    case Value::Kind::kNull:
    case Value::Kind::kUnset:
      return Status::InvalidArgument(fmt::format(
          "a {} value has no cell bytes: encode it as a length of {}", KindName(v.kind()),
          v.kind() == Value::Kind::kNull ? -1 : -2));
    case Value::Kind::kBoolean: return EncodeImpl(v, DataType::Simple(TypeId::kBoolean), out, depth);
    case Value::Kind::kInt: return EncodeImpl(v, DataType::Simple(TypeId::kInt), out, depth);
    case Value::Kind::kBigint: return EncodeImpl(v, DataType::Simple(TypeId::kBigint), out, depth);
    case Value::Kind::kDouble: return EncodeImpl(v, DataType::Simple(TypeId::kDouble), out, depth);
    case Value::Kind::kText: return EncodeImpl(v, DataType::Simple(TypeId::kVarchar), out, depth);
    case Value::Kind::kBlob:
    case Value::Kind::kBlobRef: PutBytes(out, v.as_blob()); return Status::OK();
    case Value::Kind::kUuid: PutBytes(out, v.as_uuid().bytes); return Status::OK();
    case Value::Kind::kTimestamp:
      PutU64(out, static_cast<uint64_t>(v.as_timestamp().millis));
      return Status::OK();
    case Value::Kind::kList: {
      const ValueList& l = v.as_list();
      CQLS_RETURN_IF_ERROR(CheckCount(l.size(), DataType::Simple(TypeId::kList)));
      PutU32(out, static_cast<uint32_t>(l.size()));
      for (const Value& e : l) CQLS_RETURN_IF_ERROR(element(e));
      return Status::OK();
    }
    case Value::Kind::kMap: {
      const ValueMap& m = v.as_map();
      CQLS_RETURN_IF_ERROR(CheckCount(m.size(), DataType::Simple(TypeId::kMap)));
      PutU32(out, static_cast<uint32_t>(m.size()));
      for (const auto& [key, val] : m) {
        CQLS_RETURN_IF_ERROR(element(key));
        CQLS_RETURN_IF_ERROR(element(val));
      }
      return Status::OK();
    }
  }
  return Status::Internal("unknown value kind");
}

}  // namespace

Status EncodeCell(const Value& v, const DataType& type, std::vector<uint8_t>* out) {
  size_t start = out->size();
  Status s = EncodeImpl(v, type, out, 0);
  if (!s.ok()) out->resize(start);  // leave *out as it was
  return s;
}

Status EncodeCellNatural(const Value& v, std::vector<uint8_t>* out) {
  size_t start = out->size();
  Status s = EncodeNaturalImpl(v, out, 0);
  if (!s.ok()) out->resize(start);
  return s;
}

// ---------------------------------------------------------------------------
// Decoding

namespace {

Status SizeError(const DataType& type, std::string_view expected, size_t got) {
  return Status::ProtocolError(
      fmt::format("{} cell: expected {} bytes, got {}", type.ToString(), expected, got));
}

StatusOr<Value> DecodeImpl(const DataType& type, std::span<const uint8_t> c, int depth);

Status DecodeElements(const DataType& type, std::span<const uint8_t> c, int depth, size_t per_entry,
                      std::vector<Value>* out) {
  cql::Reader r(c);
  int32_t n;
  CQLS_RETURN_IF_ERROR(r.Int(&n).WithContext(type.ToString() + " cell"));
  // Each element is at least a 4-byte length: bound the count by the bytes
  // present before reserving memory for it.
  if (n < 0 || uint64_t(uint32_t(n)) * per_entry * 4 > r.remaining()) {
    return Status::ProtocolError(fmt::format(
        "{} cell: {} elements need at least {} bytes, got {}", type.ToString(), n,
        n < 0 ? 0 : uint64_t(uint32_t(n)) * per_entry * 4, r.remaining()));
  }
  out->reserve(size_t(n) * per_entry);
  for (size_t i = 0; i < size_t(n) * per_entry; ++i) {
    const DataType& et = type.params[i % per_entry];
    std::optional<cql::ByteView> b;
    CQLS_RETURN_IF_ERROR(r.BytesValue(&b).WithContext(type.ToString() + " cell"));
    if (!b) {
      out->push_back(Value::Null());
      continue;
    }
    CQLS_ASSIGN_OR_RETURN(Value e, DecodeImpl(et, *b, depth + 1));
    out->push_back(std::move(e));
  }
  return Status::OK();
}

StatusOr<Value> DecodeImpl(const DataType& type, std::span<const uint8_t> c, int depth) {
  if (depth > kMaxTypeDepth) {
    return Status::ProtocolError(
        fmt::format("CQL type {} nests deeper than {} levels", type.ToString(), kMaxTypeDepth));
  }
  switch (type.id) {
    case TypeId::kAscii:
    case TypeId::kVarchar:
      return Value::Text(std::string(reinterpret_cast<const char*>(c.data()), c.size()));
    case TypeId::kBlob:
      return Value::Blob(std::vector<uint8_t>(c.begin(), c.end()));
    default:
      break;
  }
  int fixed = FixedSize(type.id);
  const bool modeled = type.id == TypeId::kBoolean || type.id == TypeId::kInt ||
                       type.id == TypeId::kBigint || type.id == TypeId::kCounter ||
                       type.id == TypeId::kDouble || type.id == TypeId::kTimestamp ||
                       type.id == TypeId::kUuid || type.id == TypeId::kTimeuuid ||
                       type.id == TypeId::kList || type.id == TypeId::kSet ||
                       type.id == TypeId::kMap;
  if (!modeled) return Value::Blob(std::vector<uint8_t>(c.begin(), c.end()));
  if (c.empty()) return Value::Null();  // the legacy "empty value"
  if (fixed > 0 && c.size() != size_t(fixed)) return SizeError(type, fmt::format("{}", fixed), c.size());
  switch (type.id) {
    case TypeId::kBoolean: return Value::Boolean(c[0] != 0);
    case TypeId::kInt: return Value::Int(static_cast<int32_t>(LoadU32(c.data())));
    case TypeId::kBigint:
    case TypeId::kCounter: return Value::Bigint(static_cast<int64_t>(LoadU64(c.data())));
    case TypeId::kDouble: return Value::Double(std::bit_cast<double>(LoadU64(c.data())));
    case TypeId::kTimestamp:
      return Value::FromTimestamp(Timestamp{static_cast<int64_t>(LoadU64(c.data()))});
    case TypeId::kUuid:
    case TypeId::kTimeuuid: {
      Uuid u;
      std::memcpy(u.bytes.data(), c.data(), 16);
      return Value::FromUuid(u);
    }
    case TypeId::kList:
    case TypeId::kSet: {
      if (type.params.size() != 1) {
        return Status::InvalidArgument(fmt::format("CQL type {} needs 1 element type, has {}",
                                                   type.ToString(), type.params.size()));
      }
      ValueList l;
      CQLS_RETURN_IF_ERROR(DecodeElements(type, c, depth, 1, &l));
      return Value::List(std::move(l));
    }
    case TypeId::kMap: {
      if (type.params.size() != 2) {
        return Status::InvalidArgument(fmt::format("CQL type {} needs 2 parameter types, has {}",
                                                   type.ToString(), type.params.size()));
      }
      ValueList flat;
      CQLS_RETURN_IF_ERROR(DecodeElements(type, c, depth, 2, &flat));
      ValueMap m;
      m.reserve(flat.size() / 2);
      for (size_t i = 0; i + 1 < flat.size(); i += 2) {
        m.emplace_back(std::move(flat[i]), std::move(flat[i + 1]));
      }
      return Value::Map(std::move(m));
    }
    default:
      break;
  }
  return Status::Internal("unreachable cell type");
}

}  // namespace

StatusOr<Value> DecodeCell(const DataType& type, std::span<const uint8_t> cell) {
  return DecodeImpl(type, cell, 0);
}

}  // namespace cqlstream
