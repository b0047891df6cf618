// Copyright (c) cqlstream authors.
//
// Helpers for the codec's unit tests and the fuzz corpus generator: hex
// literals, and response frames assembled from hand-written body bytes.
//
// Thread-safety: pure functions. Test-only; not part of cqlstream_cql.
#ifndef CQLSTREAM_CQL_TEST_UTIL_H_
#define CQLSTREAM_CQL_TEST_UTIL_H_

#include <cassert>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cql/frame.h"
#include "cql/response.h"
#include "cql/wire.h"
#include "cqlstream/value.h"

namespace cqlstream::cql::testing {

// "84 00 00 01 02" -> bytes. Whitespace and '|' are ignored (use them to
// group fields); anything else must be a hex digit.
inline Bytes Hex(std::string_view s) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  Bytes out;
  int hi = -1;
  for (char c : s) {
    if (c == ' ' || c == '\n' || c == '\t' || c == '|') continue;
    int d = digit(c);
    assert(d >= 0 && "bad hex literal");
    if (hi < 0) {
      hi = d;
    } else {
      out.push_back(static_cast<uint8_t>(hi << 4 | d));
      hi = -1;
    }
  }
  assert(hi < 0 && "odd number of hex digits");
  return out;
}

inline std::string ToHex(ByteView b) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (uint8_t c : b) {
    s += kHex[c >> 4];
    s += kHex[c & 0xf];
  }
  return s;
}

// Raw bytes of a text.
inline Bytes Text(std::string_view s) { return Bytes(s.begin(), s.end()); }

// [string]: [short] length + bytes.
inline Bytes Str(std::string_view s) {
  Bytes b(2 + s.size());
  StoreU16(b.data(), static_cast<uint16_t>(s.size()));
  for (size_t i = 0; i < s.size(); ++i) b[2 + i] = static_cast<uint8_t>(s[i]);
  return b;
}

inline Bytes Cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// A response frame: header (version 0x84) + body.
inline Bytes ResponseFrame(Opcode op, int16_t stream, const Bytes& body, uint8_t flags = 0) {
  Bytes f(kHeaderSize);
  FrameHeader h;
  h.version = kProtocolVersion | kResponseBit;
  h.flags = flags;
  h.stream = stream;
  h.opcode = op;
  h.length = static_cast<uint32_t>(body.size());
  EncodeHeader(h, f.data());
  f.insert(f.end(), body.begin(), body.end());
  return f;
}

// Hand-written response bodies, one per message kind, named for the corpus.
struct SampleFrame {
  std::string name;
  Bytes frame;
};

inline std::vector<SampleFrame> SampleResponseFrames() {
  std::vector<SampleFrame> v;
  auto add = [&](std::string name, Opcode op, int16_t stream, Bytes body, uint8_t flags = 0) {
    v.push_back({std::move(name), ResponseFrame(op, stream, body, flags)});
  };
  add("ready", Opcode::kReady, 0, {});
  add("authenticate", Opcode::kAuthenticate, 0,
      Str("org.apache.cassandra.auth.PasswordAuthenticator"));
  add("supported", Opcode::kSupported, 0,
      Cat({Hex("0002"), Str("CQL_VERSION"), Hex("0001"), Str("3.4.7"), Str("COMPRESSION"),
           Hex("0002"), Str("lz4"), Str("snappy")}));
  add("error_unavailable", Opcode::kError, 3,
      Cat({Hex("00001000"), Str("Cannot achieve consistency"), Hex("0004 00000003 00000001")}));
  add("error_write_timeout", Opcode::kError, 3,
      Cat({Hex("00001100"), Str("timeout"), Hex("0001 00000000 00000001"), Str("SIMPLE")}));
  add("error_read_failure", Opcode::kError, 3,
      Cat({Hex("00001300"), Str("failed"), Hex("0006 00000001 00000002 00000001 01")}));
  add("error_function_failure", Opcode::kError, 3,
      Cat({Hex("00001400"), Str("boom"), Str("ks"), Str("fn"), Hex("0002"), Str("int"), Str("text")}));
  add("error_unprepared", Opcode::kError, 3,
      Cat({Hex("00002500"), Str("unknown id"), Hex("0004 deadbeef")}));
  add("result_void", Opcode::kResult, 1, Hex("00000001"));
  add("result_set_keyspace", Opcode::kResult, 1, Cat({Hex("00000003"), Str("images")}));
  add("result_schema_change", Opcode::kResult, 1,
      Cat({Hex("00000005"), Str("CREATED"), Str("TABLE"), Str("ks"), Str("t")}));
  // Prepared: id, bind metadata with global spec (2 markers, pk index 1),
  // result metadata with no_metadata.
  add("result_prepared", Opcode::kResult, 2,
      Cat({Hex("00000004 0002 abcd | 00000001 00000002 00000001 0001"), Str("ks"), Str("img"),
           Str("bucket"), Hex("0009"), Str("id"), Hex("000c"),
           Hex("00000004 00000001")}));
  // Rows: global spec, columns (id int, data blob), 3 rows, one null cell,
  // one empty cell, and a paging state.
  add("result_rows", Opcode::kResult, 1,
      Cat({Hex("00000002 | 00000003 00000002 | 00000002 cafe"), Str("ks"), Str("img"), Str("id"),
           Hex("0009"), Str("data"), Hex("0003"),
           Hex("00000003"
               "00000004 00000001 00000005 0102030405"
               "00000004 00000002 ffffffff"
               "00000004 00000003 00000000")}));
  // Rows with tracing id and warnings in the preamble.
  add("result_rows_tracing_warnings", Opcode::kResult, 4,
      Cat({Hex("00112233445566778899aabbccddeeff"), Hex("0001"), Str("slow query"),
           Hex("00000002 | 00000005 00000001 | 00000001 | 00000003 616263")}),
      kFlagTracing | kFlagWarning);
  add("event_topology", Opcode::kEvent, -1,
      Cat({Str("TOPOLOGY_CHANGE"), Str("NEW_NODE"), Hex("04 7f000002 00002352")}));
  add("event_status", Opcode::kEvent, -1,
      Cat({Str("STATUS_CHANGE"), Str("DOWN"),
           Hex("10 00000000000000000000000000000001 00002352")}));
  add("event_schema", Opcode::kEvent, -1,
      Cat({Str("SCHEMA_CHANGE"), Str("UPDATED"), Str("FUNCTION"), Str("ks"), Str("f"), Hex("0001"),
           Str("int")}));
  add("auth_challenge", Opcode::kAuthChallenge, 0, Hex("00000002 0102"));
  add("auth_success", Opcode::kAuthSuccess, 0, Hex("ffffffff"));
  return v;
}

// [option] of a type (spec 4.2.5.2), for the simple types and collections.
inline void PutType(Writer& w, const DataType& t) {
  w.Short(static_cast<uint16_t>(t.id));
  for (const auto& p : t.params) PutType(w, p);
}

// A Rows result (as a server would send it) of one table, decoded: columns
// (name, type) and rows of cells, each a Value encoded with its column's type
// or nullopt for null. `raw` rows give the cell bytes as they are.
struct RowsSpec {
  std::string keyspace = "ks", table = "t";
  std::vector<std::pair<std::string, DataType>> columns;
  std::vector<std::vector<std::optional<Value>>> rows;
  std::vector<std::vector<std::optional<Bytes>>> raw;
};
inline Rows MakeRows(const RowsSpec& spec) {
  Bytes body;
  Writer w(&body);
  w.Int(0x0002);  // Rows
  w.Int(0x0001);  // global tables spec
  w.Int(static_cast<int32_t>(spec.columns.size()));
  w.String(spec.keyspace);
  w.String(spec.table);
  for (const auto& [name, type] : spec.columns) {
    w.String(name);
    PutType(w, type);
  }
  w.Int(static_cast<int32_t>(spec.rows.size() + spec.raw.size()));
  for (const auto& row : spec.rows) {
    assert(row.size() == spec.columns.size());
    for (size_t c = 0; c < row.size(); ++c) {
      if (!row[c]) {
        w.BytesValue(std::nullopt);
        continue;
      }
      Bytes cell;
      [[maybe_unused]] Status st = EncodeCell(*row[c], spec.columns[c].second, &cell);
      assert(st.ok());
      w.BytesValue(ByteView(cell));
    }
  }
  for (const auto& row : spec.raw) {
    for (const auto& cell : row) w.BytesValue(cell ? std::optional<ByteView>(ByteView(*cell)) : std::nullopt);
  }
  FrameHeader h;
  h.version = kProtocolVersion | kResponseBit;
  h.opcode = Opcode::kResult;
  h.length = static_cast<uint32_t>(body.size());
  auto r = DecodeResponse(h, std::move(body));
  assert(r.ok());
  return std::get<Rows>(std::get<Result>(r->message));
}

}  // namespace cqlstream::cql::testing

#endif  // CQLSTREAM_CQL_TEST_UTIL_H_
