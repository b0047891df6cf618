// Copyright (c) cqlstream authors.
//
// SessionOptions::stop, the interrupt of an opening: Connect to a host that
// accepts and never answers, to one whose TCP connect or TLS handshake never
// completes (the shutdown cancels the connect under way), and the waits of a connected session (Execute,
// Prepare, ExecuteBatch, WaitForSchemaAgreement) on answers that never
// come, end within a poll of the flag being set, not at their time-outs; a
// statement with a sink is waited for to its end; SetStop replaces the flag.
#include <gtest/gtest.h>

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "net/fake_server_test_util.h"
#include "net/session.h"
#include "net/syn_dropping_host_test_util.h"

namespace cqlstream::net {
namespace {

using testing::FakeServer;
using testing::Frame;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr char kNever[] = "SELECT x FROM ks.never";  // never answered
constexpr char kAnswered[] = "SELECT x FROM ks.answered";

// Sets the flag `after` from now, on its own thread (joined by the dtor).
class StopLater {
 public:
  StopLater(std::atomic<bool>* flag, std::chrono::milliseconds after)
      : t_([flag, after] {
          std::this_thread::sleep_for(after);
          flag->store(true);
        }) {}

 private:
  std::jthread t_;
};

// A fake host that answers everything but kNever (and PREPAREs of it).
struct SelectiveHost {
  SelectiveHost() {
    srv.SetHandler([](const testing::Request& r) -> std::optional<cql::Bytes> {
      if (r.query == kNever) return std::nullopt;
      return Frame(cql::Opcode::kResult, r.header.stream, cql::Bytes{0, 0, 0, 1});  // VOID
    });
  }
  ConnectionOptions Options() const { return testing::LoopbackOptions(srv.port()); }
  FakeServer srv;
};

SessionOptions WithStop(std::shared_ptr<const std::atomic<bool>> flag) {
  SessionOptions so;
  so.stop = std::move(flag);
  return so;
}

bool Interrupted(const Status& s) { return s.code() == Status::Code::kCancelled && s.message() == "interrupted"; }

TEST(SessionStop, AConnectThatNoAnswerEndsAtTheStop) {
  // A listening socket that never accepts: the kernel completes each TCP
  // handshake, so the client's OPTIONS waits for an answer that never comes.
  // Without the stop, Connect waits the connect time-out (5 s) on each of
  // its three attempts.
  asio::io_context io;
  asio::ip::tcp::acceptor silent(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const ConnectionOptions o = testing::LoopbackOptions(silent.local_endpoint().port());  // connect time-out 5 s
  auto flag = std::make_shared<std::atomic<bool>>(false);
  const SessionOptions so = WithStop(flag);
  const auto t0 = Clock::now();
  StatusOr<std::shared_ptr<Session>> s = Status::Internal("not connected");
  {
    StopLater later(flag.get(), 300ms);
    s = Session::Connect(o, so);
  }
  EXPECT_TRUE(!s.ok() && Interrupted(s.status())) << (s.ok() ? "connected" : s.status().ToString());
  // Under 2 s: the session's shutdown closed the connection in its
  // handshake, not left it to the I/O threads' 2 s grace (where, abandoned,
  // it was never freed: ASan's leak check).
  EXPECT_LT(Clock::now() - t0, 2s);
}

// Connect with `o`, the stop set 300 ms in; the time until Connect returns.
std::chrono::milliseconds ConnectStoppedAfter300ms(const ConnectionOptions& o) {
  auto flag = std::make_shared<std::atomic<bool>>(false);
  const auto t0 = Clock::now();
  StatusOr<std::shared_ptr<Session>> s = Status::Internal("not connected");
  {
    StopLater later(flag.get(), 300ms);
    s = Session::Connect(o, WithStop(flag));
  }
  EXPECT_TRUE(!s.ok() && Interrupted(s.status())) << (s.ok() ? "connected" : s.status().ToString());
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
}

TEST(SessionStop, ATcpConnectUnderWayEndsAtTheStop) {
  // Under 2 s: the session's shutdown cancelled the connect under way, not
  // left it to the I/O threads' 2 s grace (the connect time-out is 5 s).
  testing::SynDroppingHost h;
  EXPECT_LT(ConnectStoppedAfter300ms(testing::LoopbackOptions(h.port())), 2s);
}

TEST(SessionStop, ATlsHandshakeUnderWayEndsAtTheStop) {
  // A host that accepts (the kernel does) and never answers the ClientHello.
  asio::io_context io;
  asio::ip::tcp::acceptor silent(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  ConnectionOptions o = testing::LoopbackOptions(silent.local_endpoint().port());
  o.tls.emplace();
  o.tls->insecure_skip_verify = true;
  EXPECT_LT(ConnectStoppedAfter300ms(o), 2s);
}

TEST(SessionStop, AFlagSetBeforeConnectConnectsNothing) {
  SelectiveHost h;
  auto s = Session::Connect(h.Options(), WithStop(std::make_shared<std::atomic<bool>>(true)));
  EXPECT_TRUE(!s.ok() && Interrupted(s.status())) << (s.ok() ? "connected" : s.status().ToString());
  EXPECT_EQ(h.srv.connections(), 0);
}

TEST(SessionStop, TheWaitsOfAConnectedSessionEndAtTheStop) {
  SelectiveHost h;
  auto flag = std::make_shared<std::atomic<bool>>(false);
  auto s = Session::Connect(h.Options(), WithStop(flag));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Session& session = **s;
  ASSERT_TRUE(session.Query(kAnswered).ok());  // a flag not set stops nothing

  const auto t0 = Clock::now();
  {
    StopLater later(flag.get(), 300ms);
    auto r = session.Query(kNever);
    EXPECT_TRUE(!r.ok() && Interrupted(r.status())) << (r.ok() ? "answered" : r.status().ToString());
  }
  EXPECT_LT(Clock::now() - t0, 3s);  // the request time-out is 10 s

  // Set: every wait ends at once, before sending.
  auto p = session.Prepare(kNever);
  EXPECT_TRUE(!p.ok() && Interrupted(p.status())) << (p.ok() ? "prepared" : p.status().ToString());
  auto b = session.ExecuteBatch(cql::BatchType::kUnlogged, {Statement::Query(kNever)});
  EXPECT_TRUE(!b.ok() && Interrupted(b.status())) << (b.ok() ? "answered" : b.status().ToString());
  std::atomic<bool> own_stop{false};
  auto e = session.Execute(Statement::Query(kAnswered), &own_stop);
  EXPECT_TRUE(!e.ok() && Interrupted(e.status())) << (e.ok() ? "answered" : e.status().ToString());
  auto a = session.WaitForSchemaAgreement(10s);
  EXPECT_TRUE(Interrupted(a)) << a.ToString();
  EXPECT_LT(Clock::now() - t0, 4s);

  // An opening done forgets its flag: the same calls are answered.
  session.SetStop(nullptr);
  EXPECT_TRUE(session.Query(kAnswered).ok());
  EXPECT_TRUE(session.Execute(Statement::Query(kAnswered), &own_stop).ok());
  session.Close();
}

// A sink that takes every cell as it comes (never reached here).
class NullSink : public cql::CellSink {
 public:
  Status OnRowsBegin(const cql::RowsMetadata&, int32_t) override { return Status::OK(); }
  std::span<uint8_t> CellDestination(int32_t, int32_t, int32_t) override { return {}; }
  Status OnCell(int32_t, int32_t, std::optional<cql::ByteView>) override { return Status::OK(); }
};

TEST(SessionStop, AStatementWithASinkIsWaitedForToItsEnd) {
  // Its answer would write into the caller's memory after the caller had
  // given up: the request's own time-out ends it, not the flag.
  SelectiveHost h;
  auto flag = std::make_shared<std::atomic<bool>>(false);
  ConnectionOptions o = h.Options();
  o.request_timeout = 1000ms;
  auto s = Session::Connect(o, WithStop(flag));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Statement st = Statement::Query(kNever);
  auto sink = std::make_shared<NullSink>();
  st.sink = [sink](int) { return sink; };
  const auto t0 = Clock::now();
  {
    StopLater later(flag.get(), 100ms);
    auto r = (*s)->Execute(st);
    EXPECT_EQ(r.status().code(), Status::Code::kTimeout) << (r.ok() ? "answered" : r.status().ToString());
  }
  EXPECT_GE(Clock::now() - t0, 900ms);
  (*s)->Close();
}

}  // namespace
}  // namespace cqlstream::net
