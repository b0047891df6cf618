// Copyright (c) cqlstream authors.
#include "wan/proxy.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>
#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <asio.hpp>
#include <atomic>
#include <cassert>
#include <cerrno>
#include <deque>
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
// A read never starts into less free space than this: a new block is taken.
constexpr size_t kMinRead = 16 << 10;
// A pipe blocked on its window waits until at least min(kCreditWakeup,
// W / kCreditWakeupDivisor) credit is back before it reads again: fewer,
// larger reads, while at most 1/64 of the window stays unused.
constexpr uint64_t kCreditWakeup = 64 << 10;
constexpr uint64_t kCreditWakeupDivisor = 64;
// One gather write carries at most this much.
constexpr size_t kMaxGatherBytes = 8 << 20;
constexpr size_t kMaxGatherBuffers = 64;
// Free blocks a worker keeps for reuse.
constexpr size_t kPoolKeep = 256;

struct MappingState {
  MappingSpec spec;
  std::string name;
  tcp::endpoint target;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::unique_ptr<asio::steady_timer> retry_timer;
  std::atomic<uint64_t> accepted{0};
  std::atomic<uint64_t> active{0};
  std::atomic<uint64_t> connect_failures{0};
  std::atomic<uint64_t> bytes_up{0};
  std::atomic<uint64_t> bytes_down{0};
};

// Fixed-size buffers recycled by one worker; used on that worker's thread only.
class BlockPool {
 public:
  explicit BlockPool(size_t block_size) : block_size_(block_size) {}
  size_t block_size() const { return block_size_; }
  std::unique_ptr<uint8_t[]> Get() {
    if (free_.empty()) return std::unique_ptr<uint8_t[]>(new uint8_t[block_size_]);
    auto b = std::move(free_.back());
    free_.pop_back();
    return b;
  }
  void Put(std::unique_ptr<uint8_t[]> b) {
    if (free_.size() < kPoolKeep) free_.push_back(std::move(b));
  }

 private:
  const size_t block_size_;
  std::vector<std::unique_ptr<uint8_t[]>> free_;
};

struct Worker {
  explicit Worker(size_t block_size) : pool(block_size) {}
  BlockPool pool;  // declared before io: outlives connections destroyed with io
  asio::io_context io{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
  std::thread thread;
  std::atomic<bool> clock_valid{false};
  clockid_t cpu_clock{};
  std::atomic<double> final_cpu{0};
};

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
  // Bytes read and not yet written, in stream order: from blocks.front() at
  // write_off to blocks.back() at its `filled`. Only the back block is read
  // into; the others are sealed.
  std::deque<Block> blocks;
  size_t write_off = 0;
  std::deque<Chunk> pending;  // read, waiting for their release time
  uint64_t ready = 0;         // released, not yet handed to a write
  bool eof_ready = false;     // the source's FIN is released
  bool reading = false;
  bool writing = false;
  bool src_eof = false;
  bool fin_sent = false;
  bool wait_credit = false;  // the next read waits for the window
  std::vector<asio::const_buffer> gather;
  asio::steady_timer timer;
  TimePoint armed = TimePoint::max();
  uint64_t timer_gen = 0;
};

// One direction of a zero-delay, uncapped connection: bytes move socket ->
// kernel pipe -> socket with splice(2), never copied to user space.
struct SplicePipe {
  ~SplicePipe() {
    if (pipe_r >= 0) ::close(pipe_r);
    if (pipe_w >= 0) ::close(pipe_w);
  }
  tcp::socket* src = nullptr;
  tcp::socket* dst = nullptr;
  std::atomic<uint64_t>* delivered_counter = nullptr;
  int pipe_r = -1;
  int pipe_w = -1;
  size_t cap = 0;      // bytes the kernel pipe holds
  size_t in_pipe = 0;  // bytes spliced in, not yet out
  bool src_eof = false;
  bool fin_sent = false;
  bool read_wait = false;
  bool write_wait = false;
};

// The largest kernel pipe we ask for (unprivileged processes may get less).
constexpr int kSplicePipeBytes = 1 << 20;

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

  const ProxyOptions& options() const { return options_; }
  Link* link_up() { return options_.rate_bytes_per_sec ? &link_up_ : nullptr; }
  Link* link_down() { return options_.rate_bytes_per_sec ? &link_down_ : nullptr; }
  // Zero delay, no jitter, no rate cap: nothing to time, splice through.
  bool pass_through() const {
    return options_.zero_copy && options_.delay.count() == 0 && options_.jitter.count() == 0 &&
           options_.rate_bytes_per_sec == 0;
  }
  uint64_t NextSeed() { return options_.seed * 0x100000001b3ull + 2 * seed_counter_++; }

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
  bool stopped_ = false;
};

namespace {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
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
    sup_.src = &client_;
    sup_.dst = &server_;
    sup_.delivered_counter = &mapping_->bytes_up;
    sdown_.src = &server_;
    sdown_.dst = &client_;
    sdown_.delivered_counter = &mapping_->bytes_down;
    const uint64_t w = proxy_->options().window_bytes;
    credit_wakeup_ =
        w == 0 ? kCreditWakeup : std::clamp<uint64_t>(w / kCreditWakeupDivisor, 1, kCreditWakeup);
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
    asio::error_code ignored;
    server_.set_option(tcp::no_delay(true), ignored);
    if (proxy_->options().emulate_handshake) {
      const Nanos d = proxy_->options().delay;
      // SYN (D), SYN-ACK (D), then the client's first byte (D); the server
      // can send once the final ACK arrived (3D) and its bytes take D.
      up_.model.SetReleaseFloor(accepted_at_ + 3 * d);
      down_.model.SetReleaseFloor(accepted_at_ + 4 * d);
    }
    if (proxy_->pass_through() && SpliceSetup(sup_) && SpliceSetup(sdown_)) {
      splice_ = true;
      SplicePump(sup_);
      SplicePump(sdown_);
      return;
    }
    MaybeRead(up_);
    MaybeRead(down_);
  }

  // ---- zero-copy pass-through (no delay, no jitter, no rate cap) ----------

  bool SpliceSetup(SplicePipe& p) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return false;
    p.pipe_r = fds[0];
    p.pipe_w = fds[1];
    const uint64_t w = proxy_->options().window_bytes;
    const int want = static_cast<int>(w == 0 ? kSplicePipeBytes : std::min<uint64_t>(w, kSplicePipeBytes));
    (void)::fcntl(p.pipe_w, F_SETPIPE_SZ, want);  // may be refused: keep the default size
    const int got = ::fcntl(p.pipe_w, F_GETPIPE_SZ);
    p.cap = got > 0 ? static_cast<size_t>(got) : 65536;
    asio::error_code ec;
    p.src->non_blocking(true, ec);
    if (!ec) p.dst->non_blocking(true, ec);
    return !ec;
  }

  void SplicePump(SplicePipe& p) {
    if (closed_) return;
    const int src = p.src->native_handle(), dst = p.dst->native_handle();
    bool progress = true;
    bool src_empty = false;
    while (progress) {
      progress = false;
      if (!p.src_eof && !p.read_wait && p.in_pipe < p.cap) {
        const ssize_t n = ::splice(src, nullptr, p.pipe_w, nullptr, p.cap - p.in_pipe,
                                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n > 0) {
          p.in_pipe += static_cast<size_t>(n);
          progress = true;
        } else if (n == 0) {
          p.src_eof = true;
        } else if (errno == EAGAIN) {
          // With an empty pipe this can only mean: nothing to read. With a
          // non-empty one the pipe may be full; the write side drains it.
          src_empty = p.in_pipe == 0;
        } else if (errno != EINTR) {
          Close();
          return;
        }
      }
      if (p.in_pipe > 0 && !p.write_wait) {
        const ssize_t m = ::splice(p.pipe_r, nullptr, dst, nullptr, p.in_pipe,
                                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (m > 0) {
          p.in_pipe -= static_cast<size_t>(m);
          p.delivered_counter->fetch_add(static_cast<uint64_t>(m), std::memory_order_relaxed);
          progress = true;
        } else if (m < 0 && errno == EAGAIN) {
          p.write_wait = true;
          p.dst->async_wait(tcp::socket::wait_write,
                            [self = shared_from_this(), pp = &p](const asio::error_code& ec) {
                              pp->write_wait = false;
                              if (ec) return self->Close();
                              self->SplicePump(*pp);
                            });
        } else if (m <= 0 && errno != EINTR) {
          Close();
          return;
        }
      }
    }
    if (p.src_eof && p.in_pipe == 0 && !p.fin_sent) {
      p.fin_sent = true;
      asio::error_code ignored;
      p.dst->shutdown(tcp::socket::shutdown_send, ignored);
      if (sup_.fin_sent && sdown_.fin_sent) Close();
      return;
    }
    if (src_empty && !p.read_wait && !p.src_eof) {
      p.read_wait = true;
      p.src->async_wait(tcp::socket::wait_read,
                        [self = shared_from_this(), pp = &p](const asio::error_code& ec) {
                          pp->read_wait = false;
                          if (ec) return self->Close();
                          self->SplicePump(*pp);
                        });
    }
  }

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
    BlockPool& pool = worker_->pool;
    const size_t bs = pool.block_size();
    if (p.blocks.size() == 1 && !p.writing && p.write_off == p.blocks.back().filled) {
      // Everything was written: reuse the block from its start.
      p.blocks.back().filled = 0;
      p.write_off = 0;
    }
    if (p.blocks.empty() || bs - p.blocks.back().filled < kMinRead) {
      p.blocks.push_back(Pipe::Block{pool.Get(), 0});
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
      p.pending.push_back({p.model.OnRead(n, now), n, false});
    }
    if (ec) {
      if (ec != asio::error::eof) {
        Close();
        return;
      }
      p.src_eof = true;
      p.pending.push_back({p.model.OnEof(now), 0, true});
    }
    Pump(p, now);
    MaybeRead(p);
  }

  // Moves due chunks to `ready`, starts a write, re-arms the timer.
  void Pump(Pipe& p, TimePoint now) {
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
    MaybeWrite(p);
    ArmTimer(p);
  }

  void MaybeWrite(Pipe& p) {
    if (closed_ || p.writing) return;
    if (p.ready == 0) {
      if (p.eof_ready && !p.fin_sent) {
        p.fin_sent = true;
        asio::error_code ignored;
        p.dst->shutdown(tcp::socket::shutdown_send, ignored);
        if (up_.fin_sent && down_.fin_sent) Close();
      }
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
    if (ec) {
      Close();
      return;
    }
    size_t left = n;
    while (true) {
      Pipe::Block& f = p.blocks.front();
      const size_t take = std::min(left, f.filled - p.write_off);
      p.write_off += take;
      left -= take;
      if (p.write_off == f.filled && p.blocks.size() > 1) {
        worker_->pool.Put(std::move(f.data));
        p.blocks.pop_front();
        p.write_off = 0;
        continue;
      }
      assert(left == 0);
      break;
    }
    p.ready -= n;
    p.delivered_counter->fetch_add(n, std::memory_order_relaxed);
    const TimePoint now = Clock::now();
    p.model.OnDelivered(n, now);
    Pump(p, now);
    MaybeRead(p);
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
    const TimePoint now = Clock::now();
    Pump(p, now);
    MaybeRead(p);
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

  Proxy::Impl* proxy_;
  Worker* worker_;
  MappingState* mapping_;
  const TimePoint accepted_at_;
  tcp::socket client_;
  tcp::socket server_;
  Pipe up_;    // client -> server
  Pipe down_;  // server -> client
  SplicePipe sup_;    // client -> server, pass-through mode
  SplicePipe sdown_;  // server -> client, pass-through mode
  bool splice_ = false;
  uint64_t credit_wakeup_ = kCreditWakeup;
  bool closed_ = false;
};

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
  for (auto& w : workers_) {
    Worker* wp = w.get();
    wp->guard.emplace(wp->io.get_executor());
    wp->thread = std::thread([wp] {
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

}  // namespace cqlstream::wan
