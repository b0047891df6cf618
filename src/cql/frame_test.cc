// Copyright (c) cqlstream authors.
#include "cql/frame.h"

#include <gtest/gtest.h>

#include "cql/test_util.h"

namespace cqlstream::cql {
namespace {

using testing::Hex;
using testing::ToHex;

StatusOr<FrameHeader> Decode(const Bytes& b, uint32_t max_body = kMaxBodySize) {
  return DecodeResponseHeader(std::span<const uint8_t, kHeaderSize>(b.data(), kHeaderSize), max_body);
}

TEST(FrameHeader, EncodesRequestHeader) {
  FrameHeader h;
  h.flags = kFlagTracing;
  h.stream = 0x0102;
  h.opcode = Opcode::kQuery;
  h.length = 0x00010203;
  uint8_t out[kHeaderSize];
  EncodeHeader(h, out);
  EXPECT_EQ(ToHex(ByteView(out, kHeaderSize)), "04" "02" "0102" "07" "00010203");
  EXPECT_FALSE(h.is_response());
}

TEST(FrameHeader, DecodesResponseHeader) {
  auto h = Decode(Hex("84 08 0005 08 00000010"));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->version, 0x84);
  EXPECT_TRUE(h->is_response());
  EXPECT_EQ(h->flags, kFlagWarning);
  EXPECT_EQ(h->stream, 5);
  EXPECT_EQ(h->opcode, Opcode::kResult);
  EXPECT_EQ(h->length, 16u);
}

TEST(FrameHeader, EventStreamIsMinusOne) {
  auto h = Decode(Hex("84 00 ffff 0c 00000000"));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->stream, kEventStream);
  EXPECT_EQ(h->opcode, Opcode::kEvent);
}

TEST(FrameHeader, AcceptsEveryResponseOpcode) {
  for (uint8_t op : {0x00, 0x02, 0x03, 0x06, 0x08, 0x0c, 0x0e, 0x10}) {
    Bytes b = Hex("84 00 0000 00 00000000");
    b[4] = op;
    EXPECT_TRUE(Decode(b).ok()) << int(op);
  }
}

TEST(FrameHeader, RejectsOtherVersions) {
  auto h = Decode(Hex("83 00 0000 02 00000000"));
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), Status::Code::kProtocolError);
  EXPECT_NE(h.status().message().find("protocol version 3"), std::string::npos) << h.status().ToString();
  EXPECT_FALSE(Decode(Hex("85 00 0000 02 00000000")).ok());
}

TEST(FrameHeader, RejectsRequestFrames) {
  auto h = Decode(Hex("04 00 0000 02 00000000"));
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("request"), std::string::npos) << h.status().ToString();
}

TEST(FrameHeader, RejectsUnknownAndRequestOpcodes) {
  for (uint8_t op : {0x01, 0x04, 0x05, 0x07, 0x09, 0x0a, 0x0b, 0x0d, 0x0f, 0x11, 0xff}) {
    Bytes b = Hex("84 00 0000 00 00000000");
    b[4] = op;
    auto h = Decode(b);
    ASSERT_FALSE(h.ok()) << int(op);
    EXPECT_EQ(h.status().code(), Status::Code::kProtocolError);
    EXPECT_NE(h.status().message().find("opcode"), std::string::npos);
  }
}

TEST(FrameHeader, RejectsBodiesOverTheLimit) {
  auto h = Decode(Hex("84 00 0007 08 00000101"), 256);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), Status::Code::kFrameTooLarge);
  EXPECT_NE(h.status().message().find("257"), std::string::npos);
  EXPECT_NE(h.status().message().find("256"), std::string::npos);
  EXPECT_TRUE(Decode(Hex("84 00 0007 08 00000100"), 256).ok());
  // The protocol's own limit by default.
  EXPECT_EQ(Decode(Hex("84 00 0007 08 10000001")).status().code(), Status::Code::kFrameTooLarge);
  EXPECT_EQ(Decode(Hex("84 00 0007 08 ffffffff")).status().code(), Status::Code::kFrameTooLarge);
}

TEST(FrameHeader, PatchStreamId) {
  Bytes b = Hex("04 00 0000 05 00000000");
  PatchStreamId(b.data(), 0x7fff);
  EXPECT_EQ(ToHex(b), "04007fff0500000000");
  PatchStreamId(b.data(), -1);
  EXPECT_EQ(ToHex(b), "0400ffff0500000000");
}

TEST(FrameHeader, OpcodeNames) {
  EXPECT_EQ(OpcodeName(Opcode::kResult), "RESULT");
  EXPECT_EQ(OpcodeName(Opcode::kAuthSuccess), "AUTH_SUCCESS");
  EXPECT_EQ(OpcodeName(static_cast<Opcode>(0x04)), "UNKNOWN_OPCODE");
}

}  // namespace
}  // namespace cqlstream::cql
