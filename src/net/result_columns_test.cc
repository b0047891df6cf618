// Copyright (c) cqlstream authors.
//
// A statement that checks its result columns takes only answers naming the
// columns it was prepared with. The fake server answers a read shaped like
// an attached read with an int key and an int label (id int, img blob,
// label int) with a key-snapshot lookup's rows (seg int, idx int, key
// blob): the same column count and cell sizes, so without the metadata the
// stray answer passes for the read.
#include "net/result_columns.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cql/test_util.h"
#include "net/fake_server_test_util.h"
#include "net/session.h"

namespace cqlstream::net {
namespace {

using testing::FakeServer;
using testing::Frame;
using namespace std::chrono_literals;

const std::string kRead = "SELECT id, img, label FROM ks.foreign WHERE id = ?";
const DataType kInt = DataType::Simple(TypeId::kInt);
const DataType kBlob = DataType::Simple(TypeId::kBlob);

struct TableShape {
  std::string table;
  std::vector<std::pair<std::string, DataType>> columns;
};
const TableShape kForeign{"foreign", {{"id", kInt}, {"img", kBlob}, {"label", kInt}}};
const TableShape kLookup{"k_att", {{"seg", kInt}, {"idx", kInt}, {"key", kBlob}}};

void PutSpecs(cql::Writer& w, const TableShape& t) {
  w.String("ks");
  w.String(t.table);
  for (const auto& [name, type] : t.columns) {
    w.String(name);
    cql::testing::PutType(w, type);
  }
}

cql::Bytes PreparedBody(const TableShape& result = kForeign) {
  cql::Bytes b;
  cql::Writer w(&b);
  w.Int(0x0004);  // Prepared
  w.ShortBytes(cql::Bytes{0xab, 0xcd});
  w.Int(0x0001);  // bind metadata: global spec, one marker, pk index 0
  w.Int(1);
  w.Int(1);
  w.Short(0);
  w.String("ks");
  w.String("foreign");
  w.String("id");
  cql::testing::PutType(w, kInt);
  w.Int(0x0001);  // result metadata
  w.Int(static_cast<int32_t>(result.columns.size()));
  PutSpecs(w, result);
  return b;
}

// The same specs without a global table spec: each column names its
// keyspace and table (other bytes, the same columns).
void PutSpecsPerColumn(cql::Writer& w, const TableShape& t) {
  for (const auto& [name, type] : t.columns) {
    w.String("ks");
    w.String(t.table);
    w.String(name);
    cql::testing::PutType(w, type);
  }
}

// One row of three 4-byte cells (7, 0, 7): a read of key 7, or a lookup of
// segment 7 whose key is 7. `shape` names the columns unless `no_metadata`,
// with a global table spec unless `per_column`.
cql::Bytes RowsBody(const TableShape& shape, bool no_metadata, bool per_column = false) {
  cql::Bytes b;
  cql::Writer w(&b);
  w.Int(0x0002);
  w.Int(no_metadata ? 0x0004 : per_column ? 0x0000 : 0x0001);
  w.Int(static_cast<int32_t>(shape.columns.size()));
  if (!no_metadata && per_column) {
    PutSpecsPerColumn(w, shape);
  } else if (!no_metadata) {
    PutSpecs(w, shape);
  }
  w.Int(1);
  for (int32_t v : {7, 0, 7}) {
    const cql::Bytes cell = {0, 0, 0, static_cast<uint8_t>(v)};
    w.BytesValue(cql::ByteView(cell));
  }
  return b;
}

// The EXECUTE flags byte: after [short bytes] id and [consistency].
uint8_t ExecuteFlags(const cql::Bytes& body) {
  const size_t id_len = (size_t(body.at(0)) << 8) | body.at(1);
  return body.at(2 + id_len + 2);
}
constexpr uint8_t kSkipMetadata = 0x02;

// A sink that counts what reaches it.
struct CountingSink : cql::CellSink {
  Status OnRowsBegin(const cql::RowsMetadata&, int32_t) override {
    ++begins;
    return Status::OK();
  }
  std::span<uint8_t> CellDestination(int32_t, int32_t, int32_t) override { return {}; }
  Status OnCell(int32_t, int32_t, std::optional<cql::ByteView>) override {
    ++cells;
    return Status::OK();
  }
  int begins = 0, cells = 0;
};

class ResultColumnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    srv_.SetHandler([this](const testing::Request& r) -> std::optional<cql::Bytes> {
      if (r.header.opcode == cql::Opcode::kPrepare) {
        return Frame(cql::Opcode::kResult, r.header.stream, PreparedBody(altered_ ? kAltered : kForeign));
      }
      if (r.header.opcode != cql::Opcode::kExecute) return std::nullopt;  // the fake's defaults
      if (unprepared_.exchange(false)) {
        cql::Bytes e;
        cql::Writer w(&e);
        w.Int(0x2500);
        w.String("unknown prepared id");
        w.ShortBytes(cql::Bytes{0xab, 0xcd});
        return Frame(cql::Opcode::kError, r.header.stream, e);
      }
      if (void_) return Frame(cql::Opcode::kResult, r.header.stream, cql::Bytes{0, 0, 0, 1});
      const bool skip = (ExecuteFlags(r.body) & kSkipMetadata) != 0;
      {
        std::lock_guard<std::mutex> l(mu_);
        skipped_.push_back(skip);
      }
      return Frame(cql::Opcode::kResult, r.header.stream,
                   RowsBody(stray_ ? kLookup : kForeign, skip || no_metadata_, per_column_));
    });
    ConnectionOptions o = testing::LoopbackOptions(srv_.port());
    o.connect_timeout = 2000ms;
    o.request_timeout = 2000ms;
    auto s = Session::Connect(o, SessionOptions{});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    session_ = *s;
    auto p = session_->Prepare(kRead);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    read_ = *p;
  }
  void TearDown() override {
    if (session_) session_->Close();
  }
  Statement Read(bool check, std::shared_ptr<CountingSink> sink = nullptr) {
    Statement st = Statement::Bound(read_, {Value::Int(7)});
    st.idempotent = true;
    st.check_result_columns = check;
    if (sink) st.sink = [sink](int) { return sink; };
    return st;
  }

  FakeServer srv_;
  std::shared_ptr<Session> session_;
  PreparedPtr read_;
  // Whether each EXECUTE asked to skip the metadata (the server's thread
  // writes it).
  std::vector<bool> Skipped() {
    std::lock_guard<std::mutex> l(mu_);
    return skipped_;
  }
  std::mutex mu_;
  std::vector<bool> skipped_;
  std::atomic<bool> stray_{false}, no_metadata_{false}, void_{false}, per_column_{false};
  // The next EXECUTE is answered UNPREPARED; PREPARE answers kAltered's
  // result columns (the label became a bigint under the same query text).
  std::atomic<bool> unprepared_{false}, altered_{false};
  static inline const TableShape kAltered{"foreign", {{"id", kInt}, {"img", kBlob}, {"label", DataType::Simple(TypeId::kBigint)}}};
};

TEST_F(ResultColumnsTest, TheAnswerOfItsOwnColumnsIsTaken) {
  auto r = session_->Execute(Read(true));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_NE(r->rows(), nullptr);
  EXPECT_EQ(r->rows()->row_count(), 1);
  EXPECT_EQ(r->rows()->metadata().columns.at(2).name, "label");
  auto sink = std::make_shared<CountingSink>();
  auto streamed = session_->Execute(Read(true, sink));
  ASSERT_TRUE(streamed.ok()) << streamed.status().ToString();
  EXPECT_EQ(sink->begins, 1);
  EXPECT_EQ(sink->cells, 3);
  const auto checked = Skipped();
  ASSERT_EQ(checked.size(), 2u);
  EXPECT_FALSE(checked[0]) << "a checked statement asks for the result metadata";
  EXPECT_FALSE(checked[1]);
  // The streamed answer's specs were the PREPARED answer's bytes: compared
  // as bytes, not decoded.
  EXPECT_EQ(session_->metrics().columns_decoded, 0u);
  // Unchecked statements keep skipping it.
  ASSERT_TRUE(session_->Execute(Read(false)).ok());
  EXPECT_TRUE(Skipped().back());
}

TEST_F(ResultColumnsTest, AnotherStatementsRowsAreRefusedBeforeAnyCellReachesTheSink) {
  stray_ = true;
  // Unchecked, the lookup's rows pass for the read: the gap this closes.
  auto unchecked = session_->Execute(Read(false));
  ASSERT_TRUE(unchecked.ok()) << unchecked.status().ToString();
  EXPECT_EQ(unchecked->rows()->row_count(), 1);

  auto r = session_->Execute(Read(true));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().code() == Status::Code::kCorruption) << r.status().ToString();
  const std::string m = r.status().message();
  EXPECT_NE(m.find("ks.k_att(seg int, idx int, key blob)"), std::string::npos) << m;
  EXPECT_NE(m.find("ks.foreign(id int, img blob, label int)"), std::string::npos) << m;
  EXPECT_NE(m.find(kRead), std::string::npos) << m;
  // The host that answered is named (its endpoint formatted only now).
  const std::string host = "127.0.0.1:" + std::to_string(srv_.port());
  EXPECT_NE(m.find(host + " answered"), std::string::npos) << m;

  auto sink = std::make_shared<CountingSink>();
  auto streamed = session_->Execute(Read(true, sink));
  ASSERT_FALSE(streamed.ok());
  EXPECT_TRUE(streamed.status().code() == Status::Code::kCorruption) << streamed.status().ToString();
  EXPECT_NE(streamed.status().message().find(host + " answered"), std::string::npos) << streamed.status().ToString();
  EXPECT_EQ(sink->begins, 0) << "no call reaches the sink of a refused answer";
  EXPECT_EQ(sink->cells, 0);
}

TEST_F(ResultColumnsTest, TheSameColumnsInOtherBytesAreDecodedComparedAndCounted) {
  // Each column names its keyspace and table instead of one global spec:
  // not the PREPARED answer's bytes, but its columns.
  per_column_ = true;
  auto sink = std::make_shared<CountingSink>();
  auto streamed = session_->Execute(Read(true, sink));
  ASSERT_TRUE(streamed.ok()) << streamed.status().ToString();
  EXPECT_EQ(sink->cells, 3);
  EXPECT_EQ(session_->metrics().columns_decoded, 1u);
  // Another table's columns in the same form are refused as ever.
  stray_ = true;
  auto stray_sink = std::make_shared<CountingSink>();
  auto refused = session_->Execute(Read(true, stray_sink));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kCorruption) << refused.status().ToString();
  EXPECT_EQ(stray_sink->begins, 0);
  EXPECT_EQ(session_->metrics().columns_decoded, 1u) << "only answers that pass are counted";
}

TEST_F(ResultColumnsTest, AnAnswerWithoutMetadataIsRefused) {
  no_metadata_ = true;
  auto r = session_->Execute(Read(true));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().code() == Status::Code::kCorruption) << r.status().ToString();
  EXPECT_NE(r.status().message().find("3 columns without metadata"), std::string::npos) << r.status().ToString();
  auto sink = std::make_shared<CountingSink>();
  EXPECT_TRUE(session_->Execute(Read(true, sink)).status().code() == Status::Code::kCorruption);
  EXPECT_EQ(sink->cells, 0);
}

TEST_F(ResultColumnsTest, AnAnswerWithoutRowsIsRefused) {
  void_ = true;
  auto r = session_->Execute(Read(true));
  ASSERT_FALSE(r.ok()) << "a Void result cannot answer a SELECT";
  EXPECT_EQ(r.status().code(), Status::Code::kCorruption) << r.status().ToString();
  EXPECT_NE(r.status().message().find("no rows"), std::string::npos) << r.status().ToString();
}

TEST_F(ResultColumnsTest, ARepreparationWithOtherResultColumnsSaysToPrepareAgain) {
  // v4 prepared ids hash the query text only: the table changed under the
  // same id. Neither the stale columns nor the new answer are used; the
  // session keeps the new preparation for the next Prepare.
  altered_ = true;
  unprepared_ = true;
  auto r = session_->Execute(Read(true));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << r.status().ToString();
  EXPECT_NE(r.status().message().find("other result columns"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("label bigint"), std::string::npos) << r.status().ToString();
  auto again = session_->Prepare(kRead);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_EQ((*again)->result_metadata.columns.size(), 3u);
  EXPECT_EQ((*again)->result_metadata.columns[2].type, DataType::Simple(TypeId::kBigint));
  // Unchanged columns: the re-prepared statement runs as before.
  altered_ = false;
  unprepared_ = true;
  auto ok = session_->Execute(Read(true));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST(CheckResultColumns, ComparesKeyspaceTableNamesAndTypesInOrder) {
  Host h;
  h.address = "h";
  PreparedStatement p;
  p.query = kRead;
  auto spec = [](std::string table, std::string name, DataType t) {
    return cql::ColumnSpec{"ks", std::move(table), std::move(name), std::move(t)};
  };
  p.result_metadata.column_count = 2;
  p.result_metadata.columns = {spec("foreign", "id", kInt), spec("foreign", "img", kBlob)};
  cql::RowsMetadata a = p.result_metadata;
  EXPECT_TRUE(CheckResultColumns(p, a, h).ok());
  for (int i = 0; i < 5; ++i) {
    cql::RowsMetadata b = a;
    switch (i) {
      case 0: b.columns[1].keyspace = "other"; break;
      case 1: b.columns[1].table = "k_att"; break;
      case 2: b.columns[0].name = "seg"; break;
      case 3: b.columns[1].type = kInt; break;
      case 4: std::swap(b.columns[0], b.columns[1]); break;
    }
    EXPECT_TRUE(CheckResultColumns(p, b, h).code() == Status::Code::kCorruption) << i;
  }
  cql::RowsMetadata longer = a;
  longer.columns.push_back(spec("foreign", "label", kInt));
  longer.column_count = 3;
  EXPECT_TRUE(CheckResultColumns(p, longer, h).code() == Status::Code::kCorruption);
  // A hostile answer of many columns is named in a bounded message.
  cql::RowsMetadata wide;
  for (int i = 0; i < 5000; ++i) wide.columns.push_back(spec("foreign", "c" + std::to_string(i), kInt));
  wide.column_count = 5000;
  const Status s = CheckResultColumns(p, wide, h);
  EXPECT_TRUE(s.code() == Status::Code::kCorruption);
  EXPECT_NE(s.message().find("... 4992 more"), std::string::npos) << s.message().substr(0, 300);
  EXPECT_LT(s.message().size(), 1000u);
}

}  // namespace
}  // namespace cqlstream::net
