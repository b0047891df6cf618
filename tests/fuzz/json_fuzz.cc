// Copyright (c) cqlstream authors.
//
// libFuzzer target for the JSON reader (ParseJson over nlohmann/json's SAX
// parser) and its serializer (Json::Dump).
//
// Invariants checked (abort on violation): no exception leaves ParseJson;
// an error is InvalidArgument with a message; a value that parses dumps to
// text that parses again and dumps to the same text (Dump is a fixed point).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "store/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cqlstream::store;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto j = ParseJson(text);
  if (!j.ok()) {
    if (j.status().code() != cqlstream::Status::Code::kInvalidArgument || j.status().message().empty()) std::abort();
    return 0;
  }
  const std::string dumped = j->Dump();
  auto again = ParseJson(dumped);
  if (!again.ok() || again->Dump() != dumped) std::abort();
  (void)j->ToText();
  (void)j->AsInt();
  return 0;
}
