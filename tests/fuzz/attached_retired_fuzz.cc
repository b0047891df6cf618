// Copyright (c) cqlstream authors.
//
// libFuzzer target for the retired-generation row of an attached split's
// key snapshot (store/attached_retired.h): any bytes decoded for a split
// name from the input.
//
// Checked: nothing throws or traps (ASan/UBSan); an accepted row lists at
// most kMaxRetiredSegments segments, each seg >= 0 with 1 .. 2^31 - 1 keys,
// and encodes back to the same bytes; a refusal is NotFound (another
// split's row) or Corruption with a message.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "store/attached_retired.h"
#include "fuzz_check.h"

namespace {

using cqlstream::fuzz::Check;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cqlstream::store;
  FuzzedDataProvider in(data, size);
  const std::string split = in.ConsumeRandomLengthString(8);
  const std::vector<uint8_t> row = in.ConsumeRemainingBytes<uint8_t>();
  auto r = DecodeRetired(split, row);
  if (r.ok()) {
    Check(r->size() <= kMaxRetiredSegments);
    for (const auto& g : *r) Check(g.seg >= 0 && g.count >= 1 && g.count <= (int64_t{1} << 31) - 1);
    const std::string back = EncodeRetired(split, *r);
    Check(back == std::string(row.begin(), row.end()));
  } else {
    Check(!r.status().message().empty());
    Check(r.status().IsNotFound() || r.status().code() == cqlstream::Status::Code::kCorruption);
  }
  return 0;
}
