// Copyright (c) cqlstream authors.
#include "cql/wire.h"

#include <gtest/gtest.h>

#include "cql/test_util.h"

namespace cqlstream::cql {
namespace {

using testing::Hex;
using testing::ToHex;

TEST(WireWriter, PrimitivesAreBigEndian) {
  Bytes b;
  Writer w(&b);
  w.Byte(0xab);
  w.Short(0x0102);
  w.Int(-2);
  w.Long(0x0102030405060708);
  w.Consistency(0x000A);
  EXPECT_EQ(ToHex(b), "ab" "0102" "fffffffe" "0102030405060708" "000a");
  EXPECT_EQ(w.size(), 17u);
}

TEST(WireWriter, StringsAndLists) {
  Bytes b;
  Writer w(&b);
  w.String("abc");
  w.LongString("hi");
  w.StringList({"a", ""});
  EXPECT_EQ(ToHex(b), "0003616263" "000000026869" "0002" "000161" "0000");
}

TEST(WireWriter, BytesNullUnsetShortBytes) {
  Bytes b;
  Writer w(&b);
  const Bytes payload = Hex("0102");
  w.BytesValue(ByteView(payload));
  w.BytesValue(std::nullopt);
  w.UnsetValue();
  w.ShortBytes(payload);
  w.BytesValue(ByteView());
  EXPECT_EQ(ToHex(b), "000000020102" "ffffffff" "fffffffe" "00020102" "00000000");
}

TEST(WireWriter, InetMapsUuidRawPatch) {
  Bytes b;
  Writer w(&b);
  w.Inet(Inet{{127, 0, 0, 1}, 9042});
  w.StringMap({{"CQL_VERSION", "3.0.0"}});
  w.StringMultimap({{"K", {"a", "b"}}});
  std::array<uint8_t, 16> u{};
  u[15] = 1;
  w.Uuid(u);
  w.Raw(Hex("eeff"));
  size_t at = w.size();
  w.Int(0);
  w.PatchInt(at, 0x11223344);
  EXPECT_EQ(ToHex(b), "047f00000100002352"
                      "0001" "000b43514c5f56455253494f4e" "0005332e302e30"
                      "0001" "00014b" "0002" "000161" "000162"
                      "00000000000000000000000000000001"
                      "eeff" "11223344");
}

TEST(WireReader, ReadsWhatWriterWrote) {
  Bytes b;
  Writer w(&b);
  w.Byte(7);
  w.Short(65535);
  w.Int(-123456);
  w.Long(-1);
  w.String("key");
  w.LongString("a long string");
  std::array<uint8_t, 16> u{};
  u[0] = 0xaa;
  w.Uuid(u);
  w.StringList({"x", "yz"});
  const Bytes blob = Hex("deadbeef");
  w.BytesValue(ByteView(blob));
  w.BytesValue(std::nullopt);
  w.ShortBytes(blob);
  w.Inet(Inet{Hex("20010db8000000000000000000000001"), 19042});
  w.StringMap({{"a", "1"}, {"b", "2"}});
  w.StringMultimap({{"m", {"1", "2", "3"}}});
  // [bytes map] with a value and a null.
  w.Short(2);
  w.String("k1");
  w.BytesValue(ByteView(blob));
  w.String("k2");
  w.BytesValue(std::nullopt);

  Reader r(b);
  uint8_t by;
  uint16_t sh;
  int32_t i;
  int64_t l;
  std::string s;
  std::string_view sv;
  std::array<uint8_t, 16> uu;
  std::vector<std::string> list;
  std::optional<ByteView> bytes;
  ByteView sb;
  Inet inet;
  std::map<std::string, std::string> sm;
  std::map<std::string, std::vector<std::string>> mm;
  std::map<std::string, std::optional<Bytes>> bm;
  ASSERT_TRUE(r.Byte(&by).ok());
  EXPECT_EQ(by, 7);
  ASSERT_TRUE(r.Short(&sh).ok());
  EXPECT_EQ(sh, 65535);
  ASSERT_TRUE(r.Int(&i).ok());
  EXPECT_EQ(i, -123456);
  ASSERT_TRUE(r.Long(&l).ok());
  EXPECT_EQ(l, -1);
  ASSERT_TRUE(r.String(&s).ok());
  EXPECT_EQ(s, "key");
  ASSERT_TRUE(r.LongString(&sv).ok());
  EXPECT_EQ(sv, "a long string");
  ASSERT_TRUE(r.Uuid(&uu).ok());
  EXPECT_EQ(uu, u);
  ASSERT_TRUE(r.StringList(&list).ok());
  EXPECT_EQ(list, (std::vector<std::string>{"x", "yz"}));
  ASSERT_TRUE(r.BytesValue(&bytes).ok());
  ASSERT_TRUE(bytes.has_value());
  EXPECT_EQ(ToHex(*bytes), "deadbeef");
  ASSERT_TRUE(r.BytesValue(&bytes).ok());
  EXPECT_FALSE(bytes.has_value());
  ASSERT_TRUE(r.ShortBytes(&sb).ok());
  EXPECT_EQ(ToHex(sb), "deadbeef");
  ASSERT_TRUE(r.Inet(&inet).ok());
  EXPECT_EQ(inet.ToString(), "[2001:db8::1]:19042");
  ASSERT_TRUE(r.StringMap(&sm).ok());
  EXPECT_EQ(sm.at("b"), "2");
  ASSERT_TRUE(r.StringMultimap(&mm).ok());
  EXPECT_EQ(mm.at("m").size(), 3u);
  ASSERT_TRUE(r.BytesMap(&bm).ok());
  ASSERT_TRUE(bm.at("k1").has_value());
  EXPECT_EQ(ToHex(*bm.at("k1")), "deadbeef");
  EXPECT_FALSE(bm.at("k2").has_value());
  EXPECT_TRUE(r.empty());
}

TEST(WireReader, ErrorsNameNotationOffsetAndCounts) {
  const Bytes b = Hex("0001 00");
  Reader r(b);
  uint16_t sh;
  ASSERT_TRUE(r.Short(&sh).ok());
  int32_t i;
  Status s = r.Int(&i);
  EXPECT_EQ(s.code(), Status::Code::kProtocolError);
  EXPECT_NE(s.message().find("[int]"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("offset 2"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("expected 4 bytes, got 1"), std::string::npos) << s.ToString();
  EXPECT_EQ(r.offset(), 2u);  // a failed read consumes nothing
}

TEST(WireReader, TruncatedContents) {
  std::string_view sv;
  std::optional<ByteView> bv;
  ByteView sb;
  {
    const Bytes b = Hex("0005 6162");
    Reader r(b);
    Status s = r.String(&sv);
    EXPECT_NE(s.message().find("expected 5 bytes, got 2"), std::string::npos) << s.ToString();
  }
  {
    const Bytes b = Hex("00000010 00");
    Reader r(b);
    Status s = r.BytesValue(&bv);
    EXPECT_NE(s.message().find("[bytes]"), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("expected 16 bytes, got 1"), std::string::npos) << s.ToString();
  }
  {
    const Bytes b = Hex("ffffffff");
    Reader r(b);
    Status s = r.LongString(&sv);
    EXPECT_NE(s.message().find("negative length"), std::string::npos) << s.ToString();
  }
  {
    const Bytes b = Hex("0003 0102");
    Reader r(b);
    EXPECT_FALSE(r.ShortBytes(&sb).ok());
  }
  {
    const Bytes b = Hex("0102");
    Reader r(b);
    ByteView raw;
    EXPECT_FALSE(r.Raw(3, &raw).ok());
    EXPECT_FALSE(r.Skip(3).ok());
    EXPECT_TRUE(r.Skip(2).ok());
    EXPECT_TRUE(r.empty());
  }
}

TEST(WireReader, NegativeBytesLengthIsNull) {
  // [bytes]: any n < 0 is null.
  const Bytes b = Hex("fffffffe 80000000");
  Reader r(b);
  std::optional<ByteView> v = ByteView();
  ASSERT_TRUE(r.BytesValue(&v).ok());
  EXPECT_FALSE(v.has_value());
  ASSERT_TRUE(r.BytesValue(&v).ok());
  EXPECT_FALSE(v.has_value());
}

TEST(WireReader, ImpossibleStringListCountIsRejectedBeforeAllocating) {
  const Bytes b = Hex("ffff 0000");
  Reader r(b);
  std::vector<std::string> l;
  Status s = r.StringList(&l);
  EXPECT_EQ(s.code(), Status::Code::kProtocolError);
  EXPECT_NE(s.message().find("expected 131070 bytes, got 2"), std::string::npos) << s.ToString();
}

TEST(WireReader, InetRejectsOddAddressSizes) {
  const Bytes b = Hex("05 0102030405 00000001");
  Reader r(b);
  Inet i;
  Status s = r.Inet(&i);
  EXPECT_NE(s.message().find("neither 4 nor 16"), std::string::npos) << s.ToString();
  const Bytes c = Hex("04 0a000001");
  Reader r2(c);
  std::vector<uint8_t> addr;
  ASSERT_TRUE(r2.InetAddr(&addr).ok());
  EXPECT_EQ(FormatAddress(addr), "10.0.0.1");
}

TEST(WireAddress, FormatsLikeRfc5952) {
  EXPECT_EQ(FormatAddress(Hex("7f000001")), "127.0.0.1");
  EXPECT_EQ(FormatAddress(Hex("00000000000000000000000000000001")), "::1");
  EXPECT_EQ(FormatAddress(Hex("00000000000000000000000000000000")), "::");
  EXPECT_EQ(FormatAddress(Hex("20010db8000000000000000000000001")), "2001:db8::1");
  EXPECT_EQ(FormatAddress(Hex("00010000000000000000000000000000")), "1::");
  // The longest run wins; a single zero group is not compressed.
  EXPECT_EQ(FormatAddress(Hex("20010db8000000010000000000000001")), "2001:db8:0:1::1");
  EXPECT_EQ(FormatAddress(Hex("20010db8000100010001000100010001")), "2001:db8:1:1:1:1:1:1");
  EXPECT_EQ(FormatAddress(Hex("0102")), "<address of 2 bytes>");
  EXPECT_EQ((Inet{Hex("c0a80001"), 9042}).ToString(), "192.168.0.1:9042");
}

TEST(WireHelpers, LoadStore) {
  uint8_t b[8];
  StoreU16(b, 0xbeef);
  EXPECT_EQ(LoadU16(b), 0xbeef);
  StoreU32(b, 0xdeadbeef);
  EXPECT_EQ(LoadU32(b), 0xdeadbeefu);
  StoreU64(b, 0x0123456789abcdefULL);
  EXPECT_EQ(LoadU64(b), 0x0123456789abcdefULL);
  EXPECT_EQ(b[0], 0x01);
  EXPECT_EQ(b[7], 0xef);
}

}  // namespace
}  // namespace cqlstream::cql
