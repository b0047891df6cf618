// Copyright (c) cqlstream authors.
#include "store/segments_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>

#include "store/catalog.h"

namespace cqlstream::store {
namespace {

int64_t NowMillis() { return NowMicros() / 1000; }

// Column positions of the segment read below.
enum SegCol : int32_t {
  kSeg,
  kSplit,
  kSourceId,
  kFingerprint,
  kCount,
  kBytes,
  kMaxSize,
  kSizeHist,
  kNextPos,
  kState,
  kStateWritetime,
  kCountWritetime,
  kSource,
};

template <typename T>
StatusOr<T> Or(const cql::Rows& r, int32_t row, int32_t col, T fallback) {
  CQLS_ASSIGN_OR_RETURN(std::optional<T> v, r.GetOptional<T>(row, col));
  return v ? std::move(*v) : std::move(fallback);
}

StatusOr<SegRow> DecodeSegRow(const cql::Rows& r, int32_t i) {
  SegRow g;
  CQLS_ASSIGN_OR_RETURN(g.seg, r.Get<int32_t>(i, kSeg));
  CQLS_ASSIGN_OR_RETURN(g.split, Or<std::string>(r, i, kSplit, ""));
  CQLS_ASSIGN_OR_RETURN(g.source_id, Or<std::string>(r, i, kSourceId, ""));
  CQLS_ASSIGN_OR_RETURN(g.fingerprint, Or<std::string>(r, i, kFingerprint, ""));
  CQLS_ASSIGN_OR_RETURN(int32_t count, Or<int32_t>(r, i, kCount, 0));
  g.c.count = count;
  CQLS_ASSIGN_OR_RETURN(g.c.bytes, Or<int64_t>(r, i, kBytes, 0));
  CQLS_ASSIGN_OR_RETURN(g.c.max_size, Or<int64_t>(r, i, kMaxSize, 0));
  CQLS_ASSIGN_OR_RETURN(std::vector<int64_t> hist, Or<std::vector<int64_t>>(r, i, kSizeHist, {}));
  for (size_t b = 0; b < hist.size() && b < kSizeHistBuckets; ++b) g.c.hist[b] = hist[b];
  CQLS_ASSIGN_OR_RETURN(g.c.next_pos, Or<int64_t>(r, i, kNextPos, 0));
  CQLS_ASSIGN_OR_RETURN(g.state, Or<std::string>(r, i, kState, ""));
  CQLS_ASSIGN_OR_RETURN(int64_t wt_state, Or<int64_t>(r, i, kStateWritetime, 0));
  CQLS_ASSIGN_OR_RETURN(int64_t wt_count, Or<int64_t>(r, i, kCountWritetime, 0));
  g.writetime = std::max(wt_state, wt_count);
  CQLS_ASSIGN_OR_RETURN(g.source, Or<std::string>(r, i, kSource, ""));
  return g;
}

std::vector<Value> HistValue(const std::vector<int64_t>& hist) {
  size_t n = hist.size();
  while (n > 0 && hist[n - 1] == 0) --n;
  std::vector<Value> out;
  for (size_t i = 0; i < n; ++i) out.push_back(Value::Bigint(hist[i]));
  return out;
}

}  // namespace

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

StatusOr<std::vector<SegRow>> ReadSegRows(net::Session& s, const std::string& keyspace, const std::string& dataset) {
  std::vector<SegRow> out;
  net::Statement st = net::Statement::Query(
      fmt::format("SELECT seg, split, source_id, fingerprint, count, bytes, max_size, size_hist, next_pos, state, "
                  "writetime(state), writetime(count), source, dataset FROM {}.segments WHERE dataset = ?",
                  keyspace),
      {Value::Text(dataset)});
  st.idempotent = true;
  st.consistency = cql::Consistency::kLocalQuorum;
  net::Session::ReadBudget budget = SegmentsReadBudget(keyspace, dataset);
  std::optional<int32_t> last;
  Status status = s.ForEachPage(
      st,
      [&](const cql::Rows& r) -> Status {
        for (int32_t i = 0; i < r.row_count(); ++i) {
          CQLS_RETURN_IF_ERROR(CheckSegmentRowDataset(r, i, dataset));
          auto g = DecodeSegRow(r, i);
          if (!g.ok()) return g.status().WithContext(fmt::format("segments table of dataset '{}'", dataset));
          CQLS_RETURN_IF_ERROR(CheckNextSegment(g->seg, &last, dataset));
          CQLS_RETURN_IF_ERROR(CheckSegmentSizes(g->seg, g->c.count, g->c.bytes, g->c.max_size, dataset));
          out.push_back(std::move(g).value());
        }
        return Status::OK();
      },
      &budget);
  if (!status.ok()) {
    if (IsMissingTable(status)) return out;
    return status;
  }
  return out;  // in seg order: CheckNextSegment refused any other
}

StatusOr<ClaimedSegment> ClaimSegment(net::Session& s, const std::string& keyspace, const std::string& dataset,
                                      const NewSegment& seg) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    auto read = ReadSegRows(s, keyspace, dataset);
    if (read.status().code() == Status::Code::kUnsupported) {
      // The read's budget (store/catalog.h): rows with long source texts
      // can pass its bytes before kMaxSegments rows. Either way the dataset
      // cannot be read whole with one more segment.
      return Status::Unsupported(
          fmt::format("dataset '{}' in keyspace '{}' holds more segment rows than cqlstream reads: ingest into "
                      "another dataset ({})",
                      dataset, keyspace, read.status().message()));
    }
    CQLS_ASSIGN_OR_RETURN(auto rows, std::move(read));
    if (static_cast<int64_t>(rows.size()) >= kMaxSegments) {
      return Status::Unsupported(fmt::format(
          "dataset '{}' in keyspace '{}' holds {} segments, the most a dataset may hold: ingest into another dataset",
          dataset, keyspace, rows.size()));
    }
    int32_t next = 0;
    for (const auto& g : rows) {
      if (g.seg == INT32_MAX) {
        return Status::Corruption(
            fmt::format("dataset '{}' in keyspace '{}' holds segment {}: no segment can follow it", dataset,
                        keyspace, g.seg));
      }
      next = std::max(next, g.seg + 1);
    }
    const int64_t now = NowMillis();
    net::Statement st = net::Statement::Query(
        fmt::format("INSERT INTO {}.segments (dataset, seg, split, source_id, source, fingerprint, count, bytes, "
                    "max_size, next_pos, state, created, updated) VALUES (?, ?, ?, ?, ?, ?, 0, 0, 0, 0, 'open', ?, ?) "
                    "IF NOT EXISTS",
                    keyspace),
        {Value::Text(dataset), Value::Int(next), Value::Text(seg.split), Value::Text(seg.source_id),
         Value::Text(seg.source), Value::Text(seg.fingerprint), Value::FromTimestamp(Timestamp{now}),
         Value::FromTimestamp(Timestamp{now})});
    st.consistency = cql::Consistency::kLocalQuorum;
    st.timeout = std::chrono::milliseconds(30000);
    auto r = s.Execute(st);
    if (!r.ok()) return r.status().WithContext("claiming a segment");
    const cql::Rows* rr = r->rows();
    bool applied = false;
    if (rr != nullptr && rr->row_count() > 0) {
      auto v = rr->Get<bool>(0, 0);
      applied = v.ok() && *v;
    }
    if (!applied) continue;
    ClaimedSegment out;
    out.seg = next;
    // Our timestamps must start above the transaction's own.
    CQLS_ASSIGN_OR_RETURN(auto after, ReadSegRows(s, keyspace, dataset));
    for (const auto& g : after) {
      if (g.seg == next) out.writetime = g.writetime;
    }
    return out;
  }
  return Status::Internal("could not claim a segment number after 1000 attempts");
}

Status SupersedeSegment(net::Session& s, const std::string& keyspace, const std::string& dataset, const SegRow& g,
                        cql::Consistency consistency) {
  net::Statement st = net::Statement::Query(
      fmt::format("UPDATE {}.segments SET state = 'sealed', updated = ? WHERE dataset = ? AND seg = ?", keyspace),
      {Value::FromTimestamp(Timestamp{NowMillis()}), Value::Text(dataset), Value::Int(g.seg)});
  st.consistency = consistency;
  st.idempotent = true;
  st.default_timestamp = std::max(NowMicros(), g.writetime + 1);
  auto r = s.Execute(st);
  return r.status();
}

StatusOr<SegmentCommitStatements> PrepareSegmentCommit(net::Session& s, const std::string& keyspace) {
  SegmentCommitStatements p;
  const std::string set = "count = ?, bytes = ?, max_size = ?, size_hist = ?, next_pos = ?, updated = ?";
  CQLS_ASSIGN_OR_RETURN(
      p.update, s.Prepare(fmt::format("UPDATE {}.segments SET {} WHERE dataset = ? AND seg = ?", keyspace, set)));
  CQLS_ASSIGN_OR_RETURN(p.seal, s.Prepare(fmt::format("UPDATE {}.segments SET {}, state = 'sealed' WHERE dataset = ? "
                                                      "AND seg = ?",
                                                      keyspace, set)));
  return p;
}

net::Statement SegmentCommitStatement(const SegmentCommitStatements& p, const std::string& dataset, int32_t seg,
                                      const Committed& c, bool seal, int64_t timestamp_us, int64_t now_ms) {
  net::Statement st = net::Statement::Bound(
      seal ? p.seal : p.update,
      {Value::Int(static_cast<int32_t>(c.count)), Value::Bigint(c.bytes), Value::Bigint(c.max_size),
       Value::List(HistValue(c.hist)), Value::Bigint(c.next_pos), Value::FromTimestamp(Timestamp{now_ms}),
       Value::Text(dataset), Value::Int(seg)});
  st.idempotent = true;  // an explicit timestamp makes a repeated write a no-op
  st.default_timestamp = timestamp_us;
  return st;
}

}  // namespace cqlstream::store
