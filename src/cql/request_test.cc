// Copyright (c) cqlstream authors.
#include "cql/request.h"

#include <gtest/gtest.h>

#include "cql/test_util.h"

namespace cqlstream::cql {
namespace {

using testing::Hex;
using testing::ToHex;

std::string H(std::string_view hex) { return ToHex(Hex(hex)); }

TEST(Requests, Startup) {
  RequestFrame f = EncodeStartup({{"CQL_VERSION", "3.0.0"}});
  EXPECT_EQ(f.opcode, Opcode::kStartup);
  EXPECT_EQ(ToHex(f.bytes), H("04 00 0000 01 00000016"
                              "0001 000b 43514c5f56455253494f4e 0005 332e302e30"));
}

TEST(Requests, Options) {
  RequestFrame f = EncodeOptions();
  EXPECT_EQ(f.opcode, Opcode::kOptions);
  EXPECT_EQ(ToHex(f.bytes), H("04 00 0000 05 00000000"));
}

TEST(Requests, AuthResponseWithPlainToken) {
  Bytes token = PlainSaslToken("cassandra", "secret");
  EXPECT_EQ(ToHex(token), H("00 63617373616e647261 00 736563726574"));
  RequestFrame f = EncodeAuthResponse(ByteView(token));
  EXPECT_EQ(ToHex(f.bytes), H("04 00 0000 0f 00000015 00000011 0063617373616e647261 00736563726574"));
  EXPECT_EQ(ToHex(EncodeAuthResponse(std::nullopt).bytes), H("04 00 0000 0f 00000004 ffffffff"));
}

TEST(Requests, Register) {
  RequestFrame f = EncodeRegister({"TOPOLOGY_CHANGE", "STATUS_CHANGE"});
  EXPECT_EQ(ToHex(f.bytes), H("04 00 0000 0b 00000022 0002"
                              "000f 544f504f4c4f47595f4348414e4745"
                              "000d 5354415455535f4348414e4745"));
}

TEST(Requests, Prepare) {
  RequestFrame f = EncodePrepare("SELECT 1");
  EXPECT_EQ(ToHex(f.bytes), H("04 00 0000 09 0000000c 00000008 53454c4543542031"));
}

TEST(Requests, QueryWithoutParameters) {
  QueryParameters p;
  p.consistency = Consistency::kOne;
  auto f = EncodeQuery("SELECT 1", p);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->opcode, Opcode::kQuery);
  EXPECT_EQ(ToHex(f->bytes), H("04 00 0000 07 0000000f | 00000008 53454c4543542031 | 0001 | 00"));
}

TEST(Requests, QueryWithEveryFlag) {
  QueryParameters p;
  p.consistency = Consistency::kLocalQuorum;
  p.values = {Value::Int(5), Value::Text("x"), Value::Null(), Value::Unset()};
  p.value_names = {"a", "b", "c", "d"};
  p.skip_metadata = true;
  p.page_size = 100;
  p.paging_state = Hex("abcd");
  p.serial_consistency = Consistency::kLocalSerial;
  p.default_timestamp = 1;
  auto f = EncodeQuery("Q", p);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(ToHex(f->bytes), H("04 00 0000 07 0000003f"
                               "| 00000001 51 | 0006 | 7f | 0004"
                               "| 0001 61 00000004 00000005"
                               "| 0001 62 00000001 78"
                               "| 0001 63 ffffffff"
                               "| 0001 64 fffffffe"
                               "| 00000064 | 00000002 abcd | 0009 | 0000000000000001"));
}

TEST(Requests, QueryValidatesNamesAndTypes) {
  QueryParameters p;
  p.values = {Value::Int(1)};
  p.value_names = {"a", "b"};
  auto f = EncodeQuery("Q", p);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(f.status().message().find("2 value names for 1 values"), std::string::npos);

  p.value_names.clear();
  std::vector<DataType> types = {DataType::Simple(TypeId::kInt), DataType::Simple(TypeId::kInt)};
  p.value_types = &types;
  f = EncodeQuery("Q", p);
  EXPECT_NE(f.status().message().find("1 bind values for 2 bind markers"), std::string::npos);
}

TEST(Requests, ExecuteUsesBindMarkerTypes) {
  std::vector<DataType> types = {DataType::Simple(TypeId::kBigint),
                                 DataType::List(DataType::Simple(TypeId::kInt))};
  QueryParameters p;
  p.consistency = Consistency::kOne;
  p.values = {Value::Int(7), Value::List({Value::Int(1)})};
  p.value_types = &types;
  const Bytes id = Hex("beef");
  auto f = EncodeExecute(id, p);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->opcode, Opcode::kExecute);
  // The int is widened to the marker's bigint.
  EXPECT_EQ(ToHex(f->bytes), H("04 00 0000 0a 00000025 | 0002 beef | 0001 | 01 | 0002"
                               "| 00000008 0000000000000007"
                               "| 0000000c 00000001 00000004 00000001"));
}

TEST(Requests, ExecuteReportsWhichValueDoesNotFit) {
  std::vector<DataType> types = {DataType::Simple(TypeId::kInt), DataType::Simple(TypeId::kBlob)};
  QueryParameters p;
  p.values = {Value::Int(1), Value::Text("not a blob")};
  p.value_types = &types;
  auto f = EncodeExecute(Hex("01"), p);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(f.status().message(), "EXECUTE: bind value 1: cannot encode a text value as CQL type blob");
}

TEST(Requests, NaturalTypesWithoutMetadata) {
  QueryParameters p;
  p.consistency = Consistency::kAll;
  p.values = {Value::Bigint(2), Value::Blob(Hex("ff")), Value::Boolean(true)};
  auto f = EncodeQuery("Q", p);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(ToHex(f->bytes), H("04 00 0000 07 00000020 | 00000001 51 | 0005 | 01 | 0003"
                               "| 00000008 0000000000000002 | 00000001 ff | 00000001 01"));
}

TEST(Requests, Batch) {
  std::vector<BatchStatement> st(2);
  st[0].query = "INSERT";
  st[0].values = {Value::Int(1)};
  st[1].prepared_id = Hex("beef");
  auto f = EncodeBatch(BatchType::kUnlogged, st, Consistency::kQuorum, Consistency::kSerial, 100);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->opcode, Opcode::kBatch);
  EXPECT_EQ(ToHex(f->bytes), H("04 00 0000 0d 0000002c | 01 | 0002"
                               "| 00 00000006 494e53455254 | 0001 | 00000004 00000001"
                               "| 01 0002 beef | 0000"
                               "| 0004 | 30 | 0008 | 0000000000000064"));
  // Without the optional parts the flags are 0.
  auto g = EncodeBatch(BatchType::kLogged, {}, Consistency::kOne);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(ToHex(g->bytes), H("04 00 0000 0d 00000006 | 00 | 0000 | 0001 | 00"));
}

TEST(Requests, BatchStatementNeedsExactlyOneOfQueryAndId) {
  std::vector<BatchStatement> st(1);
  auto f = EncodeBatch(BatchType::kLogged, st, Consistency::kOne);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("BATCH statement 0"), std::string::npos);
  st[0].query = "Q";
  st[0].prepared_id = Hex("01");
  EXPECT_FALSE(EncodeBatch(BatchType::kLogged, st, Consistency::kOne).ok());
  st[0].prepared_id.reset();
  std::vector<DataType> types = {DataType::Simple(TypeId::kInt)};
  st[0].values = {Value::Text("x")};
  st[0].value_types = &types;
  f = EncodeBatch(BatchType::kLogged, st, Consistency::kOne);
  EXPECT_EQ(f.status().message(), "BATCH statement 0: bind value 0: cannot encode a text value as CQL type int");
}

TEST(Requests, StreamIdIsZeroAndPatchable) {
  RequestFrame f = EncodeOptions();
  EXPECT_EQ(f.bytes[2], 0);
  EXPECT_EQ(f.bytes[3], 0);
  PatchStreamId(f.bytes.data(), 300);
  EXPECT_EQ(ToHex(f.bytes), H("04 00 012c 05 00000000"));
}

// A blob of `n` bytes that count up, owned by a shared_ptr.
std::shared_ptr<const Bytes> CountingBlob(size_t n) {
  auto b = std::make_shared<Bytes>(n);
  for (size_t i = 0; i < n; ++i) (*b)[i] = static_cast<uint8_t>(i * 7);
  return b;
}

Value SharedOf(const std::shared_ptr<const Bytes>& b) { return Value::Shared(*b, b); }

// The bytes ForEachPiece gives from `from` on, as one buffer.
Bytes PiecesFrom(const RequestFrame& f, size_t from) {
  Bytes out;
  f.ForEachPiece(from, [&out](std::span<const uint8_t> p) {
    EXPECT_FALSE(p.empty()) << "no empty pieces";
    out.insert(out.end(), p.begin(), p.end());
  });
  return out;
}

TEST(Requests, LargeSharedBlobsAreSplicedNotCopied) {
  const auto big = CountingBlob(20000), small = CountingBlob(100), unowned = CountingBlob(kSplicedBlobBytes);
  std::vector<DataType> types = {DataType::Simple(TypeId::kInt), DataType::Simple(TypeId::kBlob),
                                 DataType::Simple(TypeId::kBlob), DataType::Simple(TypeId::kBlob)};
  QueryParameters shared, copied;
  shared.values = {Value::Int(1), SharedOf(big), SharedOf(small), Value::Ref(*unowned)};
  copied.values = {Value::Int(1), Value::Ref(*big), Value::Ref(*small), Value::Ref(*unowned)};
  shared.value_types = copied.value_types = &types;
  auto f = EncodeExecute(Hex("beef"), shared);
  auto g = EncodeExecute(Hex("beef"), copied);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(g->splices.empty()) << "blobs bound with Value::Ref are copied";
  // Only the large owned blob is spliced: the small one and the unowned one
  // are copied into the buffer.
  ASSERT_EQ(f->splices.size(), 1u);
  EXPECT_EQ(f->splices[0].bytes.data(), big->data()) << "the blob's own bytes, not a copy";
  EXPECT_EQ(f->splices[0].bytes.size(), big->size());
  EXPECT_EQ(f->bytes.size() + big->size(), g->bytes.size());
  EXPECT_EQ(f->size(), g->bytes.size());
  // Its length prefix is the last thing before it, and the header counts it.
  EXPECT_EQ(LoadU32(f->bytes.data() + f->splices[0].at - 4), big->size());
  EXPECT_EQ(LoadU32(f->bytes.data() + 5), g->bytes.size() - kHeaderSize);
  EXPECT_EQ(f->Flatten(), g->bytes);
  const size_t at = f->splices[0].at;
  for (size_t from : {size_t{0}, kHeaderSize, at, at + 5, at + big->size(), at + big->size() + 3, f->size()}) {
    EXPECT_EQ(PiecesFrom(*f, from), Bytes(g->bytes.begin() + static_cast<std::ptrdiff_t>(from), g->bytes.end()))
        << "from " << from;
  }
}

TEST(Requests, SplicedBlobsOfABatchAndAQueryFlattenToTheCopiedEncoding) {
  const auto a = CountingBlob(kSplicedBlobBytes), b = CountingBlob(3 * kSplicedBlobBytes + 1);
  std::vector<BatchStatement> shared(2), copied(2);
  shared[0].prepared_id = copied[0].prepared_id = Hex("01");
  shared[1].prepared_id = copied[1].prepared_id = Hex("02");
  shared[0].values = {SharedOf(a), Value::Int(3)};
  shared[1].values = {Value::Int(4), SharedOf(b)};
  copied[0].values = {Value::Ref(*a), Value::Int(3)};
  copied[1].values = {Value::Int(4), Value::Ref(*b)};
  auto f = EncodeBatch(BatchType::kUnlogged, shared, Consistency::kOne);
  auto g = EncodeBatch(BatchType::kUnlogged, copied, Consistency::kOne);
  ASSERT_TRUE(f.ok() && g.ok());
  ASSERT_EQ(f->splices.size(), 2u);
  EXPECT_LT(f->splices[0].at, f->splices[1].at);
  EXPECT_EQ(f->Flatten(), g->bytes);
  // A QUERY's values have their natural types: a shared blob is a blob.
  QueryParameters q;
  q.values = {SharedOf(b)};
  auto h = EncodeQuery("INSERT", q);
  ASSERT_TRUE(h.ok());
  ASSERT_EQ(h->splices.size(), 1u);
  q.values = {Value::Ref(*b)};
  EXPECT_EQ(h->Flatten(), EncodeQuery("INSERT", q)->bytes);
}

TEST(Requests, ASharedBlobForAnotherTypeIsNotSplicedAndTheFrameHoldsItsOwner) {
  auto blob = CountingBlob(kSplicedBlobBytes);
  std::weak_ptr<const Bytes> watch = blob;
  std::vector<DataType> text = {DataType::Simple(TypeId::kVarchar)};
  QueryParameters p;
  p.values = {SharedOf(blob)};
  p.value_types = &text;
  auto bad = EncodeExecute(Hex("01"), p);
  ASSERT_FALSE(bad.ok()) << "the marker's type decides, as for any blob";
  EXPECT_EQ(bad.status().message(), "EXECUTE: bind value 0: cannot encode a blob value as CQL type text");
  std::vector<DataType> types = {DataType::Simple(TypeId::kBlob)};
  p.value_types = &types;
  auto f = EncodeExecute(Hex("01"), p);
  ASSERT_TRUE(f.ok());
  p.values.clear();
  blob.reset();
  EXPECT_FALSE(watch.expired()) << "the frame keeps the spliced bytes alive";
  f = Status::Internal("dropped");
  EXPECT_TRUE(watch.expired()) << "and lets them go with it";
}

TEST(Requests, TooManyValuesAreRejected) {
  QueryParameters p;
  p.values.assign(70000, Value::Int(1));
  auto f = EncodeQuery("Q", p);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("70000 bind values"), std::string::npos) << f.status().ToString();
}

}  // namespace
}  // namespace cqlstream::cql
