// Copyright (c) cqlstream authors.
#include "cql/response.h"

#include <gtest/gtest.h>

#include "cql/test_util.h"

namespace cqlstream::cql {
namespace {

using testing::Cat;
using testing::Hex;
using testing::Str;
using testing::ToHex;

FrameHeader Header(Opcode op, uint8_t flags = 0, int16_t stream = 1) {
  FrameHeader h;
  h.version = 0x84;
  h.flags = flags;
  h.stream = stream;
  h.opcode = op;
  return h;
}

StatusOr<Response> Decode(Opcode op, const Bytes& body, uint8_t flags = 0) {
  FrameHeader h = Header(op, flags);
  h.length = static_cast<uint32_t>(body.size());
  return DecodeResponse(h, body);
}

template <typename T>
const T& As(const StatusOr<Response>& r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::get<T>(r->message);
}

template <typename T>
const T& AsResult(const StatusOr<Response>& r) {
  return std::get<T>(As<Result>(r));
}

ServerError DecodeErr(const Bytes& body) {
  auto r = Decode(Opcode::kError, body);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::get<ServerError>(r->message) : ServerError{};
}

// ---------------------------------------------------------------------------
// ERROR: every code of spec section 9 with its fields.

TEST(ErrorResponse, CodesWithoutExtraFields) {
  for (int32_t code : {0x0000, 0x000A, 0x0100, 0x1001, 0x1002, 0x1003, 0x1600, 0x2000, 0x2100,
                       0x2200, 0x2300}) {
    Bytes body = Cat({Hex("00000000"), Str("msg")});
    StoreU32(body.data(), static_cast<uint32_t>(code));
    ServerError e = DecodeErr(body);
    EXPECT_EQ(e.code, code);
    EXPECT_EQ(e.message, "msg");
    EXPECT_NE(ServerErrorCodeName(code).find("Unknown"), 0u);
  }
}

TEST(ErrorResponse, Unavailable) {
  ServerError e = DecodeErr(Cat({Hex("00001000"), Str("no"), Hex("0004 00000003 00000001")}));
  EXPECT_EQ(e.typed(), ServerErrorCode::kUnavailable);
  EXPECT_EQ(e.consistency, 4);  // QUORUM
  EXPECT_EQ(e.required, 3);
  EXPECT_EQ(e.alive, 1);
  EXPECT_EQ(e.ToString(), "Unavailable (consistency QUORUM, required 3, alive 1): no");
}

TEST(ErrorResponse, WriteTimeout) {
  ServerError e = DecodeErr(Cat({Hex("00001100"), Str("t"), Hex("0001 00000000 00000001"), Str("BATCH_LOG")}));
  EXPECT_EQ(e.typed(), ServerErrorCode::kWriteTimeout);
  EXPECT_EQ(e.consistency, 1);
  EXPECT_EQ(e.alive, 0);     // received
  EXPECT_EQ(e.required, 1);  // blockfor
  EXPECT_EQ(e.write_type, "BATCH_LOG");
}

TEST(ErrorResponse, ReadTimeout) {
  ServerError e = DecodeErr(Cat({Hex("00001200"), Str("t"), Hex("0006 00000001 00000002 00")}));
  EXPECT_EQ(e.typed(), ServerErrorCode::kReadTimeout);
  EXPECT_EQ(e.consistency, 6);
  EXPECT_EQ(e.alive, 1);
  EXPECT_EQ(e.required, 2);
  EXPECT_FALSE(e.data_present);
  e = DecodeErr(Cat({Hex("00001200"), Str("t"), Hex("0006 00000002 00000002 07")}));
  EXPECT_TRUE(e.data_present);  // any non-zero byte
}

TEST(ErrorResponse, ReadFailure) {
  ServerError e = DecodeErr(Cat({Hex("00001300"), Str("f"), Hex("000a 00000001 00000002 00000003 01")}));
  EXPECT_EQ(e.typed(), ServerErrorCode::kReadFailure);
  EXPECT_EQ(e.consistency, 0x0a);
  EXPECT_EQ(e.alive, 1);
  EXPECT_EQ(e.required, 2);
  EXPECT_EQ(e.num_failures, 3);
  EXPECT_TRUE(e.data_present);
}

TEST(ErrorResponse, FunctionFailure) {
  ServerError e = DecodeErr(Cat({Hex("00001400"), Str("boom"), Str("ks"), Str("fn"), Hex("0002"),
                                 Str("int"), Str("text")}));
  EXPECT_EQ(e.typed(), ServerErrorCode::kFunctionFailure);
  EXPECT_EQ(e.keyspace, "ks");
  EXPECT_EQ(e.table, "fn");
  EXPECT_EQ(e.arg_types, (std::vector<std::string>{"int", "text"}));
}

TEST(ErrorResponse, WriteFailure) {
  ServerError e = DecodeErr(Cat({Hex("00001500"), Str("f"), Hex("0004 00000001 00000002 00000001"), Str("COUNTER")}));
  EXPECT_EQ(e.typed(), ServerErrorCode::kWriteFailure);
  EXPECT_EQ(e.num_failures, 1);
  EXPECT_EQ(e.write_type, "COUNTER");
  EXPECT_EQ(e.required, 2);
}

TEST(ErrorResponse, CasWriteUnknown) {
  ServerError e = DecodeErr(Cat({Hex("00001700"), Str("cas"), Hex("0008 00000001 00000002")}));
  EXPECT_EQ(e.typed(), ServerErrorCode::kCasWriteUnknown);
  EXPECT_EQ(e.consistency, 8);
  EXPECT_EQ(e.alive, 1);
  EXPECT_EQ(e.required, 2);
}

TEST(ErrorResponse, AlreadyExists) {
  ServerError e = DecodeErr(Cat({Hex("00002400"), Str("exists"), Str("ks"), Str("tbl")}));
  EXPECT_EQ(e.typed(), ServerErrorCode::kAlreadyExists);
  EXPECT_EQ(e.keyspace, "ks");
  EXPECT_EQ(e.table, "tbl");
  e = DecodeErr(Cat({Hex("00002400"), Str("exists"), Str("ks"), Str("")}));
  EXPECT_TRUE(e.table.empty());  // a keyspace
}

TEST(ErrorResponse, Unprepared) {
  ServerError e = DecodeErr(Cat({Hex("00002500"), Str("unknown"), Hex("0004 deadbeef")}));
  EXPECT_EQ(e.typed(), ServerErrorCode::kUnprepared);
  EXPECT_EQ(ToHex(ByteView(reinterpret_cast<const uint8_t*>(e.unprepared_id.data()), e.unprepared_id.size())),
            "deadbeef");
  Status s = Status::FromServer(std::make_shared<ServerError>(e));
  EXPECT_EQ(s.code(), Status::Code::kServerError);
  EXPECT_EQ(s.server_error()->typed(), ServerErrorCode::kUnprepared);
}

TEST(ErrorResponse, UnknownCodeKeepsCodeAndMessage) {
  ServerError e = DecodeErr(Cat({Hex("00009999"), Str("new"), Hex("0102")}));
  EXPECT_EQ(e.code, 0x9999);
  EXPECT_EQ(e.message, "new");
}

TEST(ErrorResponse, TruncatedFieldsAreProtocolErrors) {
  auto r = Decode(Opcode::kError, Cat({Hex("00001000"), Str("no"), Hex("0004 00000003 0000")}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kProtocolError);
  EXPECT_NE(r.status().message().find("ERROR body on stream 1"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("expected 4 bytes, got 2"), std::string::npos) << r.status().ToString();
  EXPECT_FALSE(Decode(Opcode::kError, Hex("0000")).ok());
  EXPECT_FALSE(Decode(Opcode::kError, Cat({Hex("00002500"), Str("x"), Hex("0004 dead")})).ok());
}

// ---------------------------------------------------------------------------
// Connection set-up messages.

TEST(SetupResponses, ReadyAuthenticateSupported) {
  auto r = Decode(Opcode::kReady, {});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(std::holds_alternative<Ready>(r->message));
  EXPECT_EQ(r->header.stream, 1);

  r = Decode(Opcode::kAuthenticate, Str("org.apache.cassandra.auth.PasswordAuthenticator"));
  EXPECT_EQ(As<Authenticate>(r).authenticator, "org.apache.cassandra.auth.PasswordAuthenticator");

  r = Decode(Opcode::kSupported, Cat({Hex("0002"), Str("CQL_VERSION"), Hex("0001"), Str("3.4.7"),
                                      Str("SCYLLA_NR_SHARDS"), Hex("0001"), Str("8")}));
  const auto& opts = As<Supported>(r).options;
  ASSERT_EQ(opts.size(), 2u);
  EXPECT_EQ(opts.at("CQL_VERSION"), std::vector<std::string>{"3.4.7"});
  EXPECT_EQ(opts.at("SCYLLA_NR_SHARDS"), std::vector<std::string>{"8"});
}

TEST(SetupResponses, AuthChallengeAndSuccess) {
  auto r = Decode(Opcode::kAuthChallenge, Hex("00000003 010203"));
  ASSERT_TRUE(As<AuthChallenge>(r).token.has_value());
  EXPECT_EQ(ToHex(*As<AuthChallenge>(r).token), "010203");
  r = Decode(Opcode::kAuthSuccess, Hex("ffffffff"));
  EXPECT_FALSE(As<AuthSuccess>(r).token.has_value());
  r = Decode(Opcode::kAuthSuccess, Hex("00000000"));
  ASSERT_TRUE(As<AuthSuccess>(r).token.has_value());
  EXPECT_TRUE(As<AuthSuccess>(r).token->empty());
  EXPECT_FALSE(Decode(Opcode::kAuthSuccess, Hex("000000")).ok());
}

TEST(SetupResponses, RequestOpcodesAreNotResponses) {
  auto r = Decode(Opcode::kQuery, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("QUERY"), std::string::npos);
}

// ---------------------------------------------------------------------------
// RESULT kinds.

TEST(ResultResponse, Void) {
  auto r = Decode(Opcode::kResult, Hex("00000001"));
  EXPECT_TRUE(std::holds_alternative<ResultVoid>(As<Result>(r)));
}

TEST(ResultResponse, SetKeyspace) {
  auto r = Decode(Opcode::kResult, Cat({Hex("00000003"), Str("images")}));
  EXPECT_EQ(AsResult<ResultSetKeyspace>(r).keyspace, "images");
}

TEST(ResultResponse, SchemaChangeForEveryTarget) {
  auto r = Decode(Opcode::kResult, Cat({Hex("00000005"), Str("CREATED"), Str("KEYSPACE"), Str("ks")}));
  const auto& ks = AsResult<SchemaChange>(r);
  EXPECT_EQ(ks.change_type, "CREATED");
  EXPECT_EQ(ks.target, "KEYSPACE");
  EXPECT_EQ(ks.keyspace, "ks");
  EXPECT_TRUE(ks.name.empty());

  for (const char* target : {"TABLE", "TYPE"}) {
    r = Decode(Opcode::kResult, Cat({Hex("00000005"), Str("UPDATED"), Str(target), Str("ks"), Str("t")}));
    EXPECT_EQ(AsResult<SchemaChange>(r).target, target);
    EXPECT_EQ(AsResult<SchemaChange>(r).name, "t");
  }
  for (const char* target : {"FUNCTION", "AGGREGATE"}) {
    r = Decode(Opcode::kResult, Cat({Hex("00000005"), Str("DROPPED"), Str(target), Str("ks"), Str("f"),
                                     Hex("0002"), Str("int"), Str("list<text>")}));
    const auto& c = AsResult<SchemaChange>(r);
    EXPECT_EQ(c.change_type, "DROPPED");
    EXPECT_EQ(c.name, "f");
    EXPECT_EQ(c.arg_types, (std::vector<std::string>{"int", "list<text>"}));
  }
  r = Decode(Opcode::kResult, Cat({Hex("00000005"), Str("CREATED"), Str("INDEX"), Str("ks")}));
  EXPECT_FALSE(r.ok());
}

TEST(ResultResponse, PreparedWithPartitionKeyIndexes) {
  // id 0x0102; bind metadata without global spec: 3 markers, partition key
  // made of markers 2 and 0; result metadata with a global spec, 1 column.
  const Bytes body = Cat({Hex("00000004 | 0002 0102"
                              "| 00000000 | 00000003 | 00000002 | 0002 0000"),
                          Str("ks"), Str("t"), Str("a"), Hex("0009"),
                          Str("ks"), Str("t"), Str("b"), Hex("000d"),
                          Str("ks2"), Str("t2"), Str("c"), Hex("0020 0003"),
                          Hex("00000001 00000001"), Str("ks"), Str("t"), Str("data"), Hex("0003")});
  auto r = Decode(Opcode::kResult, body);
  const Prepared& p = AsResult<Prepared>(r);
  EXPECT_EQ(ToHex(p.id), "0102");
  EXPECT_EQ(p.bind_metadata.flags, 0);
  EXPECT_EQ(p.bind_metadata.pk_indexes, (std::vector<uint16_t>{2, 0}));
  ASSERT_EQ(p.bind_metadata.bind_columns.size(), 3u);
  EXPECT_EQ(p.bind_metadata.bind_columns[0].name, "a");
  EXPECT_EQ(p.bind_metadata.bind_columns[1].type, DataType::Simple(TypeId::kVarchar));
  EXPECT_EQ(p.bind_metadata.bind_columns[2].keyspace, "ks2");
  EXPECT_EQ(p.bind_metadata.bind_columns[2].table, "t2");
  EXPECT_EQ(p.bind_metadata.bind_columns[2].type.ToString(), "list<blob>");
  EXPECT_EQ(p.result_metadata.column_count, 1);
  ASSERT_EQ(p.result_metadata.columns.size(), 1u);
  EXPECT_EQ(p.result_metadata.columns[0].name, "data");
  EXPECT_EQ(p.result_metadata.columns[0].table, "t");
  // The result specs as they came, for answers to be compared with.
  EXPECT_EQ(ToHex(p.result_metadata.specs_wire), ToHex(Cat({Str("ks"), Str("t"), Str("data"), Hex("0003")})));
}

// The result metadata of a prepared SELECT of (ks.t: k int, data blob),
// with its specs' wire bytes, as DecodePrepared keeps it.
RowsMetadata ExpectedKData() {
  const Bytes body = Cat({Hex("00000004 | 0002 0102 | 00000001 | 00000001 | 00000001 | 0000"), Str("ks"),
                          Str("t"), Str("k"), Hex("0009"),  //
                          Hex("00000001 00000002"), Str("ks"), Str("t"), Str("k"), Hex("0009"), Str("data"),
                          Hex("0003")});
  auto r = Decode(Opcode::kResult, body);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::get<Prepared>(std::get<Result>(r->message)).result_metadata : RowsMetadata{};
}

TEST(RowsMetadata, AnswersOfTheExpectedSpecBytesAreNotDecoded) {
  const RowsMetadata expected = ExpectedKData();
  ASSERT_FALSE(expected.specs_wire.empty());
  const Bytes specs = Cat({Str("ks"), Str("t"), Str("k"), Hex("0009"), Str("data"), Hex("0003")});
  ASSERT_EQ(ToHex(expected.specs_wire), ToHex(specs));
  const Bytes after = Hex("00000005");  // <rows_count> follows the metadata
  struct Case {
    const char* what;
    Bytes metadata;
    bool as_expected;      // compared as bytes, not decoded
    size_t columns;        // decoded ColumnSpecs
  };
  const std::vector<Case> cases = {
      {"the same bytes", Cat({Hex("00000001 00000002"), specs}), true, 0},
      {"the same bytes after a paging state", Cat({Hex("00000003 00000002 00000002 cafe"), specs}), true, 0},
      {"another column name", Cat({Hex("00000001 00000002"), Str("ks"), Str("t"), Str("k"), Hex("0009"),
                                   Str("date"), Hex("0003")}),
       false, 2},
      {"another type", Cat({Hex("00000001 00000002"), Str("ks"), Str("t"), Str("k"), Hex("0009"), Str("data"),
                            Hex("000d")}),
       false, 2},
      {"the same columns without a global spec",
       Cat({Hex("00000000 00000002"), Str("ks"), Str("t"), Str("k"), Hex("0009"), Str("ks"), Str("t"),
            Str("data"), Hex("0003")}),
       false, 2},
      {"one column less", Cat({Hex("00000001 00000001"), Str("ks"), Str("t"), Str("k"), Hex("0009")}), false, 1},
      // The expected bytes followed by a third column: the count tells
      // them apart (a prefix match would leave the reader in that column).
      {"the expected bytes and one column more", Cat({Hex("00000001 00000003"), specs, Str("x"), Hex("0009")}),
       false, 3},
      // The expected bytes and more, read without a global spec: column 1
      // is ks.t.k int, column 2 keyspace "data", table "abc" (the blob type
      // id 0x0003 read as its length), name "x": other columns in the same
      // leading bytes, told apart by the flag.
      {"the expected bytes without a global spec",
       Cat({Hex("00000000 00000002"), specs, Hex("616263"), Str("x"), Hex("0009")}), false, 2},
      {"no metadata", Hex("00000004 00000002"), false, 0},
  };
  for (const auto& c : cases) {
    const Bytes b = Cat({c.metadata, after});
    Reader r(b);
    RowsMetadata md;
    ASSERT_TRUE(DecodeRowsMetadata(r, &md, &expected).ok()) << c.what;
    EXPECT_EQ(md.specs_matched, c.as_expected ? &expected : nullptr) << c.what;
    EXPECT_EQ(md.columns.size(), c.columns) << c.what;
    EXPECT_TRUE(md.specs_wire.empty()) << c.what;
    EXPECT_EQ(r.offset(), c.metadata.size()) << c.what << ": the reader stands at <rows_count>";
    // Without `expected` the same bytes decode as ever.
    Reader plain(b);
    RowsMetadata full;
    ASSERT_TRUE(DecodeRowsMetadata(plain, &full).ok()) << c.what;
    EXPECT_EQ(full.specs_matched, nullptr) << c.what;
    EXPECT_EQ(plain.offset(), c.metadata.size()) << c.what;
    if (c.as_expected) {
      ASSERT_EQ(full.columns.size(), expected.columns.size()) << c.what;
      for (size_t i = 0; i < full.columns.size(); ++i) {
        EXPECT_EQ(full.columns[i].name, expected.columns[i].name) << c.what;
        EXPECT_EQ(full.columns[i].type, expected.columns[i].type) << c.what;
      }
    }
  }
  // Spec bytes that stop short of the expected ones are incomplete, not a
  // match: the streaming decoder waits for more.
  const Bytes whole = Cat({Hex("00000001 00000002"), specs});
  for (size_t n = 8; n < whole.size(); ++n) {
    Reader r(ByteView(whole.data(), n));
    RowsMetadata md;
    EXPECT_FALSE(DecodeRowsMetadata(r, &md, &expected).ok()) << n << " of " << whole.size() << " bytes";
  }
  // An expectation without spec bytes (no result metadata) decodes in full.
  RowsMetadata none = expected;
  none.specs_wire.clear();
  const Bytes b = Cat({whole, after});
  Reader r(b);
  RowsMetadata md;
  ASSERT_TRUE(DecodeRowsMetadata(r, &md, &none).ok());
  EXPECT_EQ(md.specs_matched, nullptr);
  EXPECT_EQ(md.columns.size(), 2u);
}

TEST(ResultResponse, PreparedWithGlobalSpecAndNoResultMetadata) {
  auto sample = testing::SampleResponseFrames();
  auto it = std::find_if(sample.begin(), sample.end(), [](auto& s) { return s.name == "result_prepared"; });
  ASSERT_NE(it, sample.end());
  Bytes body(it->frame.begin() + kHeaderSize, it->frame.end());
  auto r = Decode(Opcode::kResult, body);
  const Prepared& p = AsResult<Prepared>(r);
  EXPECT_EQ(ToHex(p.id), "abcd");
  EXPECT_EQ(p.bind_metadata.pk_indexes, std::vector<uint16_t>{1});
  ASSERT_EQ(p.bind_metadata.bind_columns.size(), 2u);
  EXPECT_EQ(p.bind_metadata.bind_columns[1].keyspace, "ks");
  EXPECT_EQ(p.bind_metadata.bind_columns[1].table, "img");
  EXPECT_EQ(p.bind_metadata.bind_columns[1].type, DataType::Simple(TypeId::kUuid));
  EXPECT_EQ(p.result_metadata.flags, RowsMetadata::kNoMetadata);
  EXPECT_EQ(p.result_metadata.column_count, 1);
  EXPECT_TRUE(p.result_metadata.columns.empty());
  EXPECT_TRUE(p.result_metadata.specs_wire.empty());
}

TEST(ResultResponse, PreparedRejectsPartitionKeyIndexOutOfRange) {
  const Bytes body = Cat({Hex("00000004 0001 01 | 00000001 00000001 00000001 0001"), Str("ks"), Str("t"),
                          Str("a"), Hex("0009"), Hex("00000004 00000000")});
  auto r = Decode(Opcode::kResult, body);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("partition key index 1"), std::string::npos) << r.status().ToString();
}

TEST(ResultResponse, RowsWithGlobalSpecNullsAndPaging) {
  auto sample = testing::SampleResponseFrames();
  auto it = std::find_if(sample.begin(), sample.end(), [](auto& s) { return s.name == "result_rows"; });
  Bytes body(it->frame.begin() + kHeaderSize, it->frame.end());
  auto r = Decode(Opcode::kResult, body);
  const Rows& rows = AsResult<Rows>(r);
  EXPECT_EQ(rows.row_count(), 3);
  EXPECT_EQ(rows.column_count(), 2);
  ASSERT_TRUE(rows.metadata().has_more_pages());
  EXPECT_EQ(ToHex(*rows.metadata().paging_state), "cafe");
  EXPECT_EQ(rows.metadata().columns[0].keyspace, "ks");
  EXPECT_EQ(rows.metadata().columns[1].table, "img");
  EXPECT_EQ(rows.column_index("data"), 1);
  EXPECT_EQ(rows.column_index("nope"), -1);
  EXPECT_EQ(ToHex(*rows.cell(0, 1)), "0102030405");
  EXPECT_FALSE(rows.cell(1, 1).has_value());
  ASSERT_TRUE(rows.cell(2, 1).has_value());
  EXPECT_TRUE(rows.cell(2, 1)->empty());
  for (int32_t i = 0; i < 3; ++i) {
    auto v = rows.value(i, 0);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(*v, Value::Int(i + 1));
  }
  EXPECT_EQ(*rows.value(0, 1), Value::Blob(Hex("0102030405")));
  EXPECT_TRUE(rows.value(1, 1)->is_null());
  EXPECT_EQ(*rows.value(2, 1), Value::Blob(std::vector<uint8_t>{}));
  EXPECT_EQ(rows.value(3, 0).status().code(), Status::Code::kInvalidArgument);
}

TEST(ResultResponse, RowsWithPerColumnSpecsAndEveryType) {
  // One row: text, bigint, boolean, double, timestamp, uuid, list<int>,
  // map<text, blob>, set<ascii>, and a varint that stays raw bytes.
  const Bytes body = Cat({Hex("00000002 | 00000000 | 0000000a"),
                          Str("k"), Str("t"), Str("c0"), Hex("000d"),
                          Str("k"), Str("t"), Str("c1"), Hex("0002"),
                          Str("k"), Str("t"), Str("c2"), Hex("0004"),
                          Str("k"), Str("t"), Str("c3"), Hex("0007"),
                          Str("k"), Str("t"), Str("c4"), Hex("000b"),
                          Str("k"), Str("t"), Str("c5"), Hex("000c"),
                          Str("k"), Str("t"), Str("c6"), Hex("0020 0009"),
                          Str("k"), Str("t"), Str("c7"), Hex("0021 000d 0003"),
                          Str("k"), Str("t"), Str("c8"), Hex("0022 0001"),
                          Str("k"), Str("t"), Str("c9"), Hex("000e"),
                          Hex("00000001"
                              "00000002 6869"
                              "00000008 0000000000000064"
                              "00000001 01"
                              "00000008 4000000000000000"
                              "00000008 0000000000000001"
                              "00000010 00000000000000000000000000000002"
                              "0000000c 00000001 00000004 00000007"
                              "00000011 00000001 00000001 6b 00000004 deadbeef"
                              "00000009 00000001 00000001 61"
                              "00000002 0080")});
  auto r = Decode(Opcode::kResult, body);
  const Rows& rows = AsResult<Rows>(r);
  ASSERT_EQ(rows.row_count(), 1);
  EXPECT_EQ(*rows.value(0, 0), Value::Text("hi"));
  EXPECT_EQ(*rows.value(0, 1), Value::Bigint(100));
  EXPECT_EQ(*rows.value(0, 2), Value::Boolean(true));
  EXPECT_EQ(*rows.value(0, 3), Value::Double(2.0));
  EXPECT_EQ(*rows.value(0, 4), Value::FromTimestamp({1}));
  Uuid u;
  u.bytes[15] = 2;
  EXPECT_EQ(*rows.value(0, 5), Value::FromUuid(u));
  EXPECT_EQ(*rows.value(0, 6), Value::List({Value::Int(7)}));
  EXPECT_EQ(*rows.value(0, 7), Value::Map({{Value::Text("k"), Value::Blob(Hex("deadbeef"))}}));
  EXPECT_EQ(*rows.value(0, 8), Value::List({Value::Text("a")}));
  EXPECT_EQ(*rows.value(0, 9), Value::Blob(Hex("0080")));
  EXPECT_EQ(rows.metadata().columns[7].type.ToString(), "map<text, blob>");
}

TEST(ResultResponse, RowsWithoutMetadataTakeCallerColumns) {
  const Bytes body = Hex("00000002 | 00000004 00000001 | 00000002 | 00000004 0000000a | 00000004 0000000b");
  auto r = Decode(Opcode::kResult, body);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Rows rows = std::get<Rows>(std::get<Result>(r->message));
  EXPECT_EQ(rows.column_count(), 1);
  EXPECT_EQ(rows.row_count(), 2);
  EXPECT_EQ(ToHex(*rows.cell(1, 0)), "0000000b");
  EXPECT_EQ(rows.value(0, 0).status().code(), Status::Code::kInvalidArgument);  // no metadata
  rows.set_metadata_columns({ColumnSpec{"ks", "t", "n", DataType::Simple(TypeId::kInt)}});
  EXPECT_EQ(*rows.value(1, 0), Value::Int(11));
}

TEST(ResultResponse, RowsCellsAreValidatedAgainstTheBody) {
  // The second cell claims 16 bytes where 2 remain.
  auto r = Decode(Opcode::kResult, Hex("00000002 00000004 00000001 00000002 00000001 aa 00000010 bbbb"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kProtocolError);
  EXPECT_NE(r.status().message().find("row 1, column 0"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("expected 16 bytes, got 2"), std::string::npos) << r.status().ToString();
  // More rows than the body can hold: rejected before reserving memory.
  r = Decode(Opcode::kResult, Hex("00000002 00000004 00000100 7fffffff 00000000"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("2147483647 rows of 256 columns"), std::string::npos) << r.status().ToString();
  // Negative counts.
  EXPECT_FALSE(Decode(Opcode::kResult, Hex("00000002 00000004 00000001 ffffffff")).ok());
  EXPECT_FALSE(Decode(Opcode::kResult, Hex("00000002 00000004 ffffffff 00000000")).ok());
  // More columns than cqlstream accepts.
  r = Decode(Opcode::kResult, Hex("00000002 00000004 00010001 00000000"));
  EXPECT_NE(r.status().message().find("column count 65537"), std::string::npos) << r.status().ToString();
}

TEST(ResultResponse, UnknownKindAndTruncation) {
  auto r = Decode(Opcode::kResult, Hex("00000009"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown result kind 0x0009"), std::string::npos);
  EXPECT_FALSE(Decode(Opcode::kResult, Hex("0000")).ok());
  EXPECT_FALSE(Decode(Opcode::kResult, Hex("00000003 0005 6162")).ok());
}

TEST(ResultResponse, TrailingBytesAreIgnored) {
  // Spec section 1: a body may carry more than described.
  auto r = Decode(Opcode::kResult, Hex("00000001 0102030405"));
  EXPECT_TRUE(std::holds_alternative<ResultVoid>(As<Result>(r)));
}

// ---------------------------------------------------------------------------
// Types.

TEST(TypeOptions, EverySimpleAndNestedType) {
  const Bytes b = Cat({Hex("0000"), Str("org.apache.cassandra.db.marshal.DurationType"),
                       Hex("0001 0002 0003 0004 0005 0006 0007 0008 0009 000b 000c 000d 000e 000f 0010 0011"
                           "0012 0013 0014 0015"),
                       Hex("0021 000d 0022 000f"),                             // map<text, set<timeuuid>>
                       Hex("0031 0002 0009 0020 0003"),                       // tuple<int, list<blob>>
                       Hex("0030"), Str("ks"), Str("addr"), Hex("0002"), Str("street"), Hex("000d"),
                       Str("zip"), Hex("0009")});                           // udt
  Reader r(b);
  std::vector<std::string> names;
  while (!r.empty()) {
    DataType t;
    Status s = DecodeType(r, &t);
    ASSERT_TRUE(s.ok()) << s.ToString();
    names.push_back(t.ToString());
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "'org.apache.cassandra.db.marshal.DurationType'", "ascii", "bigint", "blob",
                       "boolean", "counter", "decimal", "double", "float", "int", "timestamp", "uuid",
                       "text", "varint", "timeuuid", "inet", "date", "time", "smallint", "tinyint",
                       "duration", "map<text, set<timeuuid>>", "tuple<int, list<blob>>", "ks.addr"}));
}

TEST(TypeOptions, UdtFields) {
  const Bytes b = Cat({Hex("0030"), Str("ks"), Str("addr"), Hex("0002"), Str("street"), Hex("000d"),
                       Str("tags"), Hex("0022 000d")});
  Reader r(b);
  DataType t;
  ASSERT_TRUE(DecodeType(r, &t).ok());
  EXPECT_EQ(t.id, TypeId::kUdt);
  EXPECT_EQ(t.udt_keyspace, "ks");
  EXPECT_EQ(t.udt_name, "addr");
  EXPECT_EQ(t.udt_field_names, (std::vector<std::string>{"street", "tags"}));
  EXPECT_EQ(t.params[1].ToString(), "set<text>");
}

Bytes NestedListOption(int levels) {
  Bytes b;
  for (int i = 0; i < levels; ++i) {
    b.push_back(0x00);
    b.push_back(0x20);
  }
  b.push_back(0x00);
  b.push_back(0x09);
  return b;
}

TEST(TypeOptions, NestingDepthLimit) {
  {
    const Bytes b = NestedListOption(kMaxTypeDepth);
    Reader r(b);
    DataType t;
    ASSERT_TRUE(DecodeType(r, &t).ok());
  }
  {
    const Bytes b = NestedListOption(kMaxTypeDepth + 1);
    Reader r(b);
    DataType t;
    Status s = DecodeType(r, &t);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), Status::Code::kProtocolError);
    EXPECT_NE(s.message().find("deeper than 16"), std::string::npos) << s.ToString();
  }
  {
    // 40,000 levels must not overflow the stack: the limit stops it early.
    const Bytes b = NestedListOption(40000);
    Reader r(b);
    DataType t;
    EXPECT_FALSE(DecodeType(r, &t).ok());
  }
}

TEST(TypeOptions, UnknownIdAndTruncation) {
  const Bytes b = Hex("0019");
  Reader r(b);
  DataType t;
  Status s = DecodeType(r, &t);
  EXPECT_NE(s.message().find("unknown type id 0x0019"), std::string::npos) << s.ToString();
  const Bytes c = Hex("0021 000d");  // map missing its value type
  Reader r2(c);
  EXPECT_FALSE(DecodeType(r2, &t).ok());
  const Bytes d = Hex("0031 ffff 0009");  // tuple of 65535 types in 2 bytes
  Reader r3(d);
  s = DecodeType(r3, &t);
  EXPECT_NE(s.message().find("expected at least 131070 bytes"), std::string::npos) << s.ToString();
}

// ---------------------------------------------------------------------------
// EVENT.

TEST(EventResponse, TopologyChange) {
  auto r = Decode(Opcode::kEvent, Cat({Str("TOPOLOGY_CHANGE"), Str("NEW_NODE"), Hex("04 7f000002 00002352")}));
  const auto& e = std::get<TopologyChangeEvent>(As<Event>(r));
  EXPECT_EQ(e.change, "NEW_NODE");
  EXPECT_EQ(e.address.ToString(), "127.0.0.2:9042");
}

TEST(EventResponse, StatusChangeIpv6) {
  auto r = Decode(Opcode::kEvent, Cat({Str("STATUS_CHANGE"), Str("DOWN"),
                                       Hex("10 00000000000000000000000000000001 00002352")}));
  const auto& e = std::get<StatusChangeEvent>(As<Event>(r));
  EXPECT_EQ(e.change, "DOWN");
  EXPECT_EQ(e.address.ToString(), "[::1]:9042");
}

TEST(EventResponse, SchemaChange) {
  auto r = Decode(Opcode::kEvent, Cat({Str("SCHEMA_CHANGE"), Str("CREATED"), Str("TABLE"), Str("ks"), Str("img")}));
  const auto& e = std::get<SchemaChangeEvent>(As<Event>(r));
  EXPECT_EQ(e.change.target, "TABLE");
  EXPECT_EQ(e.change.keyspace, "ks");
  EXPECT_EQ(e.change.name, "img");
  r = Decode(Opcode::kEvent, Cat({Str("SCHEMA_CHANGE"), Str("UPDATED"), Str("AGGREGATE"), Str("ks"), Str("agg"),
                                  Hex("0001"), Str("int")}));
  EXPECT_EQ(std::get<SchemaChangeEvent>(As<Event>(r)).change.arg_types, std::vector<std::string>{"int"});
}

TEST(EventResponse, UnknownTypeAndBadInet) {
  EXPECT_FALSE(Decode(Opcode::kEvent, Str("SOMETHING_ELSE")).ok());
  EXPECT_FALSE(Decode(Opcode::kEvent, Cat({Str("STATUS_CHANGE"), Str("UP"), Hex("06 010203040506 00000001")})).ok());
  EXPECT_FALSE(Decode(Opcode::kEvent, Cat({Str("STATUS_CHANGE"), Str("UP"), Hex("04 7f000001 0000")})).ok());
}

// ---------------------------------------------------------------------------
// Frame-flag preamble.

TEST(Preamble, TracingWarningsAndCustomPayload) {
  const Bytes body = Cat({Hex("00112233445566778899aabbccddeeff"),          // tracing id
                          Hex("0002"), Str("warning one"), Str("two"),       // warnings
                          Hex("0001"), Str("key"), Hex("00000002 abcd"),     // custom payload
                          Hex("00000001")});                                 // Void
  auto r = Decode(Opcode::kResult, body, kFlagTracing | kFlagWarning | kFlagCustomPayload);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->tracing_id.has_value());
  EXPECT_EQ(ToHex(*r->tracing_id), "00112233445566778899aabbccddeeff");
  EXPECT_EQ(r->warnings, (std::vector<std::string>{"warning one", "two"}));
  EXPECT_TRUE(std::holds_alternative<ResultVoid>(std::get<Result>(r->message)));
}

TEST(Preamble, WarningsOnAnError) {
  auto r = Decode(Opcode::kError, Cat({Hex("0001"), Str("w"), Hex("00002200"), Str("invalid")}), kFlagWarning);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->warnings, std::vector<std::string>{"w"});
  EXPECT_EQ(std::get<ServerError>(r->message).typed(), ServerErrorCode::kInvalid);
}

TEST(Preamble, CompressedFramesAreRefused) {
  auto r = Decode(Opcode::kResult, Hex("00000001"), kFlagCompression);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kProtocolError);
  EXPECT_NE(r.status().message().find("compress"), std::string::npos);
}

TEST(Preamble, TruncatedPreamble) {
  auto r = Decode(Opcode::kResult, Hex("0011223344"), kFlagTracing);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tracing id"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("expected 16 bytes, got 5"), std::string::npos) << r.status().ToString();
}

TEST(Samples, EverySampleFrameDecodes) {
  for (const auto& s : testing::SampleResponseFrames()) {
    auto h = DecodeResponseHeader(std::span<const uint8_t, kHeaderSize>(s.frame.data(), kHeaderSize));
    ASSERT_TRUE(h.ok()) << s.name;
    ASSERT_EQ(h->length, s.frame.size() - kHeaderSize) << s.name;
    auto r = DecodeResponse(*h, Bytes(s.frame.begin() + kHeaderSize, s.frame.end()));
    EXPECT_TRUE(r.ok()) << s.name << ": " << r.status().ToString();
  }
}

}  // namespace
}  // namespace cqlstream::cql
