// Copyright (c) cqlstream authors.
#include "fault_proxy.h"

#include <asio.hpp>
#include <algorithm>
#include <cstdint>
#include <list>
#include <random>
#include <thread>
#include <vector>

#include "util/mutex.h"

namespace cqlstream::testing {

using asio::ip::tcp;

struct FaultProxy::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::string target;
  uint16_t port = 0;
  std::string err;
  Mutex mu;
  Faults faults GUARDED_BY(mu);
  std::mt19937_64 rng GUARDED_BY(mu){12345};
  Stats stats;
  std::thread thread;
  struct Conn;
  std::list<std::weak_ptr<Conn>> conns;

  struct Conn : std::enable_shared_from_this<Conn> {
    Impl* p;
    tcp::socket client, server;
    bool closed = false, hole = false;
    // Bytes this connection may still send to the client (byte-budget resets).
    uint64_t budget = UINT64_MAX;
    std::vector<uint8_t> up = std::vector<uint8_t>(64 << 10), down = std::vector<uint8_t>(64 << 10);
    asio::steady_timer timer;
    Conn(Impl* p) : p(p), client(p->io), server(p->io), timer(p->io) {}

    void Close() {
      if (closed) return;
      closed = true;
      std::error_code ec;
      client.close(ec);
      server.close(ec);
      timer.cancel();
    }
    void Start() {
      {
        MutexLock l(&p->mu);
        const Faults f = p->faults;
        if (f.reset_after_max_bytes > 0) {
          std::uniform_int_distribution<uint64_t> u(std::min(f.reset_after_min_bytes, f.reset_after_max_bytes),
                                                    f.reset_after_max_bytes);
          budget = u(p->rng);
        }
      }
      PumpUp();
      PumpDown();
    }
    // client -> server: forwarded as is (resets may still happen).
    void PumpUp() {
      auto self = shared_from_this();
      client.async_read_some(asio::buffer(up), [self](std::error_code ec, size_t n) {
        if (ec || self->closed) return self->Close();
        if (self->hole) return self->PumpUp();  // swallow
        asio::async_write(self->server, asio::buffer(self->up.data(), n), [self](std::error_code ec, size_t) {
          if (ec) return self->Close();
          self->PumpUp();
        });
      });
    }
    // server -> client: split into CQL frames (9-byte header, length at
    // bytes 5..8); faults are drawn per frame.
    std::vector<uint8_t> pending;   // bytes read, not yet forwarded
    std::vector<uint8_t> out;       // what is being written now
    void PumpDown() {
      auto self = shared_from_this();
      server.async_read_some(asio::buffer(down), [self](std::error_code ec, size_t n) {
        if (ec || self->closed) return self->Close();
        if (self->hole) return self->PumpDown();  // swallow everything from now on
        self->pending.insert(self->pending.end(), self->down.begin(), self->down.begin() + static_cast<long>(n));
        self->NextFrame();
      });
    }
    // Forwards complete frames one by one, each with its fault.
    void NextFrame() {
      if (closed) return;
      if (pending.size() < 9) return PumpDown();
      const size_t len = 9 + ((size_t{pending[5]} << 24) | (size_t{pending[6]} << 16) | (size_t{pending[7]} << 8) |
                              size_t{pending[8]});
      if (pending.size() < len) return PumpDown();
      out.assign(pending.begin(), pending.begin() + static_cast<long>(len));
      pending.erase(pending.begin(), pending.begin() + static_cast<long>(len));
      Faults f;
      double r[7];
      {
        MutexLock l(&p->mu);
        f = p->faults;
        std::uniform_real_distribution<double> u(0, 1);
        for (double& x : r) x = u(p->rng);
      }
      auto self = shared_from_this();
      if (r[0] < f.reset_p) {
        p->stats.resets++;
        return Close();
      }
      if (r[1] < f.blackhole_p) {
        p->stats.blackholes++;
        hole = true;
        pending.clear();
        return PumpDown();
      }
      if (r[2] < f.truncate_p) {
        p->stats.truncations++;
        asio::async_write(client, asio::buffer(out.data(), out.size() / 2), [self](std::error_code, size_t) {
          self->Close();
        });
        return;
      }
      if (r[3] < f.duplicate_p) {
        p->stats.duplicates++;
        const std::vector<uint8_t> copy = out;
        out.insert(out.end(), copy.begin(), copy.end());
      }
      if (out.size() >= budget) {  // the byte budget ends inside this frame (or right after it)
        p->stats.resets++;
        out.resize(budget);
        budget = 0;
        asio::async_write(client, asio::buffer(out), [self](std::error_code, size_t) { self->Close(); });
        return;
      }
      budget -= out.size();
      auto forward = [self] {
        if (self->closed) return;
        asio::async_write(self->client, asio::buffer(self->out), [self](std::error_code ec, size_t) {
          if (ec) return self->Close();
          self->NextFrame();
        });
      };
      if (r[6] < f.stall_p && f.stall_for.count() > 0 && out.size() > 9) {
        p->stats.stalls++;
        // The header and the result kind: the client has bound the frame
        // to its request (and its sink), no cell has come yet.
        const size_t half = std::min<size_t>(out.size() - 1, 13);
        asio::async_write(client, asio::buffer(out.data(), half), [self, half, f](std::error_code ec, size_t) {
          if (ec || self->closed) return self->Close();
          self->timer.expires_after(f.stall_for);
          self->timer.async_wait([self, half](std::error_code ec) {
            if (ec || self->closed) return;
            asio::async_write(self->client, asio::buffer(self->out.data() + half, self->out.size() - half),
                              [self](std::error_code ec, size_t) {
                                if (ec) return self->Close();
                                self->NextFrame();
                              });
          });
        });
        return;
      }
      if (r[4] < f.delay_p && f.delay_max.count() > 0) {
        p->stats.delays++;
        timer.expires_after(
            std::chrono::microseconds(static_cast<int64_t>(r[5] * 1000.0 * static_cast<double>(f.delay_max.count()))));
        timer.async_wait([forward](std::error_code ec) {
          if (!ec) forward();
        });
        return;
      }
      forward();
    }
  };

  void Accept() {
    acceptor.async_accept([this](std::error_code ec, tcp::socket s) {
      if (ec) return;
      auto c = std::make_shared<Conn>(this);
      c->client = std::move(s);
      stats.connections++;
      c->server.async_connect(tcp::endpoint(asio::ip::make_address(target), port), [c](std::error_code ec) {
        if (ec) return c->Close();
        c->server.set_option(tcp::no_delay(true));
        c->client.set_option(tcp::no_delay(true));
        c->Start();
      });
      conns.push_back(c);
      Accept();
    });
  }
};

FaultProxy::FaultProxy(const std::string& listen_host, const std::string& target_host, uint16_t port)
    : impl_(std::make_unique<Impl>()) {
  impl_->target = target_host;
  impl_->port = port;
  std::error_code ec;
  tcp::endpoint ep(asio::ip::make_address(listen_host, ec), port);
  if (!ec) impl_->acceptor.open(ep.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(ep, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    impl_->err = ec.message();
    return;
  }
  impl_->Accept();
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

FaultProxy::~FaultProxy() {
  asio::post(impl_->io, [this] {
    std::error_code ec;
    impl_->acceptor.close(ec);
    for (auto& w : impl_->conns) {
      if (auto c = w.lock()) c->Close();
    }
    impl_->io.stop();
  });
  if (impl_->thread.joinable()) impl_->thread.join();
}

bool FaultProxy::ok() const { return impl_->err.empty(); }
std::string FaultProxy::error() const { return impl_->err; }

void FaultProxy::SetFaults(const Faults& f) {
  MutexLock l(&impl_->mu);
  impl_->faults = f;
}

void FaultProxy::ResetAll() {
  asio::post(impl_->io, [this] {
    for (auto& w : impl_->conns) {
      if (auto c = w.lock()) c->Close();
    }
    impl_->conns.remove_if([](auto& w) { return w.expired(); });
  });
}

const FaultProxy::Stats& FaultProxy::stats() const { return impl_->stats; }

}  // namespace cqlstream::testing
