// Copyright (c) cqlstream authors.
//
// Encoding cells of the CQL types cqlstream models (spec section 6).
#include "cqlstream/value.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <limits>

#include "cql/value_internal.h"
#include "cql/wire.h"

namespace cqlstream {

using cql::StoreU32;
using cql::StoreU64;
using value_internal::FixedSize;
using value_internal::IsBlobKind;
using value_internal::KindName;

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

// ascii (7-bit) and text (UTF-8): the text's bytes, checked.
Status EncodeText(const Value& v, const DataType& type, std::vector<uint8_t>* out) {
  if (v.kind() != Value::Kind::kText) return Mismatch(v, type);
  const std::string& s = v.as_text();
  if (type.id == TypeId::kAscii) {
    for (size_t i = 0; i < s.size(); ++i) {
      if (static_cast<uint8_t>(s[i]) >= 0x80) {
        return Status::InvalidArgument(fmt::format(
            "text value is not valid for CQL type ascii: byte 0x{:02x} at offset {}",
            static_cast<uint8_t>(s[i]), i));
      }
    }
  } else if (size_t bad = InvalidUtf8At(s); bad != std::string_view::npos) {
    return Status::InvalidArgument(fmt::format(
        "text value is not valid UTF-8 for CQL type text: bad sequence at offset {}", bad));
  }
  out->insert(out->end(), s.begin(), s.end());
  return Status::OK();
}

// The fixed-size and blob types cqlstream models: one value kind each (an
// int also widens to bigint/counter).
Status EncodeScalar(const Value& v, const DataType& type, std::vector<uint8_t>* out) {
  const Value::Kind k = v.kind();
  switch (type.id) {
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
    default:
      return Status::Internal(fmt::format("EncodeScalar called for CQL type {}", type.ToString()));
  }
}

// An int narrowed to smallint or tinyint, when it fits.
Status EncodeNarrowInt(const Value& v, const DataType& type, std::vector<uint8_t>* out) {
  int32_t i = v.as_int();
  bool small = type.id == TypeId::kSmallint;
  int32_t lo = small ? -32768 : -128, hi = small ? 32767 : 127;
  if (i < lo || i > hi) {
    return Status::InvalidArgument(fmt::format("int value {} is out of range for CQL type {}", i, type.ToString()));
  }
  if (small) out->push_back(static_cast<uint8_t>(static_cast<uint16_t>(i) >> 8));
  out->push_back(static_cast<uint8_t>(i));
  return Status::OK();
}

// list and set: [int n] then n [bytes] elements.
Status EncodeList(const Value& v, const DataType& type, std::vector<uint8_t>* out, int depth) {
  if (v.kind() != Value::Kind::kList) return Mismatch(v, type);
  if (type.params.size() != 1) {
    return Status::InvalidArgument(
        fmt::format("CQL type {} needs 1 element type, has {}", type.ToString(), type.params.size()));
  }
  const ValueList& l = v.as_list();
  CQLS_RETURN_IF_ERROR(CheckCount(l.size(), type));
  PutU32(out, static_cast<uint32_t>(l.size()));
  for (const Value& e : l) CQLS_RETURN_IF_ERROR(EncodeElement(e, type, type.params[0], out, depth));
  return Status::OK();
}

// map: [int n] then n key and value [bytes].
Status EncodeMap(const Value& v, const DataType& type, std::vector<uint8_t>* out, int depth) {
  if (v.kind() != Value::Kind::kMap) return Mismatch(v, type);
  if (type.params.size() != 2) {
    return Status::InvalidArgument(
        fmt::format("CQL type {} needs 2 parameter types, has {}", type.ToString(), type.params.size()));
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

// Types cqlstream does not model take their serialized bytes as a blob (of
// the type's fixed size, where it has one).
Status EncodeRawBytes(const Value& v, const DataType& type, std::vector<uint8_t>* out) {
  if (!IsBlobKind(v.kind())) return Mismatch(v, type);
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

Status EncodeImpl(const Value& v, const DataType& type, std::vector<uint8_t>* out, int depth) {
  if (depth > kMaxTypeDepth) return DepthError(type);
  const Value::Kind k = v.kind();
  if (k == Value::Kind::kNull || k == Value::Kind::kUnset) {
    return Status::InvalidArgument(fmt::format(
        "a {} value has no cell bytes (CQL type {}): encode it as a length of {}", KindName(k),
        type.ToString(), k == Value::Kind::kNull ? -1 : -2));
  }
  switch (type.id) {
    case TypeId::kAscii:
    case TypeId::kVarchar:
      return EncodeText(v, type, out);
    case TypeId::kBlob:
    case TypeId::kBoolean:
    case TypeId::kInt:
    case TypeId::kBigint:
    case TypeId::kCounter:
    case TypeId::kDouble:
    case TypeId::kTimestamp:
    case TypeId::kUuid:
    case TypeId::kTimeuuid:
      return EncodeScalar(v, type, out);
    case TypeId::kSmallint:
    case TypeId::kTinyint:
      // An int narrows when it fits; raw bytes are accepted below.
      if (k == Value::Kind::kInt) return EncodeNarrowInt(v, type, out);
      break;
    case TypeId::kList:
    case TypeId::kSet:
      return EncodeList(v, type, out, depth);
    case TypeId::kMap:
      return EncodeMap(v, type, out, depth);
    default:
      break;
  }
  return EncodeRawBytes(v, type, out);
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

}  // namespace cqlstream
