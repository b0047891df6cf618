// Copyright (c) cqlstream authors.
//
// store::ReadPacks against a fake host (net/fake_server_test_util.h) that
// answers the packs read with rows of its choosing: the rows come one a
// segment, in segment order (the table's clustering order), and an answer
// that names a segment at or below the one before is refused (Corruption)
// rather than taken as the split's pack layout. (The hostile server's world
// has no packs table: this is the check's test.)
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cql/wire.h"
#include "net/fake_server_test_util.h"
#include "net/session.h"
#include "store/pack.h"

namespace cqlstream::store {
namespace {

// The protocol's type codes of the columns read.
constexpr uint16_t kCqlInt = 0x0009, kCqlBigint = 0x0002, kCqlVarchar = 0x000D;

// A cell: `n` big-endian bytes of `v`.
cql::Bytes BigEndian(uint64_t v, int n) {
  cql::Bytes b(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) b[static_cast<size_t>(n - 1 - i)] = static_cast<uint8_t>(v >> (8 * i));
  return b;
}

// system_schema.tables' answer: the packs table exists.
cql::Bytes TablesBody() {
  cql::Bytes b;
  cql::Writer w(&b);
  w.Int(0x0002);  // Rows
  net::testing::PutColumnSpecs(w, "system_schema", "tables", {{"table_name", {kCqlVarchar}}});
  w.Int(1);
  const std::string name = "packs";
  w.BytesValue(cql::ByteView(reinterpret_cast<const uint8_t*>(name.data()), name.size()));
  return b;
}

// The packs read's answer: one row per entry of `segs`, in that order.
cql::Bytes PackRows(const std::vector<int32_t>& segs) {
  cql::Bytes b;
  cql::Writer w(&b);
  w.Int(0x0002);
  net::testing::PutColumnSpecs(w, "ks", "packs",
                               {{"seg", {kCqlInt}},
                                {"count", {kCqlInt}},
                                {"pack_size", {kCqlInt}},
                                {"seed", {kCqlBigint}},
                                {"packed", {kCqlInt}},
                                {"left_out", {kCqlInt}}});
  w.Int(static_cast<int32_t>(segs.size()));
  for (int32_t seg : segs) {
    for (const cql::Bytes& cell : {BigEndian(static_cast<uint32_t>(seg), 4), BigEndian(1000, 4), BigEndian(10, 4),
                                   BigEndian(42, 8), BigEndian(1000, 4), BigEndian(0, 4)}) {
      w.BytesValue(cql::ByteView(cell));
    }
  }
  return b;
}

// ReadPacks of dataset "toy" in keyspace "ks" from a host answering `segs`.
StatusOr<std::vector<PackInfo>> ReadFrom(const std::vector<int32_t>& segs) {
  net::testing::FakeServer srv;
  srv.SetHandler([segs](const net::testing::Request& r) -> std::optional<cql::Bytes> {
    if (r.query.find("system_schema.tables") != std::string::npos) {
      return net::testing::Frame(cql::Opcode::kResult, r.header.stream, TablesBody());
    }
    if (r.query.find("FROM ks.packs") != std::string::npos) {
      return net::testing::Frame(cql::Opcode::kResult, r.header.stream, PackRows(segs));
    }
    return std::nullopt;
  });
  net::SessionOptions so;
  so.watch_events = false;
  auto session = net::Session::Connect(net::testing::LoopbackOptions(srv.port()), so);
  if (!session.ok()) return session.status();
  auto packs = ReadPacks(**session, "ks", "toy");
  (*session)->Close();
  return packs;
}

TEST(ReadPacks, RowsInSegmentOrderAreRead) {
  auto packs = ReadFrom({1, 3});
  ASSERT_TRUE(packs.ok()) << packs.status().ToString();
  ASSERT_EQ(packs->size(), 2u);
  EXPECT_EQ((*packs)[0], (PackInfo{1, 1000, 10, 42, 1000, 0}));
  EXPECT_EQ((*packs)[1].seg, 3);
}

TEST(ReadPacks, ARowOutOfSegmentOrderIsRefused) {
  auto packs = ReadFrom({3, 1});
  ASSERT_FALSE(packs.ok());
  EXPECT_EQ(packs.status().code(), Status::Code::kCorruption) << packs.status().ToString();
  EXPECT_NE(packs.status().message().find("answered segment 1 after segment 3"), std::string::npos)
      << packs.status().ToString();
}

TEST(ReadPacks, ASegmentTwiceIsRefused) {
  auto packs = ReadFrom({2, 2});
  ASSERT_FALSE(packs.ok());
  EXPECT_EQ(packs.status().code(), Status::Code::kCorruption) << packs.status().ToString();
  EXPECT_NE(packs.status().message().find("answered segment 2 after segment 2"), std::string::npos)
      << packs.status().ToString();
}

}  // namespace
}  // namespace cqlstream::store
