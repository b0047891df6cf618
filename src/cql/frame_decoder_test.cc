// Copyright (c) cqlstream authors.
//
// FrameDecoder: buffered frames and streamed rows, in every chunking (the
// malformed input and sink errors: frame_decoder_errors_test.cc).
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
using testing::FeedAsOffered;
using testing::Harness;
using testing::Hex;
using testing::Mode;
using testing::Outcome;
using testing::Pattern;
using testing::RecordingSink;
using testing::ResponseFrame;
using testing::RowsBody;
using testing::Str;
using testing::ToHex;

// ---------------------------------------------------------------------------
// Buffered frames

TEST(FrameDecoder, DecodesBufferedFramesOfEveryKind) {
  Bytes input;
  for (const auto& s : testing::SampleResponseFrames()) input.insert(input.end(), s.frame.begin(), s.frame.end());
  FrameDecoder d(nullptr);
  std::vector<DecodedFrame> frames;
  ASSERT_TRUE(d.Feed(input, &frames).ok());
  auto samples = testing::SampleResponseFrames();
  ASSERT_EQ(frames.size(), samples.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    EXPECT_FALSE(frames[i].streamed);
    EXPECT_EQ(ToHex(frames[i].body), ToHex(ByteView(samples[i].frame).subspan(kHeaderSize))) << samples[i].name;
    auto r = DecodeResponse(frames[i].header, std::move(frames[i].body));
    EXPECT_TRUE(r.ok()) << samples[i].name << ": " << r.status().ToString();
  }
  EXPECT_FALSE(d.current_stream().has_value());
}

TEST(FrameDecoder, HandWrittenReadyFrame) {
  FrameDecoder d(nullptr);
  std::vector<DecodedFrame> frames;
  ASSERT_TRUE(d.Feed(Hex("84 00 0007 02 00000000"), &frames).ok());
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].header.opcode, Opcode::kReady);
  EXPECT_EQ(frames[0].header.stream, 7);
  EXPECT_TRUE(frames[0].body.empty());
}

TEST(FrameDecoder, PartialFrameWaitsForTheRest) {
  const Bytes f = ResponseFrame(Opcode::kResult, 9, Cat({Hex("00000003"), Str("images")}));
  FrameDecoder d(nullptr);
  std::vector<DecodedFrame> frames;
  ASSERT_TRUE(d.Feed(ByteView(f).first(5), &frames).ok());
  EXPECT_FALSE(d.current_stream().has_value());  // header incomplete
  ASSERT_TRUE(d.Feed(ByteView(f).subspan(5, 8), &frames).ok());
  EXPECT_EQ(d.current_stream(), 9);
  EXPECT_TRUE(frames.empty());
  ASSERT_TRUE(d.Feed(ByteView(f).subspan(13), &frames).ok());
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_FALSE(d.current_stream().has_value());
}

TEST(FrameDecoder, EveryChunkingGivesTheSameFrames) {
  Bytes input;
  for (const auto& s : testing::SampleResponseFrames()) input.insert(input.end(), s.frame.begin(), s.frame.end());
  for (size_t chunk : {size_t(1), size_t(3), size_t(9), size_t(64), size_t(64 << 10)}) {
    Harness run;
    run.options.read_chunk = chunk;
    Outcome whole = run.Go(input, Mode::kWhole);
    ASSERT_TRUE(whole.status.ok());
    for (Mode m : {Mode::kByteByByte, Mode::kRandomFeed, Mode::kSocket}) {
      for (uint32_t seed = 1; seed <= 3; ++seed) {
        Outcome o = run.Go(input, m, seed);
        ASSERT_TRUE(o.status.ok()) << o.status.ToString();
        EXPECT_EQ(o.log, whole.log) << "chunk " << chunk << " mode " << int(m);
      }
    }
  }
}

TEST(FrameDecoder, LargeBufferedBodyIsReadStraightIntoTheBody) {
  const Bytes cell = Pattern(1 << 20, 3);
  const Bytes body = RowsBody(1, {{cell}});
  const Bytes f = ResponseFrame(Opcode::kResult, 1, body);
  FrameDecoder::Options o;
  o.read_chunk = 4096;
  FrameDecoder d(o, nullptr);
  std::vector<DecodedFrame> frames;
  ASSERT_TRUE(d.Feed(ByteView(f).first(100), &frames).ok());
  // The rest arrives in targets that point into the body itself (no copy
  // through the buffer) and grow with what has arrived: at least a
  // read_chunk, at most doubling the body received so far.
  size_t at = 100, reads = 0;
  while (frames.empty()) {
    ASSERT_LT(at, f.size());
    std::span<uint8_t> t = d.ReadTarget();
    const size_t received = at - kHeaderSize;
    EXPECT_GE(t.size(), std::min<size_t>(o.read_chunk, f.size() - at));
    EXPECT_LE(t.size(), std::max<size_t>(o.read_chunk, received)) << "at " << at;
    const size_t n = std::min(t.size(), f.size() - at);
    std::memcpy(t.data(), f.data() + at, n);
    ASSERT_TRUE(d.Commit(n, &frames).ok());
    at += n;
    ++reads;
  }
  EXPECT_EQ(at, f.size());
  EXPECT_LT(reads, 20u);  // geometric growth: a few reads, not size / read_chunk
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_TRUE(frames[0].body == body);
  EXPECT_EQ(d.direct_bytes(), 0u);  // not cell bytes of a sink
  auto r = DecodeResponse(frames[0].header, std::move(frames[0].body));
  ASSERT_TRUE(r.ok());
  const Rows& rows = std::get<Rows>(std::get<Result>(r->message));
  EXPECT_TRUE(std::equal(rows.cell(0, 0)->begin(), rows.cell(0, 0)->end(), cell.begin(), cell.end()));
}

// ---------------------------------------------------------------------------
// Streamed Rows

TEST(FrameDecoder, StreamsRowsCellByCell) {
  const Bytes body = Cat({Hex("00000002 | 00000003 00000002 | 00000002 cafe"), Str("ks"), Str("img"), Str("id"),
                          Hex("0009"), Str("data"), Hex("0003"),
                          Hex("00000003"
                              "00000004 00000001 00000005 0102030405"
                              "00000004 00000002 ffffffff"
                              "00000004 00000003 00000000")});
  Harness run;
  run.sink_streams = {1};
  Outcome o = run.Go(ResponseFrame(Opcode::kResult, 1, body), Mode::kWhole);
  ASSERT_TRUE(o.status.ok()) << o.status.ToString();
  ASSERT_EQ(run.sinks[1].size(), 1u);
  const RecordingSink& s = *run.sinks[1][0];
  EXPECT_EQ(s.begin_calls, 1);
  EXPECT_EQ(s.row_count, 3);
  ASSERT_EQ(s.metadata.columns.size(), 2u);
  EXPECT_EQ(s.metadata.columns[1].name, "data");
  ASSERT_EQ(s.cells.size(), 6u);
  EXPECT_EQ(ToHex(*s.cells[1].data), "0102030405");
  EXPECT_FALSE(s.cells[3].data.has_value());      // null
  ASSERT_TRUE(s.cells[5].data.has_value());       // empty, not null
  EXPECT_TRUE(s.cells[5].data->empty());
  EXPECT_EQ(s.destination_calls, 4);              // not for the null or the empty cell
  EXPECT_EQ(o.log.substr(0, o.log.find('\n')),
            "RESULT@1 flags=0 len=" + std::to_string(body.size()) + " streamed rows=3 cols=2 sink=OK paging=cafe");
}

TEST(FrameDecoder, ExpectedColumnSpecsAreComparedAsBytesInEveryChunking) {
  // RowsBody's specs (ks.images, col0..col39 blob) as a PREPARED answer
  // would hold them, and an answer naming another table.
  const int32_t kColumns = 40;
  std::vector<std::vector<Cell>> rows = {{}, {}};
  for (auto& row : rows) {
    for (int c = 0; c < kColumns; ++c) row.push_back(Pattern(size_t(c * 3), uint8_t(c)));
  }
  const Bytes ours = RowsBody(kColumns, rows);
  Bytes other = ours;
  const Bytes images = Str("images");
  auto at = std::search(other.begin(), other.end(), images.begin(), images.end());
  ASSERT_NE(at, other.end());
  at[3] = 'n';  // after the [short] length and the i: "inages", another table
  RowsMetadata expected;
  {
    Reader r(ours);
    int32_t kind = 0;
    ASSERT_TRUE(r.Int(&kind).ok());
    const size_t start = r.offset() + 8;  // after <flags><columns_count>
    ASSERT_TRUE(DecodeRowsMetadata(r, &expected).ok());
    expected.specs_wire.assign(ours.begin() + ptrdiff_t(start), ours.begin() + ptrdiff_t(r.offset()));
  }
  const Bytes input = Cat({ResponseFrame(Opcode::kResult, 1, ours), ResponseFrame(Opcode::kResult, 2, other),
                           ResponseFrame(Opcode::kResult, 3, ours)});
  for (size_t chunk : {size_t(1), size_t(7), size_t(4096)}) {
    Harness run;
    run.options.read_chunk = chunk;
    run.sink_streams = {1, 2, 3};
    run.configure = [&expected](RecordingSink& s) { s.expected = &expected; };
    Outcome whole = run.Go(input, Mode::kWhole);
    ASSERT_TRUE(whole.status.ok()) << whole.status.ToString();
    const RecordingSink& same = *run.sinks[1][0];
    EXPECT_EQ(same.metadata.specs_matched, &expected);
    EXPECT_TRUE(same.metadata.columns.empty()) << "not decoded";
    EXPECT_EQ(same.metadata.column_count, kColumns);
    ASSERT_EQ(same.cells.size(), size_t(2 * kColumns));
    EXPECT_EQ(ToHex(*same.cells[5].data), ToHex(Pattern(15, 5)));
    const RecordingSink& renamed = *run.sinks[2][0];
    EXPECT_EQ(renamed.metadata.specs_matched, nullptr);
    ASSERT_EQ(renamed.metadata.columns.size(), size_t(kColumns)) << "decoded in full";
    EXPECT_EQ(renamed.metadata.columns[0].table, "inages");
    EXPECT_EQ(run.sinks[3][0]->metadata.specs_matched, &expected);
    for (Mode m : {Mode::kByteByByte, Mode::kRandomFeed, Mode::kSocket}) {
      Outcome o = run.Go(input, m, uint32_t(chunk));
      ASSERT_TRUE(o.status.ok()) << o.status.ToString();
      EXPECT_EQ(o.log, whole.log) << "chunk " << chunk << " mode " << int(m);
    }
  }
}

TEST(FrameDecoder, StreamedFramesAreChunkingIndependent) {
  // Metadata much larger than a read_chunk, mixed cell sizes, warnings.
  std::vector<std::vector<Cell>> rows;
  for (int r = 0; r < 6; ++r) {
    std::vector<Cell> row;
    for (int c = 0; c < 40; ++c) {
      if ((r + c) % 9 == 0) {
        row.push_back(std::nullopt);
      } else {
        row.push_back(Pattern(size_t((r * 131 + c * 17) % 300), uint8_t(r + c)));
      }
    }
    rows.push_back(std::move(row));
  }
  const Bytes rows_body = RowsBody(40, rows);
  const Bytes warned = Cat({Hex("0001"), Str("big partition"), rows_body});
  Bytes input = Cat({ResponseFrame(Opcode::kResult, 1, rows_body),
                     ResponseFrame(Opcode::kEvent, -1, Cat({Str("STATUS_CHANGE"), Str("UP"), Hex("04 7f000001 00002352")})),
                     ResponseFrame(Opcode::kResult, 2, warned, kFlagWarning),
                     ResponseFrame(Opcode::kResult, 1, Hex("00000001")),
                     ResponseFrame(Opcode::kResult, 3, rows_body)});
  for (size_t chunk : {size_t(1), size_t(5), size_t(16), size_t(4096)}) {
    for (size_t direct_min : {size_t(1), size_t(100), SIZE_MAX}) {
      Harness run;
      run.options.read_chunk = chunk;
      run.sink_streams = {1, 2};
      run.configure = [direct_min](RecordingSink& s) { s.direct_min = direct_min; };
      Outcome whole = run.Go(input, Mode::kWhole);
      ASSERT_TRUE(whole.status.ok()) << whole.status.ToString();
      EXPECT_NE(whole.log.find("warn=big partition"), std::string::npos);
      EXPECT_EQ(run.lookups, 4);  // once per RESULT header
      for (Mode m : {Mode::kByteByByte, Mode::kRandomFeed, Mode::kSocket}) {
        Outcome o = run.Go(input, m, uint32_t(chunk + direct_min));
        ASSERT_TRUE(o.status.ok()) << o.status.ToString();
        EXPECT_EQ(o.log, whole.log) << "chunk " << chunk << " direct_min " << direct_min << " mode " << int(m);
      }
      // The streamed cells equal what the buffered decoder sees.
      auto& sink = *run.sinks[1][0];
      auto r = DecodeResponse(FrameHeader{0x84, 0, 1, Opcode::kResult, uint32_t(rows_body.size())}, rows_body);
      ASSERT_TRUE(r.ok());
      const Rows& ref = std::get<Rows>(std::get<Result>(r->message));
      ASSERT_EQ(sink.cells.size(), 240u);
      for (const auto& c : sink.cells) {
        auto want = ref.cell(c.row, c.col);
        ASSERT_EQ(want.has_value(), c.data.has_value());
        if (want) {
          EXPECT_TRUE(std::equal(want->begin(), want->end(), c.data->begin(), c.data->end()));
        }
      }
      // Stream 1's Void result was delivered buffered despite its sink.
      EXPECT_NE(whole.log.find("RESULT@1 flags=0 len=4 body=00000001"), std::string::npos);
    }
  }
}

TEST(FrameDecoder, LargeCellsLandInTheirDestination) {
  const Bytes big = Pattern(3 << 20, 11);
  const Bytes small = Pattern(100, 5);
  const Bytes input = ResponseFrame(Opcode::kResult, 4, RowsBody(2, {{small, big}, {big, small}}));
  auto sink = std::make_shared<RecordingSink>();
  sink->direct_min = 4096;
  FrameDecoder::Options options;
  options.read_chunk = 64 << 10;
  FrameDecoder d(options, [&](int16_t) -> std::shared_ptr<CellSink> { return sink; });

  // Reads as a socket would: whatever ReadTarget offers, up to 256 KiB.
  std::vector<DecodedFrame> frames;
  size_t pos = 0;
  bool saw_destination_target = false;
  while (pos < input.size()) {
    std::span<uint8_t> t = d.ReadTarget();
    for (const auto& [key, mem] : sink->destinations) {
      if (t.data() >= mem.data() && t.data() < mem.data() + mem.size()) saw_destination_target = true;
    }
    size_t n = std::min({t.size(), input.size() - pos, size_t(256 << 10)});
    std::memcpy(t.data(), input.data() + pos, n);
    pos += n;
    ASSERT_TRUE(d.Commit(n, &frames).ok());
  }
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_TRUE(frames[0].streamed);
  EXPECT_TRUE(frames[0].sink_status.ok());
  EXPECT_TRUE(frames[0].body.empty());
  EXPECT_TRUE(saw_destination_target);
  ASSERT_EQ(sink->cells.size(), 4u);
  EXPECT_FALSE(sink->cells[0].directed);  // small: handed over from the receive buffer
  EXPECT_TRUE(sink->cells[1].directed);
  EXPECT_TRUE(sink->cells[2].directed);
  EXPECT_TRUE(sink->destinations.at({0, 1}) == big);
  EXPECT_TRUE(sink->destinations.at({1, 0}) == big);
  EXPECT_TRUE(*sink->cells[3].data == small);
  EXPECT_GT(d.direct_bytes(), 5u << 20);  // most of the 6 MiB never touched the buffer
  EXPECT_EQ(d.direct_bytes() + d.copied_bytes(), 2 * big.size());
}

TEST(FrameDecoder, ImageSizedCellsMostlyBypassTheBuffer) {
  // 40 rows of (id int, image blob of ~110 KB), read with the default 64 KiB
  // chunk and a socket that fills whatever ReadTarget offers: after the
  // first large cell, reads at cell boundaries are short, so nearly all image
  // bytes are received straight into their destinations.
  std::vector<std::vector<Cell>> rows;
  size_t image_bytes = 0;
  for (int r = 0; r < 40; ++r) {
    Bytes image = Pattern(100000 + size_t(r) * 517, uint8_t(r));
    image_bytes += image.size();
    rows.push_back({Hex("0000000" + std::to_string(r % 10)), std::move(image)});
  }
  const Bytes input = Cat({ResponseFrame(Opcode::kResult, 1, RowsBody(2, rows)), ResponseFrame(Opcode::kReady, 2, {})});
  auto sink = std::make_shared<RecordingSink>();
  sink->direct_min = 1024;
  FrameDecoder d([&](int16_t) -> std::shared_ptr<CellSink> { return sink; });
  std::vector<DecodedFrame> frames;
  FeedAsOffered(d, input, &frames);
  ASSERT_EQ(frames.size(), 2u);
  ASSERT_EQ(sink->cells.size(), 80u);
  for (int r = 0; r < 40; ++r) EXPECT_TRUE(*sink->cells[size_t(2 * r + 1)].data == rows[size_t(r)][1].value());
  EXPECT_EQ(d.direct_bytes() + d.copied_bytes(), image_bytes);
  EXPECT_GT(d.direct_bytes(), image_bytes * 9 / 10) << d.direct_bytes() << " of " << image_bytes;
}

// Feeds `input` (frames of one row (id int, image blob) each, `images` in
// order, then any others; `frame_count` in all) as a socket would, to a
// decoder whose sink directs cells of 1 KiB or more, and checks that every
// image arrived whole and that each image byte was received either directly
// or copied.
struct ImageFeed {
  uint64_t direct = 0, copied = 0;
  size_t reads = 0;
  size_t next_read = 0;  // ReadTarget().size() once the input is in
};
ImageFeed FeedImageFrames(const Bytes& input, const std::vector<Bytes>& images, size_t frame_count) {
  auto sink = std::make_shared<RecordingSink>();
  sink->direct_min = 1024;
  FrameDecoder d(FrameDecoder::Options{}, [&](int16_t) -> std::shared_ptr<CellSink> { return sink; });
  std::vector<DecodedFrame> frames;
  ImageFeed f;
  f.reads = FeedAsOffered(d, input, &frames);
  EXPECT_EQ(frames.size(), frame_count);
  EXPECT_EQ(sink->cells.size(), 2 * frame_count);
  size_t image_bytes = 0;
  for (size_t r = 0; r < images.size(); ++r) {
    image_bytes += images[r].size();
    const bool arrived = 2 * r + 1 < sink->cells.size() && sink->cells[2 * r + 1].data.has_value();
    EXPECT_TRUE(arrived && *sink->cells[2 * r + 1].data == images[r]) << "image " << r;
  }
  EXPECT_EQ(d.direct_bytes() + d.copied_bytes(), image_bytes);
  f.direct = d.direct_bytes();
  f.copied = d.copied_bytes();
  f.next_read = d.ReadTarget().size();
  return f;
}

TEST(FrameDecoder, OneImagePerFrameMostlyBypassesTheBuffer) {
  // The loader's traffic: one frame per sample, each a row of (id int,
  // image blob of ~110 KB), back to back on the socket. Reads at the next
  // frame's header are short too once frames carry large cells, so nearly
  // all image bytes go straight to their destinations; a frame of small
  // cells ends that, and the reads after it are whole read_chunks again.
  std::vector<Bytes> frames_in;
  size_t image_bytes = 0;
  std::vector<Bytes> images;
  for (int r = 0; r < 30; ++r) {
    Bytes image = Pattern(100000 + size_t(r) * 997, uint8_t(r));
    image_bytes += image.size();
    images.push_back(image);
    frames_in.push_back(ResponseFrame(Opcode::kResult, int16_t(r + 1), RowsBody(2, {{Hex("00000001"), image}})));
  }
  frames_in.push_back(ResponseFrame(Opcode::kResult, 40, RowsBody(2, {{Hex("00000002"), Pattern(300, 9)}})));
  Bytes input;
  for (const Bytes& f : frames_in) input.insert(input.end(), f.begin(), f.end());
  // Image cells only count: the small one of the last frame is buffered (under 1 KiB).
  const ImageFeed f = FeedImageFrames(input, images, 31);
  // The first frame's first read_chunk is copied; then at most kLookahead
  // (4 KiB) of each (a whole read_chunk each before: 57% copied here).
  EXPECT_GT(f.direct, image_bytes * 9 / 10) << f.direct << " of " << image_bytes;
  EXPECT_LE(f.reads, 31u * 2 + 2) << "two reads a frame: its start, then the rest of its image";
  // The last frame had no large cell: the next read is a whole read_chunk.
  EXPECT_EQ(f.next_read, FrameDecoder::Options{}.read_chunk);
}

TEST(FrameDecoder, ImagesUnderAReadChunkAreReceivedInPlaceToo) {
  // The 20,000-JPEG bench set's sizes: a third of its images are under the
  // 64 KiB read chunk (10th percentile 36 KB, median 89 KB). When only a
  // cell of a whole read chunk kept the reads cut, the frame after each
  // smaller image was read a whole read chunk at its header, and up to
  // 64 KiB of its image was copied from the buffer (18% of the image bytes
  // in the bench; 36% of this stream).
  const size_t sizes[] = {36000, 140000, 56000, 20000, 89000, 30000, 219000, 17000, 60000, 110000};
  std::vector<Bytes> images;
  Bytes input;
  size_t image_bytes = 0;
  for (int r = 0; r < 40; ++r) {
    Bytes image = Pattern(sizes[r % 10] + size_t(r), uint8_t(r));
    image_bytes += image.size();
    const Bytes f = ResponseFrame(Opcode::kResult, int16_t(r + 1), RowsBody(2, {{Hex("00000001"), image}}));
    input.insert(input.end(), f.begin(), f.end());
    images.push_back(std::move(image));
  }
  const ImageFeed f = FeedImageFrames(input, images, 40);
  // The first frame's first read chunk is copied, then at most 4 KiB of each.
  EXPECT_LE(f.copied, FrameDecoder::Options{}.read_chunk + 40 * 4096) << f.copied << " of " << image_bytes;
  EXPECT_LE(f.reads, 40u * 2 + 2) << "two reads a frame: its start, then the rest of its image";
}

TEST(FrameDecoder, TheCutAfterALargeFrameCoversOnlyTheNextFramesFirstRow) {
  // An image frame, then a frame of 100 small cells (a coalesced read): the
  // small frame's header, prefix and first row are read 4 KiB at a time,
  // its other rows in whole read_chunks (2 reads per cell if the cut went on).
  std::vector<std::vector<Cell>> small_rows;
  for (int r = 0; r < 100; ++r) small_rows.push_back({Pattern(3000, uint8_t(r))});
  const Bytes image = Pattern(100000, 7);
  const Bytes large = ResponseFrame(Opcode::kResult, 1, RowsBody(1, {{image}}));
  const Bytes small = ResponseFrame(Opcode::kResult, 2, RowsBody(1, small_rows));
  auto sink = std::make_shared<RecordingSink>();
  sink->direct_min = 50000;  // the image is directed, the small cells buffered
  FrameDecoder::Options o;
  FrameDecoder d(o, [&](int16_t) -> std::shared_ptr<CellSink> { return sink; });
  std::vector<DecodedFrame> frames;
  auto feed = [&](const Bytes& in) { return FeedAsOffered(d, in, &frames); };
  feed(large);
  EXPECT_EQ(d.ReadTarget().size(), 4096u);  // a large cell may come next
  // 300 KB: 4 KiB for the header and first row, then 64 KiB reads.
  EXPECT_LE(feed(small), 2u + small.size() / o.read_chunk + 2u);
  ASSERT_EQ(frames.size(), 2u);
  ASSERT_EQ(sink->cells.size(), 101u);
  EXPECT_EQ(d.ReadTarget().size(), o.read_chunk);  // ended by the small frame
  // A frame buffered whole (no sink: a READY) between image frames does not
  // end the cut, so the image after it is still received in place.
  feed(large);
  feed(ResponseFrame(Opcode::kReady, 3, {}));
  EXPECT_EQ(d.ReadTarget().size(), 4096u);
  const uint64_t direct = d.direct_bytes();
  feed(large);
  EXPECT_GT(d.direct_bytes() - direct, image.size() * 9 / 10);
}

TEST(FrameDecoder, DirectedCellsWithTinyReads) {
  const Bytes cell = Pattern(5000, 1);
  const Bytes input = Cat({ResponseFrame(Opcode::kResult, 1, RowsBody(1, {{cell}, {cell}})),
                           ResponseFrame(Opcode::kReady, 2, {})});
  Harness run;
  run.options.read_chunk = 7;
  run.sink_streams = {1};
  run.configure = [](RecordingSink& s) { s.direct_min = 1; };
  Outcome o = run.Go(input, Mode::kSocket, 42);
  ASSERT_TRUE(o.status.ok());
  EXPECT_GT(run.direct, 0u);
  EXPECT_EQ(run.direct + run.copied, 2 * cell.size());
  const RecordingSink& s = *run.sinks[1][0];
  ASSERT_EQ(s.cells.size(), 2u);
  EXPECT_TRUE(s.cells[0].directed);
  EXPECT_TRUE(*s.cells[1].data == cell);
  EXPECT_NE(o.log.find("READY@2"), std::string::npos);
}

TEST(FrameDecoder, ZeroRowsZeroColumnsAndTrailingBytes) {
  Bytes zero_rows = RowsBody(3, {});
  Bytes zero_cols = Hex("00000002 00000001 00000000 0000 0000 00000005");  // global spec "", "", 0 cols, 5 rows
  Bytes trailing = Cat({RowsBody(1, {{Hex("aa")}}), Hex("0102030405")});
  Bytes input = Cat({ResponseFrame(Opcode::kResult, 1, zero_rows), ResponseFrame(Opcode::kResult, 1, zero_cols),
                     ResponseFrame(Opcode::kResult, 1, trailing)});
  Harness run;
  run.sink_streams = {1};
  Outcome whole = run.Go(input, Mode::kWhole);
  ASSERT_TRUE(whole.status.ok()) << whole.status.ToString();
  ASSERT_EQ(run.sinks[1].size(), 3u);
  EXPECT_EQ(run.sinks[1][0]->row_count, 0);
  EXPECT_TRUE(run.sinks[1][0]->cells.empty());
  EXPECT_EQ(run.sinks[1][1]->row_count, 5);
  EXPECT_TRUE(run.sinks[1][1]->cells.empty());
  ASSERT_EQ(run.sinks[1][2]->cells.size(), 1u);
  EXPECT_EQ(ToHex(*run.sinks[1][2]->cells[0].data), "aa");
  EXPECT_EQ(run.Go(input, Mode::kByteByByte).log, whole.log);
}

TEST(FrameDecoder, RowsBeginAsSoonAsTheMetadataIsThere) {
  // Found by the fuzzer: the metadata of a streamed result must be handed to
  // the sink once its bytes are buffered, however they were split, without
  // waiting for bytes of the cells.
  const Bytes body = RowsBody(3, {{Pattern(1000, 1), Pattern(10, 2), std::nullopt}});
  const Bytes f = ResponseFrame(Opcode::kResult, 1, body);
  const size_t prefix = kHeaderSize + body.size() - (4 + 1000) - (4 + 10) - 4;  // through rows_count
  for (size_t read_chunk : {size_t(1), size_t(3), size_t(64)}) {
    auto sink = std::make_shared<RecordingSink>();
    FrameDecoder::Options o;
    o.read_chunk = read_chunk;
    FrameDecoder d(o, [&](int16_t) -> std::shared_ptr<CellSink> { return sink; });
    std::vector<DecodedFrame> frames;
    for (size_t i = 0; i < prefix; ++i) ASSERT_TRUE(d.Feed(ByteView(&f[i], 1), &frames).ok());
    EXPECT_EQ(sink->begin_calls, 1) << read_chunk;
    EXPECT_EQ(sink->row_count, 1);
    EXPECT_TRUE(sink->cells.empty());
    ASSERT_TRUE(d.Feed(ByteView(f).subspan(prefix), &frames).ok());
    EXPECT_EQ(sink->cells.size(), 3u);
    EXPECT_EQ(frames.size(), 1u);
  }
}

TEST(FrameDecoder, TracingIdBeforeStreamedRows) {
  const Bytes body = Cat({Hex("00112233445566778899aabbccddeeff"), RowsBody(1, {{Hex("beef")}})});
  Harness run;
  run.sink_streams = {6};
  Outcome o = run.Go(ResponseFrame(Opcode::kResult, 6, body, kFlagTracing), Mode::kByteByByte);
  ASSERT_TRUE(o.status.ok()) << o.status.ToString();
  ASSERT_EQ(run.sinks[6][0]->cells.size(), 1u);
  EXPECT_EQ(ToHex(*run.sinks[6][0]->cells[0].data), "beef");
}

TEST(FrameDecoder, SinkIsReleasedWhenItsFrameIsDone) {
  auto sink = std::make_shared<RecordingSink>();
  int lookups = 0;
  FrameDecoder d([&](int16_t) -> std::shared_ptr<CellSink> {
    ++lookups;
    return sink;
  });
  const Bytes f = ResponseFrame(Opcode::kResult, 1, RowsBody(1, {{Hex("01")}}));
  std::vector<DecodedFrame> frames;
  ASSERT_TRUE(d.Feed(ByteView(f).first(20), &frames).ok());
  EXPECT_EQ(sink.use_count(), 2);  // the decoder holds it while the frame is open
  ASSERT_TRUE(d.Feed(ByteView(f).subspan(20), &frames).ok());
  EXPECT_EQ(sink.use_count(), 1);
  EXPECT_EQ(lookups, 1);
  // Lookup is only consulted for RESULT frames.
  ASSERT_TRUE(d.Feed(ResponseFrame(Opcode::kError, 1, Cat({Hex("00002200"), Str("bad")})), &frames).ok());
  ASSERT_TRUE(d.Feed(ResponseFrame(Opcode::kReady, 1, {}), &frames).ok());
  EXPECT_EQ(lookups, 1);
  EXPECT_EQ(frames.size(), 3u);
}

}  // namespace
}  // namespace cqlstream::cql
