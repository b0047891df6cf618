// Copyright (c) cqlstream authors.
//
// ConnectionRegistry: CloseAll closes a connection still in its handshake
// (with a host that never answers: nothing else holds it to close it) and
// cancels one whose TCP connect is under way, and an open after CloseAll is
// refused with Cancelled.
#include "net/connection_registry.h"

#include <gtest/gtest.h>

#include <asio.hpp>
#include <chrono>
#include <future>
#include <memory>

#include "net/connection.h"
#include "net/io_pool.h"
#include "net/syn_dropping_host_test_util.h"

namespace cqlstream::net {
namespace {

using namespace std::chrono_literals;

// A listening socket that never accepts: the kernel completes each TCP
// handshake, and the CQL handshake's OPTIONS waits for an answer.
struct SilentListener {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor{io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  Connection::Options Options(const std::shared_ptr<ConnectionRegistry>& registry) {
    Connection::Options o;
    o.transport.host = "127.0.0.1";
    o.transport.port = acceptor.local_endpoint().port();
    o.transport.connect_timeout = 10000ms;  // the handshake's time-out
    o.registry = registry;
    return o;
  }
};

using OpenResult = StatusOr<std::shared_ptr<Connection>>;

TEST(ConnectionRegistry, CloseAllClosesAConnectionInItsHandshake) {
  SilentListener silent;
  IoPool io(1);
  auto registry = std::make_shared<ConnectionRegistry>();
  auto opened = std::make_shared<std::promise<OpenResult>>();
  std::future<OpenResult> f = opened->get_future();
  Connection::Open(io.Next(), silent.Options(registry), [opened](OpenResult r) { opened->set_value(std::move(r)); });
  const bool waiting = f.wait_for(300ms) == std::future_status::timeout;
  registry->CloseAll(Status::Cancelled("session closed"));  // on every way out: an abandoned handshake leaks
  ASSERT_TRUE(waiting) << "the handshake ended without an answer";
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready) << "CloseAll left the handshake to its 10 s time-out";
  OpenResult r = f.get();
  EXPECT_FALSE(r.ok());
  io.Stop();
}

TEST(ConnectionRegistry, CloseAllCancelsAConnectUnderWay) {
  testing::SynDroppingHost host;
  IoPool io(1);
  auto registry = std::make_shared<ConnectionRegistry>();
  Connection::Options o;
  o.transport.host = "127.0.0.1";
  o.transport.port = host.port();
  o.transport.connect_timeout = 10000ms;
  o.registry = registry;
  auto opened = std::make_shared<std::promise<OpenResult>>();
  std::future<OpenResult> f = opened->get_future();
  Connection::Open(io.Next(), o, [opened](OpenResult r) { opened->set_value(std::move(r)); });
  const bool waiting = f.wait_for(300ms) == std::future_status::timeout;
  registry->CloseAll(Status::Cancelled("session closed"));
  ASSERT_TRUE(waiting) << "the connect ended by itself";
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready) << "CloseAll left the connect to its 10 s time-out";
  OpenResult r = f.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kCancelled) << r.status().ToString();
  EXPECT_EQ(r.status().message(), "session closed");
  io.Stop();
}

TEST(ConnectionRegistry, AnOpenAfterCloseAllIsRefused) {
  SilentListener silent;
  IoPool io(1);
  auto registry = std::make_shared<ConnectionRegistry>();
  registry->CloseAll(Status::Cancelled("session closed"));
  auto opened = std::make_shared<std::promise<OpenResult>>();
  std::future<OpenResult> f = opened->get_future();
  Connection::Open(io.Next(), silent.Options(registry), [opened](OpenResult r) { opened->set_value(std::move(r)); });
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  OpenResult r = f.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kCancelled) << r.status().ToString();
  io.Stop();
}

}  // namespace
}  // namespace cqlstream::net
