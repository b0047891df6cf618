// Copyright (c) cqlstream authors.
#include "cql/request.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace cqlstream::cql {

namespace {

// Query-parameter flags (spec 4.1.4).
constexpr uint8_t kValues = 0x01;
constexpr uint8_t kSkipMetadata = 0x02;
constexpr uint8_t kPageSize = 0x04;
constexpr uint8_t kWithPagingState = 0x08;
constexpr uint8_t kWithSerialConsistency = 0x10;
constexpr uint8_t kWithDefaultTimestamp = 0x20;
constexpr uint8_t kWithNamesForValues = 0x40;

constexpr size_t kMaxShort = std::numeric_limits<uint16_t>::max();

// Whether the encoders leave `v`'s bytes where they lie, as a Splice (for a
// blob marker or an untyped one: WriteValue).
bool Spliceable(const Value& v) {
  return v.blob_owner() != nullptr && v.as_blob().size() >= kSplicedBlobBytes;
}

// About the encoded size of bind values (their [value]s; collections count
// 16 bytes an element): what a request buffer reserves before encoding, so
// that a large blob is copied into it once instead of again by every
// reallocation of a growing buffer (ingest writes ~100 kB blobs).
size_t EstimateValues(const std::vector<Value>& values) {
  size_t n = 2;
  for (const Value& v : values) {
    n += 4;
    switch (v.kind()) {
      case Value::Kind::kText: n += v.as_text().size(); break;
      case Value::Kind::kBlob: n += v.as_blob().size(); break;
      case Value::Kind::kBlobRef:
        // A blob that will be spliced needs no room in the buffer.
        if (!Spliceable(v)) n += v.as_blob().size();
        break;
      case Value::Kind::kList: n += 4 + 16 * v.as_list().size(); break;
      case Value::Kind::kMap: n += 4 + 32 * v.as_map().size(); break;
      default: n += 16; break;
    }
  }
  return n;
}

// Starts a frame: a header with stream 0 and a length patched by Finish;
// `reserve` bytes of body (at most the protocol's limit) are allocated up
// front.
Bytes StartFrame(Opcode op, size_t reserve = 0) {
  Bytes b;
  if (reserve) b.reserve(kHeaderSize + std::min<size_t>(reserve, kMaxBodySize));
  b.resize(kHeaderSize);
  FrameHeader h;
  h.opcode = op;
  EncodeHeader(h, b.data());
  return b;
}

size_t SplicedBytes(const std::vector<Splice>& splices) {
  size_t n = 0;
  for (const Splice& s : splices) n += s.bytes.size();
  return n;
}

RequestFrame Finish(Opcode op, Bytes b, std::vector<Splice> splices = {}) {
  StoreU32(b.data() + 5, static_cast<uint32_t>(b.size() + SplicedBytes(splices) - kHeaderSize));
  return RequestFrame{op, std::move(b), std::move(splices)};
}

StatusOr<RequestFrame> FinishChecked(Opcode op, Bytes b, std::vector<Splice> splices = {}) {
  // Each spliced blob is below 2^28 bytes (WriteValue), at most 65,535
  // values in each of at most 65,535 statements: the sum stays below 2^60.
  size_t body = b.size() + SplicedBytes(splices) - kHeaderSize;
  if (body > kMaxBodySize) {
    return Status::InvalidArgument(fmt::format("{} request body of {} bytes exceeds the protocol's limit of {}",
                                               OpcodeName(op), body, kMaxBodySize));
  }
  return Finish(op, std::move(b), std::move(splices));
}

Status CheckString(std::string_view s, std::string_view what) {
  if (s.size() > kMaxShort) {
    return Status::InvalidArgument(
        fmt::format("{} of {} bytes is longer than a [string] can hold ({})", what, s.size(), kMaxShort));
  }
  return Status::OK();
}

Status CheckLongString(std::string_view s, std::string_view what) {
  if (s.size() > kMaxBodySize) {
    return Status::InvalidArgument(
        fmt::format("{} of {} bytes exceeds the protocol's frame limit of {}", what, s.size(), kMaxBodySize));
  }
  return Status::OK();
}

// Writes one [value]: null and unset as lengths -1/-2, anything else as
// its cell bytes, with the bind marker's type when known. A blob bound with
// Value::Shared, of at least kSplicedBlobBytes, for a blob marker (or an
// untyped one) gets its length here and its bytes as a splice.
Status WriteValue(Writer& w, Bytes* out, std::vector<Splice>* splices, const Value& v, const DataType* type,
                  size_t index) {
  if (v.kind() == Value::Kind::kNull) {
    w.BytesValue(std::nullopt);
    return Status::OK();
  }
  if (v.kind() == Value::Kind::kUnset) {
    w.UnsetValue();
    return Status::OK();
  }
  if (Spliceable(v) && (type == nullptr || type->id == TypeId::kBlob)) {
    const std::span<const uint8_t> b = v.as_blob();
    if (b.size() > kMaxBodySize) {
      return Status::InvalidArgument(fmt::format("bind value {} of {} bytes exceeds the protocol's limit of {}",
                                                 index, b.size(), kMaxBodySize));
    }
    w.Int(static_cast<int32_t>(b.size()));
    splices->push_back(Splice{out->size(), b, v.blob_owner()});
    return Status::OK();
  }
  size_t at = w.size();
  w.Int(0);
  Status s = type ? EncodeCell(v, *type, out) : EncodeCellNatural(v, out);
  if (!s.ok()) return s.WithContext(fmt::format("bind value {}", index));
  size_t n = w.size() - at - 4;
  if (n > kMaxBodySize) {
    return Status::InvalidArgument(fmt::format("bind value {} of {} bytes exceeds the protocol's limit of {}",
                                               index, n, kMaxBodySize));
  }
  w.PatchInt(at, static_cast<int32_t>(n));
  return Status::OK();
}

Status CheckValueTypes(const std::vector<Value>& values, const std::vector<DataType>* types) {
  if (types && !types->empty() && types->size() != values.size()) {
    return Status::InvalidArgument(fmt::format("{} bind values for {} bind markers", values.size(),
                                               types->size()));
  }
  if (values.size() > kMaxShort) {
    return Status::InvalidArgument(
        fmt::format("{} bind values: at most {} are allowed", values.size(), kMaxShort));
  }
  return Status::OK();
}

Status WriteValues(Writer& w, Bytes* out, std::vector<Splice>* splices, const std::vector<Value>& values,
                   const std::vector<std::string>* names, const std::vector<DataType>* types) {
  w.Short(static_cast<uint16_t>(values.size()));
  const bool typed = types && !types->empty();
  for (size_t i = 0; i < values.size(); ++i) {
    if (names) w.String((*names)[i]);
    CQLS_RETURN_IF_ERROR(WriteValue(w, out, splices, values[i], typed ? &(*types)[i] : nullptr, i));
  }
  return Status::OK();
}

Status WriteQueryParameters(Writer& w, Bytes* out, std::vector<Splice>* splices, const QueryParameters& p) {
  CQLS_RETURN_IF_ERROR(CheckValueTypes(p.values, p.value_types));
  const bool named = !p.value_names.empty();
  if (named) {
    if (p.value_names.size() != p.values.size()) {
      return Status::InvalidArgument(fmt::format("{} value names for {} values", p.value_names.size(),
                                                 p.values.size()));
    }
    for (const auto& n : p.value_names) CQLS_RETURN_IF_ERROR(CheckString(n, "value name"));
  }
  if (p.paging_state && p.paging_state->size() > kMaxBodySize) {
    return Status::InvalidArgument("paging state exceeds the protocol's frame limit");
  }
  uint8_t flags = 0;
  if (!p.values.empty()) flags |= kValues;
  if (named && !p.values.empty()) flags |= kWithNamesForValues;
  if (p.skip_metadata) flags |= kSkipMetadata;
  if (p.page_size > 0) flags |= kPageSize;
  if (p.paging_state) flags |= kWithPagingState;
  if (p.serial_consistency) flags |= kWithSerialConsistency;
  if (p.default_timestamp) flags |= kWithDefaultTimestamp;

  w.Consistency(static_cast<uint16_t>(p.consistency));
  w.Byte(flags);
  if (flags & kValues) {
    CQLS_RETURN_IF_ERROR(WriteValues(w, out, splices, p.values, named ? &p.value_names : nullptr, p.value_types));
  }
  if (flags & kPageSize) w.Int(p.page_size);
  if (flags & kWithPagingState) w.BytesValue(ByteView(*p.paging_state));
  if (flags & kWithSerialConsistency) w.Consistency(static_cast<uint16_t>(*p.serial_consistency));
  if (flags & kWithDefaultTimestamp) w.Long(*p.default_timestamp);
  return Status::OK();
}

}  // namespace

RequestFrame EncodeStartup(const std::map<std::string, std::string>& options) {
  Bytes b = StartFrame(Opcode::kStartup);
  Writer(&b).StringMap(options);
  return Finish(Opcode::kStartup, std::move(b));
}

RequestFrame EncodeOptions() { return Finish(Opcode::kOptions, StartFrame(Opcode::kOptions)); }

RequestFrame EncodeAuthResponse(std::optional<ByteView> token) {
  Bytes b = StartFrame(Opcode::kAuthResponse);
  Writer(&b).BytesValue(token);
  return Finish(Opcode::kAuthResponse, std::move(b));
}

RequestFrame EncodeRegister(const std::vector<std::string>& event_types) {
  Bytes b = StartFrame(Opcode::kRegister);
  Writer(&b).StringList(event_types);
  return Finish(Opcode::kRegister, std::move(b));
}

StatusOr<RequestFrame> EncodeQuery(std::string_view query, const QueryParameters& params) {
  CQLS_RETURN_IF_ERROR(CheckLongString(query, "query string"));
  Bytes b = StartFrame(Opcode::kQuery, query.size() + 32 + EstimateValues(params.values));
  Writer w(&b);
  w.LongString(query);
  std::vector<Splice> splices;
  CQLS_RETURN_IF_ERROR(WriteQueryParameters(w, &b, &splices, params).WithContext("QUERY"));
  return FinishChecked(Opcode::kQuery, std::move(b), std::move(splices));
}

RequestFrame EncodePrepare(std::string_view query) {
  Bytes b = StartFrame(Opcode::kPrepare);
  Writer(&b).LongString(query);
  return Finish(Opcode::kPrepare, std::move(b));
}

StatusOr<RequestFrame> EncodeExecute(ByteView prepared_id, const QueryParameters& params) {
  if (prepared_id.size() > kMaxShort) {
    return Status::InvalidArgument(
        fmt::format("EXECUTE: prepared id of {} bytes is longer than [short bytes] can hold", prepared_id.size()));
  }
  Bytes b = StartFrame(Opcode::kExecute, prepared_id.size() + 32 + EstimateValues(params.values));
  Writer w(&b);
  w.ShortBytes(prepared_id);
  std::vector<Splice> splices;
  CQLS_RETURN_IF_ERROR(WriteQueryParameters(w, &b, &splices, params).WithContext("EXECUTE"));
  return FinishChecked(Opcode::kExecute, std::move(b), std::move(splices));
}

StatusOr<RequestFrame> EncodeBatch(BatchType type, const std::vector<BatchStatement>& statements,
                                   Consistency consistency,
                                   std::optional<Consistency> serial_consistency,
                                   std::optional<int64_t> default_timestamp) {
  if (statements.size() > kMaxShort) {
    return Status::InvalidArgument(
        fmt::format("BATCH of {} statements: at most {} are allowed", statements.size(), kMaxShort));
  }
  size_t reserve = 32;
  for (const BatchStatement& st : statements) {
    reserve += 3 + (st.query ? st.query->size() + 2 : 0) + (st.prepared_id ? st.prepared_id->size() : 0) +
               EstimateValues(st.values);
  }
  Bytes b = StartFrame(Opcode::kBatch, reserve);
  Writer w(&b);
  std::vector<Splice> splices;
  w.Byte(static_cast<uint8_t>(type));
  w.Short(static_cast<uint16_t>(statements.size()));
  for (size_t i = 0; i < statements.size(); ++i) {
    const BatchStatement& st = statements[i];
    auto context = [i](const Status& s) { return s.WithContext(fmt::format("BATCH statement {}", i)); };
    if (st.query.has_value() == st.prepared_id.has_value()) {
      return context(Status::InvalidArgument("exactly one of query and prepared_id must be set"));
    }
    if (st.query) {
      if (Status s = CheckLongString(*st.query, "query string"); !s.ok()) return context(s);
      w.Byte(0);
      w.LongString(*st.query);
    } else {
      if (st.prepared_id->size() > kMaxShort) {
        return context(Status::InvalidArgument("prepared id is longer than [short bytes] can hold"));
      }
      w.Byte(1);
      w.ShortBytes(*st.prepared_id);
    }
    if (Status s = CheckValueTypes(st.values, st.value_types); !s.ok()) return context(s);
    if (Status s = WriteValues(w, &b, &splices, st.values, nullptr, st.value_types); !s.ok()) return context(s);
  }
  uint8_t flags = 0;
  if (serial_consistency) flags |= kWithSerialConsistency;
  if (default_timestamp) flags |= kWithDefaultTimestamp;
  w.Consistency(static_cast<uint16_t>(consistency));
  w.Byte(flags);
  if (serial_consistency) w.Consistency(static_cast<uint16_t>(*serial_consistency));
  if (default_timestamp) w.Long(*default_timestamp);
  return FinishChecked(Opcode::kBatch, std::move(b), std::move(splices));
}

size_t RequestFrame::size() const { return bytes.size() + SplicedBytes(splices); }

Bytes RequestFrame::Flatten() const {
  Bytes b;
  b.reserve(size());
  ForEachPiece(0, [&b](std::span<const uint8_t> p) { b.insert(b.end(), p.begin(), p.end()); });
  return b;
}

Bytes PlainSaslToken(std::string_view user, std::string_view password) {
  Bytes t;
  t.reserve(user.size() + password.size() + 2);
  t.push_back(0);
  t.insert(t.end(), user.begin(), user.end());
  t.push_back(0);
  t.insert(t.end(), password.begin(), password.end());
  return t;
}

}  // namespace cqlstream::cql
