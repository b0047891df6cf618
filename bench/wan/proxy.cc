// Copyright (c) cqlstream authors.
#include "wan/proxy.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <asio.hpp>
#include <atomic>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <deque>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "wan/wan_model.h"

namespace cqlstream::wan {
namespace {

using asio::ip::tcp;

// Events due within this horizon are handled in the same wake-up (a release
// may come this much early); keeps bursts of chunks from costing one timer
// wake-up each.
constexpr Nanos kTimerSlack = std::chrono::microseconds(50);
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
// raises SIGPIPE. The I/O threads block it (so it stays pending on the thread
// instead of killing the process) and take it back after each EPIPE.
void BlockSigpipe() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void ConsumeSigpipe() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  const timespec zero{0, 0};
  while (sigtimedwait(&set, nullptr, &zero) == SIGPIPE) {
  }
}

double ThreadCpuSeconds(clockid_t clock) {
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return -1;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void SetBuffers(tcp::socket& s, int bytes) {
  if (bytes <= 0) return;
  asio::error_code ec;
  s.set_option(asio::socket_base::receive_buffer_size(bytes), ec);
  s.set_option(asio::socket_base::send_buffer_size(bytes), ec);
}

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

}  // namespace

class Proxy::Impl {
 public:
  explicit Impl(const ProxyOptions& options)
      : options_(options),
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
    return !options_.force_timed && options_.delay.count() == 0 && options_.jitter.count() == 0 &&
           options_.rate_bytes_per_sec == 0;
  }

 private:
  void DoAccept(MappingState* m);

  ProxyOptions options_;
  Link link_up_;
  Link link_down_;
  std::vector<std::unique_ptr<MappingState>> mappings_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<HostPort> bound_;
  size_t next_worker_ = 0;  // used on worker 0's thread only
  std::atomic<uint64_t> seed_counter_{0};
  std::atomic<bool> realtime_ok_{true};
  bool stopped_ = false;
};

namespace {

// A proxied connection: the accepted client socket, the socket to the target
// and one Pipe per direction. All of it runs on one worker thread.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  enum class Mode { kPassThrough, kTimedSplice, kTimedCopy };

  Connection(Proxy::Impl* proxy, Worker* worker, MappingState* mapping, tcp::socket client)
      : proxy_(proxy),
        worker_(worker),
        mapping_(mapping),
        accepted_at_(Clock::now()),
        client_(std::move(client)),
        server_(worker->io),
        up_(worker->io, Params(), proxy->link_up(), proxy->NextSeed()),
        down_(worker->io, Params(), proxy->link_down(), proxy->NextSeed() + 1) {
    mapping_->active.fetch_add(1, std::memory_order_relaxed);
    up_.src = &client_;
    up_.dst = &server_;
    up_.delivered_counter = &mapping_->bytes_up;
    down_.src = &server_;
    down_.dst = &client_;
    down_.delivered_counter = &mapping_->bytes_down;
    const ProxyOptions& o = proxy_->options();
    const uint64_t w = o.window_bytes;
    credit_wakeup_ =
        w == 0 ? kCreditWakeup : std::clamp<uint64_t>(w / kCreditWakeupDivisor, 1, kCreditWakeup);
    serial_unit_ = o.rate_bytes_per_sec == 0
                       ? std::numeric_limits<size_t>::max()
                       : static_cast<size_t>(std::max<uint64_t>(
                             kMinSerialUnit, o.rate_bytes_per_sec / kSerialUnitsPerSecond));
    pipe_bytes_ = w == 0 ? static_cast<size_t>(kKernelPipeBytes)
                         : static_cast<size_t>(std::min<uint64_t>(w, kKernelPipeBytes));
    mode_ = proxy_->untimed() ? (o.zero_copy ? Mode::kPassThrough : Mode::kTimedCopy)
                              : (o.zero_copy ? Mode::kTimedSplice : Mode::kTimedCopy);
  }

  ~Connection() { mapping_->active.fetch_sub(1, std::memory_order_relaxed); }

  // Runs on the worker's thread.
  void Start() {
    asio::error_code ec;
    client_.set_option(tcp::no_delay(true), ec);
    server_.open(mapping_->target.protocol(), ec);
    if (ec) {
      mapping_->connect_failures.fetch_add(1, std::memory_order_relaxed);
      Close();
      return;
    }
    SetBuffers(server_, proxy_->options().socket_buffer_bytes);
    server_.async_connect(mapping_->target, [self = shared_from_this()](const asio::error_code& e) {
      self->OnConnected(e);
    });
  }

 private:
  PipeParams Params() const {
    const ProxyOptions& o = proxy_->options();
    return PipeParams{.delay = o.delay, .jitter = o.jitter,
                      .window = o.window_bytes == 0 ? kUnlimited : o.window_bytes};
  }

  void OnConnected(const asio::error_code& ec) {
    if (closed_) return;
    if (ec) {
      mapping_->connect_failures.fetch_add(1, std::memory_order_relaxed);
      Close();
      return;
    }
    asio::error_code e;
    server_.set_option(tcp::no_delay(true), e);
    if (proxy_->options().emulate_handshake) {
      const Nanos d = proxy_->options().delay;
      // SYN (D), SYN-ACK (D), then the client's first byte (D); the server
      // can send once the final ACK arrived (3D) and its bytes take D.
      up_.model.SetReleaseFloor(accepted_at_ + 3 * d);
      down_.model.SetReleaseFloor(accepted_at_ + 4 * d);
    }
    if (mode_ != Mode::kTimedCopy) {
      client_.non_blocking(true, e);
      if (!e) server_.non_blocking(true, e);
      if (e) mode_ = Mode::kTimedCopy;
    }
    for (Pipe* p : {&up_, &down_}) {
      if (mode_ == Mode::kTimedCopy) {
        MaybeRead(*p);
      } else {
        Drive(*p);
      }
    }
  }

  // ---- shared by all paths ------------------------------------------------

  // n bytes were read from the source at `now`: time them.
  void RecordRead(Pipe& p, size_t n, TimePoint now) {
    // On a capped link a chunk is released when its last byte has been
    // serialized; cutting a read into small units keeps it from holding its
    // first bytes back (a real link forwards packet by packet).
    for (size_t done = 0; done < n;) {
      const size_t take = std::min(n - done, serial_unit_);
      p.pending.push_back({p.model.OnRead(take, now), take, false});
      done += take;
    }
  }

  void RecordEof(Pipe& p, TimePoint now) {
    p.src_eof = true;
    p.pending.push_back({p.model.OnEof(now), 0, true});
  }

  // Moves chunks due by `now` (plus the slack) into `ready`.
  void ReleaseDue(Pipe& p, TimePoint now) {
    const TimePoint horizon = now + kTimerSlack;
    while (!p.pending.empty() && p.pending.front().release <= horizon) {
      const Pipe::Chunk& c = p.pending.front();
      if (c.eof) {
        p.eof_ready = true;
      } else {
        p.ready += c.bytes;
      }
      p.pending.pop_front();
    }
  }

  // Passes the FIN on once everything before it is written. Returns false
  // when the connection got closed.
  bool MaybeSendFin(Pipe& p) {
    if (p.writing || p.ready != 0 || !p.eof_ready || p.fin_sent) return true;
    p.fin_sent = true;
    asio::error_code ignored;
    p.dst->shutdown(tcp::socket::shutdown_send, ignored);
    if (up_.fin_sent && down_.fin_sent) {
      Close();
      return false;
    }
    return true;
  }

  void Delivered(Pipe& p, uint64_t n, TimePoint now) {
    p.delivered_counter->fetch_add(n, std::memory_order_relaxed);
    p.model.OnDelivered(n, now);
  }

  void ArmTimer(Pipe& p) {
    if (closed_) return;
    TimePoint next = TimePoint::max();
    if (!p.pending.empty()) next = p.pending.front().release;
    if (p.wait_credit && !p.reading && !p.src_eof) {
      next = std::min(next, p.model.TimeCreditReaches(credit_wakeup_));
    }
    if (next == TimePoint::max() || next >= p.armed) return;
    p.armed = next;
    const uint64_t gen = ++p.timer_gen;
    p.timer.expires_at(next);
    p.timer.async_wait([self = shared_from_this(), pp = &p, gen](const asio::error_code&) {
      self->OnTimer(*pp, gen);
    });
  }

  void OnTimer(Pipe& p, uint64_t gen) {
    if (closed_ || gen != p.timer_gen) return;  // superseded by an earlier deadline
    p.armed = TimePoint::max();
    if (mode_ == Mode::kTimedCopy) {
      Pump(p, Clock::now());
      MaybeRead(p);
    } else {
      Drive(p);
    }
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    asio::error_code ignored;
    client_.close(ignored);
    server_.close(ignored);
    up_.timer.cancel();
    down_.timer.cancel();
  }

  // Unexpected errors (not EOF) also count in the mapping's stats.
  void Fail() {
    if (!closed_) mapping_->errors.fetch_add(1, std::memory_order_relaxed);
    Close();
  }

  // ---- splice paths: pass-through and timed --------------------------------
  //
  // Bytes go source socket -> kernel pipe(s) -> sink socket with splice(2)
  // and never enter user space. Drive() is a small state machine run after
  // every event (readable, writable, timer): release due chunks, write what
  // is released, read what the window allows; it loops while it makes
  // progress and otherwise arms the waits it needs.

  void Drive(Pipe& p) {
    const int src = p.src->native_handle(), dst = p.dst->native_handle();
    const bool timed = mode_ == Mode::kTimedSplice;
    for (int round = 0; !closed_; ++round) {
      if (round == kDriveRounds) {
        // Busy connection: let the others on this thread have a turn.
        asio::post(worker_->io, [self = shared_from_this(), pp = &p] { self->Drive(*pp); });
        return;
      }
      const TimePoint now = timed ? Clock::now() : TimePoint{};
      bool progress = false;
      ReleaseDue(p, now);

      // Write what is released.
      if (!p.writing && p.ready > 0) {
        uint64_t wrote = 0;
        bool blocked = false;
        while (p.ready > 0) {
          KernelPipe& f = p.kpipes.front();
          if (f.held() == 0) {
            assert(p.kpipes.size() > 1);
            worker_->pool.PutPipe(std::move(f));
            p.kpipes.pop_front();
            continue;
          }
          const ssize_t m = ::splice(f.r, nullptr, dst, nullptr,
                                     static_cast<size_t>(std::min<uint64_t>(f.held(), p.ready)),
                                     SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
          if (m > 0) {
            f.out += static_cast<uint64_t>(m);
            p.ready -= static_cast<uint64_t>(m);
            wrote += static_cast<uint64_t>(m);
          } else if (m < 0 && errno == EAGAIN) {
            blocked = true;
            break;
          } else if (!(m < 0 && errno == EINTR)) {
            if (m < 0 && errno == EPIPE) ConsumeSigpipe();
            return Fail();
          }
        }
        if (wrote > 0) {
          if (timed) {
            Delivered(p, wrote, now);
          } else {
            p.delivered_counter->fetch_add(wrote, std::memory_order_relaxed);
          }
          progress = true;
        }
        if (blocked) {
          p.writing = true;
          p.dst->async_wait(tcp::socket::wait_write,
                            [self = shared_from_this(), pp = &p](const asio::error_code& ec) {
                              pp->writing = false;
                              if (ec) return self->Close();
                              self->Drive(*pp);
                            });
        }
      }
      if (!MaybeSendFin(p)) return;

      // Read what the window allows.
      if (!p.reading && !p.src_eof) {
        // Timed: the window's credit. Pass-through: at most pipe_bytes_ held.
        uint64_t credit = 0;
        bool may_read = false;
        if (timed) {
          credit = p.model.Credit(now);
          p.wait_credit = credit < credit_wakeup_;  // ArmTimer wakes us when it is back
          may_read = !p.wait_credit;
        } else {
          credit = p.ready < pipe_bytes_ ? pipe_bytes_ - p.ready : 0;
          may_read = credit >= std::min<uint64_t>(kMinRead, pipe_bytes_);  // else the next write makes room
        }
        if (may_read) {
          if (p.kpipes.empty() || p.kpipes.back().sealed || p.kpipes.back().space() < kMinRead) {
            KernelPipe fresh;
            if (!worker_->pool.GetPipe(pipe_bytes_, &fresh)) return Fail();  // out of fds
            p.kpipes.push_back(std::move(fresh));
          }
          KernelPipe& b = p.kpipes.back();
          const size_t n = static_cast<size_t>(std::min<uint64_t>(credit, b.space()));
          const ssize_t got = ::splice(src, nullptr, b.w, nullptr, n, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
          if (got > 0) {
            b.in += static_cast<uint64_t>(got);
            if (timed) {
              RecordRead(p, static_cast<size_t>(got), now);
            } else {
              p.ready += static_cast<uint64_t>(got);
            }
            progress = true;
          } else if (got == 0) {
            if (timed) {
              RecordEof(p, now);
            } else {
              p.src_eof = true;
              p.eof_ready = true;
            }
            progress = true;
          } else if (errno == EAGAIN) {
            // Either the socket is empty or the pipe is out of slots (a pipe
            // holds a number of buffers, not of bytes).
            int queued = 0;
            if (b.held() > 0 && ::ioctl(src, FIONREAD, &queued) == 0 && queued > 0) {
              b.sealed = true;
              progress = true;
            } else {
              p.reading = true;
              p.src->async_wait(tcp::socket::wait_read,
                                [self = shared_from_this(), pp = &p](const asio::error_code& ec) {
                                  pp->reading = false;
                                  if (ec) return self->Close();
                                  self->Drive(*pp);
                                });
            }
          } else if (errno != EINTR) {
            return Fail();
          }
        }
      }
      if (!progress) break;
    }
    if (timed) ArmTimer(p);
  }

  // ---- timed copy path ----------------------------------------------------
  //
  // Asynchronous reads into pooled user-space blocks and gather writes.

  void MaybeRead(Pipe& p) {
    if (closed_ || p.reading || p.src_eof) return;
    const TimePoint now = Clock::now();
    const uint64_t credit = p.model.Credit(now);
    if (credit < credit_wakeup_) {
      p.wait_credit = true;
      ArmTimer(p);
      return;
    }
    p.wait_credit = false;
    BufferPool& pool = worker_->pool;
    const size_t bs = pool.block_size();
    if (p.blocks.size() == 1 && !p.writing && p.write_off == p.blocks.back().filled) {
      // Everything was written: reuse the block from its start.
      p.blocks.back().filled = 0;
      p.write_off = 0;
    }
    if (p.blocks.empty() || bs - p.blocks.back().filled < kMinRead) {
      p.blocks.push_back(Pipe::Block{pool.GetBlock(), 0});
    }
    Pipe::Block& b = p.blocks.back();
    const size_t n = static_cast<size_t>(std::min<uint64_t>(bs - b.filled, credit));
    p.reading = true;
    p.src->async_read_some(asio::buffer(b.data.get() + b.filled, n),
                           [self = shared_from_this(), pp = &p](const asio::error_code& ec, size_t got) {
                             self->OnRead(*pp, ec, got);
                           });
  }

  void OnRead(Pipe& p, const asio::error_code& ec, size_t n) {
    p.reading = false;
    if (closed_) return;
    const TimePoint now = Clock::now();
    if (n > 0) {
      p.blocks.back().filled += n;
      RecordRead(p, n, now);
    }
    if (ec) {
      if (ec != asio::error::eof) return Fail();
      RecordEof(p, now);
    }
    Pump(p, now);
    MaybeRead(p);
  }

  // Moves due chunks to `ready`, starts a write, re-arms the timer.
  void Pump(Pipe& p, TimePoint now) {
    ReleaseDue(p, now);
    MaybeWrite(p);
    ArmTimer(p);
  }

  void MaybeWrite(Pipe& p) {
    if (closed_ || p.writing) return;
    if (p.ready == 0) {
      MaybeSendFin(p);
      return;
    }
    p.gather.clear();
    uint64_t left = std::min<uint64_t>(p.ready, kMaxGatherBytes);
    size_t off = p.write_off;
    for (const Pipe::Block& b : p.blocks) {
      if (left == 0 || p.gather.size() == kMaxGatherBuffers) break;
      const size_t take = static_cast<size_t>(std::min<uint64_t>(b.filled - off, left));
      if (take > 0) p.gather.emplace_back(b.data.get() + off, take);
      left -= take;
      off = 0;
    }
    p.writing = true;
    asio::async_write(*p.dst, p.gather,
                      [self = shared_from_this(), pp = &p](const asio::error_code& ec, size_t n) {
                        self->OnWritten(*pp, ec, n);
                      });
  }

  void OnWritten(Pipe& p, const asio::error_code& ec, size_t n) {
    p.writing = false;
    if (closed_) return;
    if (ec) return Fail();
    size_t left = n;
    while (true) {
      Pipe::Block& f = p.blocks.front();
      const size_t take = std::min(left, f.filled - p.write_off);
      p.write_off += take;
      left -= take;
      if (p.write_off == f.filled && p.blocks.size() > 1) {
        worker_->pool.PutBlock(std::move(f.data));
        p.blocks.pop_front();
        p.write_off = 0;
        continue;
      }
      assert(left == 0);
      break;
    }
    p.ready -= n;
    const TimePoint now = Clock::now();
    Delivered(p, n, now);
    Pump(p, now);
    MaybeRead(p);
  }

  Proxy::Impl* proxy_;
  Worker* worker_;
  MappingState* mapping_;
  const TimePoint accepted_at_;
  tcp::socket client_;
  tcp::socket server_;
  Pipe up_;    // client -> server
  Pipe down_;  // server -> client
  Mode mode_ = Mode::kTimedCopy;
  uint64_t credit_wakeup_ = kCreditWakeup;
  size_t serial_unit_ = std::numeric_limits<size_t>::max();
  size_t pipe_bytes_ = kKernelPipeBytes;
  bool closed_ = false;
};

// Many kernel pipes per connection on the splice paths: allow as many file
// descriptors as the hard limit does.
void RaiseFdLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace

Status Proxy::Impl::Init() {
  if (options_.mappings.empty()) return Status::InvalidArgument("no mappings");
  if (options_.threads < 1) return Status::InvalidArgument("threads must be >= 1");
  if (options_.read_chunk < 2 * kMinRead) {
    return Status::InvalidArgument(fmt::format("read chunk must be >= {}", 2 * kMinRead));
  }
  if (options_.delay.count() < 0 || options_.jitter.count() < 0) {
    return Status::InvalidArgument("negative delay or jitter");
  }
  if (options_.realtime_priority < 0 || options_.realtime_priority > 99) {
    return Status::InvalidArgument("realtime priority must be 0..99");
  }
  if (options_.zero_copy) RaiseFdLimit();
  for (int i = 0; i < options_.threads; ++i) {
    workers_.push_back(std::make_unique<Worker>(options_.read_chunk));
  }
  asio::io_context& accept_io = workers_[0]->io;
  for (const MappingSpec& spec : options_.mappings) {
    auto m = std::make_unique<MappingState>();
    m->spec = spec;
    asio::error_code ec;
    auto listen_addr = asio::ip::make_address(spec.listen.host, ec);
    if (ec) return Status::InvalidArgument(fmt::format("bad listen address '{}'", spec.listen.host));
    auto target_addr = asio::ip::make_address(spec.target.host, ec);
    if (ec) return Status::InvalidArgument(fmt::format("bad target address '{}'", spec.target.host));
    m->target = tcp::endpoint(target_addr, spec.target.port);
    tcp::endpoint listen_ep(listen_addr, spec.listen.port);
    m->acceptor = std::make_unique<tcp::acceptor>(accept_io);
    m->retry_timer = std::make_unique<asio::steady_timer>(accept_io);
    tcp::acceptor& a = *m->acceptor;
    a.open(listen_ep.protocol(), ec);
    if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec && options_.socket_buffer_bytes > 0) {
      // Accepted sockets inherit these (and the window scale they imply).
      a.set_option(asio::socket_base::receive_buffer_size(options_.socket_buffer_bytes), ec);
      if (!ec) a.set_option(asio::socket_base::send_buffer_size(options_.socket_buffer_bytes), ec);
    }
    if (!ec) a.bind(listen_ep, ec);
    if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return Status::IOError(
          fmt::format("cannot listen on {}: {}", spec.listen.ToString(), ec.message()));
    }
    tcp::endpoint bound = a.local_endpoint(ec);
    HostPort hp{spec.listen.host, bound.port()};
    m->name = fmt::format("{}->{}", hp.ToString(), spec.target.ToString());
    bound_.push_back(hp);
    mappings_.push_back(std::move(m));
  }
  for (auto& m : mappings_) DoAccept(m.get());
  realtime_ok_ = options_.realtime_priority > 0;
  for (auto& w : workers_) {
    Worker* wp = w.get();
    wp->guard.emplace(wp->io.get_executor());
    wp->thread = std::thread([this, wp] {
      BlockSigpipe();
      if (options_.realtime_priority > 0) {
        sched_param sp{};
        sp.sched_priority = options_.realtime_priority;
        if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) != 0) realtime_ok_ = false;
      }
      if (pthread_getcpuclockid(pthread_self(), &wp->cpu_clock) == 0) {
        wp->clock_valid.store(true, std::memory_order_release);
      }
      wp->io.run();
      wp->final_cpu.store(ThreadCpuSeconds(CLOCK_THREAD_CPUTIME_ID), std::memory_order_release);
      wp->clock_valid.store(false, std::memory_order_release);
    });
  }
  return Status::OK();
}

void Proxy::Impl::DoAccept(MappingState* m) {
  Worker* w = workers_[next_worker_++ % workers_.size()].get();
  m->acceptor->async_accept(w->io, [this, m, w](const asio::error_code& ec, tcp::socket s) {
    if (ec == asio::error::operation_aborted || !m->acceptor->is_open()) return;
    if (ec) {
      // E.g. out of file descriptors: try again shortly instead of spinning.
      m->retry_timer->expires_after(std::chrono::milliseconds(50));
      m->retry_timer->async_wait([this, m](const asio::error_code& e) {
        if (!e) DoAccept(m);
      });
      return;
    }
    m->accepted.fetch_add(1, std::memory_order_relaxed);
    auto c = std::make_shared<Connection>(this, w, m, std::move(s));
    asio::post(w->io, [c] { c->Start(); });
    DoAccept(m);
  });
}

void Proxy::Impl::Stop() {
  if (stopped_) return;
  stopped_ = true;
  for (auto& w : workers_) {
    w->guard.reset();
    w->io.stop();
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
  for (auto& m : mappings_) {
    m->retry_timer.reset();
    m->acceptor.reset();
  }
  // Destroying the io_contexts destroys the pending handlers and with them the
  // connections (which still reference their mapping's counters).
  workers_.clear();
}

std::vector<MappingStats> Proxy::Impl::Stats() const {
  std::vector<MappingStats> out;
  for (const auto& m : mappings_) {
    MappingStats s;
    s.name = m->name;
    s.accepted = m->accepted.load(std::memory_order_relaxed);
    s.active = m->active.load(std::memory_order_relaxed);
    s.connect_failures = m->connect_failures.load(std::memory_order_relaxed);
    s.errors = m->errors.load(std::memory_order_relaxed);
    s.bytes_up = m->bytes_up.load(std::memory_order_relaxed);
    s.bytes_down = m->bytes_down.load(std::memory_order_relaxed);
    out.push_back(std::move(s));
  }
  return out;
}

double Proxy::Impl::CpuSeconds() const {
  double total = 0;
  for (const auto& w : workers_) {
    double v = -1;
    if (w->clock_valid.load(std::memory_order_acquire)) v = ThreadCpuSeconds(w->cpu_clock);
    if (v < 0) v = w->final_cpu.load(std::memory_order_acquire);
    total += v;
  }
  return total;
}

StatusOr<std::unique_ptr<Proxy>> Proxy::Start(const ProxyOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  CQLS_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<Proxy>(new Proxy(std::move(impl)));
}

Proxy::Proxy(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Proxy::~Proxy() { Stop(); }
void Proxy::Stop() { impl_->Stop(); }
std::vector<HostPort> Proxy::listen_endpoints() const { return impl_->listen_endpoints(); }
std::vector<MappingStats> Proxy::Stats() const { return impl_->Stats(); }
double Proxy::CpuSeconds() const { return impl_->CpuSeconds(); }
bool Proxy::realtime() const { return impl_->realtime(); }

}  // namespace cqlstream::wan
