// Copyright (c) cqlstream authors.
//
// The FrameDecoder's unit-test kit (frame_decoder_test.cc,
// frame_decoder_errors_test.cc): Rows bodies with blob columns, a sink that
// records what it sees, and a Harness that feeds the same bytes whole, byte
// by byte, in random pieces or like a socket and logs the outcome, so that
// decodings of the same input can be compared.
//
// Thread-safety: single-threaded test code. Test-only; not part of
// cqlstream_cql.
#ifndef CQLSTREAM_CQL_FRAME_DECODER_HARNESS_H_
#define CQLSTREAM_CQL_FRAME_DECODER_HARNESS_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cql/frame_decoder.h"
#include "cql/test_util.h"

namespace cqlstream::cql::testing {

using Cell = std::optional<Bytes>;

// A Rows RESULT body: global table spec, blob columns, the given cells.
inline Bytes RowsBody(int32_t columns, const std::vector<std::vector<Cell>>& rows, uint8_t extra_flags = 0,
               std::optional<Bytes> paging_state = std::nullopt) {
  Bytes b;
  Writer w(&b);
  w.Int(0x0002);
  int32_t flags = RowsMetadata::kGlobalTablesSpec | extra_flags;
  if (paging_state) flags |= RowsMetadata::kHasMorePages;
  w.Int(flags);
  w.Int(columns);
  if (paging_state) w.BytesValue(ByteView(*paging_state));
  if (!(flags & RowsMetadata::kNoMetadata)) {
    w.String("ks");
    w.String("images");
    for (int32_t c = 0; c < columns; ++c) {
      w.String("col" + std::to_string(c));
      w.Short(static_cast<uint16_t>(TypeId::kBlob));
    }
  }
  w.Int(static_cast<int32_t>(rows.size()));
  for (const auto& row : rows) {
    for (const auto& cell : row) {
      if (cell) {
        w.BytesValue(ByteView(*cell));
      } else {
        w.BytesValue(std::nullopt);
      }
    }
  }
  return b;
}

inline Bytes Pattern(size_t n, uint8_t seed) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 8));
  return b;
}

// Records everything a sink sees; optionally directs cells of at least
// `direct_min` bytes into memory it owns, and fails on request.
class RecordingSink : public CellSink {
 public:
  size_t direct_min = SIZE_MAX;
  int fail_on_cell = -1;  // index of the OnCell call that fails
  bool fail_on_begin = false;
  bool wrong_size = false;
  const RowsMetadata* expected = nullptr;  // ExpectedColumns()

  int begin_calls = 0;
  RowsMetadata metadata;
  int32_t row_count = -1;
  struct Rec {
    int32_t row, col;
    std::optional<Bytes> data;
    bool directed;
  };
  std::vector<Rec> cells;
  std::map<std::pair<int32_t, int32_t>, Bytes> destinations;
  int destination_calls = 0;
  std::vector<std::pair<int32_t, int32_t>> abandoned;  // OnCellAbandoned calls

  const RowsMetadata* ExpectedColumns() const override { return expected; }
  Status OnRowsBegin(const RowsMetadata& md, int32_t rows) override {
    ++begin_calls;
    metadata = md;
    row_count = rows;
    if (fail_on_begin) return Status::Cancelled("sink refuses rows");
    return Status::OK();
  }
  std::span<uint8_t> CellDestination(int32_t row, int32_t col, int32_t size) override {
    ++destination_calls;
    EXPECT_GT(size, 0);
    if (size_t(size) < direct_min) return {};
    Bytes& d = destinations[{row, col}];
    d.assign(size_t(size) + (wrong_size ? 1 : 0), 0xEE);
    return std::span<uint8_t>(d);
  }
  Status OnCell(int32_t row, int32_t col, std::optional<ByteView> data) override {
    bool directed = false;
    if (auto it = destinations.find({row, col}); it != destinations.end() && data) {
      directed = data->data() == it->second.data();
    }
    cells.push_back({row, col, data ? std::optional<Bytes>(Bytes(data->begin(), data->end())) : std::nullopt,
                     directed});
    if (int(cells.size()) - 1 == fail_on_cell) return Status::Corruption("sink failed on purpose");
    return Status::OK();
  }
  void OnCellAbandoned(int32_t row, int32_t col) override { abandoned.emplace_back(row, col); }
};

// A textual log of what a decoder produced, to compare decodings of the
// same bytes delivered in different pieces.
struct Outcome {
  std::string log;
  Status status;
};

inline std::string Describe(const DecodedFrame& f) {
  std::string s = std::string(OpcodeName(f.header.opcode)) + "@" + std::to_string(f.header.stream) +
                  " flags=" + std::to_string(f.header.flags) + " len=" + std::to_string(f.header.length);
  if (f.streamed) {
    s += " streamed rows=" + std::to_string(f.row_count) + " cols=" +
         std::to_string(f.rows_metadata.column_count) + " sink=" + f.sink_status.ToString();
    if (f.rows_metadata.paging_state) s += " paging=" + ToHex(*f.rows_metadata.paging_state);
    for (const auto& w : f.warnings) s += " warn=" + w;
  } else {
    s += " body=" + ToHex(f.body);
  }
  return s + "\n";
}

inline std::string Describe(const RecordingSink& sink) {
  std::string s = "sink begin=" + std::to_string(sink.begin_calls) + " rows=" + std::to_string(sink.row_count) +
                  " columns=" + std::to_string(sink.metadata.columns.size()) +
                  (sink.metadata.specs_matched != nullptr ? " as-expected" : "") + "\n";
  for (const auto& c : sink.cells) {
    s += "  cell " + std::to_string(c.row) + "," + std::to_string(c.col) + " " +
         (c.data ? ToHex(*c.data) : std::string("null")) + "\n";
  }
  return s;
}

// Feeds `input` as a socket that fills whatever ReadTarget offers, each
// Commit expected to succeed; returns how many reads that took.
inline size_t FeedAsOffered(FrameDecoder& d, const Bytes& input, std::vector<DecodedFrame>* out) {
  size_t reads = 0;
  for (size_t pos = 0; pos < input.size(); ++reads) {
    std::span<uint8_t> t = d.ReadTarget();
    const size_t n = std::min(t.size(), input.size() - pos);
    std::memcpy(t.data(), input.data() + pos, n);
    pos += n;
    EXPECT_TRUE(d.Commit(n, out).ok());
  }
  return reads;
}

enum class Mode { kWhole, kByteByByte, kRandomFeed, kSocket };

// Runs `input` through a fresh decoder; streams in `sink_streams` get a
// fresh RecordingSink configured by `configure`.
struct Harness {
  FrameDecoder::Options options;
  std::vector<int16_t> sink_streams;
  std::function<void(RecordingSink&)> configure = [](RecordingSink&) {};

  std::map<int16_t, std::vector<std::shared_ptr<RecordingSink>>> sinks;
  int lookups = 0;
  uint64_t direct = 0, copied = 0;

  Outcome Go(const Bytes& input, Mode mode, uint32_t seed = 1) {
    sinks.clear();
    lookups = 0;
    FrameDecoder d(options, [this](int16_t stream) -> std::shared_ptr<CellSink> {
      ++lookups;
      if (std::find(sink_streams.begin(), sink_streams.end(), stream) == sink_streams.end()) return nullptr;
      auto s = std::make_shared<RecordingSink>();
      configure(*s);
      sinks[stream].push_back(s);
      return s;
    });
    std::vector<DecodedFrame> frames;
    Status st;
    std::mt19937 rng(seed);
    size_t pos = 0;
    switch (mode) {
      case Mode::kWhole:
        st = d.Feed(input, &frames);
        break;
      case Mode::kByteByByte:
        for (; pos < input.size() && st.ok(); ++pos) st = d.Feed(ByteView(&input[pos], 1), &frames);
        break;
      case Mode::kRandomFeed:
        while (pos < input.size() && st.ok()) {
          size_t n = std::min<size_t>(input.size() - pos, 1 + rng() % (rng() % 4 == 0 ? 70000 : 300));
          st = d.Feed(ByteView(input.data() + pos, n), &frames);
          pos += n;
        }
        break;
      case Mode::kSocket:
        // Like a socket: read at most what ReadTarget offers, and often less.
        while (pos < input.size() && st.ok()) {
          std::span<uint8_t> t = d.ReadTarget();
          EXPECT_FALSE(t.empty());
          size_t n = std::min({t.size(), input.size() - pos, size_t(1 + rng() % 23)});
          std::memcpy(t.data(), input.data() + pos, n);
          pos += n;
          st = d.Commit(n, &frames);
        }
        break;
    }
    direct = d.direct_bytes();
    copied = d.copied_bytes();
    Outcome o;
    o.status = st;
    for (const auto& f : frames) o.log += Describe(f);
    for (const auto& [stream, list] : sinks) {
      for (const auto& s : list) o.log += "stream " + std::to_string(stream) + " " + Describe(*s);
    }
    if (!st.ok()) o.log += "error " + std::string(Status::CodeName(st.code())) + "\n";
    return o;
  }
};

}  // namespace cqlstream::cql::testing

#endif  // CQLSTREAM_CQL_FRAME_DECODER_HARNESS_H_
