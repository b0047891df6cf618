// Copyright (c) cqlstream authors.
//
// Test-only: a host whose TCP connect never completes, as one that drops
// packets does. On Linux a listening socket with a backlog of 0 holds one
// connection in its accept queue; the constructor makes it and waits until
// it is queued, and nobody accepts it, so the kernel drops every later SYN
// (retransmitted until the client's own time-out).
//
// Thread-safety: port() may be called from any thread; the host is built
// and destroyed on one.
#ifndef CQLSTREAM_NET_SYN_DROPPING_HOST_TEST_UTIL_H_
#define CQLSTREAM_NET_SYN_DROPPING_HOST_TEST_UTIL_H_

#include <asio.hpp>
#include <cstdint>

namespace cqlstream::net::testing {

class SynDroppingHost {
 public:
  SynDroppingHost() : acceptor_(io_), filler_(io_) {
    const asio::ip::tcp::endpoint loopback(asio::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(loopback.protocol());
    acceptor_.bind(loopback);
    acceptor_.listen(0);
    filler_.connect(acceptor_.local_endpoint());
    acceptor_.wait(asio::socket_base::wait_read);  // the filler is in the accept queue
    port_ = acceptor_.local_endpoint().port();
  }
  uint16_t port() const { return port_; }

 private:
  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  asio::ip::tcp::socket filler_;
  uint16_t port_ = 0;
};

}  // namespace cqlstream::net::testing

#endif  // CQLSTREAM_NET_SYN_DROPPING_HOST_TEST_UTIL_H_
