// Copyright (c) cqlstream authors.
//
// Test-only: a fake host (net/fake_server_test_util.h) that answers the
// handshake and its system tables and never any other request (a catalog
// read, a prepare), for the tests of an opening's interrupt; and the
// setting of that interrupt once the opening waits on such a request.
//
// Thread-safety: asked() and StopOnceAsked may be called from any thread.
#ifndef CQLSTREAM_NET_STALLING_HOST_TEST_UTIL_H_
#define CQLSTREAM_NET_STALLING_HOST_TEST_UTIL_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <stop_token>
#include <thread>

#include "cqlstream/options.h"
#include "net/fake_server_test_util.h"

namespace cqlstream::net::testing {

class StallingHost {
 public:
  StallingHost() {
    srv_.SetHandler([this](const Request&) -> std::optional<cql::Bytes> {
      asked_ = true;
      return std::nullopt;
    });
  }
  // 127.0.0.1 and the host's port, keyspace "ks", one I/O thread, a 5 s
  // connect and a 10 s request time-out.
  ConnectionOptions Options() const {
    ConnectionOptions c = LoopbackOptions(srv_.port());
    c.keyspace = "ks";
    return c;
  }
  // Whether a request past the handshake and system tables came.
  bool asked() const { return asked_; }
  // Sets *flag 200 ms after the first such request came (or 10 s from now),
  // on a thread of its own; the returned thread's destruction asks it to
  // stop (then the flag is left as it is) and joins it.
  std::jthread StopOnceAsked(std::shared_ptr<std::atomic<bool>> flag) const {
    return std::jthread([this, flag = std::move(flag)](const std::stop_token& st) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!asked_ && !st.stop_requested() && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (!st.stop_requested()) flag->store(true);
    });
  }

 private:
  std::atomic<bool> asked_{false};  // before srv_: its handler writes it until srv_ is gone
  FakeServer srv_;
};

}  // namespace cqlstream::net::testing

#endif  // CQLSTREAM_NET_STALLING_HOST_TEST_UTIL_H_
