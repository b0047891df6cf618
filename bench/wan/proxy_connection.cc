// Copyright (c) cqlstream authors.
//
// A proxied connection: its two pipes and the byte pumps that move and time
// them (splice paths and the timed copy path). See proxy.h for the model and
// proxy_internal.h for the parts it shares with the listener.
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <asio.hpp>
#include <cassert>
#include <cerrno>
#include <limits>
#include <memory>

#include "wan/proxy_internal.h"

namespace cqlstream::wan::proxy_internal {
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
        up_(worker->io, proxy->pipe_params(), proxy->link_up(), proxy->NextSeed()),
        down_(worker->io, proxy->pipe_params(), proxy->link_down(), proxy->NextSeed() + 1) {
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
      const Nanos d = proxy_->pipe_params().DelayAt(accepted_at_);  // the delay when the handshake began
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
        mapping_->RecordLate(now > c.release ? now - c.release : Nanos{0}, c.bytes);
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
    if (next == TimePoint::max()) return;
    next = OnTimerGrid(next, TimerGrid(proxy_->pipe_params().DelayAt(next)));  // the delay may change mid-run
    if (next >= p.armed) return;
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

  // The result of one splice step.
  enum class Step { kIdle, kProgress, kClosed };

  void Drive(Pipe& p) {
    const bool timed = mode_ == Mode::kTimedSplice;
    for (int round = 0; !closed_; ++round) {
      if (round == kDriveRounds) {
        // Busy connection: let the others on this thread have a turn.
        asio::post(worker_->io, [self = shared_from_this(), pp = &p] { self->Drive(*pp); });
        return;
      }
      const TimePoint now = timed ? Clock::now() : TimePoint{};
      ReleaseDue(p, now);
      const Step wrote = SpliceOut(p, now, timed);
      if (wrote == Step::kClosed || !MaybeSendFin(p)) return;
      const Step read = SpliceIn(p, now, timed);
      if (read == Step::kClosed) return;
      if (wrote == Step::kIdle && read == Step::kIdle) break;
    }
    if (timed) ArmTimer(p);
  }

  // Writes what is released from the kernel pipes to the sink; waits for
  // writability when the sink is full.
  Step SpliceOut(Pipe& p, TimePoint now, bool timed) {
    if (p.writing || p.ready == 0) return Step::kIdle;
    const int dst = p.dst->native_handle();
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
        Fail();
        return Step::kClosed;
      }
    }
    if (wrote > 0) {
      if (timed) {
        Delivered(p, wrote, now);
      } else {
        p.delivered_counter->fetch_add(wrote, std::memory_order_relaxed);
      }
    }
    if (blocked) {
      p.writing = true;
      p.dst->async_wait(tcp::socket::wait_write, [self = shared_from_this(), pp = &p](const asio::error_code& ec) {
        pp->writing = false;
        if (ec) return self->Close();
        self->Drive(*pp);
      });
    }
    return wrote > 0 ? Step::kProgress : Step::kIdle;
  }

  // How much the next splice in may take, or 0 when it must wait (timed: the
  // window's credit, ArmTimer wakes us when it is back; pass-through: at
  // most pipe_bytes_ held, the next write makes room).
  uint64_t ReadAllowance(Pipe& p, TimePoint now, bool timed) {
    if (timed) {
      const uint64_t credit = p.model.Credit(now);
      p.wait_credit = credit < credit_wakeup_;
      return p.wait_credit ? 0 : credit;
    }
    const uint64_t credit = p.ready < pipe_bytes_ ? pipe_bytes_ - p.ready : 0;
    return credit >= std::min<uint64_t>(kMinRead, pipe_bytes_) ? credit : 0;
  }

  // Reads what the window allows from the source into the back kernel pipe;
  // waits for readability when the source is empty.
  Step SpliceIn(Pipe& p, TimePoint now, bool timed) {
    if (p.reading || p.src_eof) return Step::kIdle;
    const uint64_t credit = ReadAllowance(p, now, timed);
    if (credit == 0) return Step::kIdle;
    if (p.kpipes.empty() || p.kpipes.back().sealed || p.kpipes.back().space() < kMinRead) {
      KernelPipe fresh;
      if (!worker_->pool.GetPipe(pipe_bytes_, &fresh)) {  // out of fds
        Fail();
        return Step::kClosed;
      }
      p.kpipes.push_back(std::move(fresh));
    }
    KernelPipe& b = p.kpipes.back();
    const int src = p.src->native_handle();
    const size_t n = static_cast<size_t>(std::min<uint64_t>(credit, b.space()));
    const ssize_t got = ::splice(src, nullptr, b.w, nullptr, n, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (got > 0) {
      b.in += static_cast<uint64_t>(got);
      if (timed) {
        RecordRead(p, static_cast<size_t>(got), now);
      } else {
        p.ready += static_cast<uint64_t>(got);
      }
      return Step::kProgress;
    }
    if (got == 0) {
      if (timed) {
        RecordEof(p, now);
      } else {
        p.src_eof = true;
        p.eof_ready = true;
      }
      return Step::kProgress;
    }
    if (errno == EAGAIN) {
      // Either the socket is empty or the pipe is out of slots (a pipe
      // holds a number of buffers, not of bytes).
      int queued = 0;
      if (b.held() > 0 && ::ioctl(src, FIONREAD, &queued) == 0 && queued > 0) {
        b.sealed = true;
        return Step::kProgress;
      }
      p.reading = true;
      p.src->async_wait(tcp::socket::wait_read, [self = shared_from_this(), pp = &p](const asio::error_code& ec) {
        pp->reading = false;
        if (ec) return self->Close();
        self->Drive(*pp);
      });
      return Step::kIdle;
    }
    if (errno != EINTR) {
      Fail();
      return Step::kClosed;
    }
    return Step::kIdle;
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

}  // namespace

void StartConnection(Proxy::Impl* proxy, Worker* worker, MappingState* mapping, tcp::socket client) {
  auto c = std::make_shared<Connection>(proxy, worker, mapping, std::move(client));
  asio::post(worker->io, [c] { c->Start(); });
}

}  // namespace cqlstream::wan::proxy_internal
