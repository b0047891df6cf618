// Copyright (c) cqlstream authors.
//
// Decoding cells of the CQL types cqlstream models (spec section 6); cells
// are outside input, every length is checked.
#include "cqlstream/value.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <limits>

#include "cql/value_internal.h"
#include "cql/wire.h"

namespace cqlstream {

using cql::LoadU32;
using cql::LoadU64;
using value_internal::FixedSize;

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

std::optional<int32_t> DecodeIntCell(std::span<const uint8_t> cell) {
  if (cell.size() != 4) return std::nullopt;
  return static_cast<int32_t>(LoadU32(cell.data()));
}

std::optional<int64_t> DecodeBigintCell(std::span<const uint8_t> cell) {
  if (cell.size() != 8) return std::nullopt;
  return static_cast<int64_t>(LoadU64(cell.data()));
}

}  // namespace cqlstream
