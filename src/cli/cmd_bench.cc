// Copyright (c) cqlstream authors.
//
// `cqlstream bench NAME`: reads epochs of a dataset through the loader
// without decoding and prints throughput, the consumer's wait (stall) and
// request latency. The first --warmup epochs are excluded from the summary.
// It also prints the start-up: time-to-90% (see StartupCurve) over the
// whole run, warm-up included, and with --ramp the rate per second.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

#include "cli/cli.h"
#include "util/measure.h"
#include "cqlstream/loader.h"

namespace cqlstream::cli {
namespace {

struct Args {
  std::string dataset, split = "train", selection;
  int batch_size = 256, epochs = 3, warmup = 1, seed = 0, rank = -1, world = -1;
  bool ordered = false, no_shuffle = false, fixed_window = false, verify = false, json = false, no_hedge = false,
       ramp = false, packed = false;
  int max_in_flight = 0, initial_window = 0, max_connections = 0, coalesce = 0;
  int64_t memory_mb = 0;
  // Per-sample retry bounds; 0: the loader's defaults (include/cqlstream/loader.h).
  int max_attempts = 0, request_timeout_ms = 0, retry_budget_ms = 0;
};

double Median(std::vector<double> v) { return Percentile(std::move(v), 50); }

LoaderOptions MakeOptions(const ConnectionOptions& connection, const Args& a) {
  LoaderOptions o;
  o.connection = connection;
  o.dataset = a.dataset;
  o.split = a.split;
  o.selection_path = a.selection;
  o.batch_size = a.batch_size;
  o.shuffle = !a.no_shuffle;
  o.seed = static_cast<uint64_t>(a.seed);
  o.rank = a.rank;
  o.world_size = a.world;
  o.ordered = a.ordered;
  o.epochs = a.epochs + a.warmup;
  o.verify_checksums = a.verify;
  o.max_in_flight = a.max_in_flight;
  o.initial_window = a.initial_window;
  o.adaptive = !a.fixed_window;
  o.max_connections_per_host = a.max_connections;
  o.memory_bytes = a.memory_mb * (1 << 20);
  o.hedge = !a.no_hedge;
  o.coalesce = a.coalesce;
  o.packed = a.packed;
  o.max_attempts = a.max_attempts;
  o.request_timeout = std::chrono::milliseconds(a.request_timeout_ms);
  o.retry_budget = std::chrono::milliseconds(a.retry_budget_ms);
  return o;
}

// Bytes delivered over time from the first request (the first Next(): the
// loader issues nothing before it), one point per batch. A batch's bytes
// count as arriving evenly since the previous batch (the loader fills
// batches continuously), so the cumulative curve is piecewise linear and
// rates over short windows are not quantized by whole batches.
class StartupCurve {
 public:
  // Steady state: the median rate over 1-s windows starting in the last
  // half of the run. Time-to-90%: the earliest time T (100 ms steps) such
  // that every 1-s window starting in [T, T + 1 s] carries >= 90% of it —
  // the rate reaches 90% and holds it. Both need a run of >= 4 s.
  static constexpr double kWindowS = 1.0, kStepS = 0.1, kHoldS = 1.0, kMinRunS = 4.0;

  void Add(double t, double bytes) {
    total_ += bytes;
    points_.emplace_back(t, total_);
  }
  double duration() const { return points_.empty() ? 0 : points_.back().first; }
  // Bytes delivered by time t: interpolated between the batches around it
  // (a binary search: a run has one point per batch, hundreds of thousands
  // in a long run of small batches, and At is called for every 100 ms step).
  double At(double t) const {
    auto it = std::lower_bound(points_.begin(), points_.end(), t,
                               [](const std::pair<double, double>& p, double x) { return p.first < x; });
    if (it == points_.end()) return points_.empty() ? 0.0 : points_.back().second;
    const auto [t1, c1] = *it;
    const auto [t0, c0] = it == points_.begin() ? std::pair<double, double>{0.0, 0.0} : *std::prev(it);
    return t1 > t0 ? c0 + (c1 - c0) * (t - t0) / (t1 - t0) : c1;
  }
  double Rate(double a, double b) const { return (At(b) - At(a)) / (b - a); }
  std::optional<double> Steady() const {
    const double end = duration();
    if (end < kMinRunS) return std::nullopt;
    std::vector<double> r;
    for (double a = end / 2; a + kWindowS <= end; a += kStepS) r.push_back(Rate(a, a + kWindowS));
    return r.empty() ? std::nullopt : std::optional<double>(Median(r));
  }
  std::optional<double> TimeTo90() const {
    const auto steady = Steady();
    if (!steady) return std::nullopt;
    const double end = duration();
    for (double t = 0; t + kHoldS + kWindowS <= end; t += kStepS) {
      bool holds = true;
      for (double a = t; a <= t + kHoldS + 1e-9 && holds; a += kStepS) holds = Rate(a, a + kWindowS) >= 0.9 * *steady;
      if (holds) return t;
    }
    return std::nullopt;
  }
  // The rate in each whole second from the first request.
  std::vector<double> PerSecond() const {
    std::vector<double> r;
    for (double a = 0; a + 1 <= duration(); a += 1) r.push_back(Rate(a, a + 1));
    return r;
  }

 private:
  double total_ = 0;
  std::vector<std::pair<double, double>> points_;  // (seconds since the first request, cumulative bytes)
};

struct EpochResult {
  double seconds, images, bytes, stall, cpu;
  std::vector<double> waits_ms;
  LoaderMetrics metrics;  // at the epoch's end
};

// Reads one epoch to its end, timing each Next().
StatusOr<EpochResult> ReadEpoch(Loader& loader, std::chrono::steady_clock::time_point start, StartupCurve* curve) {
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = ProcessCpuSeconds();
  const auto m0 = loader.Metrics();
  EpochResult r{};
  for (;;) {
    const auto w0 = std::chrono::steady_clock::now();
    auto b = loader.Next();
    const double wait_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - w0).count();
    if (!b.ok()) return b.status();
    if (!*b) break;
    r.waits_ms.push_back(wait_ms);
    r.images += static_cast<double>((*b)->size());
    r.bytes += static_cast<double>((*b)->data().size());
    curve->Add(SecondsSince(start),
               static_cast<double>((*b)->data().size()));
  }
  r.seconds = SecondsSince(t0);
  r.cpu = ProcessCpuSeconds() - cpu0;
  r.metrics = loader.Metrics();
  r.stall = r.metrics.stall_s - m0.stall_s;
  return r;
}

void PrintEpoch(int e, bool warm, const EpochResult& r) {
  const LoaderMetrics& m = r.metrics;
  fmt::print("epoch {}{}: {:.0f} images, {:.1f} MB in {:.2f} s: {:.0f} images/s, {:.1f} MB/s, stall {:.2f} s, "
             "wait p50 {:.2f} ms p99 {:.2f} ms; latency p50 {:.2f} ms p99 {:.2f} ms; window {} in flight {} "
             "connections {} (wanted {}); retries {} hedges {} ({} won) timeouts {}\n",
             e, warm ? " (warm-up)" : "", r.images, r.bytes / 1e6, r.seconds, r.images / r.seconds,
             r.bytes / 1e6 / r.seconds, r.stall, Percentile(r.waits_ms, 50), Percentile(r.waits_ms, 99),
             m.latency_p50_ms, m.latency_p99_ms, m.window, m.in_flight, m.connections, m.connections_wanted, m.retries,
             m.hedges, m.hedge_wins, m.timeouts);
}

// The summary over the measured epochs: medians per epoch, waits over all.
void PrintSummary(const Args& a, const std::vector<EpochResult>& measured, const std::vector<double>& all_waits,
                  const LoaderMetrics& m, const StartupCurve& curve) {
  const auto steady = curve.Steady();
  const auto t90 = curve.TimeTo90();
  std::vector<double> ips, mbps, cpu_per_gb, stall;
  // Over all measured epochs together: the rate that holds when an epoch is
  // shorter than what the window prefetches (epochs then alternate between
  // waiting and arriving at once, and their median says little).
  double images = 0, seconds = 0;
  for (const auto& r : measured) {
    images += static_cast<double>(r.images);
    seconds += r.seconds;
    ips.push_back(r.images / r.seconds);
    mbps.push_back(r.bytes / 1e6 / r.seconds);
    cpu_per_gb.push_back(r.bytes > 0 ? r.cpu / (r.bytes / 1e9) : 0);
    stall.push_back(r.stall);
  }
  if (a.json) {
    fmt::print("{{\"loader\": \"cqlstream{}\", \"images_per_s\": {:.1f}, \"mb_per_s\": {:.2f}, "
               "\"cpu_s_per_gb\": {:.3f}, \"p50_wait_ms\": {:.3f}, \"p99_wait_ms\": {:.3f}, "
               "\"peak_rss_mb\": {:.1f}, \"peak_memory_mb\": {:.1f}, \"epochs\": {}, "
               "\"stall_s\": {:.3f}, \"window\": {}, \"connections\": {}, \"connections_wanted\": {}, "
               "\"retries\": {}, \"hedges\": {}, "
               "\"latency_p50_ms\": {:.3f}, \"latency_p99_ms\": {:.3f}, \"direct_bytes\": {}, \"copied_bytes\": {}, "
               "\"time_to_90_s\": {}, \"steady_mb_per_s\": {}, \"coalesced_requests\": {}, "
               "\"coalesced_samples\": {}, \"packed_requests\": {}, \"group_failures\": {}, \"key_lookups\": {}, "
               "\"foreign_keys_cached\": {}, \"columns_decoded\": {}, "
               "\"images_per_s_overall\": {:.1f}}}\n",
               a.ordered ? "-ordered" : "", Median(ips), Median(mbps), Median(cpu_per_gb), Percentile(all_waits, 50),
               Percentile(all_waits, 99), PeakRssMb(), static_cast<double>(m.memory_peak_bytes) / 1048576.0,
               measured.size(), Median(stall), m.window, m.connections,
               m.connections_wanted, m.retries, m.hedges, m.latency_p50_ms, m.latency_p99_ms, m.direct_bytes,
               m.copied_bytes,
               t90 ? fmt::format("{:.1f}", *t90) : "null", steady ? fmt::format("{:.2f}", *steady / 1e6) : "null",
               m.coalesced_requests, m.coalesced_samples, m.packed_requests, m.group_failures, m.key_lookups,
               m.foreign_keys_cached, m.columns_decoded,
               seconds > 0 ? images / seconds : 0.0);
  } else if (!measured.empty()) {
    fmt::print("summary over {} epoch{} (median): {:.0f} images/s ({:.0f} over all of them), {:.1f} MB/s, "
               "{:.3f} CPU s/GB, stall {:.2f} s, "
               "batch wait p50 {:.2f} ms p99 {:.2f} ms, peak RSS {:.0f} MiB (batch memory {:.0f} MiB at most); "
               "{:.0f}% of sample bytes received in place\n",
               measured.size(), measured.size() == 1 ? "" : "s", Median(ips), seconds > 0 ? images / seconds : 0.0,
               Median(mbps), Median(cpu_per_gb),
               Median(stall), Percentile(all_waits, 50), Percentile(all_waits, 99), PeakRssMb(),
               static_cast<double>(m.memory_peak_bytes) / 1048576.0, m.direct_bytes + m.copied_bytes > 0
                   ? 100.0 * static_cast<double>(m.direct_bytes) /
                         static_cast<double>(m.direct_bytes + m.copied_bytes)
                   : 0.0);
  }
  if (a.json) return;
  fmt::print("coalesced reads: {} requests ({} of one pack), {:.1f} samples per request, {} samples not delivered by "
             "their group\n",
             m.coalesced_requests, m.packed_requests,
             m.coalesced_requests > 0
                 ? static_cast<double>(m.coalesced_samples) / static_cast<double>(m.coalesced_requests)
                 : 0.0,
             m.group_failures);
  if (m.key_lookups > 0 || m.foreign_keys_cached > 0) {
    fmt::print("attached: {} key lookups, {} foreign keys kept for later epochs\n", m.key_lookups,
               m.foreign_keys_cached);
  }
  if (t90) {
    fmt::print("time to 90%: {:.1f} s from the first request (steady state {:.1f} MB/s: the median rate over 1-s "
               "windows in the last half of the run; 90% reached and held for 1 s)\n",
               *t90, *steady / 1e6);
  } else {
    fmt::print("time to 90%: n/a ({})\n", steady ? "90% of the steady state was not reached and held"
                                                 : "the run is shorter than 4 s");
  }
  if (a.ramp) {
    const auto ps = curve.PerSecond();
    for (size_t i = 0; i < ps.size(); ++i) fmt::print("ramp {}-{} s: {:.1f} MB/s\n", i, i + 1, ps[i] / 1e6);
  }
}

int Run(const ConnectionFlags& flags, const Args& a) {
  auto co = flags.Resolve();
  if (!co.ok()) return ReportError(co.status());
  auto l = Loader::Open(MakeOptions(*co, a));
  if (!l.ok()) return ReportError(l.status());
  Loader& loader = **l;
  if (!a.json) {
    fmt::print("dataset {} split {}: {} samples per epoch for rank {}/{}, {} batches of {}{}\n", a.dataset,
               a.selection.empty() ? a.split : "(selection)", loader.SamplesPerEpoch(), loader.rank(),
               loader.world_size(), loader.BatchesPerEpoch(), a.batch_size, a.ordered ? ", ordered" : "");
  }
  std::vector<EpochResult> measured;
  std::vector<double> all_waits;
  StartupCurve curve;
  const auto start = std::chrono::steady_clock::now();
  for (int e = 0; e < a.epochs + a.warmup; ++e) {
    auto r = ReadEpoch(loader, start, &curve);
    if (!r.ok()) return ReportError(r.status());
    const bool warm = e < a.warmup;
    if (!a.json) PrintEpoch(e, warm, *r);
    if (!warm) {
      all_waits.insert(all_waits.end(), r->waits_ms.begin(), r->waits_ms.end());
      measured.push_back(std::move(*r));
    }
  }
  PrintSummary(a, measured, all_waits, loader.Metrics(), curve);
  loader.Close();
  return 0;
}

}  // namespace

void RegisterBench(CLI::App& app, Action* action) {
  auto* cmd = app.add_subcommand("bench", "Read epochs of a dataset through the loader (no decoding) and measure");
  auto flags = std::make_shared<ConnectionFlags>();
  flags->Add(cmd);
  auto a = std::make_shared<Args>();
  cmd->add_option("dataset", a->dataset, "Dataset name")->required();
  cmd->add_option("--split", a->split, "Split to read (default train)");
  cmd->add_option("--selection", a->selection, "Read a selection file instead of a split");
  cmd->add_option("--batch-size", a->batch_size, "Samples per batch (default 256)")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--epochs", a->epochs, "Measured epochs (default 3)")->check(CLI::Range(1, 1000000));
  cmd->add_option("--warmup", a->warmup, "Warm-up epochs, not measured (default 1)")->check(CLI::Range(0, 1000));
  cmd->add_flag("--ordered", a->ordered, "Ordered mode (exact plan order)");
  cmd->add_flag("--no-shuffle", a->no_shuffle, "Read in key order");
  cmd->add_option("--seed", a->seed, "Shuffle seed");
  cmd->add_option("--rank", a->rank, "Rank (default $RANK or 0)");
  cmd->add_option("--world-size", a->world, "World size (default $WORLD_SIZE or 1)");
  cmd->add_flag("--verify", a->verify, "Verify checksums while reading");
  cmd->add_option("--max-in-flight", a->max_in_flight, "Cap on requests in flight (default: adaptive up to 16384)");
  cmd->add_option("--initial-window", a->initial_window, "First window (default 32)");
  cmd->add_flag("--fixed-window", a->fixed_window, "Keep the window at --max-in-flight (no adaptation)");
  cmd->add_option("--max-connections", a->max_connections,
                  "Cap on connections per host (default: adaptive, up to a safety limit of 256)");
  cmd->add_option("--memory-mb", a->memory_mb, "Byte budget in MiB (default max(1 GiB, 8 batches))");
  cmd->add_flag("--no-hedge", a->no_hedge, "Do not hedge slow requests");
  cmd->add_option("--coalesce", a->coalesce,
                  "Keys per request for small samples (0: automatic, 64; 1: off; at most 100)");
  cmd->add_flag("--packed", a->packed,
                "Read the split's packs (cqlstream pack) one pack per request, in the packed order");
  cmd->add_option("--max-attempts", a->max_attempts, "Attempts per sample before it fails (default 64)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--request-timeout-ms", a->request_timeout_ms,
                  "Per-attempt time-out of a sample read (default: adaptive, 2-30 s)")
      ->check(CLI::Range(1, 86400000));
  cmd->add_option("--retry-budget-ms", a->retry_budget_ms,
                  "Time a sample may spend in retries after its first failure (default 120000)")
      ->check(CLI::Range(1, 86400000));
  cmd->add_flag("--ramp", a->ramp,
                "Also print the rate in each second from the first request (time to 90% is always printed: the "
                "first time from which every 1-s window for the next second carries >= 90% of the steady state, "
                "the median 1-s rate of the run's last half)");
  cmd->add_flag("--json", a->json, "Print one JSON summary line (for bench/run)");
  cmd->callback([action, flags, a] { *action = [flags, a] { return Run(*flags, *a); }; });
}

}  // namespace cqlstream::cli
