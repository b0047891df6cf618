// Copyright (c) cqlstream authors.
#include "cql/response.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace cqlstream::cql {

namespace {

// RESULT kinds (spec 4.2.5).
constexpr int32_t kResultVoid = 0x0001;
constexpr int32_t kResultRows = 0x0002;
constexpr int32_t kResultSetKeyspace = 0x0003;
constexpr int32_t kResultPrepared = 0x0004;
constexpr int32_t kResultSchemaChange = 0x0005;

Status CheckCount(int32_t n, std::string_view what, size_t min_bytes_each, const Reader& r) {
  if (n < 0 || n > kMaxColumns) {
    return Status::ProtocolError(
        fmt::format("{} {} at offset {}: must be between 0 and {}", what, n, r.offset(), kMaxColumns));
  }
  if (uint64_t(n) * min_bytes_each > r.remaining()) {
    return Status::ProtocolError(fmt::format("{} {} at offset {}: expected at least {} bytes, got {}",
                                             what, n, r.offset(), uint64_t(n) * min_bytes_each,
                                             r.remaining()));
  }
  return Status::OK();
}

// <global_table_spec>?<col_spec_1>...<col_spec_n> of Rows and Prepared metadata.
Status DecodeColumnSpecs(Reader& r, bool global, int32_t count, std::vector<ColumnSpec>* cols) {
  std::string ks, table;
  if (global) {
    CQLS_RETURN_IF_ERROR(r.String(&ks));
    CQLS_RETURN_IF_ERROR(r.String(&table));
  }
  // A column spec takes at least a [string] name and a [short] type id, plus
  // two [string]s without a global table spec.
  CQLS_RETURN_IF_ERROR(CheckCount(count, "column count", global ? 4 : 8, r));
  cols->clear();
  cols->reserve(size_t(count));
  for (int32_t i = 0; i < count; ++i) {
    ColumnSpec c;
    if (global) {
      c.keyspace = ks;
      c.table = table;
    } else {
      CQLS_RETURN_IF_ERROR(r.String(&c.keyspace));
      CQLS_RETURN_IF_ERROR(r.String(&c.table));
    }
    CQLS_RETURN_IF_ERROR(r.String(&c.name));
    // The context is formatted only for an error: every answer that carries
    // its metadata decodes these, and most decode without one.
    if (Status st = DecodeType(r, &c.type); !st.ok()) return st.WithContext(fmt::format("type of column {}", i));
    cols->push_back(std::move(c));
  }
  return Status::OK();
}

// <flags><columns_count>[<paging_state>] of <metadata>; the column specs
// are left to the caller. Clears what they would fill.
Status DecodeRowsMetadataHead(Reader& r, RowsMetadata* md) {
  CQLS_RETURN_IF_ERROR(r.Int(&md->flags));
  CQLS_RETURN_IF_ERROR(r.Int(&md->column_count));
  if (md->column_count < 0 || md->column_count > kMaxColumns) {
    return Status::ProtocolError(fmt::format("rows metadata: column count {} must be between 0 and {}",
                                             md->column_count, kMaxColumns));
  }
  md->paging_state.reset();
  if (md->flags & RowsMetadata::kHasMorePages) {
    std::optional<ByteView> ps;
    CQLS_RETURN_IF_ERROR(r.BytesValue(&ps));
    md->paging_state = ps ? Bytes(ps->begin(), ps->end()) : Bytes{};
  }
  md->columns.clear();
  md->specs_wire.clear();
  md->specs_matched = nullptr;
  return Status::OK();
}

Status DecodeSchemaChange(Reader& r, SchemaChange* c) {
  CQLS_RETURN_IF_ERROR(r.String(&c->change_type));
  CQLS_RETURN_IF_ERROR(r.String(&c->target));
  CQLS_RETURN_IF_ERROR(r.String(&c->keyspace));
  if (c->target == "KEYSPACE") return Status::OK();
  CQLS_RETURN_IF_ERROR(r.String(&c->name));
  if (c->target == "TABLE" || c->target == "TYPE") return Status::OK();
  if (c->target == "FUNCTION" || c->target == "AGGREGATE") return r.StringList(&c->arg_types);
  return Status::ProtocolError(fmt::format("schema change: unknown target '{}'", c->target));
}

Status DecodePrepared(Reader& r, Prepared* p) {
  ByteView id;
  CQLS_RETURN_IF_ERROR(r.ShortBytes(&id));
  p->id.assign(id.begin(), id.end());
  PreparedMetadata& md = p->bind_metadata;
  int32_t columns, pk_count;
  CQLS_RETURN_IF_ERROR(r.Int(&md.flags));
  CQLS_RETURN_IF_ERROR(r.Int(&columns));
  CQLS_RETURN_IF_ERROR(r.Int(&pk_count));
  CQLS_RETURN_IF_ERROR(CheckCount(pk_count, "partition key count", 2, r));
  md.pk_indexes.resize(size_t(pk_count));
  for (auto& idx : md.pk_indexes) {
    CQLS_RETURN_IF_ERROR(r.Short(&idx));
    if (columns < 0 || idx >= columns) {
      return Status::ProtocolError(fmt::format(
          "prepared metadata: partition key index {} is not a bind marker (there are {})", idx, columns));
    }
  }
  CQLS_RETURN_IF_ERROR(DecodeColumnSpecs(r, md.flags & RowsMetadata::kGlobalTablesSpec, columns,
                                         &md.bind_columns)
                           .WithContext("prepared bind metadata"));
  // The result metadata's column specs are kept as they came too: every
  // answer that carries its metadata is compared with them (specs_wire).
  RowsMetadata& rm = p->result_metadata;
  CQLS_RETURN_IF_ERROR(DecodeRowsMetadataHead(r, &rm).WithContext("prepared result metadata"));
  if (rm.flags & RowsMetadata::kNoMetadata) return Status::OK();
  Reader at = r;
  CQLS_RETURN_IF_ERROR(DecodeColumnSpecs(r, rm.flags & RowsMetadata::kGlobalTablesSpec, rm.column_count,
                                         &rm.columns)
                           .WithContext("prepared result metadata"));
  ByteView specs;
  CQLS_RETURN_IF_ERROR(at.Raw(r.offset() - at.offset(), &specs));
  rm.specs_wire.assign(specs.begin(), specs.end());
  return Status::OK();
}

Status DecodeEvent(Reader& r, Event* e) {
  std::string type;
  CQLS_RETURN_IF_ERROR(r.String(&type));
  if (type == "TOPOLOGY_CHANGE") {
    TopologyChangeEvent t;
    CQLS_RETURN_IF_ERROR(r.String(&t.change));
    CQLS_RETURN_IF_ERROR(r.Inet(&t.address));
    *e = std::move(t);
    return Status::OK();
  }
  if (type == "STATUS_CHANGE") {
    StatusChangeEvent s;
    CQLS_RETURN_IF_ERROR(r.String(&s.change));
    CQLS_RETURN_IF_ERROR(r.Inet(&s.address));
    *e = std::move(s);
    return Status::OK();
  }
  if (type == "SCHEMA_CHANGE") {
    SchemaChangeEvent s;
    CQLS_RETURN_IF_ERROR(DecodeSchemaChange(r, &s.change));
    *e = std::move(s);
    return Status::OK();
  }
  return Status::ProtocolError(fmt::format("unknown event type '{}'", type.substr(0, 64)));
}

StatusOr<Result> DecodeResult(std::shared_ptr<const Bytes> body, Reader& r) {
  int32_t kind;
  CQLS_RETURN_IF_ERROR(r.Int(&kind));
  switch (kind) {
    case kResultVoid:
      return Result(ResultVoid{});
    case kResultRows: {
      CQLS_ASSIGN_OR_RETURN(Rows rows, Rows::Decode(std::move(body), r));
      return Result(std::move(rows));
    }
    case kResultSetKeyspace: {
      ResultSetKeyspace k;
      CQLS_RETURN_IF_ERROR(r.String(&k.keyspace));
      return Result(std::move(k));
    }
    case kResultPrepared: {
      Prepared p;
      CQLS_RETURN_IF_ERROR(DecodePrepared(r, &p));
      return Result(std::move(p));
    }
    case kResultSchemaChange: {
      SchemaChange c;
      CQLS_RETURN_IF_ERROR(DecodeSchemaChange(r, &c));
      return Result(std::move(c));
    }
    default:
      return Status::ProtocolError(fmt::format("unknown result kind 0x{:04x}", uint32_t(kind)));
  }
}

}  // namespace

// ---------------------------------------------------------------------------

Status DecodeType(Reader& r, DataType* t, int depth) {
  if (depth > kMaxTypeDepth) {
    return Status::ProtocolError(
        fmt::format("[option] at offset {}: type nests deeper than {} levels", r.offset(), kMaxTypeDepth));
  }
  uint16_t id;
  CQLS_RETURN_IF_ERROR(r.Short(&id));
  *t = DataType{};
  t->id = static_cast<TypeId>(id);
  switch (t->id) {
    case TypeId::kCustom:
      return r.String(&t->custom_class);
    case TypeId::kAscii:
    case TypeId::kBigint:
    case TypeId::kBlob:
    case TypeId::kBoolean:
    case TypeId::kCounter:
    case TypeId::kDecimal:
    case TypeId::kDouble:
    case TypeId::kFloat:
    case TypeId::kInt:
    case TypeId::kTimestamp:
    case TypeId::kUuid:
    case TypeId::kVarchar:
    case TypeId::kVarint:
    case TypeId::kTimeuuid:
    case TypeId::kInet:
    case TypeId::kDate:
    case TypeId::kTime:
    case TypeId::kSmallint:
    case TypeId::kTinyint:
    case TypeId::kDuration:
      return Status::OK();
    case TypeId::kList:
    case TypeId::kSet:
    case TypeId::kMap: {
      t->params.resize(t->id == TypeId::kMap ? 2 : 1);
      for (auto& p : t->params) CQLS_RETURN_IF_ERROR(DecodeType(r, &p, depth + 1));
      return Status::OK();
    }
    case TypeId::kUdt: {
      CQLS_RETURN_IF_ERROR(r.String(&t->udt_keyspace));
      CQLS_RETURN_IF_ERROR(r.String(&t->udt_name));
      uint16_t n;
      CQLS_RETURN_IF_ERROR(r.Short(&n));
      // Each field is at least a [string] name and a [short] type id.
      if (size_t{n} * 4 > r.remaining()) {
        return Status::ProtocolError(fmt::format("UDT {} with {} fields at offset {}: expected at least {} bytes, got {}",
                                                 t->udt_name, n, r.offset(), size_t{n} * 4, r.remaining()));
      }
      t->udt_field_names.resize(n);
      t->params.resize(n);
      for (uint16_t i = 0; i < n; ++i) {
        CQLS_RETURN_IF_ERROR(r.String(&t->udt_field_names[i]));
        CQLS_RETURN_IF_ERROR(DecodeType(r, &t->params[i], depth + 1));
      }
      return Status::OK();
    }
    case TypeId::kTuple: {
      uint16_t n;
      CQLS_RETURN_IF_ERROR(r.Short(&n));
      if (size_t{n} * 2 > r.remaining()) {
        return Status::ProtocolError(fmt::format("tuple of {} types at offset {}: expected at least {} bytes, got {}",
                                                 n, r.offset(), size_t{n} * 2, r.remaining()));
      }
      t->params.resize(n);
      for (auto& p : t->params) CQLS_RETURN_IF_ERROR(DecodeType(r, &p, depth + 1));
      return Status::OK();
    }
  }
  return Status::ProtocolError(fmt::format("[option] at offset {}: unknown type id 0x{:04x}", r.offset() - 2, id));
}

Status DecodeRowsMetadata(Reader& r, RowsMetadata* md, const RowsMetadata* expected) {
  CQLS_RETURN_IF_ERROR(DecodeRowsMetadataHead(r, md));
  if (md->flags & RowsMetadata::kNoMetadata) return Status::OK();
  const bool global = md->flags & RowsMetadata::kGlobalTablesSpec;
  if (expected != nullptr && !expected->specs_wire.empty() && md->column_count == expected->column_count &&
      global == bool(expected->flags & RowsMetadata::kGlobalTablesSpec) &&
      r.remaining() >= expected->specs_wire.size()) {
    Reader peek = r;
    ByteView specs;
    CQLS_RETURN_IF_ERROR(peek.Raw(expected->specs_wire.size(), &specs));
    if (std::equal(specs.begin(), specs.end(), expected->specs_wire.begin())) {
      md->specs_matched = expected;
      r = peek;
      return Status::OK();
    }
  }
  return DecodeColumnSpecs(r, global, md->column_count, &md->columns);
}

Status DecodePreamble(uint8_t flags, Reader& r, std::optional<std::array<uint8_t, 16>>* tracing_id,
                      std::vector<std::string>* warnings) {
  if (flags & kFlagCompression) {
    return Status::ProtocolError(
        "compressed frame: cqlstream never negotiates compression, so the body cannot be read");
  }
  if (flags & kFlagTracing) {
    std::array<uint8_t, 16> id;
    CQLS_RETURN_IF_ERROR(r.Uuid(&id).WithContext("tracing id"));
    *tracing_id = id;
  }
  if (flags & kFlagWarning) CQLS_RETURN_IF_ERROR(r.StringList(warnings).WithContext("warnings"));
  if (flags & kFlagCustomPayload) {
    std::map<std::string, std::optional<Bytes>> payload;  // not used by cqlstream
    CQLS_RETURN_IF_ERROR(r.BytesMap(&payload).WithContext("custom payload"));
  }
  return Status::OK();
}

Status DecodeError(Reader& r, ServerError* e) {
  CQLS_RETURN_IF_ERROR(r.Int(&e->code));
  CQLS_RETURN_IF_ERROR(r.String(&e->message));
  auto counts = [&]() -> Status {
    // <cl><received><blockfor> of the timeouts and failures.
    CQLS_RETURN_IF_ERROR(r.Consistency(&e->consistency));
    CQLS_RETURN_IF_ERROR(r.Int(&e->alive));
    return r.Int(&e->required);
  };
  auto data_present = [&]() -> Status {
    uint8_t b;
    CQLS_RETURN_IF_ERROR(r.Byte(&b));
    e->data_present = b != 0;
    return Status::OK();
  };
  switch (e->typed()) {
    case ServerErrorCode::kUnavailable:
      CQLS_RETURN_IF_ERROR(r.Consistency(&e->consistency));
      CQLS_RETURN_IF_ERROR(r.Int(&e->required));
      return r.Int(&e->alive);
    case ServerErrorCode::kWriteTimeout:
      CQLS_RETURN_IF_ERROR(counts());
      return r.String(&e->write_type);
    case ServerErrorCode::kReadTimeout:
      CQLS_RETURN_IF_ERROR(counts());
      return data_present();
    case ServerErrorCode::kReadFailure:
      CQLS_RETURN_IF_ERROR(counts());
      CQLS_RETURN_IF_ERROR(r.Int(&e->num_failures));
      return data_present();
    case ServerErrorCode::kWriteFailure:
      CQLS_RETURN_IF_ERROR(counts());
      CQLS_RETURN_IF_ERROR(r.Int(&e->num_failures));
      return r.String(&e->write_type);
    case ServerErrorCode::kCasWriteUnknown:  // v5: <cl><received><blockfor>
      return counts();
    case ServerErrorCode::kFunctionFailure:
      CQLS_RETURN_IF_ERROR(r.String(&e->keyspace));
      CQLS_RETURN_IF_ERROR(r.String(&e->table));
      return r.StringList(&e->arg_types);
    case ServerErrorCode::kAlreadyExists:
      CQLS_RETURN_IF_ERROR(r.String(&e->keyspace));
      return r.String(&e->table);
    case ServerErrorCode::kUnprepared: {
      ByteView id;
      CQLS_RETURN_IF_ERROR(r.ShortBytes(&id));
      e->unprepared_id.assign(reinterpret_cast<const char*>(id.data()), id.size());
      return Status::OK();
    }
    default:
      return Status::OK();  // no code-specific fields (or a code we do not know)
  }
}

// ---------------------------------------------------------------------------
// Rows

StatusOr<Rows> Rows::Decode(std::shared_ptr<const Bytes> body, Reader& r) {
  Rows rows;
  CQLS_RETURN_IF_ERROR(DecodeRowsMetadata(r, &rows.metadata_));
  CQLS_RETURN_IF_ERROR(r.Int(&rows.row_count_));
  const int32_t cols = rows.metadata_.column_count;
  // Every cell takes at least its 4-byte length: bound the cell count by the
  // bytes present before reserving memory for it.
  const uint64_t cells = uint64_t(std::max(rows.row_count_, 0)) * uint64_t(cols);
  if (rows.row_count_ < 0 || cells * 4 > r.remaining()) {
    return Status::ProtocolError(fmt::format(
        "Rows: {} rows of {} columns need at least {} bytes, got {}", rows.row_count_, cols,
        cells * 4, r.remaining()));
  }
  rows.cells_.reserve(cells);
  const uint8_t* base = body->data();
  for (uint64_t i = 0; i < cells; ++i) {
    std::optional<ByteView> b;
    size_t at = r.offset();
    if (Status s = r.BytesValue(&b); !s.ok()) {
      return s.WithContext(fmt::format("Rows: cell (row {}, column {}) at offset {}", i / cols, i % cols, at));
    }
    if (!b) {
      rows.cells_.emplace_back(-1, 0);
    } else {
      rows.cells_.emplace_back(b->data() - base, static_cast<int32_t>(b->size()));
    }
  }
  rows.body_ = std::move(body);
  return rows;
}

std::optional<ByteView> Rows::cell(int32_t row, int32_t col) const {
  assert(row >= 0 && row < row_count_ && col >= 0 && col < column_count());
  const auto& [off, len] = cells_[size_t(row) * size_t(column_count()) + size_t(col)];
  if (off < 0) return std::nullopt;
  return ByteView(body_->data() + off, size_t(len));
}

StatusOr<Value> Rows::value(int32_t row, int32_t col) const {
  if (row < 0 || row >= row_count_ || col < 0 || col >= column_count()) {
    return Status::InvalidArgument(fmt::format("cell (row {}, column {}) is outside a result of {} rows and {} columns",
                                               row, col, row_count_, column_count()));
  }
  if (metadata_.columns.size() != size_t(column_count())) {
    return Status::InvalidArgument(
        "the result has no column metadata (it was requested with skip_metadata)");
  }
  std::optional<ByteView> c = cell(row, col);
  if (!c) return Value::Null();
  const ColumnSpec& spec = metadata_.columns[size_t(col)];
  auto v = DecodeCell(spec.type, *c);
  if (!v.ok()) return v.status().WithContext(fmt::format("column {}", spec.name));
  return v;
}

int32_t Rows::column_index(std::string_view name) const {
  for (size_t i = 0; i < metadata_.columns.size(); ++i) {
    if (metadata_.columns[i].name == name) return static_cast<int32_t>(i);
  }
  return -1;
}

// ---------------------------------------------------------------------------

StatusOr<Response> DecodeResponse(const FrameHeader& header, Bytes body) {
  auto owned = std::make_shared<const Bytes>(std::move(body));
  Reader r(*owned);
  Response resp;
  resp.header = header;
  const auto context = [&](const Status& s) {
    return s.WithContext(fmt::format("{} body on stream {}", OpcodeName(header.opcode), header.stream));
  };
  if (Status s = DecodePreamble(header.flags, r, &resp.tracing_id, &resp.warnings); !s.ok()) {
    return context(s);
  }
  Status s;
  switch (header.opcode) {
    case Opcode::kError: {
      ServerError e;
      s = DecodeError(r, &e);
      resp.message = std::move(e);
      break;
    }
    case Opcode::kReady:
      resp.message = Ready{};
      break;
    case Opcode::kAuthenticate: {
      Authenticate a;
      s = r.String(&a.authenticator);
      resp.message = std::move(a);
      break;
    }
    case Opcode::kSupported: {
      Supported sup;
      s = r.StringMultimap(&sup.options);
      resp.message = std::move(sup);
      break;
    }
    case Opcode::kResult: {
      auto result = DecodeResult(owned, r);
      if (!result.ok()) return context(result.status());
      resp.message = std::move(result).value();
      break;
    }
    case Opcode::kEvent: {
      Event e;
      s = DecodeEvent(r, &e);
      resp.message = std::move(e);
      break;
    }
    case Opcode::kAuthChallenge:
    case Opcode::kAuthSuccess: {
      std::optional<ByteView> token;
      s = r.BytesValue(&token);
      std::optional<Bytes> t;
      if (token) t = Bytes(token->begin(), token->end());
      if (header.opcode == Opcode::kAuthChallenge) {
        resp.message = AuthChallenge{std::move(t)};
      } else {
        resp.message = AuthSuccess{std::move(t)};
      }
      break;
    }
    default:
      return Status::ProtocolError(fmt::format("opcode 0x{:02x} ({}) is not a response",
                                               static_cast<unsigned>(header.opcode),
                                               OpcodeName(header.opcode)));
  }
  if (!s.ok()) return context(s);
  return resp;
}

}  // namespace cqlstream::cql
