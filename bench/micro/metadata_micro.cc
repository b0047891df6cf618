// Copyright (c) cqlstream authors.
//
// cqlstream-metadata-micro: what the result-column check costs per answer
// (net/result_columns.h), on the <metadata> of the loader's data read —
// SELECT seg, idx, size, image_size, checksum, label, labels, data FROM
// <ks>.d_<dataset> (8 columns, one global table spec), as Cassandra encodes
// it. Google Benchmark; each case (ParseAnswer/<case>) parses one answer's
// <metadata> and <rows_count> with cql::DecodeRowsMetadata:
//
//   NoMetadata         an answer to skip_metadata (the loader's reads before
//                      they checked their columns): flags and count only
//   DecodedAndCompared the specs decoded into ColumnSpecs and compared name
//                      by name (net::SameResultColumns): what a check cost
//                      before the byte comparison
//   ComparedAsBytes    the specs compared with the PREPARED answer's bytes
//                      (RowsMetadata::specs_wire), as a checked read now does
//
// Single-threaded; nothing is shared between cases.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "cql/response.h"
#include "cql/wire.h"
#include "net/result_columns.h"

namespace cqlstream::bench {
namespace {

constexpr int32_t kNoMetadata = cql::RowsMetadata::kNoMetadata;
constexpr int32_t kGlobal = cql::RowsMetadata::kGlobalTablesSpec;

// <flags><columns_count>[specs]<rows_count> of the data read's answer.
cql::Bytes AnswerPrefix(bool with_metadata) {
  cql::Bytes b;
  cql::Writer w(&b);
  const std::vector<std::pair<std::string, uint16_t>> columns = {
      {"seg", 0x0009},  {"idx", 0x0009},   {"size", 0x0002},   {"image_size", 0x0002},
      {"checksum", 0x0002}, {"label", 0x0009}, {"labels", 0x0020}, {"data", 0x0003}};
  w.Int(with_metadata ? kGlobal : kNoMetadata);
  w.Int(static_cast<int32_t>(columns.size()));
  if (with_metadata) {
    w.String("cqlstream_bench");
    w.String("d_jpeg");
    for (const auto& [name, type] : columns) {
      w.String(name);
      w.Short(type);
      if (type == 0x0020) w.Short(0x0009);  // list<int>
    }
  }
  w.Int(1);  // <rows_count>
  return b;
}

// The prepared statement's result metadata, with its specs' bytes kept as
// DecodePrepared keeps them.
cql::RowsMetadata Prepared() {
  const cql::Bytes b = AnswerPrefix(true);
  cql::Reader r(b);
  cql::RowsMetadata md;
  if (!cql::DecodeRowsMetadata(r, &md).ok()) std::abort();
  md.specs_wire.assign(b.begin() + 8, b.begin() + static_cast<std::ptrdiff_t>(r.offset()));
  return md;
}

enum class Check { kNone, kDecoded, kBytes };

// One answer's <metadata> and <rows_count> per iteration, checked as `check`
// says (kNone: an answer without metadata).
void ParseAnswer(benchmark::State& state, Check check) {
  const cql::Bytes answer = AnswerPrefix(check != Check::kNone);
  const cql::RowsMetadata prepared = Prepared();
  const cql::RowsMetadata* expected = check == Check::kBytes ? &prepared : nullptr;
  for (auto _ : state) {
    cql::Reader r(answer);
    cql::RowsMetadata md;
    int32_t rows = 0;
    if (!cql::DecodeRowsMetadata(r, &md, expected).ok() || !r.Int(&rows).ok()) state.SkipWithError("decode failed");
    if (check == Check::kDecoded && !net::SameResultColumns(md, prepared)) state.SkipWithError("columns differ");
    if (check == Check::kBytes && md.specs_matched != &prepared) state.SkipWithError("not compared as bytes");
    benchmark::DoNotOptimize(md);
  }
}

BENCHMARK_CAPTURE(ParseAnswer, NoMetadata, Check::kNone);
BENCHMARK_CAPTURE(ParseAnswer, DecodedAndCompared, Check::kDecoded);
BENCHMARK_CAPTURE(ParseAnswer, ComparedAsBytes, Check::kBytes);

}  // namespace
}  // namespace cqlstream::bench

BENCHMARK_MAIN();
