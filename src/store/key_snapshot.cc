// Copyright (c) cqlstream authors.
#include "store/key_snapshot.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <set>
#include <utility>

#include "net/routing/token_ring.h"
#include "store/key_scan_order.h"
#include "store/scan.h"
#include "store/schema.h"
#include "store/segments_table.h"
#include "util/measure.h"
#include "util/mutex.h"

namespace cqlstream::store {
namespace {

// The batches of one page: the worker waits for all of them before it asks
// for the next page (the bound on keys in flight). Callbacks run on I/O
// threads and only count down.
class PageBatches {
 public:
  void Add() {
    MutexLock l(&mu_);
    ++pending_;
  }
  void Done(const Status& st) {
    MutexLock l(&mu_);
    if (!st.ok() && first_.ok()) first_ = st;
    if (--pending_ == 0) cv_.SignalAll();
  }
  Status Wait() {
    MutexLock l(&mu_);
    while (pending_ > 0) cv_.Wait(&mu_);
    return first_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int pending_ GUARDED_BY(mu_) = 0;
  Status first_ GUARDED_BY(mu_);
};

class SnapshotWriter {
 public:
  SnapshotWriter(net::Session& s, std::string keyspace, std::string dataset, const AttachedTable& a,
                 std::string split, const KeySnapshotOptions& o)
      : s_(s), ks_(std::move(keyspace)), dataset_(std::move(dataset)), a_(a), split_(std::move(split)), o_(o) {}

  Status Prepare() {
    CQLS_ASSIGN_OR_RETURN(scan_, s_.Prepare(KeyScanCql(a_, split_)));
    CQLS_ASSIGN_OR_RETURN(insert_, s_.Prepare(fmt::format("INSERT INTO {}.{} (seg, idx, key) VALUES (?, ?, ?)", ks_,
                                                          KeyTableName(dataset_))));
    return Status::OK();
  }

  Status ScanRange(const routing::TokenRange& r) {
    net::Statement st = net::Statement::Bound(scan_, {Value::Bigint(r.start), Value::Bigint(r.end)});
    st.idempotent = true;
    st.consistency = cql::Consistency::kLocalQuorum;
    st.page_size = o_.page_size;
    // Pages must be this scan's: its columns, rows of its range in ring
    // order (store/key_scan_order.h), or no key of theirs is written.
    st.check_result_columns = true;
    KeyScanOrder order(r.start, r.end, a_.tables.at(split_));
    bool out_of_order = false;  // KeyScanOrder's refusals name the range already
    Status scanned = s_.ForEachPage(st, [&](const cql::Rows& rows) -> Status {
      if (o_.stop != nullptr && o_.stop->load()) return Status::Cancelled("interrupted");
      if (Status in_order = order.Page(rows); !in_order.ok()) {
        out_of_order = true;
        return in_order;
      }
      return OnPage(rows);
    });
    if (scanned.ok() || out_of_order) return scanned;
    // A page refused for its columns, a server error: name the range.
    return scanned.WithContext(
        fmt::format("the key scan of {} over tokens ({}, {}]", a_.tables.at(split_), r.start, r.end));
  }

  StatusOr<KeySnapshot> Result(double seconds) {
    KeySnapshot out;
    out.keys = next_.load();
    out.seconds = seconds;
    MutexLock l(&mu_);
    for (size_t j = 0; j < claimed_.size(); ++j) {
      const int64_t first = static_cast<int64_t>(j) * o_.segment_capacity;
      const int64_t count = std::clamp<int64_t>(out.keys - first, 0, o_.segment_capacity);
      if (count > 0) {
        out.segments.push_back({claimed_[j], count});
      } else {
        out.empty_claims.push_back(claimed_[j]);
      }
    }
    out.label_texts.assign(labels_.begin(), labels_.end());
    return out;
  }

 private:
  // The segment of the j-th `segment_capacity` keys, claimed on first use.
  StatusOr<int32_t> SegFor(int64_t j) {
    MutexLock l(&mu_);
    while (static_cast<int64_t>(claimed_.size()) <= j) {
      const NewSegment seg{split_, a_.SourceId(split_), a_.tables.at(split_), ""};
      CQLS_ASSIGN_OR_RETURN(ClaimedSegment c, ClaimSegment(s_, ks_, dataset_, seg));
      claimed_.push_back(c.seg);
    }
    return claimed_[static_cast<size_t>(j)];
  }

  Status AddLabel(const cql::Rows& rows, int32_t i) {
    std::optional<cql::ByteView> cell = rows.cell(i, 2);
    if (!cell) return Status::OK();
    std::string text(reinterpret_cast<const char*>(cell->data()), cell->size());
    MutexLock l(&mu_);
    if (labels_.contains(text)) return Status::OK();
    label_bytes_ += text.size();
    labels_.insert(std::move(text));
    if (labels_.size() > kMaxClasses || label_bytes_ > kMaxClassListBytes) {
      return Status::InvalidArgument(fmt::format(
          "label column '{}' of {} holds more than {} distinct texts ({} bytes at most): too many to be class names",
          a_.label_column, a_.tables.at(split_), kMaxClasses, kMaxClassListBytes));
    }
    return Status::OK();
  }

  void Send(std::vector<net::Statement>* batch, const std::shared_ptr<PageBatches>& waiter) {
    waiter->Add();
    s_.ExecuteBatchAsync(cql::BatchType::kUnlogged, *batch, cql::Consistency::kLocalQuorum,
                         [waiter](const StatusOr<net::ResultSet>& r) { waiter->Done(r.status()); });
    batch->clear();
  }

  Status OnPage(const cql::Rows& rows) {
    const int32_t n = rows.row_count();
    if (n == 0) return Status::OK();
    const bool text_label = a_.label_type == "text";
    const int64_t first = next_.fetch_add(n);
    auto waiter = std::make_shared<PageBatches>();
    std::vector<net::Statement> batch;
    size_t batch_bytes = 0;
    Status st;
    for (int32_t i = 0; i < n && st.ok(); ++i) {
      std::optional<cql::ByteView> key = rows.cell(i, 1);  // after its token
      if (!key) {
        st = Status::Corruption(fmt::format("{} returned a row without key", a_.tables.at(split_)));
        break;
      }
      if (text_label && !(st = AddLabel(rows, i)).ok()) break;
      const int64_t g = first + i;
      auto seg = SegFor(g / o_.segment_capacity);
      if (!seg.ok()) {
        st = seg.status();
        break;
      }
      const auto idx = static_cast<int32_t>(g % o_.segment_capacity);
      net::Statement ins = net::Statement::Bound(
          insert_, {Value::Int(*seg), Value::Int(idx),
                    Value::Blob(std::string_view(reinterpret_cast<const char*>(key->data()), key->size()))});
      ins.idempotent = true;
      batch.push_back(std::move(ins));
      batch_bytes += key->size();
      if (static_cast<int>(batch.size()) >= o_.batch_rows || batch_bytes >= o_.batch_bytes) {
        Send(&batch, waiter);
        batch_bytes = 0;
      }
    }
    if (st.ok() && !batch.empty()) Send(&batch, waiter);
    Status sent = waiter->Wait();  // also after an error: no callback outlives the page
    if (!st.ok()) return st;
    if (!sent.ok()) return sent.WithContext(fmt::format("writing {}.{}", ks_, KeyTableName(dataset_)));
    const int64_t done = written_.fetch_add(n) + n;
    if (o_.on_progress) {
      MutexLock l(&progress_mu_);
      o_.on_progress(done);
    }
    return Status::OK();
  }

  net::Session& s_;
  const std::string ks_, dataset_;
  const AttachedTable& a_;
  const std::string split_;
  const KeySnapshotOptions& o_;
  net::PreparedPtr scan_, insert_;
  std::atomic<int64_t> next_{0};
  std::atomic<int64_t> written_{0};
  Mutex mu_;
  std::vector<int32_t> claimed_ GUARDED_BY(mu_);
  std::set<std::string> labels_ GUARDED_BY(mu_);
  size_t label_bytes_ GUARDED_BY(mu_) = 0;
  Mutex progress_mu_;
};

}  // namespace

std::string KeyScanCql(const AttachedTable& a, const std::string& split) {
  const std::string key = QuoteIdentifier(a.key_column);
  std::string cols = fmt::format("token({}), {}", key, key);
  if (a.label_type == "text") cols += ", " + QuoteIdentifier(a.label_column);
  return fmt::format("SELECT {} FROM {} WHERE token({}) > ? AND token({}) <= ?", cols, a.QuotedTable(split), key, key);
}

StatusOr<KeySnapshot> WriteKeySnapshot(net::Session& s, const std::string& keyspace, const std::string& dataset,
                                       const AttachedTable& a, const std::string& split, const KeySnapshotOptions& o) {
  CQLS_RETURN_IF_ERROR(a.Validate());
  if (!a.tables.contains(split)) return Status::InvalidArgument(fmt::format("no table for split '{}'", split));
  if (o.segment_capacity < 1 || o.segment_capacity > (int64_t{1} << 31) - 1 || o.page_size < 1 || o.batch_rows < 1)
    return Status::InvalidArgument("key snapshot options out of range");
  const int concurrency = std::max(1, o.concurrency);
  const int hosts = std::max<int>(1, static_cast<int>(s.Hosts().size()));
  const int ranges = o.ranges > 0 ? o.ranges : 4 * hosts * concurrency;
  CQLS_ASSIGN_OR_RETURN(auto pieces, routing::SplitTokenRange(ranges));
  const auto start = std::chrono::steady_clock::now();
  SnapshotWriter w(s, keyspace, dataset, a, split, o);
  CQLS_RETURN_IF_ERROR(w.Prepare());
  Status st = ParallelFor(pieces.size(), concurrency, [&](size_t i) { return w.ScanRange(pieces[i]); }, o.stop);
  if (!st.ok()) return st.WithContext(fmt::format("scanning the keys of {}", a.tables.at(split)));
  return w.Result(SecondsSince(start));
}

}  // namespace cqlstream::store
