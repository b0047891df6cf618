// Copyright (c) cqlstream authors.
//
// FrameDecoder: sink errors stay inside their frame, malformed input is
// rejected without a crash or an unbounded allocation, and a randomized
// differential test against DecodeResponse.
#include "cql/frame_decoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>

#include "cql/frame_decoder_harness.h"
#include "cql/test_util.h"

namespace cqlstream::cql {
namespace {

using testing::Cat;
using testing::Cell;
using testing::Harness;
using testing::Hex;
using testing::Mode;
using testing::Outcome;
using testing::Pattern;
using testing::RecordingSink;
using testing::ResponseFrame;
using testing::RowsBody;
using testing::Str;

// ---------------------------------------------------------------------------
// Sink errors stay inside their frame

TEST(FrameDecoder, SinkErrorIsReportedAndTheConnectionContinues) {
  const Bytes big = Pattern(20000, 9);
  const Bytes rows = RowsBody(2, {{Hex("01"), big}, {Hex("02"), big}, {Hex("03"), big}});
  const Bytes input = Cat({ResponseFrame(Opcode::kResult, 1, rows), ResponseFrame(Opcode::kResult, 2, rows),
                           ResponseFrame(Opcode::kReady, 3, {})});
  for (Mode m : {Mode::kWhole, Mode::kByteByByte, Mode::kSocket, Mode::kRandomFeed}) {
    Harness run;
    run.options.read_chunk = 512;
    run.sink_streams = {1, 2};
    int n = 0;
    run.configure = [&n](RecordingSink& s) {
      s.direct_min = 1000;
      if (n++ == 0) s.fail_on_cell = 1;  // the first sink fails on its second cell
    };
    Outcome o = run.Go(input, m, 7);
    ASSERT_TRUE(o.status.ok()) << o.status.ToString();
    const RecordingSink& failed = *run.sinks[1][0];
    EXPECT_EQ(failed.cells.size(), 2u);  // no calls after the error
    const RecordingSink& ok = *run.sinks[2][0];
    ASSERT_EQ(ok.cells.size(), 6u);
    EXPECT_TRUE(*ok.cells[5].data == big);
    EXPECT_NE(o.log.find("RESULT@1 flags=0 len=" + std::to_string(rows.size()) +
                         " streamed rows=3 cols=2 sink=Corruption: sink failed on purpose"),
              std::string::npos)
        << o.log;
    EXPECT_NE(o.log.find("RESULT@2 flags=0 len=" + std::to_string(rows.size()) + " streamed rows=3 cols=2 sink=OK"),
              std::string::npos);
    EXPECT_NE(o.log.find("READY@3"), std::string::npos);
  }
}

TEST(FrameDecoder, SinkErrorInRowsBeginAndBadDestinationSize) {
  const Bytes rows = RowsBody(1, {{Pattern(300, 1)}, {Pattern(300, 2)}});
  const Bytes input = Cat({ResponseFrame(Opcode::kResult, 1, rows), ResponseFrame(Opcode::kResult, 2, rows),
                           ResponseFrame(Opcode::kResult, 3, rows)});
  Harness run;
  run.sink_streams = {1, 2, 3};
  run.configure = [](RecordingSink& s) { s.direct_min = 1; };
  int n = 0;
  run.configure = [&n](RecordingSink& s) {
    s.direct_min = 1;
    if (n == 0) s.fail_on_begin = true;
    if (n == 1) s.wrong_size = true;
    ++n;
  };
  Outcome o = run.Go(input, Mode::kWhole);
  ASSERT_TRUE(o.status.ok());
  EXPECT_TRUE(run.sinks[1][0]->cells.empty());
  EXPECT_NE(o.log.find("sink=Cancelled: sink refuses rows"), std::string::npos) << o.log;
  EXPECT_TRUE(run.sinks[2][0]->cells.empty());
  EXPECT_NE(o.log.find("returned 301 bytes"), std::string::npos) << o.log;
  // The span it did hand out is given back (the sink may reuse it).
  EXPECT_EQ(run.sinks[2][0]->abandoned.size(), 1u);
  EXPECT_EQ(run.sinks[3][0]->cells.size(), 2u);
  n = 0;
  EXPECT_EQ(run.Go(input, Mode::kByteByByte).log, o.log);
}

// ---------------------------------------------------------------------------
// Malformed input

Status FeedAll(const Bytes& input, FrameDecoder::Options o = {}, bool sink = false) {
  FrameDecoder d(o, [sink](int16_t) -> std::shared_ptr<CellSink> {
    return sink ? std::make_shared<RecordingSink>() : nullptr;
  });
  std::vector<DecodedFrame> frames;
  return d.Feed(input, &frames);
}

TEST(FrameDecoder, GarbageIsRejected) {
  Status s = FeedAll(testing::Text("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(s.code(), Status::Code::kProtocolError);
  std::mt19937 rng(5);
  for (int i = 0; i < 200; ++i) {
    Bytes junk(1 + rng() % 64);
    for (auto& b : junk) b = static_cast<uint8_t>(rng());
    junk[0] = 0x84;  // a plausible version byte, garbage after it
    (void)FeedAll(junk);  // any outcome but a crash or hang
    (void)FeedAll(junk, {}, true);
  }
}

TEST(FrameDecoder, AfterAnErrorTheDecoderStaysFailed) {
  FrameDecoder d(nullptr);
  std::vector<DecodedFrame> frames;
  Status s = d.Feed(Hex("04 00 0000 02 00000000"), &frames);  // a request frame
  ASSERT_EQ(s.code(), Status::Code::kProtocolError);
  Status again = d.Feed(ResponseFrame(Opcode::kReady, 1, {}), &frames);
  EXPECT_EQ(again.code(), Status::Code::kProtocolError);
  EXPECT_EQ(again.message(), s.message());
  EXPECT_TRUE(frames.empty());
  EXPECT_FALSE(d.ReadTarget().empty());  // still a valid (if useless) target
}

TEST(FrameDecoder, OversizedFramesAreRejectedBeforeBuffering) {
  FrameDecoder::Options o;
  o.max_body = 1000;
  Status s = FeedAll(Hex("84 00 0001 08 000003e9"), o);
  EXPECT_EQ(s.code(), Status::Code::kFrameTooLarge);
  EXPECT_NE(s.message().find("1001"), std::string::npos) << s.ToString();
  EXPECT_TRUE(FeedAll(ResponseFrame(Opcode::kResult, 1, Bytes(1000, 0)), o).ok());
  // The default limit is the protocol's 256 MB.
  EXPECT_EQ(FeedAll(Hex("84 00 0001 08 10000001")).code(), Status::Code::kFrameTooLarge);
}

// Issue 9 item 19: a header that declares a body up to the limit must not
// make the decoder allocate that body before its bytes arrive (every
// connection of a hostile or broken server could otherwise cost max_body).
TEST(FrameDecoder, DeclaredBodyLengthIsNotAllocatedUpFront) {
  FrameDecoder::Options o;
  o.read_chunk = 64 << 10;
  FrameDecoder d(o, nullptr);
  std::vector<DecodedFrame> frames;
  const uint32_t declared = 200u << 20;
  ASSERT_TRUE(d.Feed(Hex("84 00 0001 08 0c800000"), &frames).ok());  // RESULT, 200 MiB
  const Bytes chunk = Pattern(1 << 20, 5);
  ASSERT_TRUE(d.Feed(chunk, &frames).ok());
  size_t received = chunk.size();
  for (int i = 0; i < 4; ++i) {
    std::span<uint8_t> t = d.ReadTarget();
    // Before the fix this was the whole declared rest (~199 MiB), allocated.
    EXPECT_LE(t.size(), std::max<size_t>(o.read_chunk, received));
    EXPECT_GE(t.size(), 1u);
    std::memset(t.data(), 7, t.size());
    ASSERT_TRUE(d.Commit(t.size(), &frames).ok());
    received += t.size();
  }
  EXPECT_TRUE(frames.empty());
  EXPECT_LT(received, size_t(declared));
  EXPECT_EQ(d.current_stream(), std::optional<int16_t>(1));
}

TEST(FrameDecoder, StreamedCellLongerThanTheBodyIsAnError) {
  // One blob column, one row, a cell claiming 0x100 bytes with 3 present.
  Bytes body = RowsBody(1, {{Hex("aabbcc")}});
  StoreU32(body.data() + body.size() - 7, 0x100);
  for (bool sink : {true, false}) {
    FrameDecoder d([sink](int16_t) -> std::shared_ptr<CellSink> {
      return sink ? std::make_shared<RecordingSink>() : nullptr;
    });
    std::vector<DecodedFrame> frames;
    Status s = d.Feed(ResponseFrame(Opcode::kResult, 1, body), &frames);
    if (sink) {
      ASSERT_EQ(s.code(), Status::Code::kProtocolError);
      EXPECT_NE(s.message().find("RESULT frame on stream 1: cell (row 0, column 0): length 256 exceeds the 3 bytes left"),
                std::string::npos)
          << s.ToString();
    } else {
      // Buffered: the frame is intact, DecodeResponse finds the problem.
      ASSERT_TRUE(s.ok());
      ASSERT_EQ(frames.size(), 1u);
      auto r = DecodeResponse(frames[0].header, frames[0].body);
      ASSERT_FALSE(r.ok());
      EXPECT_NE(r.status().message().find("expected 256 bytes, got 3"), std::string::npos) << r.status().ToString();
    }
  }
}

TEST(FrameDecoder, StreamedStructuralErrors) {
  auto streamed = [](const Bytes& body, uint8_t flags = 0) {
    return FeedAll(ResponseFrame(Opcode::kResult, 1, body, flags), {}, true);
  };
  // Too many rows for the body.
  Status s = streamed(Hex("00000002 00000004 00000002 00001000 00000001 aa"));
  EXPECT_EQ(s.code(), Status::Code::kProtocolError);
  EXPECT_NE(s.message().find("4096 rows of 2 columns need at least 32768 bytes"), std::string::npos) << s.ToString();
  // Body ends in the middle of the metadata.
  s = streamed(Cat({Hex("00000002 00000001 00000001"), Str("ks")}));
  EXPECT_EQ(s.code(), Status::Code::kProtocolError);
  EXPECT_NE(s.message().find("Rows result"), std::string::npos) << s.ToString();
  // Body ends where a cell length should be.
  s = streamed(Hex("00000002 00000004 00000002 00000001 00000001 aa 000000"));
  EXPECT_NE(s.message().find("cell (row 0, column 1): expected 4 bytes for its length, got 3"), std::string::npos)
      << s.ToString();
  // An empty RESULT body.
  EXPECT_EQ(streamed({}).code(), Status::Code::kProtocolError);
  // Unknown type in the metadata.
  s = streamed(Cat({Hex("00000002 00000001 00000001"), Str("ks"), Str("t"), Str("c"), Hex("0099 00000000")}));
  EXPECT_NE(s.message().find("unknown type id 0x0099"), std::string::npos) << s.ToString();
  // Compressed: cqlstream cannot read it.
  s = streamed(Hex("00000001"), kFlagCompression);
  EXPECT_NE(s.message().find("compress"), std::string::npos) << s.ToString();
  // Without a sink the compressed frame is delivered and DecodeResponse refuses it.
  FrameDecoder d(nullptr);
  std::vector<DecodedFrame> frames;
  ASSERT_TRUE(d.Feed(ResponseFrame(Opcode::kResult, 1, Hex("00000001"), kFlagCompression), &frames).ok());
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_FALSE(DecodeResponse(frames[0].header, frames[0].body).ok());
}

TEST(FrameDecoder, CommitMoreThanTheTargetIsAnError) {
  FrameDecoder::Options o;
  o.read_chunk = 16;
  FrameDecoder d(o, nullptr);
  std::vector<DecodedFrame> frames;
  EXPECT_EQ(d.ReadTarget().size(), 16u);
  Status s = d.Commit(17, &frames);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  FrameDecoder d2(o, nullptr);
  EXPECT_FALSE(d2.Commit(1, &frames).ok());  // no ReadTarget yet
}

TEST(FrameDecoder, TruncatedStreamsNeverProduceFrames) {
  // Every strict prefix of a valid stream decodes without error and without
  // the last frame; the full stream yields it.
  const Bytes f = Cat({ResponseFrame(Opcode::kReady, 1, {}),
                       ResponseFrame(Opcode::kResult, 2, RowsBody(2, {{Hex("01"), std::nullopt}, {Hex(""), Hex("0203")}}))});
  for (bool sink : {false, true}) {
    for (size_t cut = 10; cut < f.size(); ++cut) {
      FrameDecoder d([sink](int16_t) -> std::shared_ptr<CellSink> {
        return sink ? std::make_shared<RecordingSink>() : nullptr;
      });
      std::vector<DecodedFrame> frames;
      ASSERT_TRUE(d.Feed(ByteView(f).first(cut), &frames).ok()) << cut;
      EXPECT_EQ(frames.size(), 1u) << cut;
      EXPECT_EQ(d.current_stream(), cut >= 18 ? std::optional<int16_t>(2) : std::nullopt) << cut;
    }
  }
}

// A large randomized differential test: random Rows frames interleaved with
// other frames, random sinks and destinations, random chunking. Every run
// must agree with feeding the whole input at once, and the streamed cells
// must agree with DecodeResponse on the same body.
TEST(FrameDecoder, RandomizedDifferential) {
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 25; ++iter) {
    Bytes input;
    std::map<int16_t, std::vector<Bytes>> rows_bodies;
    const int frames = 1 + int(rng() % 8);
    for (int i = 0; i < frames; ++i) {
      int16_t stream = int16_t(rng() % 4);
      switch (rng() % 4) {
        case 0:
          input = Cat({input, ResponseFrame(Opcode::kReady, stream, {})});
          break;
        case 1:
          input = Cat({input, ResponseFrame(Opcode::kError, stream, Cat({Hex("00001001"), Str("overloaded")}))});
          break;
        default: {
          int32_t cols = int32_t(rng() % 4);
          std::vector<std::vector<Cell>> rows(rng() % 6);
          for (auto& row : rows) {
            for (int32_t c = 0; c < cols; ++c) {
              uint32_t k = rng() % 10;
              if (k == 0) {
                row.push_back(std::nullopt);
              } else if (k == 1) {
                row.push_back(Bytes{});
              } else if (k == 2) {
                row.push_back(Pattern(20000 + rng() % 70000, uint8_t(rng())));
              } else {
                row.push_back(Pattern(rng() % 200, uint8_t(rng())));
              }
            }
          }
          Bytes body = RowsBody(cols, rows, 0, rng() % 3 == 0 ? std::optional<Bytes>(Hex("0a0b")) : std::nullopt);
          rows_bodies[stream].push_back(body);
          input = Cat({input, ResponseFrame(Opcode::kResult, stream, body)});
        }
      }
    }
    Harness run;
    run.options.read_chunk = size_t(1) << (rng() % 17);
    run.sink_streams = {0, 2};
    size_t direct_min = rng() % 2 ? 1 : 5000;
    run.configure = [direct_min](RecordingSink& s) { s.direct_min = direct_min; };
    Outcome whole = run.Go(input, Mode::kWhole);
    ASSERT_TRUE(whole.status.ok()) << whole.status.ToString();
    for (int16_t stream : {int16_t(0), int16_t(2)}) {
      ASSERT_EQ(run.sinks[stream].size(), rows_bodies[stream].size());
      for (size_t k = 0; k < rows_bodies[stream].size(); ++k) {
        const Bytes& body = rows_bodies[stream][k];
        auto r = DecodeResponse(FrameHeader{0x84, 0, stream, Opcode::kResult, uint32_t(body.size())}, body);
        ASSERT_TRUE(r.ok());
        const Rows& ref = std::get<Rows>(std::get<Result>(r->message));
        const RecordingSink& s = *run.sinks[stream][k];
        ASSERT_EQ(s.cells.size(), size_t(ref.row_count()) * size_t(ref.column_count()));
        for (const auto& c : s.cells) {
          auto want = ref.cell(c.row, c.col);
          ASSERT_EQ(want.has_value(), c.data.has_value());
          if (want) {
            ASSERT_TRUE(std::equal(want->begin(), want->end(), c.data->begin(), c.data->end()));
          }
        }
      }
    }
    for (Mode m : {Mode::kRandomFeed, Mode::kSocket}) {
      Outcome o = run.Go(input, m, uint32_t(iter));
      ASSERT_TRUE(o.status.ok()) << o.status.ToString();
      ASSERT_EQ(o.log, whole.log) << "iteration " << iter << " mode " << int(m);
    }
  }
}

// Feeds `input` as a socket would (whatever ReadTarget offers) up to byte
// `until`; the frames completed so far go to *frames.
void FeedUntil(FrameDecoder& d, const Bytes& input, size_t until, std::vector<DecodedFrame>* frames) {
  size_t pos = 0;
  while (pos < until) {
    std::span<uint8_t> t = d.ReadTarget();
    const size_t n = std::min(t.size(), until - pos);
    std::memcpy(t.data(), input.data() + pos, n);
    pos += n;
    ASSERT_TRUE(d.Commit(n, frames).ok());
  }
}

// A connection that stops reading in the middle of a directed cell (closed,
// or its request timed out) abandons its decoder: the sink hears once that
// its destination is given up, and nothing more is decoded. So does a
// decoder destroyed mid-cell. A cell completed, or a frame without one in
// progress, gives nothing up.
TEST(FrameDecoder, AnAbandonedDecoderGivesItsDestinationBack) {
  const Bytes big = Pattern(200 << 10, 3);
  const Bytes small = Pattern(100, 5);
  const Bytes input = ResponseFrame(Opcode::kResult, 7, RowsBody(2, {{small, big}}));
  const size_t mid = input.size() - big.size() / 2;
  for (const bool destroy : {false, true}) {
    SCOPED_TRACE(destroy ? "destroyed" : "abandoned");
    auto sink = std::make_shared<RecordingSink>();
    sink->direct_min = 4096;
    std::vector<DecodedFrame> frames;
    {
      FrameDecoder d([&](int16_t) -> std::shared_ptr<CellSink> { return sink; });
      EXPECT_EQ(d.directing_stream(), std::nullopt);
      ASSERT_NO_FATAL_FAILURE(FeedUntil(d, input, mid, &frames));
      EXPECT_EQ(d.directing_stream(), std::optional<int16_t>(7));
      EXPECT_TRUE(sink->abandoned.empty());
      if (!destroy) {
        d.Abandon();
        EXPECT_EQ(d.directing_stream(), std::nullopt);
        d.Abandon();  // once only
        std::span<uint8_t> t = d.ReadTarget();
        t[0] = input[mid];
        EXPECT_FALSE(d.Commit(1, &frames).ok());
      }
    }
    EXPECT_TRUE(frames.empty());
    ASSERT_EQ(sink->cells.size(), 1u);  // the small cell, before the big one
    EXPECT_EQ(sink->abandoned, (std::vector<std::pair<int32_t, int32_t>>{{0, 1}}));
  }
  // The whole frame: the cell ends with its OnCell; nothing is given up, not
  // even when the decoder is abandoned or destroyed afterwards.
  auto sink = std::make_shared<RecordingSink>();
  sink->direct_min = 4096;
  std::vector<DecodedFrame> frames;
  {
    FrameDecoder d([&](int16_t) -> std::shared_ptr<CellSink> { return sink; });
    ASSERT_NO_FATAL_FAILURE(FeedUntil(d, input, input.size(), &frames));
    EXPECT_EQ(d.directing_stream(), std::nullopt);
    d.Abandon();
  }
  ASSERT_EQ(frames.size(), 1u);
  ASSERT_EQ(sink->cells.size(), 2u);
  EXPECT_TRUE(sink->cells[1].directed);
  EXPECT_TRUE(sink->abandoned.empty());
}

}  // namespace
}  // namespace cqlstream::cql
