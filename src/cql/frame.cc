// Copyright (c) cqlstream authors.
#include "cql/frame.h"

#include <fmt/format.h>

#include "cql/wire.h"

namespace cqlstream::cql {

std::string_view OpcodeName(Opcode op) {
  switch (op) {
    case Opcode::kError: return "ERROR";
    case Opcode::kStartup: return "STARTUP";
    case Opcode::kReady: return "READY";
    case Opcode::kAuthenticate: return "AUTHENTICATE";
    case Opcode::kOptions: return "OPTIONS";
    case Opcode::kSupported: return "SUPPORTED";
    case Opcode::kQuery: return "QUERY";
    case Opcode::kResult: return "RESULT";
    case Opcode::kPrepare: return "PREPARE";
    case Opcode::kExecute: return "EXECUTE";
    case Opcode::kRegister: return "REGISTER";
    case Opcode::kEvent: return "EVENT";
    case Opcode::kBatch: return "BATCH";
    case Opcode::kAuthChallenge: return "AUTH_CHALLENGE";
    case Opcode::kAuthResponse: return "AUTH_RESPONSE";
    case Opcode::kAuthSuccess: return "AUTH_SUCCESS";
  }
  return "UNKNOWN_OPCODE";
}

void EncodeHeader(const FrameHeader& h, uint8_t out[kHeaderSize]) {
  out[0] = h.version;
  out[1] = h.flags;
  StoreU16(out + 2, static_cast<uint16_t>(h.stream));
  out[4] = static_cast<uint8_t>(h.opcode);
  StoreU32(out + 5, h.length);
}

namespace {

bool IsResponseOpcode(uint8_t op) {
  switch (static_cast<Opcode>(op)) {
    case Opcode::kError:
    case Opcode::kReady:
    case Opcode::kAuthenticate:
    case Opcode::kSupported:
    case Opcode::kResult:
    case Opcode::kEvent:
    case Opcode::kAuthChallenge:
    case Opcode::kAuthSuccess:
      return true;
    default:
      return false;
  }
}

}  // namespace

StatusOr<FrameHeader> DecodeResponseHeader(std::span<const uint8_t, kHeaderSize> b,
                                           uint32_t max_body) {
  FrameHeader h;
  h.version = b[0];
  h.flags = b[1];
  h.stream = static_cast<int16_t>(LoadU16(&b[2]));
  h.opcode = static_cast<Opcode>(b[4]);
  h.length = LoadU32(&b[5]);
  if ((h.version & 0x7f) != kProtocolVersion) {
    return Status::ProtocolError(fmt::format(
        "frame header: protocol version {} (byte 0x{:02x}), expected {}", h.version & 0x7f,
        h.version, kProtocolVersion));
  }
  if (!h.is_response()) {
    return Status::ProtocolError(
        fmt::format("frame header: version byte 0x{:02x} is a request, expected a response (0x{:02x})",
                    h.version, kProtocolVersion | kResponseBit));
  }
  if (!IsResponseOpcode(b[4])) {
    return Status::ProtocolError(fmt::format("frame header: opcode 0x{:02x} ({}) is not a response",
                                             b[4], OpcodeName(h.opcode)));
  }
  if (h.length > max_body) {
    return Status::FrameTooLarge(fmt::format("{} frame on stream {}: body of {} bytes exceeds the limit of {}",
                                             OpcodeName(h.opcode), h.stream, h.length, max_body));
  }
  return h;
}

}  // namespace cqlstream::cql
