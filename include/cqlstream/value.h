// Copyright (c) cqlstream authors.
//
// CQL data types and values as seen by users of the client: the types
// cqlstream reads and writes (blob, text, ascii, int, bigint, uuid, timeuuid,
// boolean, timestamp, double, and list/set/map of these). Other types decode
// to their raw bytes (Value::Kind::kBlob with DataType giving the real type).
//
// Ownership: a Value owns its contents, except a BlobRef. Made by
// Value::Ref, a BlobRef is a non-owning view: the caller keeps the
// referenced memory alive until the call that takes the Value returns
// (requests are serialized before Session::Execute* returns, so such a
// BlobRef never outlives that call). Made by Value::Shared, it also holds
// an owner of the bytes, which keeps them alive for as long as the Value or
// a request encoded from it exists; the bytes must not change meanwhile (an
// encoded request may refer to them instead of copying them).
// Thread-safety: value types; no shared state.
#ifndef CQLSTREAM_VALUE_H_
#define CQLSTREAM_VALUE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "cqlstream/status.h"

namespace cqlstream {

// Type option ids of the protocol ([option] in spec section 4.2.5.2).
enum class TypeId : uint16_t {
  kCustom = 0x0000,
  kAscii = 0x0001,
  kBigint = 0x0002,
  kBlob = 0x0003,
  kBoolean = 0x0004,
  kCounter = 0x0005,
  kDecimal = 0x0006,
  kDouble = 0x0007,
  kFloat = 0x0008,
  kInt = 0x0009,
  kTimestamp = 0x000B,
  kUuid = 0x000C,
  kVarchar = 0x000D,  // text
  kVarint = 0x000E,
  kTimeuuid = 0x000F,
  kInet = 0x0010,
  kDate = 0x0011,
  kTime = 0x0012,
  kSmallint = 0x0013,
  kTinyint = 0x0014,
  kDuration = 0x0015,
  kList = 0x0020,
  kMap = 0x0021,
  kSet = 0x0022,
  kUdt = 0x0030,
  kTuple = 0x0031,
};

// The deepest nesting of types cqlstream accepts (list<map<text, list<...>>>):
// the type of a top-level column has depth 0, its element types depth 1, ...
// Deeper types are rejected when decoded from the wire (DecodeType) and when
// cells are encoded or decoded.
inline constexpr int kMaxTypeDepth = 16;

struct DataType {
  TypeId id = TypeId::kBlob;
  std::string custom_class;          // kCustom: the Java class name
  std::vector<DataType> params;      // list/set: 1, map: 2, tuple: n, udt: n fields
  std::string udt_keyspace, udt_name;
  std::vector<std::string> udt_field_names;

  static DataType Simple(TypeId id) { return DataType{id, {}, {}, {}, {}, {}}; }
  static DataType List(DataType e) { return Collection(TypeId::kList, {std::move(e)}); }
  static DataType Set(DataType e) { return Collection(TypeId::kSet, {std::move(e)}); }
  static DataType Map(DataType k, DataType v) {
    return Collection(TypeId::kMap, {std::move(k), std::move(v)});
  }
  // CQL spelling: "bigint", "list<text>", "map<text, int>".
  std::string ToString() const;
  bool operator==(const DataType& o) const = default;

 private:
  static DataType Collection(TypeId id, std::vector<DataType> p) {
    DataType t;
    t.id = id;
    t.params = std::move(p);
    return t;
  }
};

struct Uuid {
  std::array<uint8_t, 16> bytes{};
  // Parses "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
  static StatusOr<Uuid> Parse(std::string_view text);
  std::string ToString() const;
  int Version() const { return bytes[6] >> 4; }
  bool operator==(const Uuid&) const = default;
};

// Milliseconds since the Unix epoch (CQL timestamp).
struct Timestamp {
  int64_t millis = 0;
  bool operator==(const Timestamp&) const = default;
};

// A blob to bind without copying it into a Value first. `keep`, when set,
// owns the memory `bytes` lies in (see Value::Shared).
struct BlobRef {
  std::span<const uint8_t> bytes;
  std::shared_ptr<const void> keep;
};

class Value;
using ValueList = std::vector<Value>;
using ValueMap = std::vector<std::pair<Value, Value>>;

class Value {
 public:
  enum class Kind : uint8_t {
    kNull,
    kUnset,      // "not set" bind value (protocol v4): leaves the column untouched
    kBoolean,
    kInt,        // int32
    kBigint,     // int64 (bigint, counter)
    kDouble,
    kText,       // text / varchar / ascii
    kBlob,       // blob, or the raw bytes of a type cqlstream does not model
    kBlobRef,    // referenced blob, owned or not (binding only)
    kUuid,       // uuid / timeuuid
    kTimestamp,
    kList,       // list or set
    kMap,
  };

  Value() = default;  // null
  static Value Null() { return Value(); }
  static Value Unset() { Value v; v.v_ = UnsetTag{}; return v; }
  static Value Boolean(bool b) { return Value(b); }
  static Value Int(int32_t i) { return Value(i); }
  static Value Bigint(int64_t i) { return Value(i); }
  static Value Double(double d) { return Value(d); }
  static Value Text(std::string s) { return Value(TextBox{std::move(s)}); }
  static Value Blob(std::vector<uint8_t> b) { return Value(std::move(b)); }
  static Value Blob(std::string_view b) {
    return Value(std::vector<uint8_t>(b.begin(), b.end()));
  }
  static Value Ref(std::span<const uint8_t> b) { return Value(BlobRef{b, nullptr}); }
  // A blob whose bytes `keep` owns: a request encoder may write them to the
  // socket from where they lie instead of copying them into the request
  // (cql/request.h, Splice), holding `keep` until the request is done.
  static Value Shared(std::span<const uint8_t> b, std::shared_ptr<const void> keep) {
    return Value(BlobRef{b, std::move(keep)});
  }
  static Value FromUuid(Uuid u) { return Value(u); }
  static Value FromTimestamp(Timestamp t) { return Value(t); }
  static Value List(ValueList l) { return Value(ListBox{std::make_shared<ValueList>(std::move(l))}); }
  static Value Map(ValueMap m) { return Value(MapBox{std::make_shared<ValueMap>(std::move(m))}); }

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_null() const { return kind() == Kind::kNull; }

  // Typed access. REQUIRES: kind() matches (asserted); use kind() first.
  bool as_bool() const { return std::get<bool>(v_); }
  int32_t as_int() const { return std::get<int32_t>(v_); }
  int64_t as_bigint() const { return std::get<int64_t>(v_); }
  double as_double() const { return std::get<double>(v_); }
  const std::string& as_text() const { return std::get<TextBox>(v_).s; }
  // Blob bytes (owned or referenced).
  std::span<const uint8_t> as_blob() const {
    if (auto* r = std::get_if<BlobRef>(&v_)) return r->bytes;
    return std::get<std::vector<uint8_t>>(v_);
  }
  // The owner of a blob made by Value::Shared; null for any other value.
  const std::shared_ptr<const void>& blob_owner() const {
    static const std::shared_ptr<const void> kNone;
    auto* r = std::get_if<BlobRef>(&v_);
    return r ? r->keep : kNone;
  }
  const Uuid& as_uuid() const { return std::get<Uuid>(v_); }
  Timestamp as_timestamp() const { return std::get<Timestamp>(v_); }
  const ValueList& as_list() const { return *std::get<ListBox>(v_).l; }
  const ValueMap& as_map() const { return *std::get<MapBox>(v_).m; }

  // A short, human-readable rendering for messages and the CLI.
  std::string ToString() const;
  bool operator==(const Value& o) const;

 private:
  struct UnsetTag {};
  struct TextBox { std::string s; };
  struct ListBox { std::shared_ptr<const ValueList> l; };
  struct MapBox { std::shared_ptr<const ValueMap> m; };
  template <typename T, typename = std::enable_if_t<!std::is_same_v<std::decay_t<T>, Value>>>
  explicit Value(T&& t) : v_(std::forward<T>(t)) {}

  // The index order matches Kind.
  std::variant<std::monostate, UnsetTag, bool, int32_t, int64_t, double, TextBox,
               std::vector<uint8_t>, BlobRef, Uuid, Timestamp, ListBox, MapBox>
      v_;
};

// Serializes `v` as the cell bytes of CQL type `type` (without the [bytes]
// length prefix) and appends them to *out. Fails with InvalidArgument naming
// both types when the value does not fit the type (e.g. Text for an int).
// Null/Unset are not cell bytes: callers encode them as lengths -1/-2.
Status EncodeCell(const Value& v, const DataType& type, std::vector<uint8_t>* out);

// Serializes `v` using the natural CQL type of its kind (int32 -> int,
// int64 -> bigint, text -> varchar, ...): for unprepared QUERY values.
Status EncodeCellNatural(const Value& v, std::vector<uint8_t>* out);

// Decodes cell bytes of CQL type `type`. Types cqlstream does not model
// decode to a Blob holding the raw bytes. An empty cell (0 bytes) of a
// fixed-size type (int, bigint, boolean, double, timestamp, uuid, timeuuid,
// collections) is the protocol's legacy "empty value" and decodes to Null;
// for blob/text/ascii it is the empty blob/string. Cell bytes that do not fit
// the type (e.g. 3 bytes for an int) are a ProtocolError naming the type and
// the expected and actual sizes.
StatusOr<Value> DecodeCell(const DataType& type, std::span<const uint8_t> cell);

// The value of an int cell (exactly 4 bytes) or a bigint cell (exactly 8
// bytes), or nullopt when the cell has another width: for readers of
// fixed-size cells that arrive as bytes (a CellSink), without a Value.
std::optional<int32_t> DecodeIntCell(std::span<const uint8_t> cell);
std::optional<int64_t> DecodeBigintCell(std::span<const uint8_t> cell);

}  // namespace cqlstream

#endif  // CQLSTREAM_VALUE_H_
