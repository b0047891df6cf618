// Copyright (c) cqlstream authors.
//
// Test-only: a minimal CQL v4 server speaking just enough of the protocol to
// exercise the client's connection and session logic where a real node cannot
// (ScyllaDB shard awareness, exact stream-id and timeout behaviour). It is an
// addition to the integration tests against a real Cassandra node, never a
// replacement.
//
// It answers OPTIONS with a configurable SUPPORTED map, STARTUP and REGISTER
// with READY, queries of system.local / system.peers_v2 /
// system_schema.keyspaces with a topology of itself and the peers set with
// SetPeers (none by default), and hands every other
// request to a handler that may answer, answer later, or never answer.
//
// Thread-safety: the server runs on its own thread; the accessors and the
// handler hooks are thread-safe (guarded by an internal mutex).
#ifndef CQLSTREAM_NET_FAKE_SERVER_TEST_UTIL_H_
#define CQLSTREAM_NET_FAKE_SERVER_TEST_UTIL_H_

#include <asio.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cql/frame.h"
#include "cql/wire.h"
#include "cqlstream/options.h"
#include "util/mutex.h"

namespace cqlstream::net::testing {

// A client's options for one fake host on 127.0.0.1:`port`: one I/O thread,
// a 5 s connect and a 10 s request time-out (a test changes what it needs).
inline ConnectionOptions LoopbackOptions(uint16_t port) {
  ConnectionOptions o;
  o.hosts = {"127.0.0.1"};
  o.port = port;
  o.io_threads = 1;
  o.connect_timeout = std::chrono::milliseconds(5000);
  o.request_timeout = std::chrono::milliseconds(10000);
  return o;
}

// Encoding helpers for response bodies.
inline void PutColumnSpecs(cql::Writer& w, const std::string& ks, const std::string& table,
                           const std::vector<std::pair<std::string, std::vector<uint16_t>>>& cols) {
  w.Int(0x0001);  // global tables spec
  w.Int(static_cast<int32_t>(cols.size()));
  w.String(ks);
  w.String(table);
  for (const auto& [name, type] : cols) {
    w.String(name);
    for (uint16_t t : type) w.Short(t);
  }
}

inline cql::Bytes Frame(cql::Opcode op, int16_t stream, const cql::Bytes& body) {
  cql::Bytes out(cql::kHeaderSize);
  cql::FrameHeader h;
  h.version = cql::kProtocolVersion | cql::kResponseBit;
  h.stream = stream;
  h.opcode = op;
  h.length = static_cast<uint32_t>(body.size());
  cql::EncodeHeader(h, out.data());
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

struct Request {
  cql::FrameHeader header;
  cql::Bytes body;
  std::string query;  // QUERY / PREPARE text
  uint16_t accepted_port = 0;
  uint16_t client_port = 0;
  int connection = 0;
};

class FakeServer {
 public:
  // A handler returns the response body's frame(s) to send, or nothing to
  // leave the request unanswered. It may also call Send later.
  using Handler = std::function<std::optional<cql::Bytes>(const Request&)>;

  // Listens on `address` (any loopback address: several fake hosts can
  // share a port number on 127.0.0.1, .2, .3).
  explicit FakeServer(std::vector<uint16_t> ports = {0}, const std::string& address = "127.0.0.1")
      : address_(address) {
    for (uint16_t p : ports) {
      auto a = std::make_unique<asio::ip::tcp::acceptor>(io_);
      asio::ip::tcp::endpoint ep(asio::ip::make_address(address), p);
      a->open(ep.protocol());
      a->set_option(asio::ip::tcp::acceptor::reuse_address(true));
      a->bind(ep);
      a->listen();
      ports_.push_back(a->local_endpoint().port());
      acceptors_.push_back(std::move(a));
    }
    for (size_t i = 0; i < acceptors_.size(); ++i) Accept(i);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~FakeServer() {
    asio::post(io_, [this] {
      for (auto& a : acceptors_) a->close();
      std::vector<std::shared_ptr<Conn>> conns;
      {
        MutexLock l(&mu_);
        conns = conns_;
      }
      for (auto& c : conns) {
        std::error_code ec;
        c->sock.close(ec);
      }
      io_.stop();
    });
    thread_.join();
  }

  uint16_t port(size_t i = 0) const { return ports_[i]; }
  void SetSupported(std::map<std::string, std::vector<std::string>> m) {
    MutexLock l(&mu_);
    supported_ = std::move(m);
  }
  // Called for the SUPPORTED answer of each connection (e.g. to report the
  // shard a connection landed on).
  void SetSupportedFn(std::function<std::map<std::string, std::vector<std::string>>(const Request&)> f) {
    MutexLock l(&mu_);
    supported_fn_ = std::move(f);
  }
  void SetHandler(Handler h) {
    MutexLock l(&mu_);
    handler_ = std::move(h);
  }
  // STARTUP is answered with AUTHENTICATE (PasswordAuthenticator); the
  // AUTH_RESPONSE goes to the handler.
  void SetRequireAuth(bool on) {
    MutexLock l(&mu_);
    require_auth_ = on;
  }
  // On: a connection's SUPPORTED is held back until its STARTUP has been
  // read, then sent after STARTUP's answer (a client that waits for
  // SUPPORTED before it sends STARTUP never gets either).
  void SetHoldSupportedUntilStartup(bool on) {
    MutexLock l(&mu_);
    hold_supported_ = on;
  }
  // Off: queries of the system tables go to the handler too (to answer
  // them wrongly on purpose).
  void SetAnswerSystemTables(bool on) {
    MutexLock l(&mu_);
    answer_system_tables_ = on;
  }
  // Connections accepted beyond `n` are closed at once (as a node with
  // native_transport_max_connections_per_ip does); n < 0: no limit.
  void SetMaxConnections(int n) {
    MutexLock l(&mu_);
    max_connections_ = n;
  }
  // Rows of system.peers_v2: (address, native port) of the other hosts.
  void SetPeers(std::vector<std::pair<std::string, uint16_t>> peers) {
    MutexLock l(&mu_);
    peers_ = std::move(peers);
  }
  void SetTokens(std::vector<std::string> tokens) {
    MutexLock l(&mu_);
    tokens_ = std::move(tokens);
  }
  std::vector<Request> requests() const {
    MutexLock l(&mu_);
    return requests_;
  }
  // Sends raw bytes on connection `conn`.
  void Send(int conn, cql::Bytes bytes) {
    asio::post(io_, [this, conn, bytes = std::move(bytes)]() mutable {
      std::shared_ptr<Conn> c;
      {
        MutexLock l(&mu_);
        if (conn < 0 || static_cast<size_t>(conn) >= conns_.size()) return;
        c = conns_[static_cast<size_t>(conn)];
      }
      Write(c, std::move(bytes));
    });
  }
  int connections() const {
    MutexLock l(&mu_);
    return static_cast<int>(conns_.size());
  }

 private:
  struct Conn {
    explicit Conn(asio::io_context& io) : sock(io) {}
    asio::ip::tcp::socket sock;
    cql::Bytes in;
    std::optional<cql::Bytes> held_supported;
    uint8_t buf[65536];
    int id = 0;
    uint16_t accepted_port = 0;
    // Answers waiting to be written, the first being written: one write at
    // a time, so that two large answers never interleave on the stream.
    std::deque<cql::Bytes> out;
  };

  // Queues `bytes` on `c` (on the I/O thread).
  void Write(const std::shared_ptr<Conn>& c, cql::Bytes bytes) {
    c->out.push_back(std::move(bytes));
    if (c->out.size() == 1) WriteNext(c);
  }
  void WriteNext(const std::shared_ptr<Conn>& c) {
    asio::async_write(c->sock, asio::buffer(c->out.front()), [this, c](std::error_code ec, size_t) {
      c->out.pop_front();
      if (ec) {
        c->out.clear();
        return;
      }
      if (!c->out.empty()) WriteNext(c);
    });
  }

  void Accept(size_t i) {
    acceptors_[i]->async_accept([this, i](std::error_code ec, asio::ip::tcp::socket s) {
      if (ec) return;
      auto c = std::make_shared<Conn>(io_);
      c->sock = std::move(s);
      c->accepted_port = ports_[i];
      bool refuse = false;
      {
        MutexLock l(&mu_);
        int open = 0;
        for (const auto& o : conns_) open += o->sock.is_open() ? 1 : 0;
        refuse = max_connections_ >= 0 && open >= max_connections_;
        if (!refuse) {
          c->id = static_cast<int>(conns_.size());
          conns_.push_back(c);
        }
      }
      if (refuse) {
        std::error_code e;
        c->sock.close(e);
      } else {
        Read(c);
      }
      Accept(i);
    });
  }

  void Read(std::shared_ptr<Conn> c) {
    c->sock.async_read_some(asio::buffer(c->buf), [this, c](std::error_code ec, size_t n) {
      if (ec) return;
      c->in.insert(c->in.end(), c->buf, c->buf + n);
      while (c->in.size() >= cql::kHeaderSize) {
        const uint32_t len = cql::LoadU32(&c->in[5]);
        if (c->in.size() < cql::kHeaderSize + len) break;
        Request r;
        r.header.version = c->in[0];
        r.header.flags = c->in[1];
        r.header.stream = static_cast<int16_t>(cql::LoadU16(&c->in[2]));
        r.header.opcode = static_cast<cql::Opcode>(c->in[4]);
        r.header.length = len;
        r.body.assign(c->in.begin() + cql::kHeaderSize, c->in.begin() + cql::kHeaderSize + len);
        c->in.erase(c->in.begin(), c->in.begin() + cql::kHeaderSize + len);
        r.accepted_port = c->accepted_port;
        std::error_code e2;
        r.client_port = c->sock.remote_endpoint(e2).port();
        r.connection = c->id;
        if (r.header.opcode == cql::Opcode::kQuery || r.header.opcode == cql::Opcode::kPrepare) {
          cql::Reader rd(r.body);
          std::string_view q;
          if (rd.LongString(&q).ok()) r.query = std::string(q);
        }
        auto reply = Answer(r);
        bool hold;
        {
          MutexLock l(&mu_);
          requests_.push_back(r);
          hold = hold_supported_;
        }
        if (hold && r.header.opcode == cql::Opcode::kOptions) {
          c->held_supported = std::move(reply);
          reply.reset();
        }
        if (reply && r.header.opcode == cql::Opcode::kStartup && c->held_supported) {
          reply->insert(reply->end(), c->held_supported->begin(), c->held_supported->end());
          c->held_supported.reset();
        }
        if (reply) Write(c, std::move(*reply));
      }
      Read(c);
    });
  }

  std::optional<cql::Bytes> Answer(const Request& r) {
    using cql::Opcode;
    cql::Bytes body;
    cql::Writer w(&body);
    switch (r.header.opcode) {
      case Opcode::kOptions: {
        std::map<std::string, std::vector<std::string>> m;
        {
          MutexLock l(&mu_);
          m = supported_fn_ ? supported_fn_(r) : supported_;
        }
        m["CQL_VERSION"] = {"3.4.7"};
        w.StringMultimap(m);
        return Frame(Opcode::kSupported, r.header.stream, body);
      }
      case Opcode::kStartup: {
        bool auth;
        {
          MutexLock l(&mu_);
          auth = require_auth_;
        }
        if (auth) {
          w.String("org.apache.cassandra.auth.PasswordAuthenticator");
          return Frame(Opcode::kAuthenticate, r.header.stream, body);
        }
        return Frame(Opcode::kReady, r.header.stream, body);
      }
      case Opcode::kRegister:
        return Frame(Opcode::kReady, r.header.stream, body);
      case Opcode::kQuery:
        if (!SystemTables()) break;
        if (r.query.find("system.local") != std::string::npos) return Local(r);
        if (r.query.find("system.peers_v2") != std::string::npos) return Peers(r);
        if (r.query.find("system_schema.keyspaces") != std::string::npos) return Keyspaces(r);
        break;
      default:
        break;
    }
    Handler h;
    {
      MutexLock l(&mu_);
      h = handler_;
    }
    if (h) return h(r);
    return EmptyRows(r);
  }

  bool SystemTables() {
    MutexLock l(&mu_);
    return answer_system_tables_;
  }

  cql::Bytes Local(const Request& r) {
    cql::Bytes body;
    cql::Writer w(&body);
    w.Int(0x0002);  // Rows
    PutColumnSpecs(w, "system", "local",
                   {{"cluster_name", {0x000D}},
                    {"data_center", {0x000D}},
                    {"rack", {0x000D}},
                    {"release_version", {0x000D}},
                    {"host_id", {0x000C}},
                    {"schema_version", {0x000C}},
                    {"tokens", {0x0022, 0x000D}}});
    w.Int(1);
    auto text = [&](const std::string& s) { w.BytesValue(cql::ByteView(reinterpret_cast<const uint8_t*>(s.data()), s.size())); };
    text("fake");
    HostCells(w, address_, ports_.front());
    std::vector<std::string> tokens;
    {
      MutexLock l(&mu_);
      tokens = tokens_;
    }
    cql::Bytes set;
    cql::Writer sw(&set);
    sw.Int(static_cast<int32_t>(tokens.size()));
    for (const auto& t : tokens) sw.BytesValue(cql::ByteView(reinterpret_cast<const uint8_t*>(t.data()), t.size()));
    w.BytesValue(cql::ByteView(set));
    return Frame(cql::Opcode::kResult, r.header.stream, body);
  }

  // data_center, rack, release_version, host_id, schema_version. The host
  // id ends in the host's IPv4 address (an IPv6 one's last byte) and port:
  // one id per host, as a cluster's are (BuildTopology leaves out a peer
  // row that repeats the control connection's own host's id).
  static void HostCells(cql::Writer& w, const std::string& address, uint16_t port) {
    auto text = [&](const std::string& s) { w.BytesValue(cql::ByteView(reinterpret_cast<const uint8_t*>(s.data()), s.size())); };
    text("dc1");
    text("rack1");
    text("2025.1.0");
    const asio::ip::address ip = asio::ip::make_address(address);
    const auto a = ip.is_v4() ? ip.to_v4().to_bytes() : asio::ip::make_address_v4(0x7F000000 | ip.to_v6().to_bytes()[15]).to_bytes();
    const uint8_t id[16] = {0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x43, 0x33, 0x84, 0x44,
                            a[0], a[1], a[2], a[3], static_cast<uint8_t>(port >> 8), static_cast<uint8_t>(port)};
    w.BytesValue(cql::ByteView(id, 16));
    const uint8_t schema[16] = {0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x43, 0x33, 0x84, 0x44, 1, 2, 3, 4, 5, 6};
    w.BytesValue(cql::ByteView(schema, 16));
  }

  cql::Bytes Peers(const Request& r) {
    std::vector<std::pair<std::string, uint16_t>> peers;
    {
      MutexLock l(&mu_);
      peers = peers_;
    }
    cql::Bytes body;
    cql::Writer w(&body);
    w.Int(0x0002);
    PutColumnSpecs(w, "system", "peers_v2",
                   {{"peer", {0x0010}},
                    {"data_center", {0x000D}},
                    {"rack", {0x000D}},
                    {"release_version", {0x000D}},
                    {"host_id", {0x000C}},
                    {"schema_version", {0x000C}},
                    {"tokens", {0x0022, 0x000D}},
                    {"native_address", {0x0010}},
                    {"native_port", {0x0009}}});
    w.Int(static_cast<int32_t>(peers.size()));
    for (const auto& [address, port] : peers) {
      const auto a = asio::ip::make_address_v4(address).to_bytes();
      w.BytesValue(cql::ByteView(a.data(), a.size()));
      HostCells(w, address, port);
      w.BytesValue(std::nullopt);  // tokens: none (not routable)
      w.BytesValue(cql::ByteView(a.data(), a.size()));
      uint8_t p[4];
      cql::StoreU32(p, port);
      w.BytesValue(cql::ByteView(p, 4));
    }
    return Frame(cql::Opcode::kResult, r.header.stream, body);
  }

  static cql::Bytes Keyspaces(const Request& r) {
    cql::Bytes body;
    cql::Writer w(&body);
    w.Int(0x0002);
    PutColumnSpecs(w, "system_schema", "keyspaces", {{"keyspace_name", {0x000D}}, {"replication", {0x0021, 0x000D, 0x000D}}});
    w.Int(0);
    return Frame(cql::Opcode::kResult, r.header.stream, body);
  }

  static cql::Bytes EmptyRows(const Request& r) {
    cql::Bytes body;
    cql::Writer w(&body);
    w.Int(0x0002);
    PutColumnSpecs(w, "system", "peers", {{"peer", {0x0010}}});
    w.Int(0);
    return Frame(cql::Opcode::kResult, r.header.stream, body);
  }

  asio::io_context io_;
  const std::string address_;  // every acceptor's
  std::vector<std::unique_ptr<asio::ip::tcp::acceptor>> acceptors_;
  std::vector<uint16_t> ports_;
  std::thread thread_;
  mutable Mutex mu_;
  std::map<std::string, std::vector<std::string>> supported_ GUARDED_BY(mu_);
  std::function<std::map<std::string, std::vector<std::string>>(const Request&)> supported_fn_ GUARDED_BY(mu_);
  Handler handler_ GUARDED_BY(mu_);
  std::vector<std::string> tokens_ GUARDED_BY(mu_) = {"0"};
  std::vector<std::pair<std::string, uint16_t>> peers_ GUARDED_BY(mu_);
  bool answer_system_tables_ GUARDED_BY(mu_) = true;
  bool require_auth_ GUARDED_BY(mu_) = false;
  bool hold_supported_ GUARDED_BY(mu_) = false;
  int max_connections_ GUARDED_BY(mu_) = -1;
  std::vector<Request> requests_ GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Conn>> conns_ GUARDED_BY(mu_);
};

}  // namespace cqlstream::net::testing

#endif  // CQLSTREAM_NET_FAKE_SERVER_TEST_UTIL_H_
