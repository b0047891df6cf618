// Copyright (c) cqlstream authors.
//
// Test-only: the session's side of a HostPool (net/pool.h PoolOwner) with
// counters the tests read, and small helpers shared by the pool's tests
// (pool_test.cc, pool_shard_test.cc).
//
// Thread-safety: FakeOwner's counters are atomics; its settings are set
// before the pool opens anything or are atomics too.
#ifndef CQLSTREAM_NET_POOL_TEST_UTIL_H_
#define CQLSTREAM_NET_POOL_TEST_UTIL_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "cqlstream/options.h"
#include "net/connection.h"
#include "net/io_pool.h"
#include "net/pool.h"

namespace cqlstream::net::testing {

using namespace std::chrono_literals;

// The session's side of a pool, with counters the tests read. The I/O
// threads belong to the test (declared before the owner, so they are joined
// last, on the test's thread: a callback may hold the owner's last reference).
class FakeOwner final : public PoolOwner {
 public:
  explicit FakeOwner(IoPool* io) : io_(io) {}
  bool closed() const override { return closed_; }
  asio::io_context& NextIo() override { return io_->Next(); }
  Connection::Options ConnectionOptionsFor(const std::string& address, uint16_t port) override {
    ++opens;
    Connection::Options o;
    if (!username.empty()) {
      o.username = username;
      o.password = Secret("secret");
    }
    o.transport.host = address;
    o.transport.port = port;
    o.transport.connect_timeout = 1000ms;
    return o;
  }
  int ConnectionsPerHost() const override { return per_host; }
  void OnConnectionClosed(const Connection&) override { ++closed_connections; }
  void OnPoolUp() override { ++ups; }

  std::atomic<int> per_host{2};
  std::string username;  // set before the pool opens anything
  std::atomic<int> opens{0}, closed_connections{0}, ups{0};
  std::atomic<bool> closed_{false};

 private:
  IoPool* io_;
};

inline PoolConfig FastReconnect() {
  PoolConfig c;
  c.reconnect = ExponentialBackoff(20ms, 40ms);
  return c;
}

// Whether `f` holds within `within` (polled every 5 ms).
inline bool Eventually(const std::function<bool()>& f, std::chrono::milliseconds within = 3000ms) {
  const auto until = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < until) {
    if (f()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return f();
}

}  // namespace cqlstream::net::testing

#endif  // CQLSTREAM_NET_POOL_TEST_UTIL_H_
