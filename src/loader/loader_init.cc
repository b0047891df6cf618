// Copyright (c) cqlstream authors.
//
// Setting up the loader engine (loader_impl.h): the steps of Init, and the
// making of an epoch.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "loader/loader_impl.h"
#include "store/pack.h"
#include "store/catalog.h"

namespace cqlstream {

using loader_impl::Epoch;

namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  return (end != v && *end == '\0') ? static_cast<int>(x) : fallback;
}

}  // namespace

Loader::Impl::Impl(LoaderOptions opts)
    : o(std::move(opts)), ctl(loader::WindowController::Options{}, Clock::now()) {}

Status Loader::Impl::Init() {
  if (o.batch_size < 1) return Status::InvalidArgument(fmt::format("batch_size must be >= 1, got {}", o.batch_size));
  CQLS_RETURN_IF_ERROR(loader::CheckCoalesceOption(o.coalesce));
  CQLS_RETURN_IF_ERROR(ResolveRank());
  if (o.dataset.empty()) return Status::InvalidArgument("no dataset given");
  const int max_conns =
      o.max_connections_per_host > 0 ? o.max_connections_per_host : loader::WindowController::kDefaultMaxConnections;
  ConnectionOptions co = o.connection;
  co.connections_per_host = std::min(std::max(1, co.connections_per_host), max_conns);
  CQLS_RETURN_IF_ERROR(Connect(co));
  CQLS_RETURN_IF_ERROR(LoadSampleSet());
  // The first window's connections open during the round trips below.
  const int start_connections = StartConnections(co.connections_per_host, max_conns);
  session->SetTotalConnections(start_connections);
  CQLS_RETURN_IF_ERROR(LoadPacks());
  CQLS_RETURN_IF_ERROR(PrepareStatements());
  MutexLock lock(&mu);  // (the pump thread starts below)
  CQLS_RETURN_IF_ERROR(SizeMemory());
  if (attached) {
    for (auto& [name, sp] : attached->splits) sp.row.max_bytes = budget;
  }
  ConfigureWindow(start_connections, max_conns);
  // An interrupt that came after the last wait still ends Open.
  if (o.open_stop && o.open_stop->load()) return Status::Cancelled("interrupted");
  session->SetStop(nullptr);  // open: LoaderOptions::open_stop is Open's alone
  next_epoch = 0;
  pump = std::thread([this] { PumpLoop(); });
  return Status::OK();
}

// rank and world size: the options, else $RANK / $WORLD_SIZE, else 0 of 1.
Status Loader::Impl::ResolveRank() {
  rank = o.rank >= 0 ? o.rank : EnvInt("RANK", 0);
  world = o.world_size > 0 ? o.world_size : EnvInt("WORLD_SIZE", 1);
  if (world < 1 || rank < 0 || rank >= world) {
    return Status::InvalidArgument(fmt::format("rank {} is not in [0, world_size {})", rank, world));
  }
  return Status::OK();
}

// The session, and the dataset's catalog entry.
Status Loader::Impl::Connect(const ConnectionOptions& co) {
  // Setup queries (catalog, prepare) use the session's retrying default
  // policy; sample reads set their own (none: the loader retries per sample).
  net::SessionOptions so;
  net::DefaultRetryPolicy::Options ro;
  ro.max_retries = 8;
  so.retry = std::make_shared<net::DefaultRetryPolicy>(ro);
  so.stop = o.open_stop;  // forgotten at the end of Init
  auto s = net::Session::Connect(co, so);
  if (!s.ok()) return s.status();
  session = *s;
  CQLS_ASSIGN_OR_RETURN(ds, store::LoadDataset(*session, co.keyspace, o.dataset));
  for (const auto& g : ds.segments) {
    seg_max_size[g.seg] = g.max_size;
    seg_count[g.seg] = g.count;
  }
  return Status::OK();
}

// The samples an epoch covers: the split's committed samples, or a selection.
Status Loader::Impl::LoadSampleSet() {
  split = o.split;
  if (!o.selection_path.empty()) {
    CQLS_RETURN_IF_ERROR(LoadSelection());
  } else {
    source = loader::SampleSource::FromSegments(ds.SplitSegments(split));
  }
  if (source.size() > 0) return Status::OK();
  std::string splits;
  for (const auto& sp : ds.splits()) splits += (splits.empty() ? "" : ", ") + sp;
  return Status::NotFound(fmt::format("{} of dataset '{}' has no samples (splits: {})",
                                      o.selection_path.empty() ? "split '" + split + "'" : "the selection", ds.name,
                                      splits.empty() ? "none" : splits));
}

Status Loader::Impl::LoadSelection() {
  CQLS_ASSIGN_OR_RETURN(Selection sel, Selection::Load(o.selection_path));
  if (sel.dataset != ds.name) {
    return Status::InvalidArgument(fmt::format("selection '{}' was made for dataset '{}', not '{}'",
                                               o.selection_path, sel.dataset, ds.name));
  }
  split = sel.split;
  // Every selected key must be committed.
  for (SampleKey k : sel.keys) {
    if (!Committed(k)) {
      return Status::InvalidArgument(fmt::format("selection '{}' holds key {} which dataset '{}' does not have",
                                                 o.selection_path, FormatKey(k), ds.name));
    }
  }
  source = loader::SampleSource::FromKeys(std::move(sel.keys));
  return Status::OK();
}

Status Loader::Impl::PrepareStatements() {
  if (ds.attached()) return PrepareAttached();  // (no path table: errors name the foreign key)
  CQLS_ASSIGN_OR_RETURN(read_stmt, session->Prepare(store::DataReadQuery(ds)));
  if (o.coalesce != 1 && std::any_of(seg_max_size.begin(), seg_max_size.end(), [&](const auto& s) {
        return loader::Coalescible(s.second, ds.chunk_size);
      })) {
    CQLS_ASSIGN_OR_RETURN(group_read_stmt, session->Prepare(store::DataReadManyQuery(ds)));
    all_coalescible = std::all_of(seg_max_size.begin(), seg_max_size.end(), [&](const auto& s) {
      return loader::Coalescible(s.second, ds.chunk_size);
    });
  }
  if (packed_layout) {
    CQLS_ASSIGN_OR_RETURN(pack_read_stmt, session->Prepare(store::PackReadQuery(ds)));
  }
  auto p = session->Prepare(store::SamplePathQuery(ds));
  if (p.ok()) {
    path_stmt = *p;  // only for error messages
  } else if (p.status().code() == Status::Code::kCancelled) {
    return p.status();  // interrupted (LoaderOptions::open_stop)
  }
  return Status::OK();
}

// Batch memory: the address space a batch may need, and the byte budget.
Status Loader::Impl::SizeMemory() {
  const int64_t max_size = std::max<int64_t>(ds.MaxSize(split), 1);
  const double mean = CatalogMeanSize();
  uint64_t reservation = loader::BatchReservation(o.batch_size, max_size);
  if (ds.attached() && ds.Bytes(split) <= 0) {
    // The key snapshot knows no sizes: reserve the most address space a
    // batch may have (it is reserved, not committed).
    reservation = loader::kMaxBatchReservation;
  }
  avg_size = mean;
  if (o.max_batch_reservation > 0) reservation = std::min(reservation, static_cast<uint64_t>(o.max_batch_reservation));
  const double batch_bytes = o.batch_size * mean;
  budget = o.memory_bytes > 0 ? o.memory_bytes
                              : std::max<int64_t>(loader_impl::kMinDefaultMemoryBytes,
                                                  static_cast<int64_t>(loader_impl::kDefaultMemoryBatches * batch_bytes));
  if (static_cast<double>(budget) < 2.0 * batch_bytes) {
    return Status::InvalidArgument(fmt::format(
        "memory budget of {} bytes is less than two batches of {} samples (~{:.0f} bytes each)", budget,
        o.batch_size, batch_bytes));
  }
  // Pooled buffers count against the budget: keep at most what it can hold,
  // as many buffers as half of it holds batches of the catalog's mean (each
  // keeps 1.25 typical batches: about 5/8 of the budget; the budget check
  // gives pooled pages back first). A buffer the pool cannot keep is
  // unmapped, and the next batch pays a page fault for every page of a
  // fresh one: at long round trips the batches being filled at once (one
  // per batch_size requests in flight, and their stragglers) outnumbered a
  // pool of a quarter of the budget, and fresh pages cost the loader up to
  // a third of its CPU.
  const int max_pooled = static_cast<int>(std::clamp<double>(static_cast<double>(budget) / (2.0 * batch_bytes), 1.0, 16.0));
  pool = std::make_shared<loader::BufferPool>(static_cast<size_t>(reservation), max_pooled, account);
  return Status::OK();
}

double Loader::Impl::CatalogMeanSize() const {
  // The key snapshot of an attached dataset knows no sizes: assume an
  // ImageNet-sized sample until the running average (avg_size) knows better.
  if (ds.attached() && ds.Bytes(split) <= 0) return static_cast<double>(loader_impl::kAttachedSizeGuess);
  const int64_t split_bytes = std::max<int64_t>(ds.Bytes(split), 1);
  return static_cast<double>(split_bytes) / static_cast<double>(std::max<int64_t>(ds.Count(split), 1));
}

int Loader::Impl::UpHosts() const {
  int up_hosts = 0;
  for (const auto& h : session->Hosts()) up_hosts += h.up ? 1 : 0;
  return std::max(1, up_hosts);
}

int Loader::Impl::FirstWindow() const {
  const int window = o.initial_window > 0 ? o.initial_window : loader_impl::kDefaultInitialWindow;
  return o.max_in_flight > 0 ? std::clamp(window, std::min(4, o.max_in_flight), o.max_in_flight) : window;
}

int Loader::Impl::StartConnections(int per_host, int max_per_host) const {
  const int hosts = UpHosts();
  int n = per_host * hosts;
  if (o.adaptive) n = std::max(n, loader::WindowController::InitialConnections(FirstWindow(), CatalogMeanSize()));
  return std::clamp(n, 1, std::max(1, max_per_host) * hosts);
}

void Loader::Impl::ConfigureWindow(int start_connections, int max_connections) {
  loader::WindowController::Options wo;
  wo.initial_window = FirstWindow();
  wo.max_window = o.max_in_flight > 0 ? o.max_in_flight : loader_impl::kDefaultMaxInFlight;
  if (o.max_in_flight <= 0 && packed_layout) {
    // The window counts samples; a pack request moves P of them. The
    // default ceiling of 16,384 samples held packed reads at 100 ms to
    // about 155,000 images/s (16,384 per round trip): with packs it is
    // 16,384 x P / 16 samples (65,536 for packs of 64: 1,024 requests).
    wo.max_window = loader_impl::kDefaultMaxInFlight * std::max(1, packed_layout->pack_size() / 16);
  }
  wo.min_window = std::min(4, wo.max_window);
  // The controller counts connections to all hosts together (what the
  // bytes in flight need); the session spreads them over the up hosts
  // (SetTotalConnections) and says how many it can hold (ConnectionLimit).
  const int up_hosts = UpHosts();
  wo.initial_connections = start_connections;
  wo.max_connections = max_connections * up_hosts;
  wo.adaptive = o.adaptive;
  ctl = loader::WindowController(wo, Clock::now());
  session->SetTotalConnections(ctl.connections());  // also measures the descriptor budget
  connections_asked = ctl.connections();
  ctl.SetConnectionLimit(session->ConnectionLimit());
  ctl.SetConnectionsShrink(session->ConnectionsShrink());
}

bool Loader::Impl::Committed(SampleKey k) const {
  auto it = seg_count.find(KeySegment(k));
  return it != seg_count.end() && KeyIndex(k) >= 0 && KeyIndex(k) < it->second;
}

store::SampleHints Loader::Impl::HintsFor(SampleKey k) const {
  auto it = seg_max_size.find(KeySegment(k));
  return store::HintsFor(ds, it != seg_max_size.end() ? it->second : -1);
}

int64_t Loader::Impl::BatchesFor(uint64_t n) const {
  const uint64_t b = static_cast<uint64_t>(o.batch_size);
  return static_cast<int64_t>(o.drop_last ? n / b : (n + b - 1) / b);
}

loader::BatchAssembler::Options Loader::Impl::AssemblyOptions(int64_t epoch, bool ordered,
                                                               int64_t base_batches) const {
  loader::BatchAssembler::Options a;
  a.batch_size = o.batch_size;
  a.ordered = ordered;
  a.queue_errors = o.on_missing == OnMissing::kRaise;
  a.epoch = epoch;
  a.base_batches = base_batches;
  return a;
}

std::unique_ptr<Epoch> Loader::Impl::MakeEpoch(int64_t number, std::vector<loader::PositionRange> ranges,
                                               int64_t base_batches, bool resplit) {
  loader::RankPlan plan(std::move(ranges));
  const uint64_t n = plan.size();
  uint64_t samples = n;
  if (o.drop_last) {
    // Every rank delivers the same number of full batches: floor(N / world / B)
    // of a whole epoch; the rest of a resumed one is cut to full batches.
    const bool whole_slice = !resplit && base_batches == 0 && plan.ranges().size() == 1;
    const uint64_t per_rank = whole_slice ? source.size() / static_cast<uint64_t>(world) : n;
    const uint64_t b = static_cast<uint64_t>(o.batch_size);
    samples = std::min<uint64_t>(n, per_rank / b * b);
    m_dropped += static_cast<int64_t>(n - samples);
  }
  auto e = std::make_unique<Epoch>(
      number, loader::Permutation(source.size(), o.seed, static_cast<uint64_t>(number), o.shuffle), std::move(plan),
      loader::BatchAssembler(AssemblyOptions(number, o.ordered, base_batches), samples, pool));
  if (packed_layout) e->packed.emplace(packed_layout, o.seed, static_cast<uint64_t>(number), o.shuffle);
  return e;
}

// A Fetch call's batch: exactly these keys, in this order (ordered assembly).
std::unique_ptr<Epoch> Loader::Impl::MakeFetch(const std::vector<SampleKey>& keys) {
  auto e = std::make_unique<Epoch>(-1, loader::Permutation(0, 0, 0, false), loader::RankPlan(),
                                   loader::BatchAssembler(AssemblyOptions(-1, true, 0), keys.size(), pool));
  e->next_seq = keys.size();  // issued by Fetch itself
  return e;
}

}  // namespace cqlstream
