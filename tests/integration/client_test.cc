// Copyright (c) cqlstream authors.
//
// The CQL client against the real node: schema, blobs of every size class,
// many requests in flight, paging, re-prepare, typed server errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <numeric>
#include <random>

#include "cql/frame_decoder.h"
#include "test_env.h"

namespace cqlstream {
namespace {

using testing::MustRun;
using testing::TestKeyspace;
using testing::TestSession;

std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// Lands column `col` of row 0 in caller memory (the zero-copy path).
class LandingSink final : public cql::CellSink {
 public:
  LandingSink(int col, std::vector<uint8_t>* out) : col_(col), out_(out) {}
  Status OnRowsBegin(const cql::RowsMetadata& md, int32_t rows) override {
    rows_ = rows;
    as_expected_ = md.specs_matched != nullptr;
    return Status::OK();
  }
  std::span<uint8_t> CellDestination(int32_t row, int32_t col, int32_t size) override {
    if (row != 0 || col != col_) return {};
    out_->resize(static_cast<size_t>(size));
    return {out_->data(), out_->size()};
  }
  Status OnCell(int32_t row, int32_t col, std::optional<cql::ByteView> data) override {
    if (row == 0 && col == col_) {
      seen_ = true;
      if (!data) out_->clear();
      else if (data->data() != out_->data() && !data->empty()) return Status::Internal("cell not landed in place");
    }
    return Status::OK();
  }
  int32_t rows_ = -1;
  bool seen_ = false;
  bool as_expected_ = false;  // the answer's column specs were its PREPARED answer's bytes

 private:
  int col_;
  std::vector<uint8_t>* out_;
};

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ks_ = TestKeyspace();
    s_ = TestSession();
    ASSERT_NE(s_, nullptr);
  }
  void TearDown() override {
    if (s_) s_->Close();
  }
  std::string ks_;
  std::shared_ptr<net::Session> s_;
};

TEST_F(ClientTest, TopologyAndKeyspace) {
  auto hosts = s_->Hosts();
  ASSERT_FALSE(hosts.empty());
  EXPECT_FALSE(s_->cluster_name().empty());
  for (const auto& h : hosts) {
    EXPECT_FALSE(h.datacenter.empty());
    EXPECT_GT(h.token_count, 0u);
    EXPECT_EQ(h.release_version.substr(0, 2), "5.");
  }
  MustRun(*s_, fmt::format("CREATE TABLE IF NOT EXISTS {}.kv (k int PRIMARY KEY, v text)", ks_));
  auto r = s_->Query(fmt::format("SELECT table_name FROM system_schema.tables WHERE keyspace_name = '{}'", ks_));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_NE(r->rows(), nullptr);
  bool found = false;
  for (int32_t i = 0; i < r->rows()->row_count(); ++i) {
    auto v = r->rows()->value(i, 0);
    found = found || (v.ok() && v->as_text() == "kv");
  }
  EXPECT_TRUE(found);
}

TEST_F(ClientTest, BlobsRoundTripBufferedAndInPlace) {
  MustRun(*s_, fmt::format("CREATE TABLE IF NOT EXISTS {}.blobs (k int PRIMARY KEY, b blob)", ks_));
  auto ins = s_->Prepare(fmt::format("INSERT INTO {}.blobs (k, b) VALUES (?, ?)", ks_));
  ASSERT_TRUE(ins.ok()) << ins.status().ToString();
  auto sel = s_->Prepare(fmt::format("SELECT b FROM {}.blobs WHERE k = ?", ks_));
  ASSERT_TRUE(sel.ok()) << sel.status().ToString();
  const std::vector<size_t> sizes = {0, 1, 100 * 1000, 5 * 1000 * 1000};
  for (size_t i = 0; i < sizes.size(); ++i) {
    SCOPED_TRACE(fmt::format("blob of {} bytes", sizes[i]));
    const auto blob = Pattern(sizes[i], static_cast<uint32_t>(i));
    net::Statement w = net::Statement::Bound(*ins, {Value::Int(static_cast<int32_t>(i)), Value::Ref(blob)});
    w.idempotent = true;
    auto wr = s_->Execute(w);
    ASSERT_TRUE(wr.ok()) << wr.status().ToString();

    // Buffered read.
    auto rr = s_->Execute(net::Statement::Bound(*sel, {Value::Int(static_cast<int32_t>(i))}));
    ASSERT_TRUE(rr.ok()) << rr.status().ToString();
    ASSERT_NE(rr->rows(), nullptr);
    ASSERT_EQ(rr->rows()->row_count(), 1);
    auto cell = rr->rows()->cell(0, 0);
    ASSERT_TRUE(cell.has_value());  // an empty blob is empty, not null
    ASSERT_EQ(cell->size(), blob.size());
    EXPECT_TRUE(std::equal(cell->begin(), cell->end(), blob.begin()));

    // Read straight into caller memory.
    std::vector<uint8_t> landed;
    auto sink = std::make_shared<LandingSink>(0, &landed);
    net::Statement r2 = net::Statement::Bound(*sel, {Value::Int(static_cast<int32_t>(i))});
    r2.sink = [sink](int) { return sink; };
    auto before = s_->metrics().direct_bytes;
    auto sr = s_->Execute(r2);
    ASSERT_TRUE(sr.ok()) << sr.status().ToString();
    EXPECT_TRUE(sr->streamed);
    EXPECT_EQ(sr->streamed_row_count, 1);
    EXPECT_TRUE(sink->seen_);
    ASSERT_EQ(landed.size(), blob.size());
    EXPECT_EQ(landed, blob);
    if (blob.size() >= 1000000) {
      // Most of a large blob is read by the socket straight into place.
      EXPECT_GT(s_->metrics().direct_bytes - before, blob.size() / 2);
    }
  }
}

TEST_F(ClientTest, CheckedAnswersCarryTheirPreparedColumnsByteForByte) {
  // Cassandra encodes an answer's column specs as it encoded the PREPARED
  // answer's: a read that checks its columns compares them as bytes and
  // decodes none (net/result_columns.h); the loader's data reads rely on it.
  MustRun(*s_, fmt::format("CREATE TABLE IF NOT EXISTS {}.checked (seg int, idx int, size bigint, data blob, "
                           "label int, PRIMARY KEY ((seg, idx)))",
                           ks_));
  const auto blob = Pattern(200 * 1000, 7);
  auto ins = s_->Prepare(fmt::format("INSERT INTO {}.checked (seg, idx, size, data, label) VALUES (?, ?, ?, ?, ?)", ks_));
  ASSERT_TRUE(ins.ok()) << ins.status().ToString();
  auto w = s_->Execute(net::Statement::Bound(
      *ins, {Value::Int(0), Value::Int(3), Value::Bigint(int64_t(blob.size())), Value::Ref(blob), Value::Int(9)}));
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  auto sel = s_->Prepare(fmt::format("SELECT seg, idx, size, data, label FROM {}.checked WHERE seg = ? AND idx = ?", ks_));
  ASSERT_TRUE(sel.ok()) << sel.status().ToString();
  ASSERT_FALSE((*sel)->result_metadata.specs_wire.empty());
  for (bool check : {true, false}) {
    SCOPED_TRACE(check ? "checked" : "unchecked");
    std::vector<uint8_t> landed;
    auto sink = std::make_shared<LandingSink>(3, &landed);
    net::Statement st = net::Statement::Bound(*sel, {Value::Int(0), Value::Int(3)});
    st.check_result_columns = check;
    st.sink = [sink](int) { return sink; };
    const uint64_t before = s_->metrics().columns_decoded;
    auto r = s_->Execute(st);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(landed, blob);
    // Unchecked, the answer carries no metadata at all (skip_metadata).
    EXPECT_EQ(sink->as_expected_, check);
    EXPECT_EQ(s_->metrics().columns_decoded, before);
  }
}

TEST_F(ClientTest, OversizedMutationIsRejectedWithATypedError) {
  MustRun(*s_, fmt::format("CREATE TABLE IF NOT EXISTS {}.oversize (k int PRIMARY KEY, b blob)", ks_));
  auto ins = s_->Prepare(fmt::format("INSERT INTO {}.oversize (k, b) VALUES (?, ?)", ks_));
  ASSERT_TRUE(ins.ok()) << ins.status().ToString();
  // Above the server's limit for one mutation (half a 32 MiB commit-log
  // segment) and its request frame limit (16 MiB).
  const auto blob = Pattern(17u << 20, 7);
  net::Statement w = net::Statement::Bound(*ins, {Value::Int(1), Value::Ref(blob)});
  w.retry = nullptr;
  auto r = s_->Execute(w);
  ASSERT_FALSE(r.ok());
  // The server refuses the request frame (16 MiB native_transport_max_frame_size)
  // with a typed Invalid error; never a hang, never a silent success.
  ASSERT_NE(r.status().server_error(), nullptr) << r.status().ToString();
  EXPECT_EQ(r.status().server_error()->typed(), ServerErrorCode::kInvalid) << r.status().ToString();
  EXPECT_NE(r.status().message().find("exceeds maximum allowed length"), std::string::npos)
      << r.status().ToString();
  std::printf("[   INFO   ] oversized write rejected: %s\n", r.status().ToString().c_str());
  // The session still works afterwards.
  auto ok = s_->Query("SELECT release_version FROM system.local");
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST_F(ClientTest, TwentyThousandPreparedReadsWith8192InFlightOnOneConnection) {
  auto o = testing::TestOptions();
  o.connections_per_host = 1;
  o.io_threads = 1;
  auto sess = net::Session::Connect(o);
  ASSERT_TRUE(sess.ok()) << sess.status().ToString();
  auto& s = **sess;
  MustRun(s, fmt::format("CREATE TABLE IF NOT EXISTS {}.many (k int PRIMARY KEY, v blob)", ks_));
  auto ins = s.Prepare(fmt::format("INSERT INTO {}.many (k, v) VALUES (?, ?)", ks_));
  ASSERT_TRUE(ins.ok());
  constexpr int kKeys = 1000;
  for (int k = 0; k < kKeys; ++k) {
    auto v = Pattern(512, static_cast<uint32_t>(k));
    ASSERT_TRUE(s.Execute(net::Statement::Bound(*ins, {Value::Int(k), Value::Blob(std::move(v))})).ok());
  }
  auto sel = s.Prepare(fmt::format("SELECT v FROM {}.many WHERE k = ?", ks_));
  ASSERT_TRUE(sel.ok());

  constexpr int kReads = 20000;
  constexpr int kWindow = 8192;
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0, done = 0, max_in_flight = 0, bad = 0;
  std::string first_error;
  for (int i = 0; i < kReads; ++i) {
    {
      std::unique_lock<std::mutex> l(mu);
      cv.wait(l, [&] { return in_flight < kWindow; });
      ++in_flight;
      max_in_flight = std::max(max_in_flight, s.InFlight());
    }
    const int k = i % kKeys;
    net::Statement st = net::Statement::Bound(*sel, {Value::Int(k)});
    st.idempotent = true;
    s.ExecuteAsync(std::move(st), [&, k](StatusOr<net::ResultSet> r) {
      bool good = r.ok() && r->rows() && r->rows()->row_count() == 1;
      if (good) {
        auto cell = r->rows()->cell(0, 0);
        auto want = Pattern(512, static_cast<uint32_t>(k));
        good = cell && cell->size() == want.size() && std::equal(cell->begin(), cell->end(), want.begin());
      }
      std::lock_guard<std::mutex> l(mu);
      if (!good) {
        ++bad;
        if (first_error.empty()) first_error = r.ok() ? "wrong row" : r.status().ToString();
      }
      --in_flight;
      ++done;
      cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return done == kReads; });
  EXPECT_EQ(bad, 0) << first_error;
  EXPECT_GT(max_in_flight, 1000) << "requests were not really concurrent";
  auto hosts = s.Hosts();
  ASSERT_EQ(hosts.size(), 1u);
  EXPECT_EQ(hosts[0].open_connections, 1);
  s.Close();
}

TEST_F(ClientTest, PagingOverTenThousandRows) {
  MustRun(*s_, fmt::format("CREATE TABLE IF NOT EXISTS {}.paged (p int, c int, v text, PRIMARY KEY (p, c))", ks_));
  auto ins = s_->Prepare(fmt::format("INSERT INTO {}.paged (p, c, v) VALUES (0, ?, ?)", ks_));
  ASSERT_TRUE(ins.ok());
  constexpr int kRows = 10000;
  std::atomic<int> pending{0}, failed{0};
  for (int c = 0; c < kRows; ++c) {
    while (pending.load() > 512) std::this_thread::sleep_for(std::chrono::microseconds(200));
    ++pending;
    net::Statement st = net::Statement::Bound(*ins, {Value::Int(c), Value::Text(fmt::format("row{}", c))});
    st.idempotent = true;
    s_->ExecuteAsync(std::move(st), [&](StatusOr<net::ResultSet> r) {
      if (!r.ok()) ++failed;
      --pending;
    });
  }
  while (pending.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(failed.load(), 0);

  auto sel = s_->Prepare(fmt::format("SELECT c, v FROM {}.paged WHERE p = 0", ks_));
  ASSERT_TRUE(sel.ok());
  net::Statement st = net::Statement::Bound(*sel);
  st.page_size = 999;
  int pages = 0, rows = 0;
  Status s = s_->ForEachPage(st, [&](const cql::Rows& page) {
    ++pages;
    for (int32_t i = 0; i < page.row_count(); ++i) {
      auto c = page.value(i, 0);
      auto v = page.value(i, 1);
      if (!c.ok() || c->as_int() != rows || v->as_text() != fmt::format("row{}", rows)) {
        return Status::Corruption(fmt::format("row {} out of order", rows));
      }
      ++rows;
    }
    return Status::OK();
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(rows, kRows);
  EXPECT_GE(pages, 11);  // 10000 / 999 -> 11 pages (the last may be followed by an empty one)
}

// Execute with a stop flag: an answer as Execute's while the flag is clear;
// a flag set before sending sends nothing and says so; a statement with a
// sink is refused (an abandoned request would write into memory its caller
// has given up). The wait's end at the flag: StoreTest's black-hole test.
TEST_F(ClientTest, ExecuteWithAStopFlag) {
  MustRun(*s_, fmt::format("CREATE TABLE IF NOT EXISTS {}.stops (k int PRIMARY KEY, v int)", ks_));
  MustRun(*s_, fmt::format("INSERT INTO {}.stops (k, v) VALUES (1, 7)", ks_));
  auto sel = s_->Prepare(fmt::format("SELECT v FROM {}.stops WHERE k = ?", ks_));
  ASSERT_TRUE(sel.ok()) << sel.status().ToString();
  std::atomic<bool> stop{false};
  auto r = s_->Execute(net::Statement::Bound(*sel, {Value::Int(1)}), &stop);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_NE(r->rows(), nullptr);
  ASSERT_EQ(r->rows()->row_count(), 1);
  EXPECT_EQ(r->rows()->value(0, 0)->as_int(), 7);

  const uint64_t sent = s_->metrics().requests;
  stop = true;
  auto cut = s_->Execute(net::Statement::Bound(*sel, {Value::Int(1)}), &stop);
  EXPECT_EQ(cut.status().code(), Status::Code::kCancelled) << cut.status().ToString();
  EXPECT_EQ(cut.status().message(), "interrupted");
  EXPECT_EQ(s_->metrics().requests, sent) << "a request was sent although the flag was set";

  stop = false;
  std::vector<uint8_t> landed;
  auto sink = std::make_shared<LandingSink>(0, &landed);
  net::Statement with_sink = net::Statement::Bound(*sel, {Value::Int(1)});
  with_sink.sink = [sink](int) { return sink; };
  auto refused = s_->Execute(with_sink, &stop);
  EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument) << refused.status().ToString();
  EXPECT_FALSE(sink->seen_);
}

// A read whose rows its caller keeps stops at its budget: the page that
// would pass it is not handed over, and the error names the read and the
// bound. One budget may bound several reads together.
TEST_F(ClientTest, AReadBudgetBoundsWhatPagedReadsHandOver) {
  MustRun(*s_, fmt::format("CREATE TABLE IF NOT EXISTS {}.budgeted (p int, c int, PRIMARY KEY (p, c))", ks_));
  for (int c = 0; c < 30; ++c) MustRun(*s_, fmt::format("INSERT INTO {}.budgeted (p, c) VALUES (0, {})", ks_, c));
  net::Statement st = net::Statement::Query(fmt::format("SELECT c FROM {}.budgeted WHERE p = 0", ks_));
  st.page_size = 10;
  int64_t handed = 0, first_page_bytes = 0;
  auto count = [&](const cql::Rows& page) {
    if (first_page_bytes == 0) first_page_bytes = page.body_bytes();
    handed += page.row_count();
    return Status::OK();
  };

  net::Session::ReadBudget exact{"the budgeted read", 30, int64_t{1} << 20};
  ASSERT_TRUE(s_->ForEachPage(st, count, &exact).ok());
  EXPECT_EQ(handed, 30);
  EXPECT_EQ(exact.rows, 30);
  EXPECT_GT(first_page_bytes, 0);

  handed = 0;
  net::Session::ReadBudget rows{"the budgeted read", 25, int64_t{1} << 20};
  Status short_of_rows = s_->ForEachPage(st, count, &rows);
  EXPECT_EQ(short_of_rows.code(), Status::Code::kUnsupported) << short_of_rows.ToString();
  EXPECT_NE(short_of_rows.ToString().find("the budgeted read answered more than 25 rows"), std::string::npos)
      << short_of_rows.ToString();
  EXPECT_EQ(handed, 20);  // the third page would pass the bound: not handed over

  handed = 0;
  net::Session::ReadBudget shared{"the two reads", 45, int64_t{1} << 20};
  ASSERT_TRUE(s_->ForEachPage(st, count, &shared).ok());
  Status second = s_->ForEachPage(st, count, &shared);
  EXPECT_EQ(second.code(), Status::Code::kUnsupported) << second.ToString();
  EXPECT_EQ(handed, 40);

  handed = 0;
  net::Session::ReadBudget bytes{"the budgeted read", 1000, first_page_bytes + 1};
  Status short_of_bytes = s_->ForEachPage(st, count, &bytes);
  EXPECT_EQ(short_of_bytes.code(), Status::Code::kUnsupported) << short_of_bytes.ToString();
  EXPECT_NE(short_of_bytes.ToString().find(fmt::format("more than {} bytes", first_page_bytes + 1)),
            std::string::npos)
      << short_of_bytes.ToString();
  EXPECT_EQ(handed, 10);
}

TEST_F(ClientTest, ReprepareAfterTableIsDroppedAndRecreated) {
  const std::string t = fmt::format("{}.reprep", ks_);
  MustRun(*s_, fmt::format("CREATE TABLE IF NOT EXISTS {} (k int PRIMARY KEY, v int)", t));
  MustRun(*s_, fmt::format("INSERT INTO {} (k, v) VALUES (1, 10)", t));
  auto sel = s_->Prepare(fmt::format("SELECT v FROM {} WHERE k = ?", t));
  ASSERT_TRUE(sel.ok());
  auto r1 = s_->Execute(net::Statement::Bound(*sel, {Value::Int(1)}));
  ASSERT_TRUE(r1.ok());
  ASSERT_EQ(r1->rows()->row_count(), 1);

  MustRun(*s_, fmt::format("DROP TABLE {}", t));
  MustRun(*s_, fmt::format("CREATE TABLE {} (k int PRIMARY KEY, v int)", t));
  MustRun(*s_, fmt::format("INSERT INTO {} (k, v) VALUES (1, 20)", t));
  const auto reprepares = s_->metrics().reprepares;
  auto r2 = s_->Execute(net::Statement::Bound(*sel, {Value::Int(1)}));
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  ASSERT_EQ(r2->rows()->row_count(), 1);
  EXPECT_EQ(r2->rows()->value(0, 0)->as_int(), 20);
  EXPECT_GE(s_->metrics().reprepares, reprepares + 1) << "the server should have forgotten the statement";
}

TEST_F(ClientTest, ReprepareWithOtherResultColumnsSaysToPrepareAgain) {
  // A table recreated with another type under the same query text: v4
  // prepared ids hash the text only, so the re-preparation keeps its id but
  // not its result columns. The stale statement must not decode the new
  // cells with the old type (or, checking its columns, call the answer
  // another statement's); the session keeps the new preparation.
  const std::string t = fmt::format("{}.reprep_types", ks_);
  MustRun(*s_, fmt::format("DROP TABLE IF EXISTS {}", t));
  MustRun(*s_, fmt::format("CREATE TABLE {} (k int PRIMARY KEY, v int)", t));
  MustRun(*s_, fmt::format("INSERT INTO {} (k, v) VALUES (1, 10)", t));
  const std::string q = fmt::format("SELECT k, v FROM {} WHERE k = ?", t);
  auto sel = s_->Prepare(q);
  ASSERT_TRUE(sel.ok()) << sel.status().ToString();
  for (bool check : {false, true}) {
    net::Statement st = net::Statement::Bound(*sel, {Value::Int(1)});
    st.check_result_columns = check;
    auto r = s_->Execute(st);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->rows()->value(0, 1)->as_int(), 10);
  }

  MustRun(*s_, fmt::format("DROP TABLE {}", t));
  MustRun(*s_, fmt::format("CREATE TABLE {} (k int PRIMARY KEY, v text)", t));
  MustRun(*s_, fmt::format("INSERT INTO {} (k, v) VALUES (1, 'twenty')", t));
  net::Statement st = net::Statement::Bound(*sel, {Value::Int(1)});
  st.check_result_columns = true;
  auto stale = s_->Execute(st);
  ASSERT_FALSE(stale.ok()) << "the stale statement read the new table";
  EXPECT_EQ(stale.status().code(), Status::Code::kInvalidArgument) << stale.status().ToString();
  EXPECT_NE(stale.status().message().find("prepare it again"), std::string::npos) << stale.status().ToString();
  auto fresh = s_->Prepare(q);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  net::Statement again = net::Statement::Bound(*fresh, {Value::Int(1)});
  again.check_result_columns = true;
  auto r = s_->Execute(again);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rows()->value(0, 1)->as_text(), "twenty");
}

TEST_F(ClientTest, ServerErrorsAreTyped) {
  // Unknown table.
  auto r = s_->Query(fmt::format("SELECT * FROM {}.no_such_table", ks_));
  ASSERT_FALSE(r.ok());
  ASSERT_NE(r.status().server_error(), nullptr) << r.status().ToString();
  EXPECT_EQ(r.status().server_error()->typed(), ServerErrorCode::kInvalid);
  EXPECT_NE(r.status().message().find("no_such_table"), std::string::npos) << r.status().ToString();

  // Syntax error.
  r = s_->Query("SELEKT 1");
  ASSERT_FALSE(r.ok());
  ASSERT_NE(r.status().server_error(), nullptr);
  EXPECT_EQ(r.status().server_error()->typed(), ServerErrorCode::kSyntaxError);

  // A bad type in a literal: the server says Invalid.
  MustRun(*s_, fmt::format("CREATE TABLE IF NOT EXISTS {}.typed (k int PRIMARY KEY, v int)", ks_));
  r = s_->Query(fmt::format("INSERT INTO {}.typed (k, v) VALUES (1, 'text')", ks_));
  ASSERT_FALSE(r.ok());
  ASSERT_NE(r.status().server_error(), nullptr);
  EXPECT_EQ(r.status().server_error()->typed(), ServerErrorCode::kInvalid);

  // A bad type for a bind marker: refused by the client, naming both types.
  auto ins = s_->Prepare(fmt::format("INSERT INTO {}.typed (k, v) VALUES (?, ?)", ks_));
  ASSERT_TRUE(ins.ok());
  auto w = s_->Execute(net::Statement::Bound(*ins, {Value::Int(1), Value::Text("x")}));
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), Status::Code::kInvalidArgument) << w.status().ToString();
  EXPECT_NE(w.status().message().find("int"), std::string::npos) << w.status().ToString();

  // Wrong number of bind values.
  w = s_->Execute(net::Statement::Bound(*ins, {Value::Int(1)}));
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace cqlstream
