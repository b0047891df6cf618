// Copyright (c) cqlstream authors.
//
// Typed getters on a Rows result (declared in response.h): each supported
// C++ type has a Fit<T> that says which CQL column types it accepts and how a
// cell of such a column becomes a T. The column type is checked against the
// result metadata before any cell is decoded, so a server that answers with
// a column of another type (or without the column) gets a ProtocolError that
// names the column, never a default value.
#include <fmt/format.h>

#include "cql/response.h"

namespace cqlstream::cql {
namespace {

bool IsText(const DataType& t) { return t.id == TypeId::kVarchar || t.id == TypeId::kAscii; }
bool IsCollectionOf(const DataType& t, bool (*elem)(const DataType&)) {
  return (t.id == TypeId::kList || t.id == TypeId::kSet) && t.params.size() == 1 && elem(t.params[0]);
}

template <typename T>
struct Fit;

template <>
struct Fit<std::string> {
  static constexpr const char* kExpected = "text";
  static bool Accepts(const DataType& t) { return IsText(t); }
  static StatusOr<std::string> From(const Value& v, ByteView) { return v.as_text(); }
};
template <>
struct Fit<int32_t> {
  static constexpr const char* kExpected = "int";
  static bool Accepts(const DataType& t) { return t.id == TypeId::kInt; }
  static StatusOr<int32_t> From(const Value& v, ByteView) { return v.as_int(); }
};
template <>
struct Fit<int64_t> {
  static constexpr const char* kExpected = "bigint";
  static bool Accepts(const DataType& t) { return t.id == TypeId::kBigint || t.id == TypeId::kCounter; }
  static StatusOr<int64_t> From(const Value& v, ByteView) { return v.as_bigint(); }
};
template <>
struct Fit<bool> {
  static constexpr const char* kExpected = "boolean";
  static bool Accepts(const DataType& t) { return t.id == TypeId::kBoolean; }
  static StatusOr<bool> From(const Value& v, ByteView) { return v.as_bool(); }
};
template <>
struct Fit<double> {
  static constexpr const char* kExpected = "double";
  static bool Accepts(const DataType& t) { return t.id == TypeId::kDouble; }
  static StatusOr<double> From(const Value& v, ByteView) { return v.as_double(); }
};
template <>
struct Fit<Uuid> {
  static constexpr const char* kExpected = "uuid";
  static bool Accepts(const DataType& t) { return t.id == TypeId::kUuid || t.id == TypeId::kTimeuuid; }
  static StatusOr<Uuid> From(const Value& v, ByteView) { return v.as_uuid(); }
};
template <>
struct Fit<InetAddress> {
  static constexpr const char* kExpected = "inet";
  static constexpr bool kRaw = true;
  static bool Accepts(const DataType& t) { return t.id == TypeId::kInet; }
  static StatusOr<InetAddress> FromRaw(ByteView cell) {
    if (cell.size() != 4 && cell.size() != 16) {
      return Status::ProtocolError(fmt::format("an inet of {} bytes (expected 4 or 16)", cell.size()));
    }
    return InetAddress{Bytes(cell.begin(), cell.end())};
  }
};
template <>
struct Fit<ByteView> {
  static constexpr const char* kExpected = "blob";
  static constexpr bool kRaw = true;
  static bool Accepts(const DataType& t) { return t.id == TypeId::kBlob; }
  static StatusOr<ByteView> FromRaw(ByteView cell) { return cell; }
};
template <>
struct Fit<std::vector<std::string>> {
  static constexpr const char* kExpected = "list<text> or set<text>";
  static bool Accepts(const DataType& t) { return IsCollectionOf(t, IsText); }
  static StatusOr<std::vector<std::string>> From(const Value& v, ByteView) {
    std::vector<std::string> out;
    for (const Value& e : v.as_list()) {
      if (e.kind() != Value::Kind::kText) return Status::ProtocolError("a null element in a collection");
      out.push_back(e.as_text());
    }
    return out;
  }
};
template <typename E, Value::Kind kKind, TypeId kId>
struct FitNumberList {
  static bool Accepts(const DataType& t) {
    return IsCollectionOf(t, [](const DataType& e) { return e.id == kId; });
  }
  static StatusOr<std::vector<E>> From(const Value& v, ByteView) {
    std::vector<E> out;
    for (const Value& e : v.as_list()) {
      if (e.kind() != kKind) return Status::ProtocolError("a null element in a collection");
      if constexpr (kKind == Value::Kind::kInt) {
        out.push_back(e.as_int());
      } else {
        out.push_back(e.as_bigint());
      }
    }
    return out;
  }
};
template <>
struct Fit<std::vector<int32_t>> : FitNumberList<int32_t, Value::Kind::kInt, TypeId::kInt> {
  static constexpr const char* kExpected = "list<int> or set<int>";
};
template <>
struct Fit<std::vector<int64_t>> : FitNumberList<int64_t, Value::Kind::kBigint, TypeId::kBigint> {
  static constexpr const char* kExpected = "list<bigint> or set<bigint>";
};
template <>
struct Fit<std::map<std::string, std::string>> {
  static constexpr const char* kExpected = "map<text, text>";
  static bool Accepts(const DataType& t) {
    return t.id == TypeId::kMap && t.params.size() == 2 && IsText(t.params[0]) && IsText(t.params[1]);
  }
  static StatusOr<std::map<std::string, std::string>> From(const Value& v, ByteView) {
    std::map<std::string, std::string> out;
    for (const auto& [k, val] : v.as_map()) {
      if (k.kind() != Value::Kind::kText || val.kind() != Value::Kind::kText) {
        return Status::ProtocolError("a null key or value in a map");
      }
      out[k.as_text()] = val.as_text();
    }
    return out;
  }
};
template <>
struct Fit<Value> {
  static constexpr const char* kExpected = "any type";
  static bool Accepts(const DataType&) { return true; }
  static StatusOr<Value> From(const Value& v, ByteView) { return v; }
};

template <typename T>
concept RawFit = requires { Fit<T>::kRaw; };

std::string ColumnName(const ColumnSpec& c) {
  if (c.table.empty()) return fmt::format("column '{}'", c.name);
  return fmt::format("column '{}' of {}.{}", c.name, c.keyspace, c.table);
}

}  // namespace

template <typename T>
StatusOr<std::optional<T>> Rows::GetOptional(int32_t row, int32_t col) const {
  if (row < 0 || row >= row_count_ || col < 0 || col >= column_count()) {
    return Status::InvalidArgument(fmt::format("cell (row {}, column {}) is outside a result of {} rows and {} columns",
                                               row, col, row_count_, column_count()));
  }
  if (metadata_.columns.size() != size_t(column_count())) {
    return Status::InvalidArgument("the result has no column metadata (it was requested with skip_metadata)");
  }
  const ColumnSpec& spec = metadata_.columns[size_t(col)];
  if (!Fit<T>::Accepts(spec.type)) {
    return Status::ProtocolError(fmt::format("{} has type {}, expected {}", ColumnName(spec), spec.type.ToString(),
                                             Fit<T>::kExpected));
  }
  std::optional<ByteView> c = cell(row, col);
  if (!c) return std::optional<T>();
  StatusOr<T> out = [&]() -> StatusOr<T> {
    if constexpr (RawFit<T>) {
      return Fit<T>::FromRaw(*c);
    } else {
      auto v = DecodeCell(spec.type, *c);
      if (!v.ok()) return Status::ProtocolError(v.status().message());
      if (v->kind() == Value::Kind::kNull) return Status::ProtocolError("an empty value");
      return Fit<T>::From(*v, *c);
    }
  }();
  if (!out.ok()) return out.status().WithContext(fmt::format("row {}, {}", row, ColumnName(spec)));
  return std::optional<T>(std::move(*out));
}

template <typename T>
StatusOr<int32_t> Rows::ColumnOf(std::string_view column) const {
  const int32_t col = column_index(column);
  if (col < 0) {
    std::string where;
    if (!metadata_.columns.empty() && !metadata_.columns.front().table.empty()) {
      where = fmt::format(" of {}.{}", metadata_.columns.front().keyspace, metadata_.columns.front().table);
    }
    return Status::ProtocolError(fmt::format("the answer{} lacks the requested column '{}'", where, column));
  }
  const ColumnSpec& spec = metadata_.columns[size_t(col)];
  if (!Fit<T>::Accepts(spec.type)) {
    return Status::ProtocolError(fmt::format("{} has type {}, expected {}", ColumnName(spec), spec.type.ToString(),
                                             Fit<T>::kExpected));
  }
  return col;
}

template <typename T>
StatusOr<std::optional<T>> Rows::GetOptional(int32_t row, std::string_view column) const {
  auto col = ColumnOf<T>(column);
  if (!col.ok()) return col.status();
  return GetOptional<T>(row, *col);
}

template <typename T>
StatusOr<T> Rows::Get(int32_t row, int32_t col) const {
  auto v = GetOptional<T>(row, col);
  if (!v.ok()) return v.status();
  if (!v->has_value()) {
    return Status::ProtocolError(fmt::format("row {}, {} is null", row, ColumnName(metadata_.columns[size_t(col)])));
  }
  return std::move(**v);
}

template <typename T>
StatusOr<T> Rows::Get(int32_t row, std::string_view column) const {
  auto col = ColumnOf<T>(column);
  if (!col.ok()) return col.status();
  return Get<T>(row, *col);
}

#define CQLS_ROWS_GETTERS(T)                                                               \
  template StatusOr<T> Rows::Get<T>(int32_t, int32_t) const;                               \
  template StatusOr<T> Rows::Get<T>(int32_t, std::string_view) const;                      \
  template StatusOr<std::optional<T>> Rows::GetOptional<T>(int32_t, int32_t) const;        \
  template StatusOr<std::optional<T>> Rows::GetOptional<T>(int32_t, std::string_view) const; \
  template StatusOr<int32_t> Rows::ColumnOf<T>(std::string_view) const;

CQLS_ROWS_GETTERS(std::string)
CQLS_ROWS_GETTERS(int32_t)
CQLS_ROWS_GETTERS(int64_t)
CQLS_ROWS_GETTERS(bool)
CQLS_ROWS_GETTERS(double)
CQLS_ROWS_GETTERS(Uuid)
CQLS_ROWS_GETTERS(InetAddress)
CQLS_ROWS_GETTERS(ByteView)
CQLS_ROWS_GETTERS(std::vector<std::string>)
CQLS_ROWS_GETTERS(std::vector<int32_t>)
CQLS_ROWS_GETTERS(std::vector<int64_t>)
CQLS_ROWS_GETTERS(Value)
using StringMap = std::map<std::string, std::string>;
CQLS_ROWS_GETTERS(StringMap)
#undef CQLS_ROWS_GETTERS

}  // namespace cqlstream::cql
