// Copyright (c) cqlstream authors.
//
// cqlstream-wan-validate: checks the WAN emulator against its model.
//
// Starts a BulkSource (the "server"), an in-process cqlstream-wan Proxy in
// front of it and a BulkSink (the "client", n connections) that downloads
// through the proxy, over a grid of RTT x window x rate x connections. For
// each point it skips the ramp-up, measures steady-state throughput over a
// whole number of RTTs (>= 20 RTTs and >= 2 s; --quick: >= 10 RTTs, >= 1 s)
// and compares it with the model:
//   expected = min(R, n * W / RTT)                (R = 0: no cap)
//   RTT 0, uncapped: the direct connection's throughput (no proxy), n alike
//   if the model asks for more than the machine moves through the proxy's
//   timed path at RTT 0 (same n, W; measured first, --no-timed-rows skips
//   it), that throughput is the expectation ("machine" limit).
// Prints a table (markdown) and exits 1 if any checked point is off by more
// than the tolerance (10%) twice in a row (--retries 1), 2 on setup errors. Points whose expectation is a
// CPU limit (zero delay vs direct, "machine") measure the host more than the
// emulator: --cpu-tolerance (default 10%; --quick only reports them). Also
// checks byte integrity under jitter and reports the proxy's CPU cost at
// zero delay, measured in alternating slices against a direct connection.
#include <fmt/format.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "wan/bulk.h"
#include "wan/proxy.h"
#include "util/measure.h"
#include "util/main_guard.h"
#include "wan/units.h"

namespace {

using cqlstream::Status;
using cqlstream::wan::BulkSink;
using cqlstream::wan::BulkSource;
using cqlstream::wan::Proxy;
using cqlstream::wan::ProxyOptions;
using Seconds = std::chrono::duration<double>;
using cqlstream::ProcessCpuSeconds;

struct Point {
  double rtt_ms = 0;
  uint64_t window = 0;
  double rate_mbit = 0;
  int conns = 1;
  bool direct = false;
  bool timed_path = false;  // RTT 0 uncapped, every byte timed anyway (force_timed)
  // results
  double measured = 0;      // bytes/s
  double seconds = 0;       // measured interval
  double proxy_cpu = 0;     // proxy threads, CPU s during the interval
  double process_cpu = 0;   // whole process, CPU s during the interval
  double expected = 0;
  double direct_ref = 0;         // RTT 0 uncapped: direct throughput, interleaved
  double direct_cpu_per_gb = 0;  // process CPU s/GB of those direct slices
  std::string limit;
  bool checked = true;
  bool ok = true;
};

bool g_realtime_refused = false;

struct Settings {
  int proxy_threads = 1;
  bool zero_copy = true;
  int rt_priority = 10;
  int endpoint_nice = -10;  // source and sink threads
  int sockbuf = 256 << 10;
  double min_seconds = 2;
  double min_rtts = 20;
  double warmup_seconds = 0.5;
  double warmup_rtts = 4;
  double tolerance = 0.10;      // window- and rate-limited points: the model
  double cpu_tolerance = 0.10;  // CPU-bound points ("direct", "machine"); < 0: report only
  int min_pairs = 3;  // interleaved direct/proxied slice pairs at zero delay
  int retries = 1;    // re-measurements of a point that misses
};

struct Sample {
  uint64_t bytes = 0;
  double seconds = 0;
  double proxy_cpu = 0;
  double process_cpu = 0;
  void Add(const Sample& o) {
    bytes += o.bytes;
    seconds += o.seconds;
    proxy_cpu += o.proxy_cpu;
    process_cpu += o.process_cpu;
  }
};

Sample Measure(const BulkSink& sink, const Proxy* proxy, double seconds) {
  Sample out;
  const uint64_t b0 = sink.bytes();
  const double pc0 = proxy ? proxy->CpuSeconds() : 0, c0 = ProcessCpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_until(t0 + std::chrono::duration_cast<std::chrono::nanoseconds>(Seconds(seconds)));
  out.bytes = sink.bytes() - b0;
  out.seconds = Seconds(std::chrono::steady_clock::now() - t0).count();
  out.proxy_cpu = (proxy ? proxy->CpuSeconds() : 0) - pc0;
  out.process_cpu = ProcessCpuSeconds() - c0;
  return out;
}

void Record(const Sample& smp, Point& p) {
  p.seconds = smp.seconds;
  p.measured = static_cast<double>(smp.bytes) / smp.seconds;
  p.proxy_cpu = smp.proxy_cpu;
  p.process_cpu = smp.process_cpu;
}

// Slices of the interleaved zero-delay comparison.
constexpr double kSliceRamp = 0.1;
constexpr double kSliceMeasure = 0.4;

cqlstream::StatusOr<bool> RunPoint(const Settings& s, uint16_t source_port, Point& p) {
  std::unique_ptr<Proxy> proxy;
  uint16_t port = source_port;
  if (!p.direct) {
    ProxyOptions o;
    o.mappings = {cqlstream::wan::MappingSpec{{"127.0.0.1", 0}, {"127.0.0.1", source_port}}};
    o.delay = std::chrono::nanoseconds(std::llround(p.rtt_ms * 1e6 / 2));
    o.rate_bytes_per_sec = static_cast<uint64_t>(std::llround(p.rate_mbit * 1e6 / 8));
    o.window_bytes = p.window;
    o.threads = s.proxy_threads;
    o.socket_buffer_bytes = s.sockbuf;
    o.zero_copy = s.zero_copy;
    o.force_timed = p.timed_path;
    o.realtime_priority = s.rt_priority;
    auto started = Proxy::Start(o);
    if (!started.ok()) return started.status();
    proxy = std::move(started).value();
    port = proxy->listen_endpoints()[0].port;
    if (s.rt_priority > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // threads set it as they start
      if (!proxy->realtime()) g_realtime_refused = true;
    }
  }
  const double rtt = p.rtt_ms / 1e3;
  double measure = std::max(s.min_seconds, s.min_rtts * rtt);
  // A whole number of RTTs: the window-limited flow is periodic in the RTT.
  if (rtt > 0) measure = std::ceil(measure / rtt - 1e-9) * rtt;

  if (!p.direct && rtt == 0 && p.rate_mbit == 0) {
    // CPU-bound on a shared machine: measure proxied and direct in short
    // alternating slices (ABBA order) so that load drifts hit both alike.
    auto d = BulkSink::Start("127.0.0.1", source_port, p.conns, false, /*paused=*/true, s.endpoint_nice);
    if (!d.ok()) return d.status();
    auto x = BulkSink::Start("127.0.0.1", port, p.conns, false, /*paused=*/true, s.endpoint_nice);
    if (!x.ok()) return x.status();
    const int pairs = std::max(s.min_pairs, static_cast<int>(std::ceil(measure / kSliceMeasure - 1e-9)));
    Sample direct, proxied;
    for (int i = 0; i < 2 * pairs; ++i) {
      const bool proxied_turn = (i % 4 == 0 || i % 4 == 3);
      BulkSink& sink = proxied_turn ? **x : **d;
      sink.SetPaused(false);
      std::this_thread::sleep_for(Seconds(kSliceRamp));
      Sample smp = Measure(sink, proxied_turn ? proxy.get() : nullptr, kSliceMeasure);
      sink.SetPaused(true);
      (proxied_turn ? proxied : direct).Add(smp);
    }
    const int errors = (*d)->errors() + (*x)->errors();
    (*d)->Stop();
    (*x)->Stop();
    proxy->Stop();
    if (errors > 0) return Status::IOError(fmt::format("{} connection(s) failed during the run", errors));
    Record(proxied, p);
    p.direct_ref = static_cast<double>(direct.bytes) / direct.seconds;
    p.direct_cpu_per_gb = direct.process_cpu / (static_cast<double>(direct.bytes) / 1e9);
    return true;
  }

  auto sink_or = BulkSink::Start("127.0.0.1", port, p.conns, /*verify=*/false, false, s.endpoint_nice);
  if (!sink_or.ok()) return sink_or.status();
  std::unique_ptr<BulkSink> sink = std::move(sink_or).value();
  const double warmup = std::max(s.warmup_seconds, s.warmup_rtts * rtt);
  std::this_thread::sleep_for(Seconds(warmup));
  Record(Measure(*sink, proxy.get(), measure), p);
  const int errors = sink->errors();
  sink->Stop();
  if (proxy) proxy->Stop();
  if (errors > 0) return Status::IOError(fmt::format("{} connection(s) failed during the run", errors));
  return true;
}

// Sets p.expected and p.limit from the model (and records the timed-path
// ceiling); see the header comment.
void Classify(Point& p, std::map<std::pair<int, uint64_t>, double>& capacity) {
  const double rate = p.rate_mbit * 1e6 / 8;
  if (p.direct) {
    p.expected = p.measured;
    p.checked = false;
  } else if (p.timed_path) {
    // What the machine moves through the timed path: the ceiling for the
    // points with delay. Informational, not checked.
    capacity[{p.conns, p.window}] = p.measured;
    p.expected = p.direct_ref;
    p.limit = "timed path";
    p.checked = false;
  } else if (p.rtt_ms == 0 && rate == 0) {
    p.expected = p.direct_ref;
    p.limit = "direct";
  } else {
    double e = p.rtt_ms > 0 ? p.conns * static_cast<double>(p.window) / (p.rtt_ms / 1e3) : INFINITY;
    p.limit = "window";
    if (rate > 0 && rate < e) {
      e = rate;
      p.limit = "rate";
    }
    auto cap = capacity.find({p.conns, p.window});
    if (cap != capacity.end() && cap->second < e) {
      e = cap->second;
      p.limit = "machine";
    }
    p.expected = e;
  }
}

// Verified transfer through a jittery path: no byte lost, duplicated or
// reordered, FIN passed on.
Status IntegrityCheck(const Settings& s) {
  constexpr uint64_t kBytes = 48 << 20;
  auto src = BulkSource::Start(kBytes, s.endpoint_nice);
  if (!src.ok()) return src.status();
  ProxyOptions o;
  o.mappings = {cqlstream::wan::MappingSpec{{"127.0.0.1", 0}, {"127.0.0.1", (*src)->port()}}};
  o.delay = std::chrono::milliseconds(3);
  o.jitter = std::chrono::milliseconds(5);
  o.window_bytes = 2 << 20;
  o.rate_bytes_per_sec = 500'000'000;
  o.read_chunk = 64 << 10;
  o.threads = s.proxy_threads;
  o.socket_buffer_bytes = s.sockbuf;
  o.zero_copy = s.zero_copy;
  o.realtime_priority = s.rt_priority;
  auto proxy = Proxy::Start(o);
  if (!proxy.ok()) return proxy.status();
  auto sink = BulkSink::Start("127.0.0.1", (*proxy)->listen_endpoints()[0].port, 2, true, false,
                              s.endpoint_nice);
  if (!sink.ok()) return sink.status();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((*sink)->eofs() + (*sink)->errors() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if ((*sink)->eofs() != 2) return Status::IOError("transfer did not end with an orderly EOF");
  if ((*sink)->bytes() != 2 * kBytes) {
    return Status::Corruption(fmt::format("received {} bytes, want {}", (*sink)->bytes(), 2 * kBytes));
  }
  return (*sink)->verify_status();
}

std::string Mbs(double bytes_per_sec) { return fmt::format("{:.1f}", bytes_per_sec / 1e6); }

// The command line, apart from what goes straight into Settings.
struct Flags {
  bool quick = false;
  bool timed_rows = false;
  bool copy = false;
  std::vector<double> rtts, rates;
  std::vector<std::string> windows;
  std::vector<int> conns;
  std::string sockbuf = "256KiB";
};

void AddFlags(CLI::App& app, Flags* f, Settings* s) {
  app.add_flag("--quick", f->quick, "CI mode: RTT {0,50} ms, W {1,4} MiB, >= 10 RTTs / 1 s per point (~20 s)");
  app.add_flag("--timed-rows,!--no-timed-rows", f->timed_rows,
               "also measure the timed path at zero delay: the machine's ceiling for delayed points "
               "(default: on, off with --quick)");
  app.add_flag("--copy", f->copy, "run the proxy on its copy path instead of splice(2)");
  app.add_option("--rt-priority", s->rt_priority, "proxy SCHED_FIFO priority (0 = normal)")
      ->check(CLI::Range(0, 99))
      ->capture_default_str();
  app.add_option("--endpoint-nice", s->endpoint_nice,
                 "nice value of the source and sink threads, best effort (validates the emulator, "
                 "not the machine's scheduler)")
      ->check(CLI::Range(-20, 19))
      ->capture_default_str();
  app.add_option("--rtt-ms", f->rtts, "RTTs to test (default 0 10 50 100 200)");
  app.add_option("--window", f->windows, "windows to test (default 1MiB 4MiB 16MiB)");
  app.add_option("--rate-mbit", f->rates, "rate caps to test, 0 = uncapped (default 0 1000)");
  app.add_option("--conns", f->conns, "parallel connections to test (default 1 4)");
  app.add_option("--proxy-threads", s->proxy_threads, "proxy I/O threads")->capture_default_str();
  app.add_option("--sockbuf", f->sockbuf, "proxy SO_RCVBUF/SO_SNDBUF")->capture_default_str();
  app.add_option("--tolerance", s->tolerance, "allowed relative error of window/rate-limited points")
      ->capture_default_str();
  app.add_option("--cpu-tolerance", s->cpu_tolerance,
                 "allowed relative error of CPU-bound points (zero delay vs direct, 'machine' "
                 "limit); negative: report only (default 0.10, --quick: report only)");
  app.add_option("--retries", s->retries, "re-measure a point that misses this many times")
      ->capture_default_str();
  app.add_option("--min-seconds", s->min_seconds, "shortest measurement per point");
  app.add_option("--min-rtts", s->min_rtts, "fewest RTTs measured per point");
}

// The defaults that depend on --quick, and the lists left empty.
void ApplyDefaults(const CLI::App& app, Flags* f, Settings* s) {
  if (f->quick) {
    if (f->rtts.empty()) f->rtts = {0, 50};
    if (f->windows.empty()) f->windows = {"1MiB", "4MiB"};
    if (app.count("--min-seconds") == 0) s->min_seconds = 1.0;
    if (app.count("--min-rtts") == 0) s->min_rtts = 10;
    s->warmup_seconds = 0.3;
    s->warmup_rtts = 3;
    s->min_pairs = 2;
    if (app.count("--cpu-tolerance") == 0) s->cpu_tolerance = -1;
  }
  if (app.count("--timed-rows") == 0 && app.count("--no-timed-rows") == 0) f->timed_rows = !f->quick;
  s->zero_copy = !f->copy;
  if (f->rtts.empty()) f->rtts = {0, 10, 50, 100, 200};
  if (f->windows.empty()) f->windows = {"1MiB", "4MiB", "16MiB"};
  if (f->rates.empty()) f->rates = {0, 1000};
  if (f->conns.empty()) f->conns = {1, 4};
}

// The points to measure, in order.
std::vector<Point> PlanPoints(const Flags& f, const std::vector<uint64_t>& wins) {
  std::vector<Point> points;
  // Standalone direct rows for reference (the checked comparison at zero
  // delay interleaves its own direct slices); --quick skips them.
  if (!f.quick) {
    for (int n : f.conns) points.push_back(Point{.rtt_ms = 0, .conns = n, .direct = true});
  }
  for (double rtt : f.rtts) {
    for (uint64_t w : wins) {
      for (double rate : f.rates) {
        for (int n : f.conns) {
          // --quick: the untimed zero-delay pass-through buffers min(W, 1 MiB)
          // whatever W is; one window is enough there.
          if (f.quick && rtt == 0 && rate == 0 && w != wins.front()) continue;
          points.push_back(Point{.rtt_ms = rtt, .window = w, .rate_mbit = rate, .conns = n});
          if (rtt == 0 && rate == 0 && f.timed_rows) {
            points.push_back(Point{.rtt_ms = 0, .window = w, .rate_mbit = 0, .conns = n, .timed_path = true});
          }
        }
      }
    }
  }
  return points;
}

void PrintHeader(const Flags& f, const Settings& s) {
  double load[3] = {0, 0, 0};
  (void)getloadavg(load, 3);
  fmt::print("# cqlstream-wan-validate ({}; proxy: {}, threads {}, sockbuf {}, SCHED_FIFO {}; endpoints "
             "nice {}; tolerance {:.0f}%, CPU-bound points {}; {} cores, load average {:.1f})\n\n",
             f.quick ? "quick" : "full", s.zero_copy ? "splice" : "copy", s.proxy_threads,
             cqlstream::wan::FormatBytes(s.sockbuf), s.rt_priority, s.endpoint_nice, s.tolerance * 100,
             s.cpu_tolerance < 0 ? std::string("report only") : fmt::format("{:.0f}%", s.cpu_tolerance * 100),
             std::thread::hardware_concurrency(), load[0]);
  std::fflush(stdout);
}

// Measures `p`, again while it misses (--retries: a load spike on a shared
// machine passes, a systematic error fails every time); *err and *attempt
// as of the last try.
Status MeasurePoint(const Settings& s, uint16_t source_port, Point& p,
                    std::map<std::pair<int, uint64_t>, double>& capacity, double* err, int* attempt) {
  for (*attempt = 0;; ++*attempt) {
    CQLS_RETURN_IF_ERROR(RunPoint(s, source_port, p).status());
    Classify(p, capacity);
    *err = p.expected > 0 ? (p.measured - p.expected) / p.expected : 0;
    const bool cpu_bound = p.limit == "direct" || p.limit == "machine";
    if (cpu_bound && s.cpu_tolerance < 0) p.checked = false;
    p.ok = !p.checked || std::fabs(*err) <= (cpu_bound ? s.cpu_tolerance : s.tolerance);
    if (p.ok || *attempt >= s.retries) return Status::OK();
  }
}

void PrintPointRow(const Point& p, double err, int attempt) {
  const double gb = p.measured * p.seconds / 1e9;
  fmt::print("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", p.rtt_ms,
             p.direct ? std::string("-") : cqlstream::wan::FormatBytes(p.window),
             p.direct ? std::string("-") : (p.rate_mbit > 0 ? fmt::format("{}", p.rate_mbit) : std::string("0")),
             p.conns, Mbs(p.expected), p.direct ? "direct (no proxy)" : p.limit, Mbs(p.measured),
             p.checked ? fmt::format("{:+.1f}%", err * 100) : std::string("-"),
             p.direct ? std::string("-") : fmt::format("{:.2f}", gb > 0 ? p.proxy_cpu / gb : 0.0),
             p.checked ? fmt::format("{}{}", p.ok ? "ok" : "FAIL", attempt > 0 ? fmt::format(" (try {})", attempt + 1) : "")
                       : std::string("info"));
  std::fflush(stdout);
}

// Zero-delay overhead: the proxy against a direct connection, measured in
// alternating slices.
void PrintOverhead(const std::vector<Point>& points, const Settings& s) {
  fmt::print("\nZero delay, uncapped: proxy vs direct, alternating {:.1f} s slices "
             "(CPU = whole process: source + sink (+ proxy))\n\n", kSliceMeasure);
  fmt::print("| conns | W | path | direct MB/s | proxied MB/s | ratio | CPU s/GB direct | CPU s/GB proxied | of which proxy |\n");
  fmt::print("|---:|---:|---|---:|---:|---:|---:|---:|---:|\n");
  for (const Point& p : points) {
    if (p.direct || p.rtt_ms != 0 || p.rate_mbit != 0) continue;
    const double gb = p.measured * p.seconds / 1e9;
    fmt::print("| {} | {} | {} | {} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} |\n", p.conns,
               cqlstream::wan::FormatBytes(p.window),
               fmt::format("{}{}", p.timed_path ? "timed" : "pass-through", s.zero_copy ? "" : " (copy)"),
               Mbs(p.direct_ref), Mbs(p.measured), p.measured / p.direct_ref, p.direct_cpu_per_gb,
               p.process_cpu / gb, p.proxy_cpu / gb);
  }
}

}  // namespace

static int Main(int argc, char** argv) {
  CLI::App app{"cqlstream-wan-validate: measures the WAN emulator against its model"};
  Flags f;
  Settings s;
  AddFlags(app, &f, &s);
  CLI11_PARSE(app, argc, argv);
  ::signal(SIGPIPE, SIG_IGN);
  ApplyDefaults(app, &f, &s);
  std::vector<uint64_t> wins;
  for (const auto& w : f.windows) {
    auto v = cqlstream::wan::ParseByteSize(w);
    if (!v.ok() || *v == 0) {
      fmt::print(stderr, "bad --window '{}'\n", w);
      return 2;
    }
    wins.push_back(*v);
  }
  auto sb = cqlstream::wan::ParseByteSize(f.sockbuf);
  if (!sb.ok() || *sb > (1u << 30)) {
    fmt::print(stderr, "bad --sockbuf\n");
    return 2;
  }
  s.sockbuf = static_cast<int>(*sb);

  const auto started = std::chrono::steady_clock::now();
  PrintHeader(f, s);
  Status integrity = IntegrityCheck(s);
  fmt::print("integrity (2 x 48 MiB, D 3 ms, jitter 5 ms, W 2 MiB, 4 Gbit/s): {}\n\n",
             integrity.ok() ? "OK" : integrity.ToString());
  bool all_ok = integrity.ok();

  auto src = BulkSource::Start(0, s.endpoint_nice);
  if (!src.ok()) {
    fmt::print(stderr, "{}\n", src.status().ToString());
    return 2;
  }
  std::vector<Point> points = PlanPoints(f, wins);
  std::map<std::pair<int, uint64_t>, double> capacity;  // (conns, W) -> B/s at RTT 0 through the proxy
  fmt::print("| RTT ms | W | rate Mbit/s | conns | expected MB/s | limit | measured MB/s | error | proxy CPU s/GB | result |\n");
  fmt::print("|---:|---:|---:|---:|---:|---|---:|---:|---:|---|\n");
  std::fflush(stdout);
  for (Point& p : points) {
    double err = 0;
    int attempt = 0;
    if (Status st = MeasurePoint(s, (*src)->port(), p, capacity, &err, &attempt); !st.ok()) {
      fmt::print(stderr, "point RTT {} W {} rate {} n {}: {}\n", p.rtt_ms, p.window, p.rate_mbit, p.conns,
                 st.ToString());
      return 2;
    }
    all_ok = all_ok && p.ok;
    PrintPointRow(p, err, attempt);
  }
  PrintOverhead(points, s);
  (*src)->Stop();
  if (g_realtime_refused) fmt::print("\nwarning: the proxy did not get SCHED_FIFO priority\n");
  fmt::print("\n{} in {:.0f} s\n", all_ok ? "PASS" : "FAIL",
             Seconds(std::chrono::steady_clock::now() - started).count());
  return all_ok ? 0 : 1;
}

int main(int argc, char** argv) {
  return cqlstream::GuardedMain("cqlstream-wan-validate", [&] { return Main(argc, argv); });
}
