// Copyright (c) cqlstream authors.
//
// The parts of the WAN proxy (proxy.h) that its files share: the tuning
// constants, a mapping's state and counters, kernel pipes and the per-worker
// buffer pool, the worker threads, one direction of a connection (Pipe), and
// Proxy::Impl. proxy.cc holds the listener and the threads,
// proxy_connection.cc the proxied connection and its byte pumps.
//
// Thread-safety: a Worker's pool, its connections and their pipes are used on
// the worker's thread only; MappingState's counters are atomics read by
// Proxy::Stats() from any thread.
#ifndef CQLSTREAM_BENCH_WAN_PROXY_INTERNAL_H_
#define CQLSTREAM_BENCH_WAN_PROXY_INTERNAL_H_

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <asio.hpp>
#include <atomic>
#include <cassert>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "wan/proxy.h"
#include "wan/wan_model.h"

namespace cqlstream::wan {
namespace proxy_internal {

using asio::ip::tcp;

// Events due within this horizon are handled in the same wake-up (a release
// may come this much early); keeps bursts of chunks from costing one timer
// wake-up each.
constexpr Nanos kTimerSlack = std::chrono::microseconds(50);
// Timers are armed on a grid of min(D / kTimerGridPerDelay, kMaxTimerGrid)
// (D: the one-way delay), rounded up: the pipes due within one grid step
// wake together, so at long delays the I/O thread wakes (and, at real-time
// priority, preempts whatever runs on its core) about once per step rather
// than once per chunk, for a release at most 1% of D late.
constexpr int64_t kTimerGridPerDelay = 100;
constexpr Nanos kMaxTimerGrid = std::chrono::milliseconds(1);

// The grid step for one-way delay `delay`; zero: no grid.
inline Nanos TimerGrid(Nanos delay) { return std::min(delay / kTimerGridPerDelay, kMaxTimerGrid); }

// `t` rounded up to a multiple of `grid` (unchanged when grid is zero, or t
// lies before the clock's epoch: an event already due).
inline TimePoint OnTimerGrid(TimePoint t, Nanos grid) {
  if (grid.count() <= 0) return t;
  const Nanos rem = t.time_since_epoch() % grid;
  return rem.count() > 0 ? t + (grid - rem) : t;
}
// A read never starts into less free space than this: a new buffer is taken.
constexpr size_t kMinRead = 16 << 10;
// A pipe blocked on its window waits until at least min(kCreditWakeup,
// W / kCreditWakeupDivisor) credit is back before it reads again: fewer,
// larger reads, while at most 1/64 of the window stays unused.
constexpr uint64_t kCreditWakeup = 64 << 10;
constexpr uint64_t kCreditWakeupDivisor = 64;
// On a capped link, bytes are timed in units of max(kMinSerialUnit, R * 100us)
// rather than whole reads (see RecordRead).
constexpr uint64_t kMinSerialUnit = 16 << 10;
constexpr uint64_t kSerialUnitsPerSecond = 10000;
// One gather write (copy path) carries at most this much.
constexpr size_t kMaxGatherBytes = 8 << 20;
constexpr size_t kMaxGatherBuffers = 64;
// Free buffers / kernel pipes a worker keeps for reuse.
constexpr size_t kPoolKeep = 256;
// The largest kernel pipe we ask for (unprivileged processes may get less).
constexpr int kKernelPipeBytes = 1 << 20;
// Rounds of one Drive() call before it yields to other connections.
constexpr int kDriveRounds = 32;

struct MappingState {
  MappingSpec spec;
  std::string name;
  tcp::endpoint target;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::unique_ptr<asio::steady_timer> retry_timer;
  std::atomic<uint64_t> accepted{0};
  std::atomic<uint64_t> active{0};
  std::atomic<uint64_t> connect_failures{0};
  std::atomic<uint64_t> errors{0};
  std::atomic<uint64_t> bytes_up{0};
  std::atomic<uint64_t> bytes_down{0};
  std::atomic<uint64_t> late_bytes[kLateBuckets] = {};

  // Counts `bytes` released `late` after their release time.
  void RecordLate(Nanos late, uint64_t bytes) {
    const double ms = std::chrono::duration<double, std::milli>(late).count();
    size_t i = 0;
    while (i + 1 < kLateBuckets && ms > kLateBucketMs[i]) ++i;
    late_bytes[i].fetch_add(bytes, std::memory_order_relaxed);
  }
};

// A kernel pipe used as a FIFO of bytes that never enter user space.
struct KernelPipe {
  KernelPipe() = default;
  KernelPipe(KernelPipe&& o) noexcept { *this = std::move(o); }
  KernelPipe& operator=(KernelPipe&& o) noexcept {
    std::swap(r, o.r);
    std::swap(w, o.w);
    cap = o.cap;
    in = o.in;
    out = o.out;
    sealed = o.sealed;
    return *this;
  }
  ~KernelPipe() {
    if (r >= 0) ::close(r);
    if (w >= 0) ::close(w);
  }
  size_t held() const { return static_cast<size_t>(in - out); }
  size_t space() const { return cap > held() ? cap - held() : 0; }

  int r = -1;
  int w = -1;
  size_t cap = 0;
  uint64_t in = 0;   // bytes spliced in
  uint64_t out = 0;  // bytes spliced out
  bool sealed = false;  // full (in pipe slots): no more reads into it
};

// Per-worker recycling of user-space blocks (copy path) and kernel pipes
// (splice paths). Used on the worker's thread only.
class BufferPool {
 public:
  explicit BufferPool(size_t block_size) : block_size_(block_size) {}
  size_t block_size() const { return block_size_; }

  std::unique_ptr<uint8_t[]> GetBlock() {
    if (blocks_.empty()) return std::unique_ptr<uint8_t[]>(new uint8_t[block_size_]);
    auto b = std::move(blocks_.back());
    blocks_.pop_back();
    return b;
  }
  void PutBlock(std::unique_ptr<uint8_t[]> b) {
    if (blocks_.size() < kPoolKeep) blocks_.push_back(std::move(b));
  }

  // An empty kernel pipe, or false when none can be made (out of fds).
  bool GetPipe(size_t want_bytes, KernelPipe* out) {
    if (!pipes_.empty()) {
      *out = std::move(pipes_.back());
      pipes_.pop_back();
      return true;
    }
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return false;
    KernelPipe p;
    p.r = fds[0];
    p.w = fds[1];
    (void)::fcntl(p.w, F_SETPIPE_SZ, static_cast<int>(std::min<size_t>(want_bytes, kKernelPipeBytes)));
    const int got = ::fcntl(p.w, F_GETPIPE_SZ);  // refused above: the default size
    p.cap = got > 0 ? static_cast<size_t>(got) : 65536;
    *out = std::move(p);
    return true;
  }
  // REQUIRES: p is empty.
  void PutPipe(KernelPipe&& p) {
    assert(p.held() == 0);
    if (pipes_.size() >= kPoolKeep) return;  // closed by the destructor
    p.in = p.out = 0;
    p.sealed = false;
    pipes_.push_back(std::move(p));
  }

 private:
  const size_t block_size_;
  std::vector<std::unique_ptr<uint8_t[]>> blocks_;
  std::vector<KernelPipe> pipes_;
};

struct Worker {
  explicit Worker(size_t block_size) : pool(block_size) {}
  BufferPool pool;  // declared before io: outlives connections destroyed with io
  asio::io_context io{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
  std::thread thread;
  std::atomic<bool> clock_valid{false};
  clockid_t cpu_clock{};
  std::atomic<double> final_cpu{0};
};

// splice(2) has no MSG_NOSIGNAL: writing into a socket whose peer is gone
// raises SIGPIPE. The I/O threads block it (BlockSigpipe: so it stays pending
// on the thread instead of killing the process) and take it back after each
// EPIPE (ConsumeSigpipe).
void BlockSigpipe();
void ConsumeSigpipe();

// CPU seconds of a thread's clock, -1 when it cannot be read.
double ThreadCpuSeconds(clockid_t clock);

// Sets both socket buffer sizes (bytes <= 0: the kernel's defaults).
void SetBuffers(asio::ip::tcp::socket& s, int bytes);

// One direction of one connection. Lives inside its Connection.
struct Pipe {
  Pipe(asio::io_context& io, const PipeParams& params, Link* link, uint64_t seed)
      : model(params, link, seed), timer(io) {}

  struct Block {
    std::unique_ptr<uint8_t[]> data;
    size_t filled = 0;
  };
  struct Chunk {
    TimePoint release;
    uint64_t bytes;
    bool eof;
  };

  tcp::socket* src = nullptr;
  tcp::socket* dst = nullptr;
  std::atomic<uint64_t>* delivered_counter = nullptr;
  PipeModel model;
  // Bytes read and not yet written, in stream order. Copy path: from
  // blocks.front() at write_off to blocks.back() at its `filled`; only the
  // back block is read into. Splice paths: in kpipes, front to back; only the
  // back pipe is spliced into.
  std::deque<Block> blocks;
  size_t write_off = 0;
  std::deque<KernelPipe> kpipes;
  std::deque<Chunk> pending;  // read, waiting for their release time
  uint64_t ready = 0;         // released, not yet handed to the sink
  bool eof_ready = false;     // the source's FIN is released
  bool reading = false;       // a read (or a wait for readability) is in flight
  bool writing = false;       // a write (or a wait for writability) is in flight
  bool src_eof = false;
  bool fin_sent = false;
  bool wait_credit = false;  // the next read waits for the window
  std::vector<asio::const_buffer> gather;
  asio::steady_timer timer;
  TimePoint armed = TimePoint::max();
  uint64_t timer_gen = 0;
};

// Starts proxying the accepted `client` socket to the mapping's target on
// `worker`'s thread (the connection owns itself until both sides are closed).
void StartConnection(Proxy::Impl* proxy, Worker* worker, MappingState* mapping, tcp::socket client);

}  // namespace proxy_internal

class Proxy::Impl {
 public:
  explicit Impl(const ProxyOptions& options)
      : options_(options),
        pipe_params_{.delay = options.delay,
                     .changed_delay = options.changed_delay,
                     .change_at = Clock::now() + options.change_after,
                     .jitter = options.jitter,
                     .window = options.window_bytes == 0 ? kUnlimited : options.window_bytes},
        link_up_(options.rate_bytes_per_sec),
        link_down_(options.rate_bytes_per_sec) {}
  ~Impl() { Stop(); }

  Status Init();
  void Stop();
  std::vector<HostPort> listen_endpoints() const { return bound_; }
  std::vector<MappingStats> Stats() const;
  double CpuSeconds() const;
  bool realtime() const { return realtime_ok_.load(); }

  const ProxyOptions& options() const { return options_; }
  Link* link_up() { return options_.rate_bytes_per_sec ? &link_up_ : nullptr; }
  Link* link_down() { return options_.rate_bytes_per_sec ? &link_down_ : nullptr; }
  uint64_t NextSeed() { return options_.seed * 0x100000001b3ull + 2 * seed_counter_++; }
  // Zero delay, no jitter, no rate cap: nothing to time.
  bool untimed() const {
    return !options_.force_timed && options_.delay.count() == 0 && options_.changed_delay.count() <= 0 &&
           options_.jitter.count() == 0 && options_.rate_bytes_per_sec == 0;
  }
  // Every pipe's parameters. The delay changes ProxyOptions::change_after
  // after the proxy was created, just before it binds its listeners.
  const PipeParams& pipe_params() const { return pipe_params_; }

 private:
  void DoAccept(proxy_internal::MappingState* m);

  ProxyOptions options_;
  const PipeParams pipe_params_;  // immutable: read by every I/O thread
  Link link_up_;
  Link link_down_;
  std::vector<std::unique_ptr<proxy_internal::MappingState>> mappings_;
  std::vector<std::unique_ptr<proxy_internal::Worker>> workers_;
  std::vector<HostPort> bound_;
  size_t next_worker_ = 0;  // used on worker 0's thread only
  std::atomic<uint64_t> seed_counter_{0};
  std::atomic<bool> realtime_ok_{true};
  bool stopped_ = false;
};

}  // namespace cqlstream::wan

#endif  // CQLSTREAM_BENCH_WAN_PROXY_INTERNAL_H_
