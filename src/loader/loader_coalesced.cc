// Copyright (c) cqlstream authors.
//
// The loader engine's coalesced reads (loader_impl.h, loader/coalesce.h):
// small samples of one segment and one replica set issued together share
// one request (`WHERE seg = ? AND idx IN ?`), sent to one of those replicas,
// which is one attempt of each of them; the
// answer's rows go to each sample's own AttemptSink, and each sample is
// settled on its own.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <set>

#include "loader/attempt_sink.h"
#include "loader/loader_impl.h"
#include "net/routing/murmur3.h"

namespace cqlstream {

using loader_impl::AttemptSink;
using loader_impl::Clock;
using loader_impl::Launch;
using loader_impl::RoutingKeyOf;
using loader_impl::Task;
using loader_impl::TokenOf;

namespace {

// An int cell's bytes (big-endian).
std::array<uint8_t, 4> IntCell(int32_t v) {
  return {static_cast<uint8_t>(v >> 24), static_cast<uint8_t>(v >> 16), static_cast<uint8_t>(v >> 8),
          static_cast<uint8_t>(v)};
}

}  // namespace

std::optional<cql::Bytes> loader_impl::RoutingKeyOf(SampleKey k) {
  const auto s = IntCell(KeySegment(k)), i = IntCell(KeyIndex(k));
  auto rk = routing::RoutingKey({std::span<const uint8_t>(s), std::span<const uint8_t>(i)});
  if (!rk.ok()) return std::nullopt;
  return cql::Bytes(rk->begin(), rk->end());
}

std::optional<int64_t> loader_impl::TokenOf(SampleKey k) {
  const auto s = IntCell(KeySegment(k)), i = IntCell(KeyIndex(k));
  auto t = routing::PartitionKeyToken({std::span<const uint8_t>(s), std::span<const uint8_t>(i)});
  if (!t.ok()) return std::nullopt;
  return *t;
}

bool Loader::Impl::CoalescibleKey(SampleKey k) const {
  if (!group_read_stmt) return false;
  auto it = seg_max_size.find(KeySegment(k));
  return it != seg_max_size.end() && loader::Coalescible(it->second, ds.chunk_size);
}

void Loader::Impl::IssueFirst(std::shared_ptr<Task> t, TaskGroups* g, std::vector<Launch>* out) {
  if (t->pack >= 0 && pack_read_stmt) {
    // A member of a pack: grouped with the pack's other members issued now.
    const int32_t seg = KeySegment(t->key), pack = t->pack;
    if (auto full = g->Add(seg, std::move(t), static_cast<size_t>(packed_layout->pack_size()), 0, pack)) {
      out->push_back(full->size() == 1 ? Launch::First(std::move((*full)[0])) : Launch::Group(std::move(*full)));
    }
    return;
  }
  if (attached) {
    if (t->foreign_key || attached->keys->Has(t->key)) {
      IssueKnownAttached(std::move(t), g, out);
      return;
    }
    // A sample whose foreign key is not known yet: its key lookup may be
    // grouped with others of its segment on the same replicas (the
    // snapshot's partitions are (seg, idx), as the data table's). The
    // answer is small: one key per sample (at most 64 KiB each).
    if (!attached->key_group_stmt) {
      out->push_back(Launch::First(std::move(t)));
      return;
    }
    const int32_t seg = KeySegment(t->key);
    const std::optional<int64_t> token = TokenOf(t->key);
    const uint64_t replicas = token ? session->ReplicaSetOf(ds.keyspace, *token) : 0;
    if (auto full = g->Add(seg, std::move(t), 0, replicas)) {
      out->push_back(full->size() == 1 ? Launch::First(std::move((*full)[0])) : Launch::Group(std::move(*full)));
    }
    return;
  }
  if (!CoalescibleKey(t->key)) {
    out->push_back(Launch::First(std::move(t)));
    return;
  }
  const int32_t seg = KeySegment(t->key);
  const size_t limit = loader::GroupLimitForSize(seg_max_size.at(seg));
  // Keys of one group live on the same replicas (loader/coalesce.h).
  const std::optional<int64_t> token = TokenOf(t->key);
  const uint64_t replicas = token ? session->ReplicaSetOf(ds.keyspace, *token) : 0;
  if (auto full = g->Add(seg, std::move(t), limit, replicas)) {
    // A group of one (a cap of 1) is a single read.
    out->push_back(full->size() == 1 ? Launch::First(std::move((*full)[0])) : Launch::Group(std::move(*full)));
  }
}

void Loader::Impl::FlushGroups(TaskGroups* g, std::vector<Launch>* out) {
  for (auto& group : g->TakeAll()) {
    if (group.size() == 1) {
      out->push_back(Launch::First(std::move(group[0])));
    } else {
      out->push_back(Launch::Group(std::move(group)));
    }
  }
}

void Loader::Impl::LaunchGroup(Launch l) {
  const auto now = Clock::now();
  // A key twice in one group (the end of one epoch and the start of the
  // next issued together, a Fetch of a key twice) is read alone the second
  // time: a row of the answer goes to one sample.
  std::vector<std::shared_ptr<Task>> tasks, repeated;
  std::vector<int> attempts;
  {
    std::vector<SampleKey> keys;
    for (const auto& t : l.group) keys.push_back(t->key);
    std::sort(keys.begin(), keys.end());
    if (std::adjacent_find(keys.begin(), keys.end()) != keys.end()) {
      std::vector<std::shared_ptr<Task>> unique;
      std::set<SampleKey> seen;
      for (auto& t : l.group) (seen.insert(t->key).second ? unique : repeated).push_back(std::move(t));
      l.group = std::move(unique);
    }
  }
  for (auto& t : repeated) LaunchOne(Launch::First(std::move(t)));
  if (l.group.size() == 1) {
    LaunchOne(Launch::First(std::move(l.group[0])));
    return;
  }
  {
    MutexLock lock(&mu);
    if (closed) return;
    for (auto& t : l.group) {
      if (t->resolved) continue;
      const int attempt = t->attempts++;
      watch.Add(Watch{now, t, attempt});
      t->outstanding++;
      tasks.push_back(t);
      attempts.push_back(attempt);
    }
    if (tasks.empty()) return;
    if (tasks.size() > 1 && !attached) {  // a group of which one is left unresolved shares nothing
      m_coalesced_requests++;
      m_coalesced_samples += static_cast<int64_t>(tasks.size());
      if (tasks[0]->pack >= 0) m_packed_requests++;
    }
  }
  if (attached) {
    LaunchAttachedGroup(std::move(tasks), std::move(attempts), now);
    return;
  }
  std::vector<Value> idx;
  std::vector<loader::CoalescedSink::Member> members;
  std::vector<std::shared_ptr<AttemptSink>> sinks;
  for (size_t i = 0; i < tasks.size(); ++i) {
    idx.push_back(Value::Int(KeyIndex(tasks[i]->key)));
    sinks.push_back(std::make_shared<AttemptSink>(this, tasks[i], attempts[i], false));
    members.push_back({tasks[i]->key, sinks.back()});
  }
  auto group = std::make_shared<loader::CoalescedSink>(std::move(members));
  // A pack group (every task of one pack: the grouper's key) reads the pack's
  // partition of p_<name>, the others the samples' partitions of d_<name>;
  // both answers carry the data read's columns (store/pack.h).
  const int32_t seg = KeySegment(tasks[0]->key), pack = tasks[0]->pack;
  const bool packed = pack >= 0 && pack_read_stmt != nullptr;
  net::Statement st =
      packed ? net::Statement::Bound(pack_read_stmt, {Value::Int(seg), Value::Int(pack), Value::List(std::move(idx))})
             : net::Statement::Bound(group_read_stmt, {Value::Int(seg), Value::List(std::move(idx))});
  st.idempotent = true;
  st.consistency = cql::Consistency::kLocalOne;
  st.page_size = 0;  // unpaged: bounded by PER PARTITION LIMIT, or by the pack (loader/coalesce.h)
  st.timeout = AttemptTimeout();
  st.retry = &no_retry;
  st.check_result_columns = true;  // as a single read's (net/result_columns.h)
  // (seg, pack) is a composite partition key of two ints, as (seg, idx) is.
  st.routing_key = RoutingKeyOf(packed ? MakeKey(seg, pack) : tasks[0]->key);
  st.routing_keyspace = ds.keyspace;
  st.sink = [group](int) { return group; };
  session->ExecuteAsync(std::move(st), [this, tasks, attempts, group, sinks, now](StatusOr<net::ResultSet> r) {
    OnGroupDone(tasks, attempts, group, sinks, now, std::move(r));
  });
}

// Each task of the group is settled as after a single read: its rows were
// passed to its own sink. A task the answer did not hold is missing (that
// attempt fails, and the normal retry path reads it alone). The read is
// sent unpaged, so only a server that pages it anyway leaves samples out
// for that reason; they take the same path (a failed attempt each).
void Loader::Impl::OnGroupDone(const std::vector<std::shared_ptr<Task>>& tasks, const std::vector<int>& attempts,
                               const std::shared_ptr<loader::CoalescedSink>& group,
                               const std::vector<std::shared_ptr<AttemptSink>>& sinks, Clock::time_point sent,
                               StatusOr<net::ResultSet> r) {
  std::vector<Launch> launches;
  {
    MutexLock lock(&mu);
    // As for a single read (OnAttemptDone): a failed request's late cells
    // must claim none of its samples, and the rest waits while one may still
    // be written into a slot.
    if (!r.ok()) {
      for (const auto& s : sinks) EndSink(*s);
      auto resume = [this, tasks, attempts, group, sinks, sent, err = r.status()] {
        OnGroupDone(tasks, attempts, group, sinks, sent, err);
      };
      if (ParkWhileWriting(tasks, [sinks] { return loader::AnyHeld(sinks); }, resume)) {
        return;
      }
    }
    for (const auto& t : tasks) t->outstanding--;
    if (closed) return;
    if (!r.ok()) OnRequestFailed(r.status(), sent);
    const auto latency = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - sent);
    const Status request_err = r.ok() ? group->error() : r.status();
    const bool pack_group = tasks[0]->pack >= 0 && pack_read_stmt != nullptr;
    for (size_t i = 0; i < tasks.size(); ++i) {
      const std::shared_ptr<Task>& t = tasks[i];
      AttemptSink& s = *sinks[i];
      if (t->resolved) {
        if (r.ok()) m_dupes++;
        continue;
      }
      s.rows = group->rows_of(i);
      Status err = request_err.ok() ? CheckAnswer(s) : request_err;
      if (!err.ok()) m_group_failures++;
      if (err.ok() && t->owner != attempts[i]) {
        m_dupes++;
        if (t->owner != -1 || t->outstanding > 0) continue;
        err = Status::ConnectionLost(fmt::format("sample {}: the attempt holding its data failed", FormatKey(t->key)));
      } else if (err.ok()) {
        err = FinishSample(*t);
        if (!err.ok()) m_group_failures++;  // its bytes damaged (a checksum, a size)
      }
      if (!err.ok() && request_err.ok() && pack_group && !t->pack_fallback) {
        // A member its pack lacks (left out when packed, deleted since) or
        // holds damaged: the copy failed, not the sample. It is read alone
        // from the data table at once, without counting a failed attempt
        // (once per sample: a failure of that read counts as usual).
        if (t->owner == attempts[i]) t->owner = -1;  // the slot stays reserved
        t->pack_fallback = true;
        m_pack_fallbacks++;
        if (t->outstanding == 0) launches.push_back(Launch::Retry(t, 0));
        continue;
      }
      Settle(t, attempts[i], latency, err);
    }
    Refill(&launches);
  }
  Start(std::move(launches));
}

}  // namespace cqlstream
