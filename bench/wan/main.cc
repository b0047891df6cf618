// Copyright (c) cqlstream authors.
//
// cqlstream-wan: a user-space WAN emulator (TCP proxy). See proxy.h and
// wan_model.h for the model, docs/wan.md for usage
// and its measured accuracy.
#include <fmt/format.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <asio.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "util/main_guard.h"
#include "wan/proxy.h"
#include "wan/units.h"

namespace {

using cqlstream::wan::FormatBytes;
using cqlstream::wan::MappingStats;
using cqlstream::wan::Proxy;

// How late the delay line released the mapping's bytes since the start, for
// the end of its stats line: bytes per bucket (bench/run_lib/harness.py diffs
// them per run) and the median and 99th percentile bucket bounds; empty when
// nothing was timed.
std::string Lateness(const MappingStats& s) {
  uint64_t total = 0;
  for (uint64_t b : s.late_bytes) total += b;
  if (total == 0) return {};
  std::string out = "  released late (bytes)";
  for (size_t i = 0; i < cqlstream::wan::kLateBuckets; ++i) {
    out += i + 1 < cqlstream::wan::kLateBuckets
               ? fmt::format(" <={}ms:{}", cqlstream::wan::kLateBucketMs[i], s.late_bytes[i])
               : fmt::format(" >{}ms:{}", cqlstream::wan::kLateBucketMs[i - 1], s.late_bytes[i]);
  }
  auto bound = [&](double q) {
    const double ms = s.LateQuantileMs(q);
    return std::isinf(ms) ? fmt::format(">{} ms", cqlstream::wan::kLateBucketMs[cqlstream::wan::kLateBuckets - 2])
                          : fmt::format("<={} ms", ms);
  };
  return out + fmt::format(" p50 {}, p99 {}", bound(0.5), bound(0.99));
}

struct Printer {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last = start;
  std::vector<MappingStats> prev;

  void Print(const Proxy& proxy, const char* why) {
    auto now = std::chrono::steady_clock::now();
    double since_start = std::chrono::duration<double>(now - start).count();
    double dt = std::chrono::duration<double>(now - last).count();
    std::vector<MappingStats> stats = proxy.Stats();
    fmt::print("[wan] stats ({}) t={:.1f}s cpu={:.2f}s\n", why, since_start, proxy.CpuSeconds());
    for (size_t i = 0; i < stats.size(); ++i) {
      const MappingStats& s = stats[i];
      uint64_t up0 = i < prev.size() ? prev[i].bytes_up : 0;
      uint64_t down0 = i < prev.size() ? prev[i].bytes_down : 0;
      auto rate = [dt](uint64_t a, uint64_t b) { return dt > 0 ? (b - a) / dt / 1e6 : 0.0; };
      fmt::print(
          "[wan]   {}  conns {} active / {} total / {} connect failed / {} errors  up {} ({:.1f} "
          "MB/s)  down {} ({:.1f} MB/s){}\n",
          s.name, s.active, s.accepted, s.connect_failures, s.errors, FormatBytes(s.bytes_up),
          rate(up0, s.bytes_up), FormatBytes(s.bytes_down), rate(down0, s.bytes_down), Lateness(s));
    }
    std::fflush(stdout);
    prev = std::move(stats);
    last = now;
  }
};

// The command line.
struct Flags {
  std::vector<std::string> maps;
  double delay_ms = 0, rtt_ms = -1, jitter_ms = 0, rate_mbit = 0, stats_interval = 0;
  double change_at_s = -1, change_rtt_ms = -1;
  std::string window = "4MiB", sockbuf = "256KiB", read_chunk = "256KiB";
  int threads = 1;
  uint64_t seed = 1;
  bool no_handshake = false, copy = false;
  int rt_priority = 10;
};

void AddFlags(CLI::App& app, Flags* f) {
  app.add_option("--map", f->maps, "LISTEN=TARGET, e.g. 127.0.0.2:9042=127.0.0.1:9042 (repeatable)")
      ->required();
  auto* delay_opt = app.add_option("--delay-ms", f->delay_ms, "one-way delay D in ms (RTT = 2D)")
                        ->check(CLI::NonNegativeNumber);
  app.add_option("--rtt-ms", f->rtt_ms, "round-trip time in ms (sets --delay-ms to RTT/2)")
      ->check(CLI::NonNegativeNumber)
      ->excludes(delay_opt);
  auto* change_at = app.add_option("--change-at-s", f->change_at_s,
                                   "seconds after start at which the RTT becomes --change-rtt-ms, for open and "
                                   "new connections alike (a route change mid-run); bytes keep their order")
                        ->check(CLI::Range(0.0, 1e6));
  app.add_option("--change-rtt-ms", f->change_rtt_ms, "the round-trip time from --change-at-s on")
      ->check(CLI::Range(0.0, 1e6))
      ->needs(change_at);
  change_at->needs("--change-rtt-ms");
  app.add_option("--jitter-ms", f->jitter_ms,
                 "extra one-way delay, uniform in [0, J] ms; never reorders bytes")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--rate-mbit", f->rate_mbit,
                 "link rate per direction in Mbit/s, shared by all connections (0 = uncapped)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--window", f->window,
                 "per-connection window W in bytes (4MiB, 512KiB, 1000000; 0 = unlimited)")
      ->capture_default_str();
  app.add_option("--threads", f->threads, "I/O threads")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--stats-interval", f->stats_interval, "print stats every N seconds (0 = only on "
                 "SIGUSR1 and at exit)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--sockbuf", f->sockbuf, "SO_RCVBUF/SO_SNDBUF of the proxy's sockets (0 = kernel)")
      ->capture_default_str();
  app.add_option("--read-chunk", f->read_chunk, "largest single read of the --copy path")
      ->capture_default_str();
  app.add_option("--seed", f->seed, "jitter seed")->capture_default_str();
  app.add_flag("--no-handshake-delay", f->no_handshake,
               "do not hold the first bytes for the emulated TCP handshake");
  app.add_option("--rt-priority", f->rt_priority,
                 "SCHED_FIFO priority of the I/O threads, best effort, so timers fire on time on a "
                 "busy machine (0 = normal scheduling)")
      ->check(CLI::Range(0, 99))
      ->capture_default_str();
  app.add_flag("--copy", f->copy, "move bytes through user-space buffers instead of splice(2)");
}

// The proxy's options from the flags (--rtt-ms resolved into f->delay_ms).
cqlstream::StatusOr<cqlstream::wan::ProxyOptions> MakeOptions(Flags* f) {
  cqlstream::wan::ProxyOptions o;
  for (const std::string& m : f->maps) {
    CQLS_ASSIGN_OR_RETURN(auto spec, cqlstream::wan::ParseMapping(m));
    o.mappings.push_back(spec);
  }
  if (f->rtt_ms >= 0) f->delay_ms = f->rtt_ms / 2;
  auto to_ns = [](double ms) { return std::chrono::nanoseconds(std::llround(ms * 1e6)); };
  o.delay = to_ns(f->delay_ms);
  o.jitter = to_ns(f->jitter_ms);
  if (f->change_at_s >= 0) {
    o.change_after = std::chrono::nanoseconds(std::llround(f->change_at_s * 1e9));
    o.changed_delay = to_ns(f->change_rtt_ms / 2);
  }
  o.rate_bytes_per_sec = static_cast<uint64_t>(std::llround(f->rate_mbit * 1e6 / 8));
  CQLS_ASSIGN_OR_RETURN(const uint64_t w, cqlstream::wan::ParseByteSize(f->window));
  CQLS_ASSIGN_OR_RETURN(const uint64_t sb, cqlstream::wan::ParseByteSize(f->sockbuf));
  CQLS_ASSIGN_OR_RETURN(const uint64_t rc, cqlstream::wan::ParseByteSize(f->read_chunk));
  if (sb > (1u << 30) || rc > (1u << 30)) {
    return cqlstream::Status::InvalidArgument("--sockbuf/--read-chunk too large");
  }
  o.window_bytes = w;
  o.socket_buffer_bytes = static_cast<int>(sb);
  o.read_chunk = static_cast<size_t>(rc);
  o.threads = f->threads;
  o.seed = f->seed;
  o.emulate_handshake = !f->no_handshake;
  o.zero_copy = !f->copy;
  o.realtime_priority = f->rt_priority;
  return o;
}

void Announce(const Proxy& proxy, const Flags& f, const cqlstream::wan::ProxyOptions& o) {
  fmt::print("[wan] delay {} ms one-way (RTT {} ms), jitter {} ms, rate {}, window {}, threads {}, {}\n",
             f.delay_ms, 2 * f.delay_ms, f.jitter_ms,
             f.rate_mbit > 0 ? fmt::format("{} Mbit/s", f.rate_mbit) : std::string("uncapped"),
             o.window_bytes ? FormatBytes(o.window_bytes) : std::string("unlimited"), f.threads,
             f.copy ? "copy path" : "splice");
  if (f.change_at_s >= 0) fmt::print("[wan] RTT {} ms from {} s after start\n", f.change_rtt_ms, f.change_at_s);
  if (f.rt_priority > 0) {
    // The threads set their priority as they start.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!proxy.realtime()) {
      fmt::print(stderr, "[wan] warning: no SCHED_FIFO priority (needs CAP_SYS_NICE); timers may fire "
                         "late on a busy machine\n");
    }
  }
  auto eps = proxy.listen_endpoints();
  for (size_t i = 0; i < eps.size(); ++i) {
    fmt::print("[wan] listening {} -> {}\n", eps[i].ToString(), o.mappings[i].target.ToString());
  }
  std::fflush(stdout);
}

// Runs until SIGINT or SIGTERM, printing stats on SIGUSR1 and every
// `stats_interval` seconds; signals are caught on main_io (this thread).
void Serve(asio::io_context& main_io, asio::signal_set& signals, Proxy& proxy, double stats_interval) {
  Printer printer;
  std::function<void(const asio::error_code&, int)> on_signal;
  on_signal = [&](const asio::error_code& ec, int sig) {
    if (ec) return;
    if (sig == SIGUSR1) {
      printer.Print(proxy, "SIGUSR1");
      signals.async_wait(on_signal);
      return;
    }
    main_io.stop();
  };
  signals.async_wait(on_signal);

  asio::steady_timer stats_timer(main_io);
  std::function<void(const asio::error_code&)> on_tick;
  const auto interval = std::chrono::nanoseconds(std::llround(stats_interval * 1e9));
  on_tick = [&](const asio::error_code& ec) {
    if (ec) return;
    printer.Print(proxy, "interval");
    stats_timer.expires_at(stats_timer.expiry() + interval);
    stats_timer.async_wait(on_tick);
  };
  if (stats_interval > 0) {
    stats_timer.expires_after(interval);
    stats_timer.async_wait(on_tick);
  }
  main_io.run();
  printer.Print(proxy, "exit");
}

}  // namespace

static int Main(int argc, char** argv) {
  CLI::App app{
      "cqlstream-wan: TCP proxy emulating a long-distance path (one-way delay, jitter without "
      "reordering, shared link-rate cap, per-connection window W limiting each connection to "
      "W/RTT)."};
  Flags f;
  AddFlags(app, &f);
  CLI11_PARSE(app, argc, argv);
  auto o = MakeOptions(&f);
  if (!o.ok()) {
    fmt::print(stderr, "cqlstream-wan: {}\n", o.status().ToString());
    return 2;
  }

  ::signal(SIGPIPE, SIG_IGN);
  // asio's signal_set catches these on whichever thread they land and runs
  // the handlers on main_io (this thread).
  asio::io_context main_io{1};
  asio::signal_set signals(main_io, SIGINT, SIGTERM, SIGUSR1);

  auto proxy_or = Proxy::Start(*o);
  if (!proxy_or.ok()) {
    fmt::print(stderr, "cqlstream-wan: {}\n", proxy_or.status().ToString());
    return 1;
  }
  std::unique_ptr<Proxy> proxy = std::move(proxy_or).value();
  Announce(*proxy, f, *o);
  Serve(main_io, signals, *proxy, f.stats_interval);
  proxy->Stop();
  return 0;
}

int main(int argc, char** argv) {
  return cqlstream::GuardedMain("cqlstream-wan", [&] { return Main(argc, argv); });
}
