// Copyright (c) cqlstream authors.
//
// libFuzzer target for the CQL v4 response path: FrameDecoder (buffered and
// streamed frames, cell sinks, direct reads), DecodeResponse, DecodeType and
// DecodeCell.
//
// Input layout:
//   byte 0  sink policy: bits 0-1 which streams get a sink (none / all /
//           even / odd); bit 2 direct every non-empty cell (else only cells of
//           64 bytes or more); bit 3 fail OnCell number byte 1; bit 4 fail
//           OnRowsBegin on streams divisible by 3; bit 5 return a destination
//           of the wrong size for every 5th cell; bit 6 every sink
//           expects the columns ks.img(id int, data blob) (ExpectedColumns:
//           an answer of those spec bytes is compared, not decoded)
//   byte 1  index of the failing OnCell call
//   byte 2  read_chunk of the chunked decoder: 1 << (b % 17)
//   byte 3  seed of the chunk sizes
//   byte 4  largest chunk: 1 << (b % 17)
//   rest    the bytes a server sent
//
// With expected columns, a sink aborts when an answer is taken as expected
// but has other columns than 2 or decoded ones, or when an answer decoded
// in full has exactly the expected columns under the same global flag
// (their bytes would have been the expected ones: a match missed).
//
// In pieces, every ReadTarget() is checked against the bytes fed so far: a
// target larger than max(read_chunk, bytes fed) that is not a sink's own
// destination means the decoder sized memory by a declared length (abort).
//
// The same bytes are decoded twice — fed at once, and through
// ReadTarget/Commit in pseudo-random pieces — and both decodings must agree
// exactly (frames, sink callbacks, final status, stream of an unfinished
// frame): any difference is a bug in the incremental decoder and aborts.
// The one allowed difference: the sink of a frame the input ends in may have
// seen fewer callbacks in pieces (the decoder may wait for more bytes before
// it parses a large metadata again), but never different ones.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cql/frame_decoder.h"
#include "cql/response.h"
#include "cqlstream/value.h"

namespace {

using cqlstream::Status;
using namespace cqlstream::cql;

constexpr uint32_t kMaxBody = 1 << 20;

uint64_t Fnv(uint64_t h, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

template <typename T>
uint64_t Mix(uint64_t h, T v) {
  return Fnv(h, &v, sizeof v);
}

struct Control {
  uint8_t policy = 0, fail_index = 0, chunk_bits = 16, seed = 0, max_bits = 16;
};

// The result metadata of a statement prepared as SELECT id, data FROM
// ks.img, with its specs' wire bytes (as DecodePrepared keeps them).
const RowsMetadata& Expected() {
  static const RowsMetadata md = [] {
    const Bytes specs = {0, 2, 'k', 's', 0, 3, 'i', 'm', 'g', 0, 2, 'i', 'd', 0, 9,
                         0, 4, 'd', 'a', 't', 'a', 0, 3};
    Bytes wire = {0, 0, 0, 1, 0, 0, 0, 2};  // global tables spec, 2 columns
    wire.insert(wire.end(), specs.begin(), specs.end());
    Reader r(wire);
    RowsMetadata m;
    if (!DecodeRowsMetadata(r, &m).ok() || m.columns.size() != 2) abort();
    m.specs_wire = specs;
    return m;
  }();
  return md;
}

class FuzzSink : public CellSink {
 public:
  FuzzSink(const Control& c, int16_t stream) : c_(c), stream_(stream) {}

  const RowsMetadata* ExpectedColumns() const override { return (c_.policy & 0x40) ? &Expected() : nullptr; }
  Status OnRowsBegin(const RowsMetadata& md, int32_t rows) override {
    if (const RowsMetadata* e = ExpectedColumns()) {
      constexpr int32_t kGlobal = RowsMetadata::kGlobalTablesSpec;
      if (md.specs_matched != nullptr &&
          (md.specs_matched != e || !md.columns.empty() || md.column_count != e->column_count)) {
        abort();
      }
      if (md.specs_matched == nullptr && !(md.flags & RowsMetadata::kNoMetadata) &&
          (md.flags & kGlobal) == (e->flags & kGlobal) && md.columns == e->columns) {
        abort();  // the expected columns in the expected form were not recognized
      }
    }
    events_.push_back(Mix(Mix(Mix(Mix(kSeed, 'B'), rows), md.column_count), md.specs_matched != nullptr));
    if ((c_.policy & 0x10) && stream_ % 3 == 0) return Status::Cancelled("begin");
    return Status::OK();
  }
  std::span<uint8_t> CellDestination(int32_t row, int32_t col, int32_t size) override {
    if (size <= 0) abort();  // never asked for null or empty cells
    events_.push_back(Mix(Mix(Mix(Mix(kSeed, 'D'), row), col), size));
    ++dest_calls_;
    if (!(c_.policy & 0x04) && size < 64) return {};
    dest_.assign(size_t(size) + ((c_.policy & 0x20) && dest_calls_ % 5 == 0 ? 1 : 0), 0xA5);
    directed_ = true;
    return std::span<uint8_t>(dest_);
  }
  // Whether `t` lies inside the destination this sink handed out.
  bool Holds(std::span<uint8_t> t) const {
    return !dest_.empty() && t.data() >= dest_.data() && t.data() + t.size() <= dest_.data() + dest_.size();
  }
  Status OnCell(int32_t row, int32_t col, std::optional<ByteView> data) override {
    uint64_t h = Mix(Mix(Mix(kSeed, 'C'), row), col);
    if (data) {
      if (directed_ && data->size() > 0 && data->data() != dest_.data()) abort();  // must be the destination
      h = Fnv(Mix(h, data->size()), data->data(), data->size());
    } else {
      h = Mix(h, 'N');
    }
    events_.push_back(h);
    directed_ = false;
    if ((c_.policy & 0x08) && cells_++ == c_.fail_index) return Status::Corruption("cell");
    return Status::OK();
  }
  // Only a destination handed out and not yet completed may be given back
  // (a wrong-sized one, or one left mid-cell when the decoder ends).
  void OnCellAbandoned(int32_t, int32_t) override {
    if (!directed_) abort();
    directed_ = false;
  }
  const std::vector<uint64_t>& events() const { return events_; }

 private:
  static constexpr uint64_t kSeed = 0xcbf29ce484222325ULL;
  const Control& c_;
  int16_t stream_;
  std::vector<uint64_t> events_;
  std::vector<uint8_t> dest_;
  bool directed_ = false;
  int dest_calls_ = 0;
  int cells_ = 0;
};

bool WantsSink(const Control& c, int16_t stream) {
  switch (c.policy & 3) {
    case 1: return true;
    case 2: return stream % 2 == 0;
    case 3: return stream % 2 != 0;
    default: return false;
  }
}

// Exercises the buffered decoders on a complete body.
void DecodeBody(const FrameHeader& h, const Bytes& body) {
  auto r = DecodeResponse(h, body);
  if (!r.ok()) return;
  if (auto* res = std::get_if<Result>(&r->message)) {
    // (A result may claim 2^31 rows of no columns: there is nothing to visit.)
    if (auto* rows = std::get_if<Rows>(res); rows && rows->column_count() > 0) {
      for (int32_t i = 0; i < rows->row_count(); ++i) {
        for (int32_t j = 0; j < rows->column_count(); ++j) {
          (void)rows->cell(i, j);
          auto v = rows->value(i, j);
          if (v.ok()) (void)v->ToString();
        }
      }
    }
  }
}

std::string Describe(const DecodedFrame& f) {
  std::string s = std::to_string(int(f.header.opcode)) + "@" + std::to_string(f.header.stream) + "/" +
                  std::to_string(f.header.flags) + "/" + std::to_string(f.header.length);
  if (f.streamed) {
    s += " S rows=" + std::to_string(f.row_count) + " cols=" + std::to_string(f.rows_metadata.column_count) +
         " sink=" + f.sink_status.ToString() + " warnings=" + std::to_string(f.warnings.size());
    if (f.rows_metadata.paging_state) s += " paging=" + std::to_string(f.rows_metadata.paging_state->size());
  } else {
    s += " B " + std::to_string(Fnv(0, f.body.data(), f.body.size()));
  }
  return s + "\n";
}

struct Outcome {
  std::string log;  // frames, final status, stream of an unfinished frame
  std::string frames_log;  // the frames alone
  bool failed = false;
  std::optional<int16_t> stream;  // of the frame being decoded at the end
  std::vector<std::vector<uint64_t>> sink_events;
  bool mid_frame = false;
};

// mode 0: everything at once; 1: ReadTarget/Commit in pseudo-random pieces.
Outcome Run(const Control& c, ByteView data, int mode, std::vector<DecodedFrame>* keep) {
  std::vector<std::shared_ptr<FuzzSink>> sinks;
  FrameDecoder::Options o;
  o.max_body = kMaxBody;
  o.read_chunk = mode == 0 ? (64 << 10) : size_t(1) << (c.chunk_bits % 17);
  FrameDecoder d(o, [&](int16_t stream) -> std::shared_ptr<CellSink> {
    if (!WantsSink(c, stream)) return nullptr;
    sinks.push_back(std::make_shared<FuzzSink>(c, stream));
    return sinks.back();
  });
  std::vector<DecodedFrame> frames;
  Status st;
  if (mode == 0) {
    st = d.Feed(data, &frames);
  } else {
    uint32_t x = 0x9e3779b9u ^ c.seed;
    const size_t max_chunk = size_t(1) << (c.max_bits % 17);
    size_t pos = 0;
    while (pos < data.size() && st.ok()) {
      std::span<uint8_t> t = d.ReadTarget();
      if (t.empty()) abort();  // ReadTarget is never empty
      // Memory follows the bytes that arrived, not the lengths the input
      // declares (issue 9 item 19): a target is a read_chunk of the buffer,
      // part of a sink's own destination, or a part of a buffered body no
      // larger than what has arrived.
      if (t.size() > std::max(o.read_chunk, pos)) {
        bool in_dest = false;
        for (const auto& s : sinks) in_dest = in_dest || s->Holds(t);
        if (!in_dest) abort();
      }
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      size_t n = std::min({t.size(), data.size() - pos, size_t(1 + x % max_chunk)});
      std::memcpy(t.data(), data.data() + pos, n);
      pos += n;
      st = d.Commit(n, &frames);
    }
  }
  Outcome out;
  for (const auto& f : frames) out.frames_log += Describe(f);
  out.log = out.frames_log;
  out.failed = !st.ok();
  out.stream = d.current_stream();
  out.log += "status " + st.ToString() + "\n";
  out.log += "stream " + (d.current_stream() ? std::to_string(*d.current_stream()) : std::string("-")) + "\n";
  out.mid_frame = st.ok() && d.current_stream().has_value();
  for (const auto& s : sinks) out.sink_events.push_back(s->events());
  if (keep) *keep = std::move(frames);
  return out;
}

bool SameDecoding(const Outcome& whole, const Outcome& pieces) {
  // The one allowed difference: the whole input rejected the frame in
  // progress, while the pieces are still waiting for more of it. A Rows
  // prefix that arrives in small pieces is parsed again only once the
  // buffered bytes have doubled (FrameDecoder::State::ParsePrefix bounds
  // the work so), so its error may need bytes the input does not have;
  // nothing of that frame was delivered either way.
  const bool later_error = whole.failed && pieces.mid_frame && whole.stream == pieces.stream;
  if (later_error ? whole.frames_log != pieces.frames_log : whole.log != pieces.log) return false;
  if (whole.sink_events.size() != pieces.sink_events.size()) return false;
  for (size_t i = 0; i < whole.sink_events.size(); ++i) {
    const auto& w = whole.sink_events[i];
    const auto& p = pieces.sink_events[i];
    const bool last_open = (whole.mid_frame || later_error) && i + 1 == whole.sink_events.size();
    if (last_open ? (p.size() > w.size() || !std::equal(p.begin(), p.end(), w.begin())) : p != w) return false;
  }
  return true;
}

std::string Dump(const Outcome& o) {
  std::string s = o.log;
  for (const auto& e : o.sink_events) s += "sink with " + std::to_string(e.size()) + " callbacks\n";
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  Control c{data[0], data[1], data[2], data[3], data[4]};
  ByteView stream(data + 5, size - 5);

  std::vector<DecodedFrame> frames;
  const Outcome whole = Run(c, stream, 0, &frames);
  const Outcome pieces = Run(c, stream, 1, nullptr);
  if (!SameDecoding(whole, pieces)) {
    fprintf(stderr, "decodings differ\n--- fed at once:\n%s--- in pieces:\n%s", Dump(whole).c_str(),
            Dump(pieces).c_str());
    abort();
  }
  for (const auto& f : frames) {
    if (!f.streamed) DecodeBody(f.header, f.body);
  }

  // The stream as one complete body of every response opcode.
  for (Opcode op : {Opcode::kError, Opcode::kReady, Opcode::kAuthenticate, Opcode::kSupported, Opcode::kResult,
                    Opcode::kEvent, Opcode::kAuthChallenge, Opcode::kAuthSuccess}) {
    FrameHeader h;
    h.version = 0x84;
    h.flags = c.policy & 0x0e;  // tracing / custom payload / warning
    h.opcode = op;
    h.length = uint32_t(stream.size());
    DecodeBody(h, Bytes(stream.begin(), stream.end()));
  }

  // A type description followed by one cell of that type.
  Reader r(stream);
  cqlstream::DataType type;
  if (DecodeType(r, &type).ok()) {
    (void)type.ToString();
    ByteView rest = stream.subspan(r.offset());
    auto v = cqlstream::DecodeCell(type, rest);
    if (v.ok()) {
      (void)v->ToString();
      // A decoded value that encodes again must decode to the same value.
      std::vector<uint8_t> again;
      if (!v->is_null() && cqlstream::EncodeCell(*v, type, &again).ok()) {
        auto back = cqlstream::DecodeCell(type, again);
        if (!back.ok() || !(*back == *v)) {
          fprintf(stderr, "round trip of %s as %s failed\n", v->ToString().c_str(), type.ToString().c_str());
          abort();
        }
      }
    }
  }
  return 0;
}
