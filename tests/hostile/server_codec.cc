// Copyright (c) cqlstream authors.
#include "hostile/server_codec.h"

#include <fmt/format.h>

#include <algorithm>

namespace cqlstream::hostile {
namespace {

constexpr uint8_t kFlagValues = 0x01, kFlagPageSize = 0x04, kFlagPagingState = 0x08, kFlagSerial = 0x10,
                  kFlagTimestamp = 0x20, kFlagNames = 0x40;

Status DecodeParams(cql::Reader& r, RequestParams* p) {
  CQLS_RETURN_IF_ERROR(r.Short(&p->consistency));
  CQLS_RETURN_IF_ERROR(r.Byte(&p->flags));
  if (p->flags & kFlagNames) return Status::Unsupported("named values");
  if (p->flags & kFlagValues) {
    uint16_t n;
    CQLS_RETURN_IF_ERROR(r.Short(&n));
    for (uint16_t i = 0; i < n; ++i) {
      std::optional<cql::ByteView> v;
      CQLS_RETURN_IF_ERROR(r.BytesValue(&v));
      if (v) {
        p->values.emplace_back(cql::Bytes(v->begin(), v->end()));
      } else {
        p->values.emplace_back(std::nullopt);
      }
    }
  }
  if (p->flags & kFlagPageSize) CQLS_RETURN_IF_ERROR(r.Int(&p->page_size));
  if (p->flags & kFlagPagingState) {
    std::optional<cql::ByteView> v;
    CQLS_RETURN_IF_ERROR(r.BytesValue(&v));
    if (v) p->paging_state = cql::Bytes(v->begin(), v->end());
  }
  if (p->flags & kFlagSerial) {
    uint16_t c;
    CQLS_RETURN_IF_ERROR(r.Short(&c));
  }
  if (p->flags & kFlagTimestamp) {
    int64_t t;
    CQLS_RETURN_IF_ERROR(r.Long(&t));
  }
  return Status::OK();
}

void PutSpecs(cql::Writer& w, const Table& t) {
  w.String(t.keyspace);
  w.String(t.name);
  for (const auto& c : t.columns) {
    w.String(c.name);
    PutType(w, c.type);
  }
}

}  // namespace

StatusOr<RequestParams> DecodeRequest(const RequestFrame& f) {
  RequestParams p;
  cql::Reader r(f.body);
  std::string_view q;
  switch (f.header.opcode) {
    case cql::Opcode::kQuery:
      CQLS_RETURN_IF_ERROR(r.LongString(&q));
      p.query = std::string(q);
      CQLS_RETURN_IF_ERROR(DecodeParams(r, &p));
      return p;
    case cql::Opcode::kPrepare:
      CQLS_RETURN_IF_ERROR(r.LongString(&q));
      p.query = std::string(q);
      return p;
    case cql::Opcode::kExecute: {
      cql::ByteView id;
      CQLS_RETURN_IF_ERROR(r.ShortBytes(&id));
      p.prepared_id.assign(id.begin(), id.end());
      CQLS_RETURN_IF_ERROR(DecodeParams(r, &p));
      return p;
    }
    default:
      return Status::Unsupported(fmt::format("opcode {}", cql::OpcodeName(f.header.opcode)));
  }
}

cql::Bytes Frame(cql::Opcode op, int16_t stream, const cql::Bytes& body, uint8_t version) {
  cql::Bytes out(cql::kHeaderSize);
  cql::FrameHeader h;
  h.version = version;
  h.stream = stream;
  h.opcode = op;
  h.length = static_cast<uint32_t>(body.size());
  cql::EncodeHeader(h, out.data());
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

void PutType(cql::Writer& w, const DataType& t) {
  w.Short(static_cast<uint16_t>(t.id));
  for (const auto& p : t.params) PutType(w, p);
}

size_t PagingOffset(const RequestParams& p) {
  if (!p.paging_state || p.paging_state->size() != 4) return 0;
  return cql::LoadU32(p.paging_state->data());
}

cql::Bytes RowsBody(const Table& t, size_t first, size_t count, bool skip_metadata, const cql::Bytes* more_state) {
  cql::Bytes body;
  cql::Writer w(&body);
  w.Int(0x0002);  // Rows
  first = std::min(first, t.rows.size());
  count = std::min(count, t.rows.size() - first);
  const bool more = more_state != nullptr || first + count < t.rows.size();
  int32_t flags = skip_metadata ? 0x0004 : 0x0001;
  if (more) flags |= 0x0002;
  w.Int(flags);
  w.Int(static_cast<int32_t>(t.columns.size()));
  if (more_state != nullptr) {
    w.BytesValue(cql::ByteView(*more_state));
  } else if (more) {
    uint8_t next[4];
    cql::StoreU32(next, static_cast<uint32_t>(first + count));
    w.BytesValue(cql::ByteView(next, 4));
  }
  if (!skip_metadata) PutSpecs(w, t);
  w.Int(static_cast<int32_t>(count));
  for (size_t i = first; i < first + count; ++i) {
    for (size_t c = 0; c < t.columns.size(); ++c) {
      const Value& v = c < t.rows[i].size() ? t.rows[i][c] : Value();
      if (v.kind() == Value::Kind::kNull) {
        w.BytesValue(std::nullopt);
        continue;
      }
      cql::Bytes cell;
      if (!EncodeCell(v, t.columns[c].type, &cell).ok()) {
        w.BytesValue(std::nullopt);
        continue;
      }
      w.BytesValue(cql::ByteView(cell));
    }
  }
  return body;
}

cql::Bytes RowsBodyForRequest(const Table& t, const RequestParams& p) {
  const size_t first = PagingOffset(p);
  const size_t count = p.page_size > 0 ? static_cast<size_t>(p.page_size) : t.rows.size();
  return RowsBody(t, first, count, p.skip_metadata());
}

cql::Bytes PreparedBody(const cql::Bytes& id, const Table& binds, const std::vector<uint16_t>& pk_indexes,
                        const Table& result) {
  cql::Bytes body;
  cql::Writer w(&body);
  w.Int(0x0004);  // Prepared
  w.ShortBytes(cql::ByteView(id));
  w.Int(0x0001);  // global tables spec
  w.Int(static_cast<int32_t>(binds.columns.size()));
  w.Int(static_cast<int32_t>(pk_indexes.size()));
  for (uint16_t i : pk_indexes) w.Short(i);
  PutSpecs(w, binds);
  w.Int(0x0001);
  w.Int(static_cast<int32_t>(result.columns.size()));
  PutSpecs(w, result);
  return body;
}

cql::Bytes VoidBody() {
  cql::Bytes body;
  cql::Writer w(&body);
  w.Int(0x0001);
  return body;
}

cql::Bytes ErrorBody(int32_t code, const std::string& message, const cql::Bytes& unprepared_id) {
  cql::Bytes body;
  cql::Writer w(&body);
  w.Int(code);
  w.String(message);
  if (code == 0x2500) w.ShortBytes(cql::ByteView(unprepared_id));
  return body;
}

cql::Bytes SupportedBody(const std::map<std::string, std::vector<std::string>>& options) {
  cql::Bytes body;
  cql::Writer w(&body);
  w.StringMultimap(options);
  return body;
}

cql::Bytes StatusEventBody(const std::string& change, const std::vector<uint8_t>& address, int32_t port) {
  cql::Bytes body;
  cql::Writer w(&body);
  w.String("STATUS_CHANGE");
  w.String(change);
  w.Inet(cql::Inet{address, port});
  return body;
}

}  // namespace cqlstream::hostile
