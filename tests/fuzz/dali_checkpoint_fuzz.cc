// Copyright (c) cqlstream authors.
//
// libFuzzer target for the DALI reader's checkpoint parser
// (plugins/dali/reader_checkpoint.cc): the text DALI hands back on restore
// comes from a file the user keeps, so it is outside bytes. The parser has
// no DALI dependency; its source is compiled into this target directly (the
// plugin itself is only built where DALI is installed).
//
// Each input is parsed twice: as the checkpoint text itself (base64 decoding
// and everything behind it) and base64-encoded first (so the fuzzer reaches
// the binary layout behind the base64 directly). A checkpoint that parses
// must survive Encode -> Decode unchanged.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "../../plugins/dali/reader_checkpoint.cc"  // NOLINT(bugprone-suspicious-include)

namespace {

using cqlstream::dali_plugin::ReaderCheckpoint;

void RoundTrips(const ReaderCheckpoint& c) {
  auto again = ReaderCheckpoint::Decode(c.Encode());
  if (!again.ok()) std::abort();
  const ReaderCheckpoint& d = again.value();
  if (d.shard_id != c.shard_id || d.num_shards != c.num_shards || d.batch_size != c.batch_size ||
      d.samples != c.samples || d.slot != c.slot || d.real != c.real || d.loader_ended != c.loader_ended ||
      d.has_last != c.has_last || d.last_key != c.last_key || d.pending != c.pending ||
      d.loader_state != c.loader_state) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  if (auto c = ReaderCheckpoint::Decode(in); c.ok()) RoundTrips(c.value());
  if (auto c = ReaderCheckpoint::Decode(cqlstream::dali_plugin::Base64Encode(in)); c.ok()) RoundTrips(c.value());
  auto raw = cqlstream::dali_plugin::Base64Decode(in);
  if (raw.ok() && cqlstream::dali_plugin::Base64Decode(cqlstream::dali_plugin::Base64Encode(raw.value())).value() !=
                      raw.value()) {
    std::abort();
  }
  return 0;
}
