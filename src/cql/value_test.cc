// Copyright (c) cqlstream authors.
#include "cqlstream/value.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cql/test_util.h"

namespace cqlstream {
namespace {

using cql::testing::Hex;
using cql::testing::ToHex;

DataType T(TypeId id) { return DataType::Simple(id); }

Uuid U(std::string_view s) {
  auto u = Uuid::Parse(s);
  EXPECT_TRUE(u.ok()) << u.status().ToString();
  return u.ok() ? *u : Uuid{};
}

std::string Enc(const Value& v, const DataType& t) {
  std::vector<uint8_t> out;
  Status s = EncodeCell(v, t, &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return ToHex(out);
}

// Encodes, checks the exact bytes, decodes and checks the value comes back.
void RoundTrip(const Value& v, const DataType& t, std::string_view hex) {
  SCOPED_TRACE(t.ToString() + " " + v.ToString());
  std::vector<uint8_t> out;
  ASSERT_TRUE(EncodeCell(v, t, &out).ok());
  EXPECT_EQ(ToHex(out), ToHex(Hex(hex)));
  auto back = DecodeCell(t, out);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, v) << back->ToString();
}

TEST(ValueCodec, ScalarsRoundTripWithSpecBytes) {
  RoundTrip(Value::Blob(Hex("00ff10")), T(TypeId::kBlob), "00ff10");
  RoundTrip(Value::Blob(std::vector<uint8_t>{}), T(TypeId::kBlob), "");
  RoundTrip(Value::Text("héllo"), T(TypeId::kVarchar), "68c3a96c6c6f");
  RoundTrip(Value::Text(""), T(TypeId::kVarchar), "");
  RoundTrip(Value::Text("abc"), T(TypeId::kAscii), "616263");
  RoundTrip(Value::Int(42), T(TypeId::kInt), "0000002a");
  RoundTrip(Value::Int(-1), T(TypeId::kInt), "ffffffff");
  RoundTrip(Value::Int(std::numeric_limits<int32_t>::min()), T(TypeId::kInt), "80000000");
  RoundTrip(Value::Bigint(-2), T(TypeId::kBigint), "fffffffffffffffe");
  RoundTrip(Value::Bigint(0x0102030405060708), T(TypeId::kBigint), "0102030405060708");
  RoundTrip(Value::Bigint(7), T(TypeId::kCounter), "0000000000000007");
  RoundTrip(Value::Boolean(true), T(TypeId::kBoolean), "01");
  RoundTrip(Value::Boolean(false), T(TypeId::kBoolean), "00");
  RoundTrip(Value::Double(1.5), T(TypeId::kDouble), "3ff8000000000000");
  RoundTrip(Value::Double(-0.0), T(TypeId::kDouble), "8000000000000000");
  RoundTrip(Value::Double(std::numeric_limits<double>::infinity()), T(TypeId::kDouble), "7ff0000000000000");
  RoundTrip(Value::FromTimestamp({1700000000123}), T(TypeId::kTimestamp), "0000018bcfe5687b");
  RoundTrip(Value::FromTimestamp({-1}), T(TypeId::kTimestamp), "ffffffffffffffff");
  RoundTrip(Value::FromUuid(U("550e8400-e29b-41d4-a716-446655440000")), T(TypeId::kUuid),
            "550e8400e29b41d4a716446655440000");
  RoundTrip(Value::FromUuid(U("8f1e7c2a-1dd2-11b2-8080-808080808080")), T(TypeId::kTimeuuid),
            "8f1e7c2a1dd211b28080808080808080");
}

TEST(ValueCodec, NanDoubleRoundTrips) {
  std::vector<uint8_t> out;
  ASSERT_TRUE(EncodeCell(Value::Double(std::nan("")), T(TypeId::kDouble), &out).ok());
  auto v = DecodeCell(T(TypeId::kDouble), out);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(std::isnan(v->as_double()));
}

TEST(ValueCodec, BlobRefEncodesLikeBlob) {
  const std::vector<uint8_t> data = Hex("0a0b0c");
  EXPECT_EQ(Enc(Value::Ref(data), T(TypeId::kBlob)), "0a0b0c");
  EXPECT_EQ(Value::Ref(data), Value::Blob(data));
  EXPECT_EQ(Value::Ref(data).kind(), Value::Kind::kBlobRef);
}

TEST(ValueCodec, CollectionsRoundTrip) {
  RoundTrip(Value::List({Value::Int(1), Value::Int(2)}), DataType::List(T(TypeId::kInt)),
            "00000002 | 00000004 00000001 | 00000004 00000002");
  RoundTrip(Value::List({}), DataType::List(T(TypeId::kInt)), "00000000");
  RoundTrip(Value::List({Value::Text("a"), Value::Text("bc")}), DataType::Set(T(TypeId::kVarchar)),
            "00000002 | 00000001 61 | 00000002 6263");
  RoundTrip(Value::Map({{Value::Text("k"), Value::Bigint(5)}}),
            DataType::Map(T(TypeId::kVarchar), T(TypeId::kBigint)),
            "00000001 | 00000001 6b | 00000008 0000000000000005");
  RoundTrip(Value::List({Value::Blob(Hex("ff")), Value::Blob(std::vector<uint8_t>{})}),
            DataType::List(T(TypeId::kBlob)), "00000002 | 00000001 ff | 00000000");
  RoundTrip(Value::List({Value::FromUuid(U("550e8400-e29b-41d4-a716-446655440000"))}),
            DataType::Set(T(TypeId::kUuid)), "00000001 00000010 550e8400e29b41d4a716446655440000");
  RoundTrip(Value::Map({{Value::Int(1), Value::Boolean(true)}, {Value::Int(2), Value::Boolean(false)}}),
            DataType::Map(T(TypeId::kInt), T(TypeId::kBoolean)),
            "00000002 | 00000004 00000001 00000001 01 | 00000004 00000002 00000001 00");
  RoundTrip(Value::List({Value::FromTimestamp({0}), Value::FromTimestamp({1})}),
            DataType::List(T(TypeId::kTimestamp)),
            "00000002 00000008 0000000000000000 00000008 0000000000000001");
  RoundTrip(Value::List({Value::Double(0.5)}), DataType::List(T(TypeId::kDouble)),
            "00000001 00000008 3fe0000000000000");
  RoundTrip(Value::List({Value::Text("x")}), DataType::List(T(TypeId::kAscii)), "00000001 00000001 78");
  RoundTrip(Value::List({Value::FromUuid(U("8f1e7c2a-1dd2-11b2-8080-808080808080"))}),
            DataType::List(T(TypeId::kTimeuuid)), "00000001 00000010 8f1e7c2a1dd211b28080808080808080");
  // Nested: map<text, list<int>>.
  RoundTrip(Value::Map({{Value::Text("a"), Value::List({Value::Int(3)})}}),
            DataType::Map(T(TypeId::kVarchar), DataType::List(T(TypeId::kInt))),
            "00000001 | 00000001 61 | 0000000c 00000001 00000004 00000003");
}

TEST(ValueCodec, NullAndUnsetAreNotCellBytes) {
  std::vector<uint8_t> out{1, 2};
  Status s = EncodeCell(Value::Null(), T(TypeId::kInt), &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("-1"), std::string::npos) << s.ToString();
  s = EncodeCell(Value::Unset(), T(TypeId::kInt), &out);
  EXPECT_NE(s.message().find("-2"), std::string::npos) << s.ToString();
  EXPECT_EQ(out.size(), 2u);  // untouched
  EXPECT_FALSE(EncodeCellNatural(Value::Null(), &out).ok());
  EXPECT_FALSE(EncodeCellNatural(Value::Unset(), &out).ok());
}

TEST(ValueCodec, NullElementsAreRejectedWhenEncodingAndDecodedAsNull) {
  std::vector<uint8_t> out;
  Status s = EncodeCell(Value::List({Value::Int(1), Value::Null()}), DataType::List(T(TypeId::kInt)), &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("list<int>"), std::string::npos) << s.ToString();
  EXPECT_TRUE(out.empty());  // a failed encode leaves the output as it was
  // A server may still send a null element ([bytes] with length -1).
  auto v = DecodeCell(DataType::List(T(TypeId::kInt)), Hex("00000002 ffffffff 00000004 00000009"));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, Value::List({Value::Null(), Value::Int(9)}));
}

TEST(ValueCodec, TypeMismatchNamesBothTypes) {
  struct Case {
    Value v;
    DataType t;
    std::string value_type, cql_type;
  };
  const std::vector<Case> cases = {
      {Value::Text("x"), T(TypeId::kInt), "text", "int"},
      {Value::Int(1), T(TypeId::kVarchar), "int", "text"},
      {Value::Bigint(1), T(TypeId::kInt), "bigint", "int"},
      {Value::Double(1), T(TypeId::kTimestamp), "double", "timestamp"},
      {Value::Blob(Hex("00")), T(TypeId::kUuid), "blob", "uuid"},
      {Value::Boolean(true), T(TypeId::kBlob), "boolean", "blob"},
      {Value::Int(1), DataType::List(T(TypeId::kInt)), "int", "list<int>"},
      {Value::List({}), DataType::Map(T(TypeId::kInt), T(TypeId::kInt)), "list", "map<int, int>"},
      {Value::Map({}), DataType::Set(T(TypeId::kAscii)), "map", "set<ascii>"},
      {Value::FromTimestamp({1}), T(TypeId::kBigint), "timestamp", "bigint"},
      {Value::FromUuid({}), T(TypeId::kDouble), "uuid", "double"},
      {Value::Text("x"), T(TypeId::kBoolean), "text", "boolean"},
      {Value::Int(1), T(TypeId::kDecimal), "int", "decimal"},
  };
  for (const auto& c : cases) {
    std::vector<uint8_t> out;
    Status s = EncodeCell(c.v, c.t, &out);
    ASSERT_FALSE(s.ok()) << c.t.ToString();
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(s.message(), "cannot encode a " + c.value_type + " value as CQL type " + c.cql_type);
  }
  // Inside a collection the message names the element types.
  std::vector<uint8_t> out;
  Status s = EncodeCell(Value::Map({{Value::Text("k"), Value::Text("v")}}),
                        DataType::Map(T(TypeId::kVarchar), T(TypeId::kInt)), &out);
  EXPECT_EQ(s.message(), "cannot encode a text value as CQL type int");
}

TEST(ValueCodec, TextValidation) {
  std::vector<uint8_t> out;
  Status s = EncodeCell(Value::Text("caf\xc3\xa9"), T(TypeId::kAscii), &out);
  EXPECT_NE(s.message().find("ascii"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("offset 3"), std::string::npos) << s.ToString();
  s = EncodeCell(Value::Text("a\xff"), T(TypeId::kVarchar), &out);
  EXPECT_NE(s.message().find("UTF-8"), std::string::npos) << s.ToString();
  EXPECT_FALSE(EncodeCell(Value::Text("\xc0\x80"), T(TypeId::kVarchar), &out).ok());  // overlong
  EXPECT_FALSE(EncodeCell(Value::Text("\xed\xa0\x80"), T(TypeId::kVarchar), &out).ok());  // surrogate
  EXPECT_FALSE(EncodeCell(Value::Text("\xe2\x82"), T(TypeId::kVarchar), &out).ok());  // truncated
  EXPECT_TRUE(EncodeCell(Value::Text("\xf0\x9f\x98\x80"), T(TypeId::kVarchar), &out).ok());
}

TEST(ValueCodec, TimeuuidNeedsVersion1) {
  std::vector<uint8_t> out;
  Status s = EncodeCell(Value::FromUuid(U("550e8400-e29b-41d4-a716-446655440000")), T(TypeId::kTimeuuid), &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("version 4"), std::string::npos) << s.ToString();
}

TEST(ValueCodec, WideningAndNarrowing) {
  EXPECT_EQ(Enc(Value::Int(-3), T(TypeId::kBigint)), "fffffffffffffffd");
  EXPECT_EQ(Enc(Value::Int(300), T(TypeId::kSmallint)), "012c");
  EXPECT_EQ(Enc(Value::Int(-2), T(TypeId::kTinyint)), "fe");
  std::vector<uint8_t> out;
  Status s = EncodeCell(Value::Int(128), T(TypeId::kTinyint), &out);
  EXPECT_NE(s.message().find("out of range"), std::string::npos) << s.ToString();
  EXPECT_FALSE(EncodeCell(Value::Int(40000), T(TypeId::kSmallint), &out).ok());
}

TEST(ValueCodec, UnmodeledTypesUseRawBytes) {
  // varint 128 is 0x0080 (spec 6.23); decimal, inet, date and friends pass
  // through as raw blobs both ways.
  RoundTrip(Value::Blob(Hex("0080")), T(TypeId::kVarint), "0080");
  RoundTrip(Value::Blob(Hex("00000002 0080")), T(TypeId::kDecimal), "000000020080");
  RoundTrip(Value::Blob(Hex("7f000001")), T(TypeId::kInet), "7f000001");
  RoundTrip(Value::Blob(Hex("80000000")), T(TypeId::kDate), "80000000");
  RoundTrip(Value::Blob(Hex("0001")), T(TypeId::kSmallint), "0001");
  std::vector<uint8_t> out;
  Status s = EncodeCell(Value::Blob(Hex("010203")), T(TypeId::kFloat), &out);
  EXPECT_NE(s.message().find("expected 4 bytes"), std::string::npos) << s.ToString();
  EXPECT_FALSE(EncodeCell(Value::Blob(Hex("0102")), T(TypeId::kInet), &out).ok());
  DataType tuple;
  tuple.id = TypeId::kTuple;
  tuple.params = {T(TypeId::kInt)};
  auto v = DecodeCell(tuple, Hex("00000004 00000001"));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->kind(), Value::Kind::kBlob);
}

TEST(ValueCodec, DecodeSizeErrorsNameTypeAndSizes) {
  auto v = DecodeCell(T(TypeId::kInt), Hex("000001"));
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), Status::Code::kProtocolError);
  EXPECT_EQ(v.status().message(), "int cell: expected 4 bytes, got 3");
  v = DecodeCell(T(TypeId::kUuid), Hex("00"));
  EXPECT_EQ(v.status().message(), "uuid cell: expected 16 bytes, got 1");
  v = DecodeCell(T(TypeId::kBoolean), Hex("0001"));
  EXPECT_EQ(v.status().message(), "boolean cell: expected 1 bytes, got 2");
  // A list element that is itself malformed.
  v = DecodeCell(DataType::List(T(TypeId::kBigint)), Hex("00000001 00000002 0001"));
  EXPECT_EQ(v.status().message(), "bigint cell: expected 8 bytes, got 2");
}

TEST(ValueCodec, DecodeRejectsBadCollectionCounts) {
  auto v = DecodeCell(DataType::List(T(TypeId::kInt)), Hex("ffffffff"));
  EXPECT_EQ(v.status().code(), Status::Code::kProtocolError);
  // 2^31-1 elements in 4 bytes: rejected before anything is reserved.
  v = DecodeCell(DataType::List(T(TypeId::kInt)), Hex("7fffffff 00000000"));
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("got 4"), std::string::npos) << v.status().ToString();
  v = DecodeCell(DataType::Map(T(TypeId::kInt), T(TypeId::kInt)), Hex("00000001 00000004 00000001"));
  EXPECT_FALSE(v.ok());
  v = DecodeCell(DataType::List(T(TypeId::kInt)), Hex("00000001 00000008 0000"));
  EXPECT_FALSE(v.ok());
}

TEST(ValueCodec, EmptyValuesOfFixedSizeTypesDecodeToNull) {
  for (TypeId id : {TypeId::kInt, TypeId::kBigint, TypeId::kBoolean, TypeId::kDouble,
                    TypeId::kTimestamp, TypeId::kUuid, TypeId::kTimeuuid}) {
    auto v = DecodeCell(T(id), {});
    ASSERT_TRUE(v.ok());
    EXPECT_TRUE(v->is_null()) << T(id).ToString();
  }
  auto v = DecodeCell(T(TypeId::kVarchar), {});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, Value::Text(""));
}

DataType NestedList(int levels) {
  DataType t = T(TypeId::kInt);
  for (int i = 0; i < levels; ++i) t = DataType::List(std::move(t));
  return t;
}

Value NestedValue(int levels) {
  Value v = Value::Int(1);
  for (int i = 0; i < levels; ++i) v = Value::List({std::move(v)});
  return v;
}

TEST(ValueCodec, NestingDepthLimit) {
  // kMaxTypeDepth levels of nesting below the column are fine...
  std::vector<uint8_t> out;
  ASSERT_TRUE(EncodeCell(NestedValue(kMaxTypeDepth), NestedList(kMaxTypeDepth), &out).ok());
  auto v = DecodeCell(NestedList(kMaxTypeDepth), out);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, NestedValue(kMaxTypeDepth));
  // ...one more is refused both ways.
  out.clear();
  Status s = EncodeCell(NestedValue(kMaxTypeDepth + 1), NestedList(kMaxTypeDepth + 1), &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("deeper than 16"), std::string::npos) << s.ToString();
  std::vector<uint8_t> deep;
  ASSERT_TRUE(EncodeCell(NestedValue(kMaxTypeDepth), NestedList(kMaxTypeDepth), &deep).ok());
  // Wrap once more by hand: list of one element.
  std::vector<uint8_t> wrapped = Hex("00000001");
  uint8_t len[4];
  cql::StoreU32(len, static_cast<uint32_t>(deep.size()));
  wrapped.insert(wrapped.end(), len, len + 4);
  wrapped.insert(wrapped.end(), deep.begin(), deep.end());
  v = DecodeCell(NestedList(kMaxTypeDepth + 1), wrapped);
  EXPECT_EQ(v.status().code(), Status::Code::kProtocolError);
  EXPECT_FALSE(EncodeCellNatural(NestedValue(kMaxTypeDepth + 1), &out).ok());
}

TEST(ValueCodec, NaturalEncoding) {
  std::vector<uint8_t> out;
  ASSERT_TRUE(EncodeCellNatural(Value::Int(1), &out).ok());
  ASSERT_TRUE(EncodeCellNatural(Value::Bigint(1), &out).ok());
  ASSERT_TRUE(EncodeCellNatural(Value::Text("a"), &out).ok());
  ASSERT_TRUE(EncodeCellNatural(Value::Boolean(true), &out).ok());
  ASSERT_TRUE(EncodeCellNatural(Value::Blob(Hex("ff")), &out).ok());
  ASSERT_TRUE(EncodeCellNatural(Value::List({Value::Int(2)}), &out).ok());
  ASSERT_TRUE(EncodeCellNatural(Value::Map({{Value::Text("k"), Value::Double(1)}}), &out).ok());
  EXPECT_EQ(ToHex(out), ToHex(Hex("00000001 | 0000000000000001 | 61 | 01 | ff"
                                  "| 00000001 00000004 00000002"
                                  "| 00000001 00000001 6b 00000008 3ff0000000000000")));
  EXPECT_FALSE(EncodeCellNatural(Value::Text("\xff"), &out).ok());
  EXPECT_FALSE(EncodeCellNatural(Value::List({Value::Null()}), &out).ok());
}

TEST(DataTypeNames, CqlSpelling) {
  EXPECT_EQ(T(TypeId::kVarchar).ToString(), "text");
  EXPECT_EQ(T(TypeId::kBigint).ToString(), "bigint");
  EXPECT_EQ(DataType::List(T(TypeId::kVarchar)).ToString(), "list<text>");
  EXPECT_EQ(DataType::Map(T(TypeId::kVarchar), T(TypeId::kInt)).ToString(), "map<text, int>");
  EXPECT_EQ(DataType::Set(DataType::List(T(TypeId::kTimeuuid))).ToString(), "set<list<timeuuid>>");
  DataType custom;
  custom.id = TypeId::kCustom;
  custom.custom_class = "org.example.Foo";
  EXPECT_EQ(custom.ToString(), "'org.example.Foo'");
  DataType udt;
  udt.id = TypeId::kUdt;
  udt.udt_keyspace = "ks";
  udt.udt_name = "address";
  EXPECT_EQ(udt.ToString(), "ks.address");
  DataType tuple;
  tuple.id = TypeId::kTuple;
  tuple.params = {T(TypeId::kInt), T(TypeId::kBlob)};
  EXPECT_EQ(tuple.ToString(), "tuple<int, blob>");
  EXPECT_EQ(T(static_cast<TypeId>(0x0099)).ToString(), "type(0x0099)");
}

TEST(UuidText, ParseAndFormat) {
  auto u = Uuid::Parse("550E8400-e29b-41d4-A716-446655440000");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->ToString(), "550e8400-e29b-41d4-a716-446655440000");
  EXPECT_EQ(u->Version(), 4);
  EXPECT_FALSE(Uuid::Parse("550e8400e29b41d4a716446655440000").ok());
  EXPECT_FALSE(Uuid::Parse("550e8400-e29b-41d4-a716-44665544000g").ok());
  EXPECT_FALSE(Uuid::Parse("550e8400-e29b-41d4-a716+446655440000").ok());
  EXPECT_FALSE(Uuid::Parse("").ok());
}

TEST(ValueText, ToString) {
  EXPECT_EQ(Value::Null().ToString(), "null");
  EXPECT_EQ(Value::Unset().ToString(), "unset");
  EXPECT_EQ(Value::Int(-5).ToString(), "-5");
  EXPECT_EQ(Value::Bigint(1LL << 40).ToString(), "1099511627776");
  EXPECT_EQ(Value::Boolean(true).ToString(), "true");
  EXPECT_EQ(Value::Double(0.25).ToString(), "0.25");
  EXPECT_EQ(Value::Text("hi").ToString(), "'hi'");
  EXPECT_EQ(Value::Blob(Hex("00ff")).ToString(), "0x00ff");
  EXPECT_EQ(Value::Blob(std::vector<uint8_t>(40, 1)).ToString().size(), 2 + 64 + std::string("...(40 bytes)").size());
  EXPECT_EQ(Value::FromTimestamp({0}).ToString(), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(Value::FromTimestamp({1700000000123}).ToString(), "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(Value::FromTimestamp({-1}).ToString(), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(Value::List({Value::Int(1), Value::Text("a")}).ToString(), "[1, 'a']");
  EXPECT_EQ(Value::Map({{Value::Text("k"), Value::Int(2)}}).ToString(), "{'k': 2}");
}

TEST(ValueEquality, ComparesDeeply) {
  EXPECT_EQ(Value::List({Value::Int(1)}), Value::List({Value::Int(1)}));
  EXPECT_NE(Value::List({Value::Int(1)}), Value::List({Value::Int(2)}));
  EXPECT_NE(Value::Int(1), Value::Bigint(1));
  EXPECT_NE(Value::Null(), Value::Unset());
  EXPECT_EQ(Value::Null(), Value::Null());
  EXPECT_NE(Value::Double(0.0), Value::Double(-0.0));
  EXPECT_NE(Value::Blob(Hex("01")), Value::Blob(Hex("0102")));
}

TEST(Value, FixedWidthCellsDecodeWithoutAValue) {
  EXPECT_EQ(DecodeIntCell(Hex("ffffff85")), -123);
  EXPECT_EQ(DecodeIntCell(Hex("00000007")), 7);
  EXPECT_EQ(DecodeBigintCell(Hex("00000001 00000002")), (int64_t{1} << 32) + 2);
  EXPECT_EQ(DecodeBigintCell(Hex("ffffffff ffffffff")), -1);
  // Any other width is no value (empty, short, long).
  EXPECT_EQ(DecodeIntCell(Hex("")), std::nullopt);
  EXPECT_EQ(DecodeIntCell(Hex("000001")), std::nullopt);
  EXPECT_EQ(DecodeIntCell(Hex("00000000 00000001")), std::nullopt);
  EXPECT_EQ(DecodeBigintCell(Hex("00000001")), std::nullopt);
}

}  // namespace
}  // namespace cqlstream
