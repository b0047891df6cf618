// Copyright (c) cqlstream authors.
//
// The incremental response decoder. Layout of the receive buffer:
//
//   buf: [ consumed: 0..rpos | live: rpos..wpos | free: wpos..cap ]
//
// Small structures (frame headers, the preamble and metadata of a streamed
// Rows result, cell lengths, cells the sink did not claim) are parsed from
// the live bytes and must be contiguous there; the buffer compacts and grows
// (geometrically) until they are. Whenever the decoder waits for more bytes,
// the live bytes are fewer than the structure it waits for, which is never
// larger than max(kHeaderSize, max_body): so the buffer never grows past that
// plus read_chunk.
//
// Large payloads bypass the buffer: the rest of a directed cell is read
// straight into the sink's destination, and the rest of a large buffered
// body straight into DecodedFrame::body, which grows with the bytes that
// arrive (to at most twice what has arrived, plus read_chunk) rather than to
// the length the header declares.
#include "cql/frame_decoder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cstring>

namespace cqlstream::cql {

namespace {

constexpr int32_t kResultKindRows = 0x0002;

// Bytes the prefix parser of one frame may re-parse for free (ParsePrefix).
constexpr size_t kPrefixAllowance = 64 << 10;

// Once a frame has had a large directed cell (kLargeCell below), reads at
// cell boundaries are cut to this many bytes: enough for the small cells and
// the length that precede the next large cell, so that little of that cell
// lands in the receive buffer (to be copied) instead of its destination.
// The same holds between frames while the last streamed frame had one (at
// the next header, its rows prefix and the cells of its first row): a
// loader reads one sample per frame, and a full read_chunk at the next
// frame's header took up to read_chunk bytes of its cell into the buffer
// (45% of the image bytes of the 20,000-JPEG set were copied). A streamed
// frame without a large cell ends it, so small-cell traffic keeps whole
// read_chunk reads after it; frames buffered whole (answers without a sink,
// e.g. key lookups interleaved with sample reads) do not end it, so the
// image after them is still received in place, at the cost of 4 KiB reads
// for such frames until a streamed frame ends the cut.
constexpr size_t kLookahead = 4096;

// A directed cell of at least this many bytes (or a whole read chunk, when
// that is smaller) keeps the reads cut. A third of the bench's JPEGs are
// under the 64 KiB read chunk that was the mark before, and the frame after
// each of them was read a whole read chunk at its header: 18% of the image
// bytes were copied. Below the mark, whole-chunk reads take several frames
// at once where cut reads would need two a frame; 16 KiB is a judgement, not
// a measured break-even (nearly all of the bench's images are above it).
constexpr size_t kLargeCell = 16 << 10;

enum class Phase : uint8_t {
  kHeader,        // waiting for a 9-byte header
  kBody,          // collecting a whole body into State::body
  kRowsPrefix,    // streamed RESULT: preamble, kind, <metadata>, <rows_count>
  kCellLength,    // streamed Rows: the next cell's [int] length
  kCellBuffered,  // streamed Rows: until the whole cell is in the receive buffer
  kCellDirect,    // streamed Rows: the rest of a cell into the sink's destination
  kSkip,          // discarding the rest of a body (trailing bytes, or after a sink error)
};

// Where the span last returned by ReadTarget() points.
enum class Target : uint8_t { kBuffer, kCell, kBody };

}  // namespace

struct FrameDecoder::State {
  explicit State(FrameDecoder* d) : self(d) {}

  FrameDecoder* self;

  // Receive buffer.
  std::unique_ptr<uint8_t[]> buf;
  size_t cap = 0, rpos = 0, wpos = 0;
  size_t base_cap = 0;  // the size the buffer returns to after a large frame
  size_t max_cap = 0;   // max(kHeaderSize, max_body) + read_chunk

  Phase phase = Phase::kHeader;
  FrameHeader header;
  size_t body_left = 0;  // bytes of the current body not consumed yet

  // kBody.
  Bytes body;
  size_t body_filled = 0;

  // Streamed Rows.
  std::shared_ptr<CellSink> sink;
  bool sink_ok = true;
  Status sink_status;
  RowsMetadata metadata;
  int32_t row_count = 0;
  std::vector<std::string> warnings;
  int32_t row = 0, col = 0;
  uint64_t cells_left = 0;
  size_t cell_size = 0;     // kCellBuffered
  std::span<uint8_t> dst;   // kCellDirect: the sink's destination
  size_t dst_filled = 0;
  bool large_cells = false;  // a directed cell of >= kLargeCell bytes was seen (this or, until the next
                             // streamed frame starts, the last streamed frame)
  bool prev_large = false;   // the last streamed frame had one
  size_t prefix_last = 0;  // bytes the last attempt to parse the prefix had
  size_t prefix_work = 0;  // bytes all attempts on this frame's prefix parsed

  Target target = Target::kBuffer;
  size_t target_size = 0;

  bool failed = false;
  Status failure;

  size_t live() const { return wpos - rpos; }
  const uint8_t* data() const { return buf.get() + rpos; }
  void Consume(size_t n) {
    rpos += n;
    body_left -= n;
  }

  std::span<uint8_t> BufferTarget(size_t want);
  // Decodes what the buffer holds, one phase step at a time; each step
  // sets *wait when it needs more bytes.
  Status Process(std::vector<DecodedFrame>* out);
  Status StepHeader(std::vector<DecodedFrame>* out, bool* wait);
  void StepBody(std::vector<DecodedFrame>* out, bool* wait);
  Status StepCellLength(bool* wait);
  void StepCellBuffered(bool* wait);
  void StepCellDirect(bool* wait);
  void StepSkip(std::vector<DecodedFrame>* out, bool* wait);
  Status StartFrame(std::vector<DecodedFrame>* out);
  void StartBuffered(std::vector<DecodedFrame>* out);
  Status ParsePrefix(std::vector<DecodedFrame>* out, bool* progress);
  Status CellLength();
  void DeliverCell(std::optional<ByteView> data);
  void SinkFailed(Status s);
  void DropDestination();
  void NextCell();
  void EmitBuffered(std::vector<DecodedFrame>* out);
  void EmitStreamed(std::vector<DecodedFrame>* out);
  void FrameDone();
  Status Error(std::string_view what) const {
    return Status::ProtocolError(fmt::format("{} frame on stream {}: {}", OpcodeName(header.opcode),
                                             header.stream, what));
  }
};

FrameDecoder::FrameDecoder(Options options, SinkLookup lookup)
    : options_(options), lookup_(std::move(lookup)), state_(std::make_unique<State>(this)) {
  options_.read_chunk = std::max<size_t>(options_.read_chunk, 1);
  State& s = *state_;
  s.base_cap = 2 * options_.read_chunk;
  s.max_cap = std::max<size_t>(kHeaderSize, options_.max_body) + options_.read_chunk;
  s.cap = s.base_cap;
  s.buf.reset(new uint8_t[s.cap]);
}

FrameDecoder::~FrameDecoder() { Abandon(); }

std::optional<int16_t> FrameDecoder::current_stream() const {
  if (state_->phase == Phase::kHeader) return std::nullopt;
  return state_->header.stream;
}

std::optional<int16_t> FrameDecoder::directing_stream() const {
  if (state_->dst.empty()) return std::nullopt;
  return state_->header.stream;
}

void FrameDecoder::Abandon() {
  State& s = *state_;
  if (!s.failed) {
    s.failed = true;
    s.failure = Status::Cancelled("the frame decoder was abandoned");
  }
  s.DropDestination();
}

// ---------------------------------------------------------------------------
// Reading

std::span<uint8_t> FrameDecoder::State::BufferTarget(size_t want) {
  if (cap - wpos < want) {
    if (rpos > 0) {  // compact: move the live bytes to the front
      std::memmove(buf.get(), buf.get() + rpos, live());
      wpos -= rpos;
      rpos = 0;
    }
    if (cap - wpos < want) {
      size_t new_cap = std::max(wpos + want, std::min(2 * cap, max_cap));
      std::unique_ptr<uint8_t[]> nb(new uint8_t[new_cap]);
      std::memcpy(nb.get(), buf.get(), wpos);
      buf = std::move(nb);
      cap = new_cap;
    }
  }
  target = Target::kBuffer;
  target_size = want;
  return std::span<uint8_t>(buf.get() + wpos, want);
}

std::span<uint8_t> FrameDecoder::ReadTarget() {
  State& s = *state_;
  if (!s.failed && s.live() == 0) {
    if (s.phase == Phase::kCellDirect) {
      assert(s.dst_filled < s.dst.size());
      s.target = Target::kCell;
      s.target_size = s.dst.size() - s.dst_filled;
      return s.dst.subspan(s.dst_filled);
    }
    // A large remainder of a buffered body goes straight into the body; a
    // small one through the buffer, so that one read also picks up the frames
    // that follow.
    // The body grows with the bytes that have arrived (at most doubling what
    // is there), never to the length the header declares: a header that
    // claims max_body costs memory only once those bytes actually come.
    if (s.phase == Phase::kBody && s.body_left >= options_.read_chunk) {
      const size_t grow = std::min(s.body_left, std::max(options_.read_chunk, s.body_filled));
      s.body.resize(s.body_filled + grow);
      s.target = Target::kBody;
      s.target_size = grow;
      return std::span<uint8_t>(s.body.data() + s.body_filled, grow);
    }
  }
  size_t want = options_.read_chunk;
  // Between frames large_cells is still the last streamed frame's; within
  // one, a large cell in it or in the frame before.
  const bool expect_large = s.phase == Phase::kHeader ? s.large_cells : s.large_cells || s.prev_large;
  const bool boundary = s.phase == Phase::kHeader || s.phase == Phase::kRowsPrefix || s.phase == Phase::kCellLength ||
                        (s.phase == Phase::kCellBuffered && s.cell_size - s.live() < kLookahead);
  if (expect_large && !s.failed && boundary) want = std::min(want, kLookahead);
  return s.BufferTarget(want);
}

Status FrameDecoder::Feed(ByteView data, std::vector<DecodedFrame>* out) {
  while (!data.empty()) {
    std::span<uint8_t> t = ReadTarget();
    size_t n = std::min(t.size(), data.size());
    std::memcpy(t.data(), data.data(), n);
    data = data.subspan(n);
    CQLS_RETURN_IF_ERROR(Commit(n, out));
  }
  return Status::OK();
}

Status FrameDecoder::Commit(size_t n, std::vector<DecodedFrame>* out) {
  State& s = *state_;
  if (s.failed) return s.failure;
  if (n > s.target_size) {
    s.failed = true;
    s.failure = Status::InvalidArgument(fmt::format(
        "FrameDecoder::Commit({}) exceeds the {} bytes of the last ReadTarget()", n, s.target_size));
    return s.failure;
  }
  switch (s.target) {
    case Target::kBuffer:
      s.wpos += n;
      break;
    case Target::kCell:
      s.dst_filled += n;
      s.body_left -= n;
      direct_bytes_ += n;
      break;
    case Target::kBody:
      s.body_filled += n;
      s.body_left -= n;
      break;
  }
  s.target = Target::kBuffer;
  s.target_size = 0;  // a second Commit needs a new ReadTarget
  Status st = s.Process(out);
  if (!st.ok()) {
    s.failed = true;
    s.failure = st;
  }
  return st;
}

// ---------------------------------------------------------------------------
// Decoding

Status FrameDecoder::State::Process(std::vector<DecodedFrame>* out) {
  for (;;) {
    bool wait = false;
    switch (phase) {
      case Phase::kHeader:
        CQLS_RETURN_IF_ERROR(StepHeader(out, &wait));
        break;
      case Phase::kBody:
        StepBody(out, &wait);
        break;
      case Phase::kRowsPrefix: {
        bool progress = false;
        CQLS_RETURN_IF_ERROR(ParsePrefix(out, &progress));
        wait = !progress;
        break;
      }
      case Phase::kCellLength:
        CQLS_RETURN_IF_ERROR(StepCellLength(&wait));
        break;
      case Phase::kCellBuffered:
        StepCellBuffered(&wait);
        break;
      case Phase::kCellDirect:
        StepCellDirect(&wait);
        break;
      case Phase::kSkip:
        StepSkip(out, &wait);
        break;
    }
    if (wait) return Status::OK();
  }
}

Status FrameDecoder::State::StepHeader(std::vector<DecodedFrame>* out, bool* wait) {
  if (live() < kHeaderSize) {
    *wait = true;
    return Status::OK();
  }
  auto h = DecodeResponseHeader(std::span<const uint8_t, kHeaderSize>(data(), kHeaderSize), self->options_.max_body);
  if (!h.ok()) return h.status();
  header = *h;
  rpos += kHeaderSize;
  body_left = header.length;
  return StartFrame(out);
}

void FrameDecoder::State::StepBody(std::vector<DecodedFrame>* out, bool* wait) {
  size_t n = std::min(live(), body_left);
  if (n > 0) {
    if (body.size() < body_filled + n) body.resize(body_filled + n);
    std::memcpy(body.data() + body_filled, data(), n);
    body_filled += n;
    Consume(n);
  }
  if (body_left > 0) {
    *wait = true;
    return;
  }
  EmitBuffered(out);
}

Status FrameDecoder::State::StepCellLength(bool* wait) {
  if (cells_left == 0 || !sink_ok) {
    phase = Phase::kSkip;
    return Status::OK();
  }
  if (body_left < 4) {
    return Error(fmt::format("cell (row {}, column {}): expected 4 bytes for its length, got {} left in the body",
                             row, col, body_left));
  }
  if (live() < 4) {
    *wait = true;
    return Status::OK();
  }
  return CellLength();
}

void FrameDecoder::State::StepCellBuffered(bool* wait) {
  if (live() < cell_size) {
    *wait = true;
    return;
  }
  ByteView cell(data(), cell_size);
  DeliverCell(cell);  // the view stays valid: nothing moves the buffer during the call
  Consume(cell_size);
  NextCell();
}

void FrameDecoder::State::StepCellDirect(bool* wait) {
  // Normally the buffer is empty here (ReadTarget points into dst), but
  // bytes a caller committed to the buffer are moved over as well.
  size_t n = std::min(live(), dst.size() - dst_filled);
  if (n > 0) {
    std::memcpy(dst.data() + dst_filled, data(), n);
    dst_filled += n;
    self->copied_bytes_ += n;
    Consume(n);
  }
  if (dst_filled < dst.size()) {
    *wait = true;
    return;
  }
  std::span<uint8_t> d = dst;
  dst = {};
  DeliverCell(ByteView(d.data(), d.size()));
  NextCell();
}

void FrameDecoder::State::StepSkip(std::vector<DecodedFrame>* out, bool* wait) {
  size_t n = std::min(live(), body_left);
  Consume(n);
  if (body_left > 0) {
    *wait = true;
    return;
  }
  EmitStreamed(out);
}

Status FrameDecoder::State::StartFrame(std::vector<DecodedFrame>* out) {
  if (header.opcode == Opcode::kResult && self->lookup_) sink = self->lookup_(header.stream);
  if (!sink) {
    StartBuffered(out);
    return Status::OK();
  }
  if (header.flags & kFlagCompression) {
    return Error("compressed frame: cqlstream never negotiates compression");
  }
  phase = Phase::kRowsPrefix;
  sink_ok = true;
  sink_status = Status::OK();
  metadata = RowsMetadata{};
  row_count = 0;
  warnings.clear();
  row = col = 0;
  cells_left = 0;
  prev_large = large_cells;
  large_cells = false;
  prefix_last = 0;
  prefix_work = 0;
  return Status::OK();
}

// Buffers the whole body (nothing of it has been consumed yet).
void FrameDecoder::State::StartBuffered(std::vector<DecodedFrame>* out) {
  sink.reset();
  body = Bytes();
  body_filled = 0;
  if (live() >= body_left) {  // the common case: the whole body is here
    body.assign(data(), data() + body_left);
    body_filled = body_left;
    Consume(body_left);
    EmitBuffered(out);
    return;
  }
  // No reserve(body_left): the declared length is the sender's claim, and
  // the body grows with the bytes that arrive (see ReadTarget).
  phase = Phase::kBody;
}

// Parses preamble, kind, <metadata> and <rows_count> of a RESULT for a sink.
// Until all of it is buffered the parse fails, and it is tried again when
// more bytes have arrived. So that a large metadata trickling in byte by byte
// cannot cost quadratic time, once the attempts on one frame have parsed
// more than kPrefixAllowance + 4x the buffered bytes, the next attempt waits
// until the buffered bytes have doubled (or the whole body is there).
Status FrameDecoder::State::ParsePrefix(std::vector<DecodedFrame>* out, bool* progress) {
  const size_t avail = std::min(live(), body_left);
  if (avail < body_left) {
    if (avail <= prefix_last) return Status::OK();  // nothing new
    const bool cheap = prefix_work + avail <= kPrefixAllowance + 4 * avail;
    if (!cheap && avail < 2 * prefix_last) return Status::OK();
  }
  prefix_last = avail;
  prefix_work += avail;
  Reader r(ByteView(data(), avail));
  std::optional<std::array<uint8_t, 16>> tracing_id;
  std::vector<std::string> w;
  int32_t kind = 0;
  Status st = DecodePreamble(header.flags, r, &tracing_id, &w);
  if (st.ok()) st = r.Int(&kind);
  if (st.ok() && kind != kResultKindRows) {
    // Not Rows: the frame is delivered buffered, body and all.
    *progress = true;
    StartBuffered(out);
    return Status::OK();
  }
  RowsMetadata md;
  int32_t rows = 0;
  if (st.ok()) st = DecodeRowsMetadata(r, &md, sink->ExpectedColumns());
  if (st.ok()) st = r.Int(&rows);
  if (!st.ok()) {
    if (avail == body_left) return Error(fmt::format("Rows result: {}", st.message()));
    return Status::OK();  // wait for more bytes
  }
  *progress = true;
  Consume(r.offset());
  const uint64_t cells = uint64_t(std::max(rows, 0)) * uint64_t(md.column_count);
  if (rows < 0 || cells * 4 > body_left) {
    return Error(fmt::format("Rows result: {} rows of {} columns need at least {} bytes, got {}",
                             rows, md.column_count, cells * 4, body_left));
  }
  metadata = std::move(md);
  row_count = rows;
  warnings = std::move(w);
  cells_left = cells;
  phase = Phase::kCellLength;
  if (Status s = sink->OnRowsBegin(metadata, row_count); !s.ok()) SinkFailed(std::move(s));
  return Status::OK();
}

Status FrameDecoder::State::CellLength() {
  const int32_t n = static_cast<int32_t>(LoadU32(data()));
  Consume(4);
  if (n < 0) {
    DeliverCell(std::nullopt);
    NextCell();
    return Status::OK();
  }
  const size_t size = size_t(n);
  if (size > body_left) {
    return Error(fmt::format("cell (row {}, column {}): length {} exceeds the {} bytes left in the body",
                             row, col, n, body_left));
  }
  if (size == 0) {
    DeliverCell(ByteView());
    NextCell();
    return Status::OK();
  }
  std::span<uint8_t> d = sink->CellDestination(row, col, n);
  if (d.empty()) {
    cell_size = size;
    phase = Phase::kCellBuffered;
    return Status::OK();
  }
  if (d.size() != size) {
    dst = d;  // handed out all the same: SinkFailed gives it back (OnCellAbandoned)
    SinkFailed(Status::InvalidArgument(
        fmt::format("CellSink::CellDestination for cell (row {}, column {}) of {} bytes returned {} bytes",
                    row, col, size, d.size())));
    return Status::OK();
  }
  dst = d;
  dst_filled = 0;
  if (size >= std::min(kLargeCell, self->options_.read_chunk)) large_cells = true;
  phase = Phase::kCellDirect;  // Process copies what is buffered, ReadTarget points at the rest
  return Status::OK();
}

void FrameDecoder::State::DeliverCell(std::optional<ByteView> cell) {
  if (!sink_ok) return;
  if (Status s = sink->OnCell(row, col, cell); !s.ok()) SinkFailed(std::move(s));
}

void FrameDecoder::State::SinkFailed(Status s) {
  sink_ok = false;
  sink_status = std::move(s);
  DropDestination();
  phase = Phase::kSkip;  // drain the rest of the frame
}

// A destination given up before its cell is complete (its OnCell will not
// come): the sink hears of it, so that it may reuse the memory.
void FrameDecoder::State::DropDestination() {
  if (dst.empty()) return;
  dst = {};
  if (sink) sink->OnCellAbandoned(row, col);
}

void FrameDecoder::State::NextCell() {
  if (!sink_ok) return;  // SinkFailed already chose kSkip
  --cells_left;
  if (++col == metadata.column_count) {
    col = 0;
    ++row;
    prev_large = false;  // the last frame's large cell predicts this one's first row only
  }
  phase = Phase::kCellLength;
}

void FrameDecoder::State::EmitBuffered(std::vector<DecodedFrame>* out) {
  DecodedFrame f;
  f.header = header;
  f.body = std::move(body);
  body = Bytes();
  out->push_back(std::move(f));
  FrameDone();
}

void FrameDecoder::State::EmitStreamed(std::vector<DecodedFrame>* out) {
  DecodedFrame f;
  f.header = header;
  f.streamed = true;
  f.sink_status = std::move(sink_status);
  f.rows_metadata = std::move(metadata);
  f.row_count = row_count;
  f.warnings = std::move(warnings);
  out->push_back(std::move(f));
  sink_status = Status::OK();
  metadata = RowsMetadata{};
  warnings.clear();
  FrameDone();
}

void FrameDecoder::State::FrameDone() {
  phase = Phase::kHeader;
  sink.reset();
  body_left = 0;
  // Give back the memory of a large frame once it is done.
  if (cap > std::max<size_t>(4 * base_cap, 1 << 20) && live() <= base_cap / 2) {
    std::unique_ptr<uint8_t[]> nb(new uint8_t[base_cap]);
    std::memcpy(nb.get(), data(), live());
    wpos = live();
    rpos = 0;
    buf = std::move(nb);
    cap = base_cap;
  }
}

}  // namespace cqlstream::cql
