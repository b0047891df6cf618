// Copyright (c) cqlstream authors.
//
// Writes the seed corpus of frame_decoder_fuzz from the unit tests' sample
// frames (src/cql/test_util.h): each frame alone and all of them in one
// stream, under a few control prefixes (see frame_decoder_fuzz.cc), plus
// streamed Rows results with large cells.
//
// Usage: make_corpus <directory>
#include <cstdio>
#include <string>
#include <vector>

#include "cql/test_util.h"

namespace {

using namespace cqlstream::cql;
using namespace cqlstream::cql::testing;

bool Write(const std::string& dir, const std::string& name, const Bytes& control, const Bytes& frames) {
  std::string path = dir + "/" + name;
  FILE* f = fopen(path.c_str(), "wb");
  if (!f) return false;
  bool ok = fwrite(control.data(), 1, control.size(), f) == control.size() &&
            fwrite(frames.data(), 1, frames.size(), f) == frames.size();
  return fclose(f) == 0 && ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <directory>\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  // policy, fail index, read_chunk bits, seed, max chunk bits
  const std::vector<std::pair<std::string, Bytes>> controls = {
      {"nosink", Hex("00 00 10 01 10")},
      {"sink_all_direct", Hex("05 00 03 02 04")},
      {"sink_even_fail", Hex("0e 01 00 03 00")},
      {"sink_odd_wrong", Hex("33 00 06 04 08")},
      {"sink_all_expect", Hex("41 00 03 05 06")},  // expected columns: result_rows's
  };
  Bytes all;
  bool ok = true;
  for (const auto& s : SampleResponseFrames()) {
    all.insert(all.end(), s.frame.begin(), s.frame.end());
    ok &= Write(dir, s.name, controls[1].second, s.frame);
  }
  for (const auto& [name, control] : controls) ok &= Write(dir, "all_" + name, control, all);

  // A streamed Rows result with a cell larger than the read chunk, then an
  // event: exercises direct reads and the frame after them.
  Bytes big(300, 0);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i);
  Bytes body = Cat({Hex("00000002 00000001 00000002"), Str("ks"), Str("t"), Str("k"), Hex("0009"), Str("v"),
                    Hex("0003 00000002 00000004 00000001"), Hex("0000012c"), big,
                    Hex("00000004 00000002 ffffffff")});
  Bytes rows = Cat({ResponseFrame(Opcode::kResult, 2, body),
                    ResponseFrame(Opcode::kEvent, -1, Cat({Str("STATUS_CHANGE"), Str("UP"), Hex("04 7f000001 00002352")}))});
  ok &= Write(dir, "rows_large_cell", Hex("05 00 04 05 03"), rows);
  ok &= Write(dir, "rows_large_cell_fail", Hex("0a 01 02 06 05"), rows);
  // A type and a cell for the DecodeType/DecodeCell path: map<text, list<int>>.
  ok &= Write(dir, "type_and_cell", Hex("00 00 00 00 00"),
              Hex("0021 000d 0020 0009 | 00000001 00000001 61 0000000c 00000001 00000004 00000007"));
  if (!ok) {
    perror("make_corpus");
    return 1;
  }
  return 0;
}
