// Copyright (c) cqlstream authors.
//
// The public Loader (include/cqlstream/loader.h) over the engine of
// loader_impl.h: the consumer side (Next, Fetch), checkpoints (State,
// Restore) and metrics.
#include "cqlstream/loader.h"

#include <fmt/format.h>

#include <algorithm>

#include "loader/checkpoint.h"
#include "loader/loader_impl.h"
#include "util/measure.h"

namespace cqlstream {

using loader_impl::Clock;
using loader_impl::Epoch;
using loader_impl::Launch;
using loader_impl::Task;

// ----------------------------------------------------------------------------
// The consumer side's steps
// ----------------------------------------------------------------------------

bool Loader::Impl::AllEpochsRead() const { return o.epochs > 0 && consumer_epoch >= o.epochs; }

// The oldest unreadable sample of the consumer's epoch (OnMissing::kRaise).
std::optional<std::pair<SampleKey, Status>> Loader::Impl::TakeSampleError() {
  if (epochs.empty()) return std::nullopt;
  return epochs.front()->batches.TakeError();
}

// The next batch of `e` for the consumer, or null when none is ready.
BatchPtr Loader::Impl::TakeBatch(Epoch& e) {
  std::shared_ptr<Batch> b = e.batches.TakeReady();
  if (!b) return nullptr;
  m_images += static_cast<int64_t>(b->size());
  m_bytes += static_cast<int64_t>(b->data().size());
  m_batches++;
  pump_cv.Signal();
  return b;
}

// Every sample of `e` issued and resolved, every batch handed out.
bool Loader::Impl::EpochEnded(const Epoch& e) const {
  return e.batches.Finished() && e.AllIssued() && !e.batches.HasErrors();
}

void Loader::Impl::EndEpoch(std::vector<Launch>* out) {
  epochs.pop_front();
  consumer_epoch++;
  if (AllEpochsRead()) all_done = true;
  Refill(out);
}

Status Loader::Impl::NamedError(SampleKey key, const Status& err) {
  if (attached) return err;  // its messages name the foreign key and table already
  const std::string who = store::DescribeSample(*session, path_stmt, key);
  return Status(err.code(), fmt::format("{} [{}]", err.message(), who), err.server_error_ptr());
}

// The positions of `e` that are done (handed out, failed, or dropped by
// drop_last), as ranges.
loader::Ranges Loader::Impl::DoneRanges(const Epoch& e) const {
  loader::Ranges done;
  // The prefix [0, watermark) of the rank's sequence, as position ranges.
  uint64_t left = e.batches.done_watermark();
  for (const auto& r : e.plan.ranges()) {
    if (left == 0) break;
    const uint64_t take = std::min(left, r.size());
    done.push_back({r.begin, r.begin + take});
    left -= take;
  }
  for (uint64_t s : e.batches.done_above()) {
    const uint64_t p = e.plan.PositionAt(s);
    done.push_back({p, p + 1});
  }
  // Samples dropped by drop_last are not delivered but are not owed either.
  for (uint64_t s = e.batches.samples(); s < e.plan.size(); ++s) {
    const uint64_t p = e.plan.PositionAt(s);
    done.push_back({p, p + 1});
  }
  return loader::Normalize(std::move(done));
}

// ============================================================================
// Loader
// ============================================================================

Loader::Loader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Loader::~Loader() { Close(); }

StatusOr<std::unique_ptr<Loader>> Loader::Open(LoaderOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  Status s = impl->Init();
  if (!s.ok()) {
    if (impl->session) impl->session->Close();
    return s;
  }
  return std::unique_ptr<Loader>(new Loader(std::move(impl)));
}

void Loader::Close() {
  if (!impl_) return;
  {
    MutexLock l(&impl_->mu);
    if (impl_->closed) return;
    impl_->closed = true;
  }
  impl_->pump_cv.SignalAll();
  impl_->ready_cv.SignalAll();
  if (impl_->pump.joinable()) impl_->pump.join();
  // Fails what is in flight; completions see `closed` and return.
  if (impl_->session) impl_->session->Close();
  MutexLock l(&impl_->mu);
  impl_->epochs.clear();
  // Interrupted Fetch calls (their reads' ends, seeing `closed`, no longer
  // drop them); a call still waiting drops its own.
  std::erase_if(impl_->fetches, [](const std::unique_ptr<Epoch>& f) { return f->abandoned; });
  while (!impl_->retries.empty()) impl_->retries.pop();
  // The session's end (from a caller's thread: its I/O threads joined)
  // ended their reads; completions see `closed`.
  impl_->parked.clear();
  impl_->watch.clear();
}

StatusOr<BatchPtr> Loader::Next() { return Next(std::function<bool()>()); }

StatusOr<BatchPtr> Loader::Next(const std::function<bool()>& interrupted) {
  Impl& L = *impl_;
  std::vector<Launch> launches;
  MutexLock lock(&L.mu);
  if (!L.started) {
    L.started = true;
    L.Refill(&launches);  // the first window
  }
  const auto t0 = Clock::now();
  bool waited = false;
  bool ask = true;  // `interrupted` is asked once before each wait
  for (;;) {
    if (!launches.empty()) {
      lock.Unlock();
      L.Start(std::move(launches));
      launches.clear();
      lock.Lock();
    }
    if (L.closed) return Status::Cancelled("loader closed");
    if (auto failed = L.TakeSampleError()) {
      lock.Unlock();
      return L.NamedError(failed->first, failed->second);
    }
    if (L.epochs.empty()) {
      if (L.AllEpochsRead()) {
        L.all_done = true;
        return BatchPtr();
      }
      L.Refill(&launches);  // creates the consumer's epoch
      if (L.epochs.empty()) return Status::Internal("no epoch to read");
    }
    Epoch& e = *L.epochs.front();
    BatchPtr b = L.TakeBatch(e);
    if (b || L.EpochEnded(e)) {
      if (!b) L.EndEpoch(&launches);  // b null: the end of the epoch
      if (waited) L.m_stall_s += SecondsSince(t0);
      lock.Unlock();
      L.Start(std::move(launches));
      return b;
    }
    if (!launches.empty()) continue;
    if (interrupted && ask) {
      lock.Unlock();  // the caller's check may take its own locks (Python's GIL)
      const bool stop = interrupted();
      lock.Lock();
      if (stop) {
        if (waited) L.m_stall_s += SecondsSince(t0);
        return Status::Cancelled("interrupted");  // no batch taken
      }
      ask = false;
      continue;  // the state may have moved while unlocked
    }
    ask = true;
    waited = true;
    L.ready_cv.WaitFor(&L.mu, std::chrono::milliseconds(50));
  }
}

StatusOr<BatchPtr> Loader::Fetch(const std::vector<SampleKey>& keys) {
  return Fetch(keys, std::function<bool()>());
}

StatusOr<BatchPtr> Loader::Fetch(const std::vector<SampleKey>& keys, const std::function<bool()>& interrupted) {
  Impl& L = *impl_;
  if (keys.size() > static_cast<size_t>(L.o.batch_size)) {
    return Status::InvalidArgument(
        fmt::format("fetch of {} keys: at most batch_size ({}) per call", keys.size(), L.o.batch_size));
  }
  for (SampleKey k : keys) {
    if (!L.Committed(k)) return Status::NotFound(fmt::format("dataset '{}' has no sample {}", L.ds.name, FormatKey(k)));
  }
  std::vector<Launch> launches;
  Epoch* e = nullptr;
  {
    MutexLock lock(&L.mu);
    if (L.closed) return Status::Cancelled("loader closed");
    L.fetches.push_back(L.MakeFetch(keys));
    e = L.fetches.back().get();
    Loader::Impl::TaskGroups groups(L.GroupsOn() ? loader::CoalesceCap(L.o.coalesce, 4 * loader::kMaxCoalesce) : 1);
    for (uint64_t i = 0; i < keys.size(); ++i) {
      auto t = std::make_shared<Task>();
      t->ep = e;
      t->seq = i;
      t->key = keys[i];
      L.in_flight++;
      L.in_flight_unslotted++;
      L.IssueFirst(std::move(t), &groups, &launches);
    }
    L.FlushGroups(&groups, &launches);
  }
  L.Start(std::move(launches));
  MutexLock lock(&L.mu);
  // The caller's check runs without the lock (it may take Python's GIL).
  const auto reading = [&L, e]() REQUIRES(L.mu) { return !L.closed && !e->batches.Settled(); };
  if (!L.ready_cv.WaitWhile(&L.mu, reading, interrupted) && !L.closed) {
    // Its reads still point at it: the last of them to end drops it
    // (DropIfAbandoned), unless that was while the check ran.
    e->abandoned = true;
    L.DropIfAbandoned(e);
    return Status::Cancelled("interrupted");
  }
  auto self = std::find_if(L.fetches.begin(), L.fetches.end(), [&](const auto& p) { return p.get() == e; });
  std::unique_ptr<Epoch> mine = std::move(*self);
  L.fetches.erase(self);
  if (L.closed) return Status::Cancelled("loader closed");
  if (auto failed = mine->batches.TakeError()) {
    lock.Unlock();
    return L.NamedError(failed->first, failed->second);
  }
  std::shared_ptr<Batch> b = mine->batches.TakeReady();
  // None: every key was skipped (OnMissing::kSkip) or none was asked for.
  return BatchPtr(b ? std::move(b) : loader::EmptyBatch(-1));
}

bool Loader::Done() const {
  MutexLock l(&impl_->mu);
  return impl_->all_done;
}

int64_t Loader::SamplesPerEpoch() const {
  const uint64_t n = loader::RankSlice(impl_->source.size(), impl_->rank, impl_->world).size();
  if (!impl_->o.drop_last) return static_cast<int64_t>(n);
  const uint64_t b = static_cast<uint64_t>(impl_->o.batch_size);
  return static_cast<int64_t>(impl_->source.size() / static_cast<uint64_t>(impl_->world) / b * b);
}

int64_t Loader::BatchesPerEpoch() const { return impl_->BatchesFor(static_cast<uint64_t>(SamplesPerEpoch())); }

int Loader::rank() const { return impl_->rank; }
int Loader::world_size() const { return impl_->world; }
const DatasetInfo& Loader::dataset() const { return impl_->ds; }

std::string Loader::State() const {
  Impl& L = *impl_;
  MutexLock lock(&L.mu);
  loader::Checkpoint cp;
  cp.fingerprint = L.order_fingerprint;
  cp.seed = L.o.seed;
  cp.shuffle = L.o.shuffle;
  cp.drop_last = L.o.drop_last;
  cp.n = L.source.size();
  cp.world = L.world;
  cp.rank = L.rank;
  cp.batch_size = L.o.batch_size;
  if (L.epochs.empty()) {
    // Between epochs: the next one has not started.
    cp.epoch = L.consumer_epoch;
    cp.assigned = {loader::RankSlice(L.source.size(), L.rank, L.world)};
    return cp.Encode();
  }
  const Epoch& e = *L.epochs.front();
  cp.epoch = e.number;
  cp.assigned = loader::Normalize(e.plan.ranges());
  cp.batches_delivered = e.batches.next_batch_index();
  cp.done = L.DoneRanges(e);
  return cp.Encode();
}

Status Loader::Restore(const std::vector<std::string>& states) {
  Impl& L = *impl_;
  std::vector<loader::Checkpoint> cps;
  for (const auto& s : states) {
    CQLS_ASSIGN_OR_RETURN(loader::Checkpoint c, loader::Checkpoint::Decode(s));
    cps.push_back(std::move(c));
  }
  if (cps.empty()) return Status::InvalidArgument("no checkpoint given");
  const auto& a = cps.front();
  if (a.fingerprint != L.order_fingerprint || a.n != L.source.size()) {
    if (L.packed_layout && a.n == L.source.size() && a.fingerprint == L.source.Fingerprint()) {
      return Status::InvalidArgument(
          "the checkpoint was taken in the per-sample order; this loader reads packs (LoaderOptions::packed): "
          "resume it with packed off");
    }
    return Status::InvalidArgument(
        "the checkpoint was taken over another sample set or order (different dataset, split, selection or "
        "segments; packed reads or not, or other packs)");
  }
  if (a.seed != L.o.seed || a.shuffle != L.o.shuffle) {
    return Status::InvalidArgument(fmt::format("the checkpoint was taken with seed {} shuffle {}; this loader has "
                                               "seed {} shuffle {}",
                                               a.seed, a.shuffle, L.o.seed, L.o.shuffle));
  }
  CQLS_ASSIGN_OR_RETURN(loader::Ranges remaining, loader::RemainingFor(cps, L.rank, L.world));
  MutexLock lock(&L.mu);
  if (L.started) return Status::InvalidArgument("Restore must be called before the first batch is read");
  const bool same = cps.size() == 1 && a.world == L.world && a.rank == L.rank;
  L.epochs.clear();
  L.consumer_epoch = a.epoch;
  L.next_epoch = a.epoch + 1;
  if (L.o.epochs > 0 && a.epoch >= L.o.epochs) {
    L.all_done = true;
    return Status::OK();
  }
  L.epochs.push_back(L.MakeEpoch(a.epoch, remaining, same ? a.batches_delivered : 0, !same));
  return Status::OK();
}

LoaderMetrics Loader::Metrics() const {
  Impl& L = *impl_;
  LoaderMetrics m;
  auto sm = L.session->metrics();
  int connections = 0;
  for (const auto& h : L.session->Hosts()) connections += h.open_connections;
  if (L.attached) m.foreign_keys_cached = L.attached->keys->keys();  // (its own lock, not under mu)
  m.ignored_peer_rows = L.session->IgnoredPeerRows();                 // (the session's topology, not under mu)
  MutexLock lock(&L.mu);
  m.images_per_s = L.rate_images;
  m.mb_per_s = L.rate_bytes / 1e6;
  m.images = L.m_images;
  m.bytes = L.m_bytes;
  m.batches = L.m_batches;
  m.in_flight = static_cast<int>(L.in_flight);
  m.fetches = static_cast<int>(L.fetches.size());
  m.window = L.ctl.window();
  m.connections = connections;
  m.connections_wanted = L.ctl.connections();
  m.bytes_in_flight = static_cast<int64_t>(static_cast<double>(L.in_flight_unslotted) * L.avg_size);
  m.memory_bytes = L.account->total();
  m.memory_budget = L.budget;
  m.memory_peak_bytes = L.account->peak();
  if (auto p = L.latencies.Percentile(50, 1)) m.latency_p50_ms = static_cast<double>(p->count()) / 1000.0;
  if (auto p = L.latencies.Percentile(99, 1)) m.latency_p99_ms = static_cast<double>(p->count()) / 1000.0;
  m.retries = L.m_retries;
  m.hedges = L.m_hedges;
  m.hedge_wins = L.m_hedge_wins;
  m.coalesced_requests = L.m_coalesced_requests;
  m.packed_requests = L.m_packed_requests;
  m.pack_fallbacks = L.m_pack_fallbacks;
  m.group_failures = L.m_group_failures;
  m.key_lookups = L.m_key_lookups;
  m.coalesced_samples = L.m_coalesced_samples;
  m.timeouts = L.m_timeouts;
  m.duplicates_dropped = L.m_dupes;
  m.skipped = L.m_skipped;
  m.dropped = L.m_dropped;
  m.stall_s = L.m_stall_s;
  m.direct_bytes = static_cast<int64_t>(sm.direct_bytes);
  m.columns_decoded = static_cast<int64_t>(sm.columns_decoded);
  m.copied_bytes = static_cast<int64_t>(sm.copied_bytes);
  return m;
}

}  // namespace cqlstream
