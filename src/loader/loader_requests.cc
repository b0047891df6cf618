// Copyright (c) cqlstream authors.
//
// The loader engine's request side (loader_impl.h): issuing samples within
// the window and the byte budget, launching attempts, placing an answer's
// cells (the attempt that claims the data first owns the sample's slot),
// completions, retries with backoff, and hedges (the pump thread).
#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "loader/attempt_sink.h"
#include "loader/loader_impl.h"
#include "loader/pump_tick.h"

namespace cqlstream {

using loader_impl::Clock;
using loader_impl::Epoch;
using loader_impl::Launch;
using loader_impl::Task;


using loader_impl::AttemptSink;

// ----------------------------------------------------------------------------
// Issuing
// ----------------------------------------------------------------------------

// Samples issued here together may share requests (IssueFirst): the plan
// order is kept, only samples of one segment issued now are grouped.
//
// Packed reads: a pack whose first member is issued is issued whole in the
// same Refill (its members take consecutive positions: loader/packed_order.h),
// so that it is read with one request even when the window opened by fewer
// places; the window is exceeded by less than a pack (the loop stops at
// window + P whatever happens, e.g. a resumed rank's range that starts
// inside a pack). (Issued a few places at a time, packs were read 3
// members to a request at RTT 0.)
//
// While samples are read several to a request (coalesced reads of a native
// dataset's small samples without packs; an attached dataset's rows,
// loader_foreign_group.cc), the places that completions free one at a time
// are issued together once there are half a group's worth of them, so that
// samples read alone do not stay alone (each completion would otherwise
// issue one sample, and the window's places drift to single reads: a
// growing window adds one place at a time, and every retry, hedge and
// leftover of a group is a single read). The window keeps at least that
// many samples in flight meanwhile, never waits for places when fewer are
// in flight, and never while the consumer's epoch is still to be created
// (Fetch calls' samples count in flight too). A first epoch's keys are
// still looked up ahead meanwhile.
void Loader::Impl::Refill(std::vector<Launch>* out) {
  if (!started || closed) return;
  if ((attached ? ForeignGroupsOn() : all_coalescible && !packed_layout) && !epochs.empty()) {
    const int64_t granule = std::max(loader::CoalesceCap(o.coalesce, ctl.window()) / 2, 1);
    if (ctl.window() - in_flight < granule && in_flight >= granule) {
      for (auto& e : epochs) {
        if (e->AllIssued()) continue;
        if (attached && attached->key_group_stmt) {
          std::vector<std::vector<SampleKey>> lookups;
          LookAheadKeys(e.get(), &lookups);
          for (auto& keys : lookups) out->push_back(Launch::LookAhead(std::move(keys)));
        }
        break;
      }
      return;
    }
  }
  // (Pack groups are full at their pack size whatever the cap: loader/coalesce.h.)
  TaskGroups groups(GroupsOn() ? loader::CoalesceCap(o.coalesce, ctl.window()) : 1);
  Epoch* open_pack = nullptr;  // the epoch whose pack is not all issued yet
  Epoch* issued = nullptr;     // the epoch this refill issued from last
  const int64_t pack_room = packed_layout ? packed_layout->pack_size() : 0;
  while (in_flight < ctl.window() || (open_pack != nullptr && in_flight < ctl.window() + pack_room)) {
    Epoch* e = OverBudget() ? nullptr : IssuingEpoch();
    if (e == nullptr) {
      if (open_pack == nullptr) ctl.OnHeldBack();
      break;
    }
    if (open_pack != nullptr && e != open_pack) break;  // the rank's part ended inside the pack
    auto t = std::make_shared<Task>();
    t->ep = e;
    t->seq = e->next_seq++;
    const uint64_t position = e->plan.PositionAt(t->seq);
    if (e->packed) {
      const auto x = e->packed->At(position);
      t->key = source.KeyAt(x.ordinal);
      t->pack = x.pack;
      open_pack = x.pack >= 0 && !x.last ? e : nullptr;
    } else {
      t->key = source.KeyAt(e->perm(position));
    }
    in_flight++;
    in_flight_unslotted++;
    IssueFirst(std::move(t), &groups, out);
    issued = e;
  }
  FlushGroups(&groups, out);
  if (issued != nullptr && attached && attached->key_group_stmt) {
    std::vector<std::vector<SampleKey>> lookups;
    LookAheadKeys(issued, &lookups);
    for (auto& keys : lookups) out->push_back(Launch::LookAhead(std::move(keys)));
  }
}

// The byte budget: bytes charged to batches (their buffers' resident pages),
// plus what the requests without a slot will bring: into the free slots of
// open batches, then into new batches' buffers, pooled ones first, less the
// pooled pages they fill (EstimateLanded). Over budget, requests wait for
// batches to be released, except when nothing is in flight and no batch is
// ready for the consumer: then one request is allowed, so that progress
// never depends on the budget.
bool Loader::Impl::OverBudget() {
  const double avg = std::max(avg_size, 1.0);
  const auto incoming = static_cast<int64_t>(static_cast<double>(in_flight_unslotted + 1) * avg);
  uint64_t open_slots = 0, open_batches = 0, bufferless = 0;
  for (const auto& e : epochs) {
    open_slots += e->batches.OpenSlots();
    open_batches += e->batches.OpenBatches();
    bufferless += e->batches.BufferlessBatches();
  }
  for (const auto& f : fetches) {
    open_slots += f->batches.OpenSlots();
    open_batches += f->batches.OpenBatches();
    bufferless += f->batches.BufferlessBatches();
  }
  loader::BudgetInputs in;
  in.incoming = incoming;
  in.into_open = static_cast<int64_t>(std::min(static_cast<double>(open_slots) * avg, static_cast<double>(incoming)));
  in.batch_bytes = static_cast<int64_t>(static_cast<double>(o.batch_size) * avg);
  in.partial_batches = static_cast<int>(epochs.size() + fetches.size() + bufferless);
  in.open_batches = static_cast<int64_t>(open_batches);
  in.page = static_cast<int64_t>(loader::PageRound(1));
  // Ordered mode (and Fetch) copies a finished batch into another buffer
  // while it still holds the first: one batch more, for a moment.
  in.headroom = o.ordered || !fetches.empty() ? in.batch_bytes : 0;
  if (static_cast<double>(pool->capacity()) < static_cast<double>(in.batch_bytes)) {
    // Batches outgrow their buffers: samples get buffers of their own (a
    // page each at least) and a batch is joined by a copy.
    in.headroom = in.batch_bytes + (in_flight_unslotted + 1) * in.page;
  }
  const int64_t into_new = in.incoming - in.into_open;
  const int64_t new_batches = in.batch_bytes > 0 ? (into_new + in.batch_bytes - 1) / in.batch_bytes : 0;
  auto estimate = [&] {
    in.in_batches = account->in_batches.load();
    in.pooled = account->pooled_resident.load();
    in.reusable = pool->Reusable(in.batch_bytes, new_batches);
    return loader::EstimateLanded(in);
  };
  auto est = estimate();
  if (est.landed > budget && est.shrinkable > 0) {
    // Pooled pages no incoming byte will fill are the first thing to give up.
    pool->Shrink(std::min(est.landed - budget, est.shrinkable));
    est = estimate();
  }
  const bool starving = in_flight == 0 && (epochs.empty() || !epochs.front()->batches.HoldsFinishedBatches());
  return est.landed > budget && !starving;
}

// The epoch with samples left to issue: the consumer's, or the one after it
// (created here; at most one epoch ahead).
Epoch* Loader::Impl::IssuingEpoch() {
  for (auto& e : epochs) {
    if (!e->AllIssued()) return e.get();
  }
  if (epochs.size() >= 2) return nullptr;
  if (o.epochs > 0 && next_epoch >= o.epochs) return nullptr;
  epochs.push_back(MakeEpoch(next_epoch, {loader::RankSlice(source.size(), rank, world)}, 0, false));
  next_epoch++;
  Epoch* e = epochs.back().get();
  return e->AllIssued() ? nullptr : e;
}

// ----------------------------------------------------------------------------
// Launching and placing
// ----------------------------------------------------------------------------

std::chrono::milliseconds Loader::Impl::AttemptTimeout() const {
  if (o.request_timeout.count() > 0) return o.request_timeout;
  auto p99 = latencies.Percentile(99.0, loader_impl::kTimeoutLatencies);
  if (!p99) return loader_impl::kFirstTimeout;
  const auto t = std::chrono::duration_cast<std::chrono::milliseconds>(*p99 * loader_impl::kTimeoutP99Factor);
  return std::clamp(t, loader_impl::kMinTimeout, loader_impl::kMaxTimeout);
}

void Loader::Impl::Start(std::vector<Launch> launches) {
  for (auto& l : launches) LaunchOne(std::move(l));
}

void Loader::Impl::LaunchOne(Launch l) {
  if (l.kind == Launch::Kind::kGroup) {
    LaunchGroup(std::move(l));
    return;
  }
  if (l.kind == Launch::Kind::kLookAhead) {
    LaunchLookAhead(std::move(l.look_ahead));
    return;
  }
  const auto now = Clock::now();
  int attempt = l.attempt;
  {
    MutexLock lock(&mu);
    if (closed || l.task->resolved) return;
    if (l.new_attempt()) {
      attempt = l.task->attempts++;
      if (l.kind == Launch::Kind::kHedge) {
        m_hedges++;
        l.task->hedge_attempt = attempt;
      }
      watch.Add(Watch{now, l.task, attempt});
    }
    l.task->outstanding++;
  }
  if (attached) {
    LaunchAttached(l.task, attempt, l.plan_offset, now);
    return;
  }
  const SampleKey key = l.task->key;
  net::Statement st = net::Statement::Bound(read_stmt, {Value::Int(KeySegment(key)), Value::Int(KeyIndex(key))});
  st.idempotent = true;
  st.consistency = cql::Consistency::kLocalOne;
  st.page_size = 64;  // chunks per page: up to 64 MiB per response
  st.paging_state = std::move(l.paging_state);
  st.timeout = AttemptTimeout();
  st.plan_offset = l.plan_offset;
  st.retry = &no_retry;
  // The answer must name the data table's columns (net/result_columns.h): a
  // byte comparison with the PREPARED answer's specs per answer.
  st.check_result_columns = true;
  auto sink = std::make_shared<AttemptSink>(this, l.task, attempt, l.kind == Launch::Kind::kNextPage);
  sink->empty_pages_before = l.empty_pages;
  st.sink = [sink](int) { return sink; };
  auto task = l.task;
  session->ExecuteAsync(std::move(st), [this, task, sink, now](StatusOr<net::ResultSet> r) {
    OnAttemptDone(task, sink, now, std::move(r));
  });
}

// The size was checked against the catalog (store::CheckStatics); the
// catalog is a hint too, so the memory budget bounds what is reserved.
Status Loader::Impl::ReserveSlot(Task& t, int64_t size) {
  if (size < 0) return Status::Corruption(fmt::format("sample {} has a negative size", FormatKey(t.key)));
  if (size > budget) {
    return Status::InvalidArgument(fmt::format("sample {} is {} bytes, more than the loader's memory budget of {}",
                                               FormatKey(t.key), size, budget));
  }
  CQLS_ASSIGN_OR_RETURN(t.slot, t.ep->batches.Reserve(t.seq, t.key, static_cast<uint64_t>(size)));
  t.size = size;
  in_flight_unslotted--;
  return Status::OK();
}

// The attempt of `s` takes ownership of the sample: its static columns are
// checked and, for the first owner, the slot is reserved.
Status Loader::Impl::Claim(AttemptSink& s) {
  Task& t = *s.task;
  if (!s.cells.status().ok()) return s.cells.status();
  const store::SampleStatics& st = s.cells.statics();
  CQLS_RETURN_IF_ERROR(store::CheckStatics(t.key, st, HintsFor(t.key)));
  if (!t.slot) {
    CQLS_RETURN_IF_ERROR(ReserveSlot(t, st.size));
  } else if (t.size != st.size) {
    return Status::Corruption(fmt::format("sample {} changed size between attempts ({} then {} bytes)",
                                          FormatKey(t.key), t.size, st.size));
  }
  t.owner = s.attempt;
  t.statics = st;
  t.placer.Begin(t.size, ds.chunk_size);
  return Status::OK();
}

std::span<uint8_t> Loader::Impl::Destination(AttemptSink& s, int32_t size) {
  MutexLock lock(&mu);
  Task& t = *s.task;
  s.offered = true;
  if (t.resolved || closed || !s.err.ok()) return {};
  if (s.cells.key_mismatch()) {
    s.err = Status::ConnectionLost(fmt::format("sample {}: the answer carries another sample's key", FormatKey(t.key)));
    return {};
  }
  if (t.owner == -1) {
    if (s.continuation) return {};  // the first page's owner failed: this page is useless
    s.err = Claim(s);
    if (!s.err.ok()) return {};
  }
  if (t.owner != s.attempt) return {};  // a duplicate (hedge) answer: dropped
  auto at = t.placer.Place(t.key, size);
  if (!at.ok()) {
    s.err = at.status();
    return {};
  }
  if (size > 0) s.hold.Take();  // until the cell's OnCell or OnCellAbandoned
  return {t.slot.data + *at, static_cast<size_t>(size)};
}

// ----------------------------------------------------------------------------
// Completions
// ----------------------------------------------------------------------------

void Loader::Impl::OnAttemptDone(const std::shared_ptr<Task>& t, const std::shared_ptr<AttemptSink>& s,
                                 Clock::time_point sent, StatusOr<net::ResultSet> r) {
  std::vector<Launch> launches;
  {
    MutexLock lock(&mu);
    if (!r.ok()) {
      // A failed request (a timeout mid-frame) may still be streaming: the
      // frame decoder keeps the sink until its frame is complete. Its late
      // cells must not claim the sample (the retry's would then be dropped
      // and nothing would settle it), so the sink is ended here; and while
      // its cell in progress may still be written into the slot, the rest
      // waits.
      EndSink(*s);
      if (ParkWhileWriting({t}, [s] { return s->hold.held(); },
                           [this, t, s, sent, err = r.status()] { OnAttemptDone(t, s, sent, err); })) {
        return;
      }
    }
    t->outstanding--;
    if (closed) return;
    if (!r.ok()) OnRequestFailed(r.status(), sent);
    const auto latency = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - sent);
    if (t->resolved) {
      if (r.ok()) m_dupes++;
      return;
    }
    Status err = r.ok() ? CheckAnswer(*s) : r.status();
    if (err.ok() && t->owner != s->attempt) {
      // Another attempt owns the data (or owned it and failed while this
      // one was discarding its copy).
      m_dupes++;
      if (t->owner != -1 || t->outstanding > 0) return;
      err = Status::ConnectionLost(fmt::format("sample {}: the attempt holding its data failed", FormatKey(t->key)));
    }
    bool page_more = false;
    if (err.ok()) {
      auto ps = r->paging_state();
      page_more = ps && !ps->empty();
      const int empty_pages = s->rows == 0 ? s->empty_pages_before + 1 : 0;
      if (page_more && empty_pages >= net::Session::kMaxEmptyPagesInARow) {
        // Pages that promise more and hold nothing, without end.
        page_more = false;
        err = Status::ProtocolError(fmt::format("sample {}: {} pages in a row held no rows and each promised more",
                                                FormatKey(t->key), empty_pages));
      } else if (page_more) {
        // The rest of the sample follows on the same attempt.
        launches.push_back(Launch::NextPage(t, r->winning_execution, std::move(*ps), s->attempt, empty_pages));
      } else {
        err = FinishSample(*t);
      }
    }
    if (!page_more) Settle(t, s->attempt, latency, err);
    Refill(&launches);
  }
  Start(std::move(launches));
}

// What is wrong with a successful answer of attempt `s`, if anything.
Status Loader::Impl::CheckAnswer(AttemptSink& s) {
  const Task& t = *s.task;
  if (!s.err.ok()) return s.err;
  if (s.cells.key_mismatch()) {
    return Status::ConnectionLost(fmt::format("sample {}: the answer carries another sample's key", FormatKey(t.key)));
  }
  if (!s.continuation && s.rows == 0) {
    return Status::NotFound(fmt::format("sample {} has no data row", FormatKey(t.key)));
  }
  if (!s.cells.status().ok()) return s.cells.status();
  // No data cell claimed the slot (every row's data cell offers itself, a
  // null or empty one as a chunk of no bytes, so a first page with rows has
  // claimed it by now): claimed here, and the chunks checked by
  // FinishSample.
  if (t.owner == -1 && !s.continuation && !s.offered) return Claim(s);
  return Status::OK();
}

// After the owner's last page: the chunks add up, and the checksum matches.
Status Loader::Impl::FinishSample(Task& t) {
  CQLS_RETURN_IF_ERROR(t.placer.Finish(t.key));
  if (!o.verify_checksums) return Status::OK();
  const uint64_t h = XXH64(t.slot.data, static_cast<size_t>(t.size), 0);
  if (h != static_cast<uint64_t>(t.statics.checksum)) {
    return Status::Corruption(fmt::format("sample {}: checksum mismatch (xxh64 {:016x}, stored {:016x})",
                                          FormatKey(t.key), h, static_cast<uint64_t>(t.statics.checksum)));
  }
  return Status::OK();
}

void Loader::Impl::Settle(const std::shared_ptr<Task>& t, int attempt, std::chrono::microseconds latency,
                          const Status& err) {
  if (err.ok()) {
    latencies.Record(latency);
    ctl.OnComplete(t->size, latency);
    const bool hedge_won = attempt == t->hedge_attempt;
    hedge_budget.OnComplete(latency, t->hedged, hedge_won);
    if (hedge_won) m_hedge_wins++;
    CompleteTask(*t);
  } else {
    if (t->owner == attempt) t->owner = -1;  // the slot stays reserved for the next attempt
    if (t->outstanding == 0) {
      // A hedged sample whose attempts all failed is neither a hedge win nor
      // a loss (hedge_budget.h): the retry that delivers it is a new start,
      // which may be hedged again.
      t->hedged = false;
      t->hedge_attempt = -1;
      HandleFailure(t, err);
    }
  }
}

void Loader::Impl::CompleteTask(Task& t) {
  loader::SampleFields f;
  f.image_size = t.statics.image_size;
  f.label = t.statics.label;
  if (ds.label_kind == LabelKind::kMultiLabel) f.labels = t.statics.labels;
  t.resolved = true;
  in_flight--;
  avg_size = 0.99 * avg_size + 0.01 * static_cast<double>(t.size);
  const loader::AssemblyProgress p = t.ep->batches.Complete(t.slot, std::move(f));
  m_skipped += p.lost;
  if (p.batch_finished) ready_cv.SignalAll();
  DropIfAbandoned(t.ep);
}

void Loader::Impl::FailTask(Task& t, const Status& err) {
  t.resolved = true;
  in_flight--;
  m_skipped++;
  if (!t.slot) in_flight_unslotted--;
  const loader::AssemblyProgress p = t.ep->batches.Fail(t.seq, t.key, t.slot, err);
  m_skipped += p.lost;
  ready_cv.SignalAll();
  DropIfAbandoned(t.ep);
}

void Loader::Impl::DropIfAbandoned(Epoch* e) {
  if (!e->abandoned || !e->batches.Settled()) return;
  std::erase_if(fetches, [e](const std::unique_ptr<Epoch>& f) { return f.get() == e; });
}

void Loader::Impl::EndSink(AttemptSink& s) {
  if (s.err.ok()) s.err = Status::Cancelled("the attempt ended");
}

bool Loader::Impl::ParkWhileWriting(std::vector<std::shared_ptr<Task>> tasks, std::function<bool()> writing,
                                    std::function<void()> resume) {
  if (closed || !writing()) return false;
  for (const auto& t : tasks) t->parked++;
  parked.push_back(Parked{std::move(tasks), std::move(writing), std::move(resume)});
  return true;
}

void Loader::Impl::TakeResumable(std::vector<std::function<void()>>* out) {
  std::erase_if(parked, [out](Parked& p) {
    if (p.writing()) return false;
    for (const auto& t : p.tasks) t->parked--;
    out->push_back(std::move(p.resume));
    return true;
  });
}

// Once per failed request, whatever number of samples it carried: the
// window is cut as loader/congestion_gate.h says.
void Loader::Impl::OnRequestFailed(const Status& err, Clock::time_point sent) {
  if (err.IsTimeout()) m_timeouts++;
  const auto now = Clock::now();
  if (congestion.Admit(err, sent, now)) ctl.OnCongestion(now);
}

// Every attempt of `t` failed: a retry after a backoff (on the next replica)
// while the error is transient and the attempts and the time allow, else the
// sample fails.
void Loader::Impl::HandleFailure(const std::shared_ptr<Task>& t, const Status& err) {
  const auto now = Clock::now();
  if (t->failures++ == 0) {
    t->first_failure = now;
    t->first_error = err;
  }
  const bool missing = err.IsNotFound();
  const bool corrupt = err.code() == Status::Code::kCorruption;
  const bool transient = net::IsTransient(err) || missing || corrupt;
  const int max_attempts = o.max_attempts > 0 ? o.max_attempts : loader_impl::kDefaultMaxAttempts;
  const int limit = (missing || corrupt) ? std::min(loader_impl::kMaxAttemptsMissingOrCorrupt, max_attempts)
                                         : max_attempts;
  const auto budget_ms = o.retry_budget.count() > 0 ? o.retry_budget : loader_impl::kDefaultRetryBudget;
  if (transient && t->failures < limit && now - t->first_failure < budget_ms) {
    // Exponential backoff from 5 ms, at most 2 s, with jitter (half to all).
    thread_local std::mt19937_64 rng{std::random_device{}()};
    const double base = 5.0 * std::pow(2.0, std::min(t->failures - 1, 12));
    const double d = std::min(2000.0, base) * std::uniform_real_distribution<double>(0.5, 1.0)(rng);
    retries.push(Retry{now + std::chrono::microseconds(static_cast<int64_t>(d * 1000)), t, t->failures});
    m_retries++;
    pump_cv.Signal();
    return;
  }
  // The last error decides the code; the first is named too when it was of
  // another kind, since it is often the cause (a request that timed out on a
  // connection that was then closed, and retries that found none open).
  std::string first;
  if (t->failures > 1 && t->first_error.code() != err.code()) {
    first = fmt::format(" (the first attempt: {})", t->first_error.ToString());
  }
  Status final = Status(err.code(),
                        fmt::format("sample {} could not be read after {} attempt{}: {}{}", FormatKey(t->key),
                                    t->attempts, t->attempts == 1 ? "" : "s", err.message(), first),
                        err.server_error_ptr());
  FailTask(*t, final);
}

// ----------------------------------------------------------------------------
// The pump thread: retries, hedges, window control, rates
// ----------------------------------------------------------------------------

void Loader::Impl::PumpLoop() {
  MutexLock lock(&mu);
  while (!closed) {
    const auto next_retry = retries.empty() ? std::nullopt : std::optional<Clock::time_point>(retries.top().due);
    pump_cv.WaitFor(&mu, loader::PumpWait(ctl.min_latency(), next_retry, Clock::now()));
    if (closed) break;
    // Before the first Next() only Fetch calls issue requests: their retries
    // and hedges still need the pump (a Fetch of a missing sample waited
    // forever for a retry that nothing launched).
    if (!started && retries.empty() && watch.empty() && parked.empty()) continue;
    const auto now = Clock::now();
    std::vector<Launch> launches;
    std::vector<std::function<void()>> resumed;
    TakeResumable(&resumed);
    QueueDueRetries(now, &launches);
    QueueHedges(now, &launches);
    ctl.SetConnectionLimit(session->ConnectionLimit());
    ctl.SetConnectionsShrink(session->ConnectionsShrink());
    ctl.Tick(now);
    // Whatever changed the count since it was last sent: Tick, the limit,
    // or a congestion signal that undid fewer connections (OnCongestion).
    const int conns = ctl.connections();
    const bool send = conns != connections_asked;
    connections_asked = conns;
    UpdateRates(now);
    Refill(&launches);
    lock.Unlock();
    if (send) session->SetTotalConnections(conns);
    Start(std::move(launches));
    for (auto& f : resumed) f();
    lock.Lock();
  }
}

void Loader::Impl::QueueDueRetries(Clock::time_point now, std::vector<Launch>* out) {
  while (!retries.empty() && retries.top().due <= now) {
    Retry r = retries.top();
    retries.pop();
    if (!r.task->resolved) out->push_back(Launch::Retry(r.task, r.plan_offset));
  }
}

// Attempts older than the hedge delay (the running p99, and never before
// a hedge could be faster: see HedgeBudget) get one more execution on the
// next replica/connection, as the budget allows (loader/hedge_watch.h).
void Loader::Impl::QueueHedges(Clock::time_point now, std::vector<Launch>* out) {
  // An attempt may still be hedged while it is its sample's latest, alone
  // in flight, and the sample has had no hedge.
  auto live = [](const std::weak_ptr<Task>& w, int attempt) {
    auto t = w.lock();
    return t && !t->resolved && !t->hedged && t->outstanding == 1 && t->parked == 0 && t->attempts == attempt + 1;
  };
  auto p99 = latencies.Percentile(99.0, 200);
  if (!o.hedge || !p99) {
    watch.Prune(live);
    return;
  }
  const auto delay = hedge_budget.Delay(*p99, ctl.min_latency());
  // Budgeted by the hedges' win rate, so that hedges that rarely win (and
  // an overloaded cluster) are not sent even more work.
  watch.Poll(now, delay, hedge_budget, in_flight, ctl.window(), live, [&](const std::weak_ptr<Task>& w) {
    auto t = w.lock();
    if (!t) return;
    t->hedged = true;
    out->push_back(Launch::Hedge(t, t->attempts));
  });
}

// Rates for metrics, once a second.
void Loader::Impl::UpdateRates(Clock::time_point now) {
  const double dt = std::chrono::duration<double>(now - rate_at).count();
  if (dt < 1.0) return;
  rate_images = static_cast<double>(m_images - rate_last_images) / dt;
  rate_bytes = static_cast<double>(m_bytes - rate_last_bytes) / dt;
  rate_last_images = m_images;
  rate_last_bytes = m_bytes;
  rate_at = now;
}

}  // namespace cqlstream
