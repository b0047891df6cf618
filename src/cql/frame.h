// Copyright (c) cqlstream authors.
//
// The CQL native protocol v4 frame header (spec section 2):
//
//   frame  := version:u8 flags:u8 stream:i16 opcode:u8 length:u32 body:length bytes
//
// The high bit of `version` is set on responses. Stream ids are 0..32767 for
// requests; -1 carries server-initiated EVENTs.
//
// Thread-safety: plain functions and value types.
#ifndef CQLSTREAM_CQL_FRAME_H_
#define CQLSTREAM_CQL_FRAME_H_

#include <cstdint>
#include <span>
#include <string_view>

#include "cqlstream/status.h"

namespace cqlstream::cql {

inline constexpr uint8_t kProtocolVersion = 4;
inline constexpr uint8_t kResponseBit = 0x80;
inline constexpr size_t kHeaderSize = 9;
inline constexpr int kMaxStreams = 32768;           // ids 0..32767
inline constexpr int16_t kEventStream = -1;
inline constexpr uint32_t kMaxBodySize = 256u << 20;  // the protocol's limit (256 MB)

enum class Opcode : uint8_t {
  kError = 0x00,
  kStartup = 0x01,
  kReady = 0x02,
  kAuthenticate = 0x03,
  kOptions = 0x05,
  kSupported = 0x06,
  kQuery = 0x07,
  kResult = 0x08,
  kPrepare = 0x09,
  kExecute = 0x0A,
  kRegister = 0x0B,
  kEvent = 0x0C,
  kBatch = 0x0D,
  kAuthChallenge = 0x0E,
  kAuthResponse = 0x0F,
  kAuthSuccess = 0x10,
};

std::string_view OpcodeName(Opcode op);

// Frame header flags.
inline constexpr uint8_t kFlagCompression = 0x01;
inline constexpr uint8_t kFlagTracing = 0x02;
inline constexpr uint8_t kFlagCustomPayload = 0x04;
inline constexpr uint8_t kFlagWarning = 0x08;
inline constexpr uint8_t kFlagBeta = 0x10;

struct FrameHeader {
  uint8_t version = kProtocolVersion;  // including the response bit
  uint8_t flags = 0;
  int16_t stream = 0;
  Opcode opcode = Opcode::kError;
  uint32_t length = 0;                 // body length in bytes

  bool is_response() const { return (version & kResponseBit) != 0; }
};

void EncodeHeader(const FrameHeader& h, uint8_t out[kHeaderSize]);

// Decodes and validates a response header: protocol version 4 with the
// response bit, a known opcode, and length <= max_body. Errors:
// ProtocolError (bad version/opcode, request bit) or FrameTooLarge.
StatusOr<FrameHeader> DecodeResponseHeader(std::span<const uint8_t, kHeaderSize> bytes,
                                           uint32_t max_body = kMaxBodySize);

// Sets the stream id of an encoded frame in place (bytes 2..3).
inline void PatchStreamId(uint8_t* frame, int16_t stream) {
  frame[2] = static_cast<uint8_t>(static_cast<uint16_t>(stream) >> 8);
  frame[3] = static_cast<uint8_t>(static_cast<uint16_t>(stream));
}

}  // namespace cqlstream::cql

#endif  // CQLSTREAM_CQL_FRAME_H_
