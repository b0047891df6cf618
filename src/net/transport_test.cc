// Copyright (c) cqlstream authors.
//
// ConnectTransport's TLS handshake against fake TCP servers that misbehave
// before any certificate is sent: a peer that closes or resets the stream is
// ConnectionLost (another node may answer), a TLS alert or a non-TLS answer
// stays TlsError. PendingConnect::Cancel ends a TCP connect under way with
// its status, and does nothing once the callback has run.
#include "net/transport.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>

#include "net/syn_dropping_host_test_util.h"

namespace cqlstream::net {
namespace {

using asio::ip::tcp;

// Accepts one connection on 127.0.0.1 and hands it to `serve` on its own
// thread. Owns the thread; joins it on destruction.
class OneShotServer {
 public:
  explicit OneShotServer(std::function<void(tcp::socket&)> serve)
      : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this, serve = std::move(serve)] {
      std::error_code ec;
      tcp::socket s(io_);
      acceptor_.accept(s, ec);
      if (!ec) serve(s);
    });
  }
  ~OneShotServer() { thread_.join(); }
  uint16_t port() const { return port_; }

 private:
  asio::io_context io_;
  tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::thread thread_;
};

// Reads the ClientHello's first bytes (so that the client is inside its
// handshake when the server acts).
void ReadSome(tcp::socket& s) {
  std::array<char, 512> buf{};
  std::error_code ec;
  s.read_some(asio::buffer(buf), ec);
}

Status Handshake(uint16_t port, const std::string& server_name = "") {
  TlsOptions tls;
  tls.insecure_skip_verify = true;
  auto ctx = MakeTlsContext(tls);
  EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
  if (!ctx.ok()) return ctx.status();
  asio::io_context io;
  TransportOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.connect_timeout = std::chrono::milliseconds(5000);
  o.tls = *ctx;
  o.tls_server_name = server_name;
  o.tls_verify = false;
  std::optional<Status> result;
  std::unique_ptr<Transport> transport;
  ConnectTransport(io, o, [&](StatusOr<std::unique_ptr<Transport>> t) {
    if (t.ok()) {
      transport = std::move(t).value();
      result = Status::OK();
    } else {
      result = t.status();
    }
  });
  io.run_for(std::chrono::seconds(10));
  transport.reset();
  EXPECT_TRUE(result.has_value()) << "ConnectTransport never called back";
  return result.value_or(Status::Internal("no callback"));
}

TEST(TransportTest, PeerClosingBeforeTheHandshakeIsConnectionLost) {
  // What an SNI proxy does with a server name it cannot route.
  OneShotServer server([](tcp::socket& s) { s.close(); });
  Status st = Handshake(server.port(), "0b8e5d4a-1111-2222-3333-444455556666");
  EXPECT_EQ(st.code(), Status::Code::kConnectionLost) << st.ToString();
  EXPECT_NE(st.message().find("127.0.0.1:" + std::to_string(server.port())), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("0b8e5d4a-1111-2222-3333-444455556666"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("closed the connection during the TLS handshake"), std::string::npos)
      << st.ToString();
}

TEST(TransportTest, PeerClosingAfterTheClientHelloIsConnectionLost) {
  OneShotServer server([](tcp::socket& s) {
    ReadSome(s);
    s.close();
  });
  Status st = Handshake(server.port());
  EXPECT_EQ(st.code(), Status::Code::kConnectionLost) << st.ToString();
  EXPECT_NE(st.message().find("during the TLS handshake"), std::string::npos) << st.ToString();
}

TEST(TransportTest, PeerResettingDuringTheHandshakeIsConnectionLost) {
  OneShotServer server([](tcp::socket& s) {
    ReadSome(s);
    s.set_option(asio::socket_base::linger(true, 0));  // close sends RST
    s.close();
  });
  Status st = Handshake(server.port());
  EXPECT_EQ(st.code(), Status::Code::kConnectionLost) << st.ToString();
}

TEST(TransportTest, TlsAlertStaysTlsError) {
  OneShotServer server([](tcp::socket& s) {
    ReadSome(s);
    // A fatal handshake_failure alert record (TLS 1.2 framing).
    const unsigned char alert[] = {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28};
    std::error_code ec;
    asio::write(s, asio::buffer(alert), ec);
    ReadSome(s);  // until the client gives up
  });
  Status st = Handshake(server.port());
  EXPECT_EQ(st.code(), Status::Code::kTlsError) << st.ToString();
  EXPECT_NE(st.message().find("TLS handshake with 127.0.0.1"), std::string::npos) << st.ToString();
}

TEST(TransportTest, NonTlsAnswerStaysTlsError) {
  OneShotServer server([](tcp::socket& s) {
    ReadSome(s);
    const std::string http = "HTTP/1.0 400 Bad Request\r\n\r\n";
    std::error_code ec;
    asio::write(s, asio::buffer(http), ec);
    ReadSome(s);
  });
  Status st = Handshake(server.port());
  EXPECT_EQ(st.code(), Status::Code::kTlsError) << st.ToString();
}

TEST(TransportTest, CancelEndsATcpConnectUnderWay) {
  testing::SynDroppingHost host;
  asio::io_context io;
  TransportOptions o;
  o.host = "127.0.0.1";
  o.port = host.port();
  o.connect_timeout = std::chrono::milliseconds(10000);
  int calls = 0;
  Status st;
  std::shared_ptr<PendingConnect> pending = ConnectTransport(io, o, [&](StatusOr<std::unique_ptr<Transport>> t) {
    ++calls;
    st = t.ok() ? Status::OK() : t.status();
  });
  asio::steady_timer later(io, std::chrono::milliseconds(200));
  later.async_wait([&](std::error_code) { pending->Cancel(Status::Cancelled("stopped")); });
  const auto t0 = std::chrono::steady_clock::now();
  io.run_for(std::chrono::seconds(5));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2)) << "Cancel left the 10 s time-out";
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(st.code(), Status::Code::kCancelled) << st.ToString();
  EXPECT_EQ(st.message(), "stopped");
}

TEST(TransportTest, CancelAfterTheCallbackDoesNothing) {
  OneShotServer server([](tcp::socket& s) { ReadSome(s); });  // until the client closes
  asio::io_context io;
  TransportOptions o;
  o.host = "127.0.0.1";
  o.port = server.port();
  int calls = 0;
  std::unique_ptr<Transport> transport;
  std::shared_ptr<PendingConnect> pending = ConnectTransport(io, o, [&](StatusOr<std::unique_ptr<Transport>> t) {
    ++calls;
    if (t.ok()) transport = std::move(t).value();
  });
  io.run_for(std::chrono::seconds(5));
  ASSERT_NE(transport, nullptr) << "no connection";
  pending->Cancel(Status::Cancelled("stopped"));
  io.restart();
  io.run_for(std::chrono::milliseconds(100));
  EXPECT_EQ(calls, 1);
  std::array<uint8_t, 1> byte{};
  transport->AsyncWrite({asio::buffer(byte)}, [&](std::error_code ec, size_t) { EXPECT_FALSE(ec) << ec.message(); });
  io.restart();
  io.run_for(std::chrono::milliseconds(100));  // the stream is still usable
  transport->Close();
}

}  // namespace
}  // namespace cqlstream::net
