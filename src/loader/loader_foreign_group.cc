// Copyright (c) cqlstream authors.
//
// The loader engine's coalesced foreign reads of attached datasets
// (loader_impl.h, loader/foreign_group_sink.h). Once a sample's foreign key
// is known (its key lookup of this epoch, the look-ahead, or the key cache
// of an earlier epoch or Fetch), its attempt is one read of its row; samples
// of one split issued together whose keys are known and whose rows live on
// the same replicas (the token of the serialized key in the foreign table's
// keyspace) share one `SELECT "<key>", "<data>"[, "<label>"] ... WHERE
// "<key>" IN ?` (store::AttachedTable::DataReadManyCql), sent unpaged to one
// of those replicas, as coalesced reads of a native dataset are
// (loader/coalesce.h). It is one attempt of each sample: each row goes to
// its sample's own AttachedSink and store::AttachedRow checks it as in a
// single read; a sample the answer lacks has a failed attempt (retried
// alone), and an answer with a row of a key not asked for fails the whole
// request.
//
// Sizes: the catalog knows none of an attached split (an attach reads keys,
// never the rows), so groups start after kForeignGroupAfter samples were
// read, and only while none of them was larger than
// loader::kCoalesceMaxSampleBytes; a group holds at most
// loader::kCoalesceMaxGroupBytes by the largest sample read so far. A row
// larger than any before can make one answer bigger than that (bounded by
// the frame limit, and at most `coalesce` rows); from then on the groups
// are smaller, or off.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "loader/attached_sink.h"
#include "loader/loader_impl.h"
#include "net/routing/murmur3.h"

namespace cqlstream {

using loader_impl::AttachedSink;
using loader_impl::Clock;
using loader_impl::Launch;
using loader_impl::Task;

bool Loader::Impl::ForeignGroupsOn() const {
  return attached_read >= loader_impl::kForeignGroupAfter && attached_max_size <= loader::kCoalesceMaxSampleBytes;
}

// The member key is the key as the IN list binds it (EncodeCell of the
// value), which is what the node answers in the key column. A snapshot
// key that decodes but does not encode (a text that is not UTF-8, an ascii
// one that is not ASCII) is not grouped: its single read fails alone,
// where in a group it would fail the group's request.
std::optional<std::pair<std::string, Value>> Loader::Impl::KnownForeignKey(const Task& t) {
  std::optional<Value> value;
  if (t.foreign_key) {
    value = *t.foreign_key;
  } else {
    std::string cached;
    if (!attached->keys->Find(t.key, &cached)) return std::nullopt;
    const std::span<const uint8_t> cell(reinterpret_cast<const uint8_t*>(cached.data()), cached.size());
    StatusOr<Value> key = store::SnapshotKeyCell(t.key, 1, cell, attached->key_type, attached->snapshot_table);
    if (!key.ok()) return std::nullopt;  // its own read names the problem
    value = std::move(*key);
  }
  cql::Bytes bound;
  if (!EncodeCell(*value, attached->key_type, &bound).ok()) return std::nullopt;
  return std::make_pair(std::string(bound.begin(), bound.end()), std::move(*value));
}

void Loader::Impl::IssueKnownAttached(std::shared_ptr<Task> t, TaskGroups* g, std::vector<Launch>* out) {
  const int32_t seg = KeySegment(t->key);
  auto split = attached->by_seg.find(seg);
  if (!ForeignGroupsOn() || split == attached->by_seg.end() || !split->second->data_group_stmt) {
    out->push_back(Launch::First(std::move(t)));
    return;
  }
  const auto key = KnownForeignKey(*t);
  if (!key) {
    out->push_back(Launch::First(std::move(t)));
    return;
  }
  const auto token =
      routing::PartitionKeyToken({std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(key->first.data()),
                                                           key->first.size())});
  const uint64_t replicas = token.ok() ? session->ReplicaSetOf(split->second->keyspace, *token) : 0;
  const size_t limit = loader::GroupLimitForSize(attached_max_size);
  if (auto full = g->Add(seg, std::move(t), limit, replicas, loader::kForeignReadGroup)) {
    out->push_back(full->size() == 1 ? Launch::First(std::move((*full)[0])) : Launch::Group(std::move(*full)));
  }
}

void Loader::Impl::LaunchAttachedGroup(std::vector<std::shared_ptr<Task>> tasks, std::vector<int> attempts,
                                       Clock::time_point sent) {
  // A group's samples are of one segment; those whose keys are known now
  // (possibly since their issue) read their rows, the others their keys.
  std::vector<std::shared_ptr<Task>> known_tasks, lookup_tasks;
  std::vector<int> known_attempts, lookup_attempts;
  std::vector<std::pair<std::string, Value>> keys;
  {
    MutexLock lock(&mu);
    for (size_t i = 0; i < tasks.size(); ++i) {
      auto key = KnownForeignKey(*tasks[i]);
      if (key) {
        known_tasks.push_back(std::move(tasks[i]));
        known_attempts.push_back(attempts[i]);
        keys.push_back(std::move(*key));
      } else {
        lookup_tasks.push_back(std::move(tasks[i]));
        lookup_attempts.push_back(attempts[i]);
      }
    }
  }
  if (lookup_tasks.size() > 1 && attached->key_group_stmt) {
    LaunchKeyGroup(std::move(lookup_tasks), std::move(lookup_attempts), sent);
  } else {
    for (size_t i = 0; i < lookup_tasks.size(); ++i) LaunchAttached(lookup_tasks[i], lookup_attempts[i], 0, sent);
  }
  LaunchKnownAttached(std::move(known_tasks), std::move(known_attempts), std::move(keys), sent);
}

// Samples looked up together were grouped by their snapshot rows' replicas
// and the lookup's cap: their rows are regrouped here as IssueKnownAttached
// groups them (the foreign key's replicas, the size limit).
void Loader::Impl::LaunchKnownAttached(std::vector<std::shared_ptr<Task>> tasks, std::vector<int> attempts,
                                       std::vector<std::pair<std::string, Value>> keys, Clock::time_point sent) {
  if (tasks.empty()) return;
  bool groups_on = false;
  size_t limit = 0;
  int cap = 1;
  {
    MutexLock lock(&mu);
    groups_on = ForeignGroupsOn();
    limit = loader::GroupLimitForSize(attached_max_size);
    cap = loader::CoalesceCap(o.coalesce, ctl.window());
  }
  auto split = attached->by_seg.find(KeySegment(tasks[0]->key));
  if (!groups_on || tasks.size() < 2 || split == attached->by_seg.end() || !split->second->data_group_stmt) {
    for (size_t i = 0; i < tasks.size(); ++i) LaunchForeignRead(tasks[i], attempts[i], 0, sent, keys[i].second);
    return;
  }
  const int32_t seg = KeySegment(tasks[0]->key);
  loader::SegmentGrouper<size_t> grouper(cap);
  std::vector<std::vector<size_t>> groups;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const auto& bytes = keys[i].first;
    const auto token = routing::PartitionKeyToken(
        {std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())});
    const uint64_t replicas = token.ok() ? session->ReplicaSetOf(split->second->keyspace, *token) : 0;
    if (auto full = grouper.Add(seg, i, limit, replicas)) groups.push_back(std::move(*full));
  }
  for (auto& g : grouper.TakeAll()) groups.push_back(std::move(g));
  for (const auto& g : groups) {
    if (g.size() == 1) {
      LaunchForeignRead(tasks[g[0]], attempts[g[0]], 0, sent, keys[g[0]].second);
      continue;
    }
    std::vector<std::shared_ptr<Task>> gt;
    std::vector<int> ga;
    std::vector<std::pair<std::string, Value>> gk;
    for (size_t i : g) {
      gt.push_back(tasks[i]);
      ga.push_back(attempts[i]);
      gk.push_back(keys[i]);
    }
    LaunchForeignGroup(std::move(gt), std::move(ga), std::move(gk), sent);
  }
}

void Loader::Impl::LaunchForeignGroup(std::vector<std::shared_ptr<Task>> tasks, std::vector<int> attempts,
                                      std::vector<std::pair<std::string, Value>> keys, Clock::time_point sent) {
  // A foreign key twice in the group (two samples of a snapshot that lists
  // one key twice) is read alone the second time: a row goes to one sample.
  const loader_impl::AttachedReads::Split* split = attached->by_seg.at(KeySegment(tasks[0]->key));
  std::set<std::string> seen;
  std::vector<std::shared_ptr<AttachedSink>> sinks;
  std::vector<loader::ForeignGroupSink::Member> members;
  std::vector<Value> list;
  std::vector<std::shared_ptr<Task>> grouped;
  std::vector<int> grouped_attempts;
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (!seen.insert(keys[i].first).second) {
      LaunchForeignRead(tasks[i], attempts[i], 0, sent, keys[i].second);
      continue;
    }
    sinks.push_back(std::make_shared<AttachedSink>(this, tasks[i], attempts[i], split,
                                                   loader_impl::KeyText(keys[i].second)));
    members.push_back({keys[i].first, sinks.back()});
    list.push_back(keys[i].second);
    grouped.push_back(tasks[i]);
    grouped_attempts.push_back(attempts[i]);
  }
  if (grouped.size() == 1) {
    LaunchForeignRead(grouped[0], grouped_attempts[0], 0, sent, list[0]);
    return;
  }
  {
    MutexLock lock(&mu);
    m_coalesced_requests++;
    m_coalesced_samples += static_cast<int64_t>(grouped.size());
  }
  auto group = std::make_shared<loader::ForeignGroupSink>(std::move(members), split->columns);
  net::Statement st = net::Statement::Bound(split->data_group_stmt, {Value::List(std::move(list))});
  loader_impl::ReadSettings(st, AttemptTimeout(), 0, &no_retry);
  st.page_size = 0;  // unpaged: one row per key (the key is the whole primary key)
  // An IN list has no single token: the group's keys share replicas, so the
  // first key's routes it (a single-column partition key is its own bytes).
  st.routing_key = cql::Bytes(keys[0].first.begin(), keys[0].first.end());
  st.routing_keyspace = split->keyspace;
  st.sink = [group](int) { return group; };
  session->ExecuteAsync(std::move(st), [this, grouped, grouped_attempts, group, sinks,
                                        sent](StatusOr<net::ResultSet> r) {
    OnForeignGroupDone(grouped, grouped_attempts, group, sinks, sent, std::move(r));
  });
}

// Each sample is settled as after its own foreign read, with the rows the
// answer held for it; all of them under one lock, then one refill, so that
// the places a group frees are issued together (and grouped again).
void Loader::Impl::OnForeignGroupDone(const std::vector<std::shared_ptr<Task>>& tasks,
                                      const std::vector<int>& attempts,
                                      const std::shared_ptr<loader::ForeignGroupSink>& group,
                                      const std::vector<std::shared_ptr<AttachedSink>>& sinks, Clock::time_point sent,
                                      StatusOr<net::ResultSet> r) {
  const Status request_err = r.ok() ? group->error() : r.status();
  std::vector<Launch> launches;
  {
    MutexLock lock(&mu);
    if (!r.ok()) {
      // As for a single read (OnAttemptDone): nothing is settled while a
      // failed request's cell may still be written into a slot.
      for (const auto& s : sinks) EndSink(*s);
      auto resume = [this, tasks, attempts, group, sinks, sent, err = r.status()] {
        OnForeignGroupDone(tasks, attempts, group, sinks, sent, err);
      };
      if (ParkWhileWriting(tasks, [sinks] { return loader::AnyHeld(sinks); }, resume)) {
        return;
      }
    }
    for (size_t i = 0; i < tasks.size(); ++i) {
      // A failed request's late cells, or a refused answer's, claim nothing.
      if (!request_err.ok()) EndSink(*sinks[i]);
      if (request_err.ok()) sinks[i]->row.OnRowsBegin(group->rows_of(i));
      SettleAttached(tasks[i], attempts[i], sinks[i], sent, request_err, /*count_request=*/i == 0 && !r.ok(),
                     /*grouped=*/true);
    }
    if (closed) return;
    Refill(&launches);
  }
  Start(std::move(launches));
}

}  // namespace cqlstream
