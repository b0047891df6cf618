// Copyright (c) cqlstream authors.
//
// The loader engine's request side for attached datasets (loader_impl.h,
// store/attached.h). One attempt at an attached sample (seg, idx) is two
// single-partition, token-aware, idempotent reads:
//   1. SELECT seg, idx, key FROM ks.k_<dataset> WHERE seg = ? AND idx = ? (the key
//      snapshot: the sample's foreign key; skipped once the task knows it,
//      and in every later epoch or Fetch of the loader once the key is in
//      its ForeignKeyCache, loader/foreign_key_cache.h). Samples issued
//      together whose keys are not known share one lookup
//      (KeyLookupManyCql: `idx IN ?`, grouped by IssueFirst as coalesced
//      reads are); each found key goes on to its own step 2.
//   2. AttachedTable::DataReadCql(split) bound with that key      (the row)
//      on the table the segment's snapshot was taken from (its segment
//      row's source; the catalog's table of the split when none is recorded)
// Each answer names what it answers (the seg and idx; the key, checked with
// the column count by a loader::ForeignGroupSink of one member), so that an
// answer a server sends twice, or late, on a stream id a newer request
// reuses is refused (docs/security.md: what the check cannot tell apart).
// Both run under the attempt that LaunchOne started: the window, the
// attempt timeout, hedges and retries count the sample once, and the
// attempt's latency spans both reads. The data cell lands straight in the
// sample's slot (a target dataset's data is held until the target's length
// is known: the slot holds data then target). A missing snapshot row or
// foreign row is a per-sample NotFound naming the sample and the table;
// a malformed one is Corruption (store/attached_row.h); either goes through
// the same retry and skip-or-raise handling as a native sample's error.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "loader/attached_sink.h"
#include "loader/foreign_group_sink.h"
#include "loader/loader_impl.h"

namespace cqlstream {

using loader_impl::AttachedReads;
using loader_impl::Clock;
using loader_impl::Launch;
using loader_impl::Task;

using loader_impl::AttachedSink;

// The statements and row checks of an attached dataset: the key lookup, and
// the data read of every table that committed segments were snapshot from
// (Fetch may ask for any split's keys).
Status Loader::Impl::PrepareAttached() {
  auto a = std::make_unique<AttachedReads>();
  CQLS_ASSIGN_OR_RETURN(a->table, store::AttachedTable::FromSource(ds));
  CQLS_ASSIGN_OR_RETURN(a->key_type, store::AttachedKeyType(a->table.key_type));
  CQLS_ASSIGN_OR_RETURN(store::AttachedLabelType label_type, store::ParseAttachedLabelType(a->table.label_type));
  Status kind = store::CheckLabelKind(a->table.label_type, ds.label_kind);
  if (!kind.ok()) {
    return Status::Corruption(fmt::format("attached dataset '{}': {}", ds.name, kind.message()));
  }
  a->snapshot_table = ds.keyspace + "." + store::KeyTableName(ds.name);
  std::map<int32_t, int64_t> counts;
  for (const auto& g : ds.segments) {
    if (g.count > 0) counts[g.seg] = g.count;
  }
  a->keys = std::make_unique<loader::ForeignKeyCache>(std::move(counts), loader_impl::kForeignKeyCacheBytes);
  CQLS_ASSIGN_OR_RETURN(a->key_stmt, session->Prepare(store::KeyLookupCql(ds.keyspace, ds.name)));
  if (o.coalesce != 1) {
    CQLS_ASSIGN_OR_RETURN(a->key_group_stmt, session->Prepare(store::KeyLookupManyCql(ds.keyspace, ds.name)));
  }
  // One name -> index map for the dataset, shared by every split's checks.
  const auto class_names = std::make_shared<const store::ClassNameIndex>(ds.class_names);
  for (const auto& g : ds.segments) {
    if (g.count <= 0) continue;
    // The table the segment's snapshot was taken from (store::AttachedSegmentTable:
    // an old snapshot's keys are never looked up in a newer table).
    CQLS_ASSIGN_OR_RETURN(const std::string table, store::AttachedSegmentTable(ds, a->table, g));
    auto it = a->splits.find(table);
    if (it == a->splits.end()) {
      // The data read of the snapshot's table (the catalog's columns).
      store::AttachedTable read = a->table;
      read.tables[g.split] = table;
      AttachedReads::Split sp;
      CQLS_ASSIGN_OR_RETURN(sp.data_stmt, session->Prepare(read.DataReadCql(g.split)));
      sp.columns = read.label_column.empty() ? 2 : 3;
      if (o.coalesce != 1) {
        CQLS_ASSIGN_OR_RETURN(sp.data_group_stmt, session->Prepare(read.DataReadManyCql(g.split)));
      }
      CQLS_ASSIGN_OR_RETURN(auto ks_table, store::SplitTableName(table));
      sp.keyspace = ks_table.first;
      sp.row.label_kind = ds.label_kind;
      sp.row.label_type = label_type;
      sp.row.class_names = class_names;
      sp.row.classes = ds.class_names.empty() ? -1 : static_cast<int64_t>(ds.class_names.size());
      sp.row.table = table;
      sp.row.keep_data = true;  // used only for a target dataset's data (AttachedSink)
      it = a->splits.emplace(table, std::move(sp)).first;
    }
    a->by_seg[g.seg] = &it->second;
  }
  attached = std::move(a);
  return Status::OK();
}

void Loader::Impl::LaunchAttached(const std::shared_ptr<Task>& t, int attempt, int plan_offset,
                                  Clock::time_point sent) {
  std::optional<Value> known;
  {
    MutexLock lock(&mu);
    if (t->foreign_key) known = *t->foreign_key;
  }
  if (!known) {
    // Looked up by an earlier epoch or Fetch of this loader: the committed
    // snapshot row has not changed since (checked again as it was then).
    std::string cached;
    if (attached->keys->Find(t->key, &cached)) {
      const std::span<const uint8_t> cell(reinterpret_cast<const uint8_t*>(cached.data()), cached.size());
      StatusOr<Value> key = store::SnapshotKeyCell(t->key, 1, cell, attached->key_type, attached->snapshot_table);
      if (!key.ok()) {
        OnAttachedDone(t, attempt, nullptr, sent, key.status());
        return;
      }
      known = std::move(*key);
    }
  }
  if (known) {
    LaunchForeignRead(t, attempt, plan_offset, sent, *known);
    return;
  }
  {
    MutexLock lock(&mu);
    m_key_lookups++;
  }
  net::Statement st =
      net::Statement::Bound(attached->key_stmt, {Value::Int(KeySegment(t->key)), Value::Int(KeyIndex(t->key))});
  loader_impl::ReadSettings(st, AttemptTimeout(), plan_offset, &no_retry);
  session->ExecuteAsync(std::move(st), [this, t, attempt, plan_offset, sent](StatusOr<net::ResultSet> r) {
    if (!r.ok()) {
      OnAttachedDone(t, attempt, nullptr, sent, r.status());
      return;
    }
    const cql::Rows* rows = r->rows();
    StatusOr<Value> key = store::SnapshotKey(t->key, rows, attached->key_type, attached->snapshot_table);
    ContinueWithKey(t, attempt, plan_offset, sent, std::move(key),
                    rows != nullptr && rows->row_count() > 0 && rows->column_count() > store::kSnapshotColKey
                        ? rows->cell(0, store::kSnapshotColKey)
                        : std::nullopt);
  });
}

void Loader::Impl::ContinueWithKey(const std::shared_ptr<Task>& t, int attempt, int plan_offset,
                                   Clock::time_point sent, StatusOr<Value> key, std::optional<cql::ByteView> cell,
                                   KnownKeys* collect) {
  if (!key.ok()) {
    OnAttachedDone(t, attempt, nullptr, sent, key.status());
    return;
  }
  // A good key (one row, one non-null cell that decodes): kept for later.
  if (cell) attached->keys->Add(t->key, *cell);
  bool stale = false;
  {
    MutexLock lock(&mu);
    stale = closed || t->resolved;
    if (!stale && !t->foreign_key) t->foreign_key = std::make_unique<Value>(*key);
  }
  if (stale) {
    OnAttachedDone(t, attempt, nullptr, sent, Status::Cancelled("the sample was settled by another attempt"));
    return;
  }
  if (collect != nullptr) {
    // Grouped by the bytes the IN list binds (a key that does not encode,
    // e.g. a text that is not UTF-8, is read alone: its error is its own).
    cql::Bytes bound;
    if (EncodeCell(*key, attached->key_type, &bound).ok()) {
      collect->tasks.push_back(t);
      collect->attempts.push_back(attempt);
      collect->keys.emplace_back(std::string(bound.begin(), bound.end()), std::move(*key));
      return;
    }
  }
  LaunchForeignRead(t, attempt, plan_offset, sent, *key);
}

void Loader::Impl::LaunchKeyGroup(std::vector<std::shared_ptr<Task>> tasks, std::vector<int> attempts,
                                  Clock::time_point sent) {
  std::vector<SampleKey> keys;
  keys.reserve(tasks.size());
  for (const auto& t : tasks) keys.push_back(t->key);
  session->ExecuteAsync(KeyGroupStatement(keys), [this, tasks = std::move(tasks), attempts = std::move(attempts),
                                                  sent](StatusOr<net::ResultSet> r) {
    OnKeyGroupDone(tasks, attempts, sent, std::move(r));
  });
}

net::Statement Loader::Impl::KeyGroupStatement(const std::vector<SampleKey>& keys) {
  std::vector<Value> idx;
  idx.reserve(keys.size());
  for (SampleKey k : keys) idx.push_back(Value::Int(KeyIndex(k)));
  net::Statement st =
      net::Statement::Bound(attached->key_group_stmt, {Value::Int(KeySegment(keys[0])), Value::List(std::move(idx))});
  loader_impl::ReadSettings(st, AttemptTimeout(), 0, &no_retry);
  st.page_size = 0;  // unpaged: one row of one key per sample at most
  st.routing_key = loader_impl::RoutingKeyOf(keys[0]);
  st.routing_keyspace = ds.keyspace;
  MutexLock lock(&mu);
  m_key_lookups++;
  return st;
}

StatusOr<std::map<int32_t, std::optional<cql::ByteView>>> Loader::Impl::KeyGroupAnswer(
    const std::vector<SampleKey>& keys, const StatusOr<net::ResultSet>& r) const {
  if (!r.ok()) return r.status();
  const int32_t seg = KeySegment(keys[0]);
  const cql::Rows* rows = r->rows();
  if (rows == nullptr || rows->column_count() != 3) {
    return Status::Corruption(fmt::format("the key lookup of {} samples of segment {} in the key snapshot {} answered "
                                          "no rows result of three columns",
                                          keys.size(), seg, attached->snapshot_table));
  }
  std::vector<int32_t> asked;
  asked.reserve(keys.size());
  for (SampleKey k : keys) asked.push_back(KeyIndex(k));
  std::vector<store::SnapshotRowCells> cells(static_cast<size_t>(std::max(rows->row_count(), 0)));
  for (int32_t i = 0; i < rows->row_count(); ++i) {
    cells[static_cast<size_t>(i)] = {rows->cell(i, 0), rows->cell(i, 1), rows->cell(i, 2)};
  }
  return store::GroupedSnapshotKeys(seg, asked, cells, attached->snapshot_table);
}

void Loader::Impl::LookAheadKeys(Epoch* e, std::vector<std::vector<SampleKey>>* out) {
  // Keys the cache can no longer keep would be looked up twice. The
  // requests in flight follow the window (an eighth of it, at most
  // kLookAheadRequests), so that a window cut for congestion cuts them too.
  const int max_requests = std::clamp(ctl.window() / 8, 1, loader_impl::kLookAheadRequests);
  if (look_ahead_in_flight >= max_requests || attached->keys->rejected() > 0) return;
  const uint64_t total = e->batches.samples();
  const uint64_t span = std::max<uint64_t>(loader_impl::kLookAheadMin,
                                           loader_impl::kLookAheadWindows * static_cast<uint64_t>(ctl.window()));
  e->keys_ahead = std::max(e->keys_ahead, e->next_seq);
  // Asked for in runs of at least half the span, so that groups fill.
  if (e->keys_ahead >= total || e->keys_ahead >= e->next_seq + span / 2) return;
  const uint64_t limit = std::min(total, e->next_seq + span);
  loader::SegmentGrouper<SampleKey> groups(loader::CoalesceCap(o.coalesce, 4 * loader::kMaxCoalesce));
  while (e->keys_ahead < limit && look_ahead_in_flight + static_cast<int>(out->size()) < max_requests) {
    const SampleKey key = source.KeyAt(e->perm(e->plan.PositionAt(e->keys_ahead++)));
    if (attached->keys->Has(key)) continue;
    const std::optional<int64_t> token = loader_impl::TokenOf(key);
    const uint64_t replicas = token ? session->ReplicaSetOf(ds.keyspace, *token) : 0;
    if (auto full = groups.Add(KeySegment(key), key, 0, replicas)) out->push_back(std::move(*full));
  }
  for (auto& g : groups.TakeAll()) out->push_back(std::move(g));
  look_ahead_in_flight += static_cast<int>(out->size());
}

// The answer only fills the key cache: a sample whose key it does not
// bring (absent, malformed, an answer that is not what was asked, a failed
// request) looks its key up itself when it is issued, where any error is
// named for it. A failed request is still a congestion signal (a timeout or
// an overload cuts the window, which bounds the look-ahead too).
void Loader::Impl::LaunchLookAhead(std::vector<SampleKey> keys) {
  net::Statement st = KeyGroupStatement(keys);
  const auto sent = Clock::now();
  session->ExecuteAsync(std::move(st), [this, keys = std::move(keys), sent](StatusOr<net::ResultSet> r) {
    auto found = KeyGroupAnswer(keys, r);
    if (found.ok()) {
      const int32_t seg = KeySegment(keys[0]);
      for (const auto& [i, cell] : *found) {
        const SampleKey k = MakeKey(seg, i);
        if (cell && store::SnapshotKeyCell(k, 1, cell, attached->key_type, attached->snapshot_table).ok()) {
          attached->keys->Add(k, *cell);
        }
      }
    }
    MutexLock lock(&mu);
    look_ahead_in_flight--;
    if (!r.ok() && !closed) OnRequestFailed(r.status(), sent);
  });
}

// Each sample of the group goes on as after its own lookup: found, to its
// foreign read; not found, a failed attempt (the retry path looks it up
// alone). An answer that is not what was asked (a row of a sample not in
// the group, of another segment, twice the same sample, a malformed seg or
// idx cell) fails every sample's attempt: none of its keys is used.
void Loader::Impl::OnKeyGroupDone(const std::vector<std::shared_ptr<Task>>& tasks, const std::vector<int>& attempts,
                                  Clock::time_point sent, StatusOr<net::ResultSet> r) {
  std::vector<SampleKey> keys;
  keys.reserve(tasks.size());
  for (const auto& t : tasks) keys.push_back(t->key);
  auto answer = KeyGroupAnswer(keys, r);
  const Status err = answer.status();
  std::map<int32_t, std::optional<cql::ByteView>> found;  // by idx
  if (answer.ok()) found = std::move(*answer);
  KnownKeys known;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const std::shared_ptr<Task>& t = tasks[i];
    if (!err.ok()) {
      OnAttachedDone(t, attempts[i], nullptr, sent, err, /*count_request=*/i == 0);
      continue;
    }
    auto it = found.find(KeyIndex(t->key));
    const int32_t row_count = it == found.end() ? 0 : 1;
    const std::optional<cql::ByteView> cell = it == found.end() ? std::nullopt : it->second;
    ContinueWithKey(t, attempts[i], 0, sent,
                    store::SnapshotKeyCell(t->key, row_count, cell, attached->key_type, attached->snapshot_table),
                    cell, &known);
  }
  // Looked up together, read together.
  LaunchKnownAttached(std::move(known.tasks), std::move(known.attempts), std::move(known.keys), sent);
}

void Loader::Impl::LaunchForeignRead(const std::shared_ptr<Task>& t, int attempt, int plan_offset,
                                     Clock::time_point sent, const Value& key) {
  auto split = attached->by_seg.find(KeySegment(t->key));
  if (split == attached->by_seg.end()) {
    // Init prepared every committed segment's split, and keys are committed.
    OnAttachedDone(t, attempt, nullptr, sent,
                   Status::Internal(fmt::format("sample {}: its segment has no attached table", FormatKey(t->key))));
    return;
  }
  // The answer's rows name their key first and pass through a group of
  // one (loader/foreign_group_sink.h): a row of another key (an answer the
  // server meant for another request on this stream id) fails the read
  // before any of its bytes reach the slot.
  cql::Bytes bound;
  if (Status enc = EncodeCell(key, attached->key_type, &bound); !enc.ok()) {
    OnAttachedDone(t, attempt, nullptr, sent,
                   enc.WithContext(fmt::format("sample {}: its foreign key {}", FormatKey(t->key),
                                               loader_impl::KeyText(key))));
    return;
  }
  auto sink = std::make_shared<AttachedSink>(this, t, attempt, split->second, loader_impl::KeyText(key));
  auto one = std::make_shared<loader::ForeignGroupSink>(
      std::vector<loader::ForeignGroupSink::Member>{{std::string(bound.begin(), bound.end()), sink}},
      split->second->columns);
  net::Statement st = net::Statement::Bound(split->second->data_stmt, {key});
  loader_impl::ReadSettings(st, AttemptTimeout(), plan_offset, &no_retry);
  st.sink = [one](int) { return one; };
  session->ExecuteAsync(std::move(st), [this, t, attempt, sink, one, sent](StatusOr<net::ResultSet> r) {
    Status err = r.ok() ? one->error() : r.status();
    if (r.ok() && !err.ok()) {
      err = err.WithContext(
          fmt::format("sample {} (key {}) in {}", FormatKey(t->key), sink->row.key(), sink->row.options().table));
    }
    if (err.ok()) sink->row.OnRowsBegin(one->rows_of(0));
    OnAttachedDone(t, attempt, sink, sent, err);
  });
}

// The attempt of `s` takes ownership of the sample's slot (`payload` bytes:
// data, and a target's); a target dataset's kept data is copied in first.
Status Loader::Impl::ClaimAttached(AttachedSink& s, int64_t payload) {
  Task& t = *s.task;
  if (!t.slot) {
    CQLS_RETURN_IF_ERROR(ReserveSlot(t, payload));
  } else if (t.size != payload) {
    return Status::Corruption(fmt::format("sample {} changed size between attempts ({} then {} bytes)",
                                          FormatKey(t.key), t.size, payload));
  }
  t.owner = s.attempt;
  if (s.target) {
    const auto kept = s.row.kept_data();
    if (kept.size() > static_cast<size_t>(t.size)) return Status::Internal("kept data larger than its slot");
    if (!kept.empty()) std::memcpy(t.slot.data, kept.data(), kept.size());
  }
  return Status::OK();
}

std::span<uint8_t> Loader::Impl::AttachedDestination(AttachedSink& s, int32_t col, int32_t size) {
  if (col == store::kAttachedColData) {
    s.row.OnDataSize(0, size);
  } else {
    s.row.OnTargetSize(0, size);
  }
  MutexLock lock(&mu);
  Task& t = *s.task;
  s.offered = true;
  if (t.resolved || closed || !s.err.ok()) return {};
  if (!s.row.status().ok()) {
    s.err = s.row.status();
    return {};
  }
  if (col != store::kAttachedColData && s.row.data_size() < 0) {
    // A target goes after the data in the slot: without a data cell (a null
    // one fails the row itself) there is no offset to place it at.
    s.err = Status::Corruption(fmt::format("sample {}: its target came without a data cell in {}", FormatKey(t.key),
                                           s.row.options().table));
    return {};
  }
  if (t.owner == -1) {
    s.err = ClaimAttached(s, s.row.payload_size());
    if (!s.err.ok()) return {};
  }
  if (t.owner != s.attempt) return {};  // a duplicate (hedge) answer: dropped
  const int64_t at = col == store::kAttachedColData ? 0 : s.row.data_size();
  s.hold.Take();  // until the cell's OnCell or OnCellAbandoned
  return {t.slot.data + at, static_cast<size_t>(size)};
}

// What is wrong with the successful foreign read of `s`, if anything; for
// the owner, the sample's fields.
Status Loader::Impl::CheckAttachedAnswer(AttachedSink& s) {
  Task& t = *s.task;
  if (!s.err.ok()) return s.err;
  CQLS_RETURN_IF_ERROR(s.row.Finish());
  if (t.owner == -1 && !s.offered) {
    // Nothing was placed while the answer streamed in (an empty data cell,
    // or a target dataset's sample without a target): claimed here.
    CQLS_RETURN_IF_ERROR(ClaimAttached(s, s.row.payload_size()));
    const auto target = s.row.kept_target();
    if (!target.empty()) std::memcpy(t.slot.data + s.row.data_size(), target.data(), target.size());
  }
  if (t.owner != s.attempt) return Status::OK();
  if (t.size != s.row.payload_size()) {
    return Status::Corruption(fmt::format("sample {} changed size between attempts ({} then {} bytes)",
                                          FormatKey(t.key), t.size, s.row.payload_size()));
  }
  t.statics.image_size = s.row.image_size();
  t.statics.label = s.row.label();
  t.statics.labels = s.row.labels();
  attached_read++;
  attached_max_size = std::max(attached_max_size, t.size);
  return Status::OK();
}

void Loader::Impl::OnAttachedDone(const std::shared_ptr<Task>& t, int attempt, const std::shared_ptr<AttachedSink>& s,
                                  Clock::time_point sent, const Status& r, bool count_request) {
  std::vector<Launch> launches;
  {
    MutexLock lock(&mu);
    if (!r.ok() && s) {
      // As for a native read (OnAttemptDone): nothing is settled while the
      // failed read's cell may still be written into the slot.
      EndSink(*s);
      if (ParkWhileWriting({t}, [s] { return s->hold.held(); }, [this, t, attempt, s, sent, r, count_request] {
            OnAttachedDone(t, attempt, s, sent, r, count_request);
          })) {
        return;
      }
    }
    SettleAttached(t, attempt, s, sent, r, count_request);
    if (closed) return;
    Refill(&launches);
  }
  Start(std::move(launches));
}

// As EndSink of a native attempt (loader_requests.cc).
void Loader::Impl::EndSink(AttachedSink& s) {
  if (s.err.ok()) s.err = Status::Cancelled("the attempt ended");
}

void Loader::Impl::SettleAttached(const std::shared_ptr<Task>& t, int attempt, const std::shared_ptr<AttachedSink>& s,
                                  Clock::time_point sent, const Status& r, bool count_request, bool grouped) {
  t->outstanding--;
  // A failed foreign read may still be streaming into `s` (a timeout
  // mid-frame): its late cells must not claim the sample (OnAttemptDone).
  if (!r.ok() && s) EndSink(*s);
  if (closed) return;
  if (!r.ok() && count_request) OnRequestFailed(r, sent);
  const auto latency = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - sent);
  if (t->resolved) {
    if (r.ok()) m_dupes++;
    return;
  }
  Status err = r.ok() && s ? CheckAttachedAnswer(*s) : r;
  if (!err.ok() && grouped) m_group_failures++;
  if (err.ok() && t->owner != attempt) {
    // Another attempt owns the data (or owned it and failed while this
    // one was discarding its copy).
    m_dupes++;
    if (t->owner != -1 || t->outstanding > 0) return;
    err = Status::ConnectionLost(fmt::format("sample {}: the attempt holding its data failed", FormatKey(t->key)));
  }
  Settle(t, attempt, latency, err);
}

}  // namespace cqlstream
