// Copyright (c) cqlstream authors.
//
// store::ClassCounts against a fake host (net/fake_server_test_util.h) whose
// metadata table holds, past the dataset's 10 committed samples, rows that
// no committed sample explains (idx past its segment's count, blocks past
// it, a segment the catalog does not list), each range's in ring order, so
// that the scan's order check takes them. The scan counts the committed
// rows' labels and skips the rest; once more of the rest than its bound
// came, it ends with Unsupported instead of reading on (a server paging
// such rows without end kept `info` reading forever), also with ranges
// scanned at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cql/wire.h"
#include "net/fake_server_test_util.h"
#include "net/routing/murmur3.h"
#include "net/session.h"
#include "store/scan.h"
#include "store/stats.h"

namespace cqlstream::store {
namespace {

constexpr uint16_t kCqlBigint = 0x0002, kCqlInt = 0x0009, kCqlList = 0x0020;
constexpr int32_t kRowsPerBlock = 1 << kBlockShift;
constexpr int64_t kCommitted = 10;  // segment 0's committed samples: idx 0-9 of block 0

cql::Bytes Int32(int32_t v) {
  cql::Bytes b(4);
  cql::StoreU32(b.data(), static_cast<uint32_t>(v));
  return b;
}

int64_t Token(int32_t seg, int32_t block) {
  const cql::Bytes s = Int32(seg), b = Int32(block);
  return routing::PartitionKeyToken({std::span<const uint8_t>(s), std::span<const uint8_t>(b)}).value();
}

void PutResultSpecs(cql::Writer& w) {
  w.String("ks");
  w.String("m_tiny");
  for (const char* c : {"seg", "block", "idx", "label"}) {
    w.String(c);
    w.Short(kCqlInt);
  }
  w.String("labels");
  w.Short(kCqlList);
  w.Short(kCqlInt);
}

// The PREPARE answer: two bigint markers (the range's tokens), five result
// columns.
cql::Bytes PreparedBody() {
  cql::Bytes b;
  cql::Writer w(&b);
  w.Int(0x0004);  // Prepared
  w.ShortBytes(cql::Bytes{0x5c, 0xa1});
  w.Int(0x0001);  // bind metadata: global spec, two markers, no pk index
  w.Int(2);
  w.Int(0);
  w.String("ks");
  w.String("m_tiny");
  for (const char* marker : {"partition key token", "partition key token"}) {
    w.String(marker);
    w.Short(kCqlBigint);
  }
  w.Int(0x0001);  // result metadata
  w.Int(5);
  PutResultSpecs(w);
  return b;
}

// What an EXECUTE of the scan asks: its range (start, end], its page size
// and where its page starts (the paging state: 4 bytes, the row's number in
// the range).
struct PageRequest {
  int64_t start = 0, end = 0;
  int32_t page_size = 5000;
  int64_t from = 0;
};

PageRequest PageOf(const cql::Bytes& body) {
  PageRequest p;
  cql::Reader r(body);
  cql::ByteView id;
  uint16_t consistency = 0;
  uint8_t flags = 0;
  EXPECT_TRUE(r.ShortBytes(&id).ok() && r.Short(&consistency).ok() && r.Byte(&flags).ok());
  EXPECT_TRUE(flags & 0x01) << "no values";
  uint16_t n = 0;
  EXPECT_TRUE(r.Short(&n).ok());
  EXPECT_EQ(n, 2);
  for (int64_t* token : {&p.start, &p.end}) {
    std::optional<cql::ByteView> v;
    EXPECT_TRUE(r.BytesValue(&v).ok() && v && v->size() == 8);
    if (v && v->size() == 8) *token = static_cast<int64_t>(cql::LoadU64(v->data()));
  }
  if (flags & 0x04) {
    EXPECT_TRUE(r.Int(&p.page_size).ok());
  }
  if (flags & 0x08) {
    std::optional<cql::ByteView> state;
    EXPECT_TRUE(r.BytesValue(&state).ok());
    if (state && state->size() == 4) p.from = cql::LoadU32(state->data());
  }
  return p;
}

// The blocks 0 .. blocks-1 of each segment given, each with all its 1024
// rows (label: idx % 2); a range's rows in ring order (by token, then seg
// and block; by idx within a block).
class MetaTableHost {
 public:
  explicit MetaTableHost(const std::vector<std::pair<int32_t, int32_t>>& segs_blocks) {
    for (const auto& [seg, blocks] : segs_blocks) {
      for (int32_t b = 0; b < blocks; ++b) parts_.push_back({Token(seg, b), {seg, b}});
    }
    std::sort(parts_.begin(), parts_.end());  // non-negative seg and block: as unsigned ints
    srv_.SetHandler([this](const net::testing::Request& r) -> std::optional<cql::Bytes> {
      if (r.header.opcode == cql::Opcode::kPrepare) {
        return net::testing::Frame(cql::Opcode::kResult, r.header.stream, PreparedBody());
      }
      if (r.header.opcode != cql::Opcode::kExecute) return std::nullopt;  // the fake's defaults
      ++pages_;
      return net::testing::Frame(cql::Opcode::kResult, r.header.stream, Page(PageOf(r.body)));
    });
  }
  uint16_t port() const { return srv_.port(); }
  int pages() const { return pages_; }

 private:
  using Part = std::pair<int64_t, std::pair<int32_t, int32_t>>;  // (token, (seg, block))

  cql::Bytes Page(const PageRequest& p) const {
    std::vector<Part> in;
    for (const Part& part : parts_) {
      if (part.first > p.start && part.first <= p.end) in.push_back(part);
    }
    const int64_t rows = static_cast<int64_t>(in.size()) * kRowsPerBlock;
    const int64_t from = std::min(p.from, rows);
    const int64_t to = std::min(rows, from + std::max(p.page_size, 1));
    cql::Bytes b;
    cql::Writer w(&b);
    w.Int(0x0002);  // Rows
    w.Int(to < rows ? 0x0003 : 0x0001);  // global spec, has_more_pages
    w.Int(5);
    if (to < rows) w.BytesValue(cql::ByteView(Int32(static_cast<int32_t>(to))));
    PutResultSpecs(w);
    w.Int(static_cast<int32_t>(to - from));
    for (int64_t k = from; k < to; ++k) {
      const auto [seg, block] = in[static_cast<size_t>(k / kRowsPerBlock)].second;
      const int32_t idx = block * kRowsPerBlock + static_cast<int32_t>(k % kRowsPerBlock);
      for (int32_t v : {seg, block, idx, idx % 2}) w.BytesValue(cql::ByteView(Int32(v)));
      w.BytesValue(std::nullopt);  // labels
    }
    return b;
  }

  std::vector<Part> parts_;  // ascending
  std::atomic<int> pages_{0};  // before srv_: its handler counts until srv_ is gone
  net::testing::FakeServer srv_;
};

DatasetInfo Tiny() {
  DatasetInfo d;
  d.keyspace = "ks";
  d.name = "tiny";
  d.label_kind = LabelKind::kClass;
  d.class_names = {"even", "odd"};
  SegmentInfo g;
  g.seg = 0;
  g.split = "train";
  g.count = kCommitted;
  d.segments = {g};
  return d;
}

StatusOr<std::map<std::string, std::vector<int64_t>>> CountFrom(const MetaTableHost& host, int64_t most,
                                                                int ranges = 1) {
  net::SessionOptions so;
  so.watch_events = false;
  auto session = net::Session::Connect(net::testing::LoopbackOptions(host.port()), so);
  if (!session.ok()) return session.status();
  auto counts = ClassCounts(**session, Tiny(), ranges, /*concurrency=*/ranges, most);
  (*session)->Close();
  return counts;
}

bool Bounded(const StatusOr<std::map<std::string, std::vector<int64_t>>>& counts) {
  return !counts.ok() && counts.status().code() == Status::Code::kUnsupported &&
         counts.status().message().find("rows past the committed samples") != std::string::npos;
}

TEST(ClassCounts, CountsTheCommittedRowsAndSkipsTheRest) {
  // 3,072 rows in one page: 3,062 of them past the committed ones (2,038
  // of segment 0, 1,024 of segment 1, which the catalog does not list).
  const std::vector<std::pair<int32_t, int32_t>> table = {{0, 2}, {1, 1}};
  MetaTableHost host(table);
  auto counts = CountFrom(host, kMostUncommittedRows);
  ASSERT_TRUE(counts.ok()) << counts.status().ToString();
  EXPECT_EQ(counts->at("train"), (std::vector<int64_t>{5, 5}));
  EXPECT_EQ(host.pages(), 1);
  // The bound's edge: as many as it allows, and one more.
  MetaTableHost at(table), over(table);
  auto at_bound = CountFrom(at, 3062);
  EXPECT_TRUE(at_bound.ok()) << at_bound.status().ToString();
  EXPECT_TRUE(Bounded(CountFrom(over, 3061)));
}

TEST(ClassCounts, EndsPastItsBoundOfRowsNoSampleExplains) {
  MetaTableHost host({{0, 64}});  // 65,536 rows: 14 pages of 5,000
  auto counts = CountFrom(host, 10000);
  ASSERT_FALSE(counts.ok());
  EXPECT_EQ(counts.status().code(), Status::Code::kUnsupported) << counts.status().ToString();
  EXPECT_NE(counts.status().message().find("ks.m_tiny met more than 10000 rows past the committed samples"),
            std::string::npos)
      << counts.status().ToString();
  EXPECT_EQ(host.pages(), 3) << "read on past the bound";
  // Four ranges scanned at once: each worker's first page (about 16,000
  // rows a range) passes the bound together; a worker asks at most one
  // page more before it hears (14 pages or more read the whole table).
  MetaTableHost four({{0, 64}});
  auto parallel = CountFrom(four, 10000, /*ranges=*/4);
  EXPECT_TRUE(Bounded(parallel)) << (parallel.ok() ? "counted" : parallel.status().ToString());
  EXPECT_LE(four.pages(), 8) << "read on past the bound";
}

}  // namespace
}  // namespace cqlstream::store
