// Copyright (c) cqlstream authors.
//
// The control connection: the topology built from parsed system tables
// (pure), where a lost control connection reopens (pure), and the
// connection itself against in-process fake servers: it skips a refused
// contact point, names the first failure when none answers, hands the
// topology to its owner, and follows STATUS_CHANGE events and a lost
// connection (reopened on another host).
#include "net/control.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "net/fake_server_test_util.h"
#include "net/io_pool.h"

namespace cqlstream::net {
namespace {

using testing::FakeServer;
using namespace std::chrono_literals;

SystemHost Peer(const std::string& address, std::optional<uint16_t> port, const std::string& dc) {
  SystemHost h;
  h.address = address;
  h.port = port;
  h.datacenter = dc;
  h.tokens = {1, 2};
  return h;
}

TEST(BuildTopologyTest, TheLocalHostComesFirstUnderTheContactAddress) {
  SystemLocal local;
  local.cluster_name = "c1";
  local.host = Peer("", std::nullopt, "dc1");
  local.host.host_id = "id-local";
  std::map<std::string, std::map<std::string, std::string>> rep{{"ks", {{"class", "SimpleStrategy"}}}};
  auto t = BuildTopology(std::move(local), "node1.example",
                         {Peer("10.0.0.2", 19042, "dc1"), Peer("10.0.0.3", {}, "dc2")}, rep, 9042);
  EXPECT_EQ(t->cluster_name, "c1");
  ASSERT_EQ(t->hosts.size(), 3u);
  EXPECT_EQ(t->hosts[0]->address, "node1.example");
  EXPECT_EQ(t->hosts[0]->port, 9042);
  EXPECT_EQ(t->hosts[0]->host_id, "id-local");
  EXPECT_EQ(t->hosts[1]->endpoint(), "10.0.0.2:19042");  // peers_v2 named its port
  EXPECT_EQ(t->hosts[2]->endpoint(), "10.0.0.3:9042");
  EXPECT_EQ(t->hosts[2]->datacenter, "dc2");
  EXPECT_EQ(t->hosts[1]->tokens, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(t->replication, rep);
  for (const auto& h : t->hosts) EXPECT_EQ(h->pool, nullptr);  // the session adds pools
}

TEST(BuildTopologyTest, APeerRowNamingAListedHostIsLeftOutAndCounted) {
  SystemLocal local;
  local.host = Peer("", std::nullopt, "dc1");
  local.host.host_id = "id-local";
  SystemHost self = Peer("10.0.0.1", {}, "dc1");  // the contact node listing itself among its peers
  self.host_id = "id-local";
  SystemHost b = Peer("10.0.0.2", {}, "dc1");
  b.host_id = "id-b";
  SystemHost b_again = Peer("10.0.0.2", {}, "dc1");  // the same endpoint, its id left empty
  SystemHost b_elsewhere = Peer("10.0.0.9", {}, "dc1");  // the same id at another address: both stay
  b_elsewhere.host_id = "id-b";
  SystemHost other_port = Peer("10.0.0.2", 19042, "dc1");  // another endpoint on that address
  other_port.host_id = "id-c";
  auto t = BuildTopology(local, "10.0.0.1", {self, b, b_again, b_elsewhere, other_port}, {}, 9042);
  ASSERT_EQ(t->hosts.size(), 4u);
  EXPECT_EQ(t->hosts[0]->endpoint(), "10.0.0.1:9042");
  EXPECT_EQ(t->hosts[1]->endpoint(), "10.0.0.2:9042");
  EXPECT_EQ(t->hosts[1]->host_id, "id-b");
  EXPECT_EQ(t->hosts[2]->endpoint(), "10.0.0.9:9042");
  EXPECT_EQ(t->hosts[3]->endpoint(), "10.0.0.2:19042");
  EXPECT_EQ(t->ignored_peers, 2);  // self, b_again

  SystemHost self_elsewhere = Peer("10.0.0.7", {}, "dc1");  // the contact's own id under another address
  self_elsewhere.host_id = "id-local";
  t = BuildTopology(std::move(local), "10.0.0.1", {self_elsewhere}, {}, 9042);
  EXPECT_EQ(t->hosts.size(), 1u);
  EXPECT_EQ(t->ignored_peers, 1);
}

TEST(ControlCandidatesTest, UpHostsThenDownHostsThenContactPoints) {
  Topology t;
  for (const char* a : {"10.0.0.1", "10.0.0.2", "10.0.0.3"}) {
    auto h = std::make_shared<Host>();
    h->address = a;
    h->pool = HostPool::Make(a, 9042, PoolConfig{}, {});
    t.hosts.push_back(h);
  }
  t.hosts[0]->pool->MarkDown();
  EXPECT_EQ(ControlCandidates(&t, {"seed"}),
            (std::vector<std::string>{"10.0.0.2", "10.0.0.3", "10.0.0.1", "seed"}));
  EXPECT_EQ(ControlCandidates(nullptr, {"a", "b"}), (std::vector<std::string>{"a", "b"}));
}

// The session's side, keeping what the control connection hands over. The
// I/O threads belong to the test (joined last, on the test's thread).
class FakeControlOwner final : public ControlOwner {
 public:
  explicit FakeControlOwner(IoPool* io) : io_(io) {}
  bool closed() const override { return false; }
  asio::io_context& NextIo() override { return io_->Next(); }
  Connection::Options ConnectionOptionsFor(const std::string& address, uint16_t port) override {
    Connection::Options o;
    o.transport.host = address;
    o.transport.port = port;
    o.transport.connect_timeout = 1000ms;
    return o;
  }
  std::shared_ptr<const Topology> Topo() const override {
    MutexLock l(&mu_);
    return topo_;
  }
  void ApplyTopology(std::shared_ptr<Topology> t) override {
    for (auto& h : t->hosts) h->pool = HostPool::Make(h->address, h->port, PoolConfig{}, {});
    MutexLock l(&mu_);
    topo_ = std::move(t);
    ++applied;
  }
  std::atomic<int> applied{0};

 private:
  IoPool* io_;
  mutable Mutex mu_;
  std::shared_ptr<const Topology> topo_ GUARDED_BY(mu_);
};

Status OpenSync(ControlConnection& c) {
  std::promise<Status> p;
  auto f = p.get_future();
  c.Open([&p](Status s) { p.set_value(std::move(s)); });
  return f.get();
}

uint16_t RefusedPort() {
  FakeServer gone;
  return gone.port();
}

ControlConfig Config(std::vector<std::string> contacts, uint16_t port) {
  ControlConfig c;
  c.contact_points = std::move(contacts);
  c.port = port;
  c.request_timeout = 2000ms;
  c.reconnect = ExponentialBackoff(20ms, 40ms);
  return c;
}

TEST(ControlConnectionTest, SkipsARefusedContactPointAndHandsOverTheTopology) {
  FakeServer srv({0}, "127.0.0.2");
  srv.SetPeers({{"127.0.0.3", srv.port()}});
  IoPool io(1);
  auto owner = std::make_shared<FakeControlOwner>(&io);
  // 127.0.0.1 has nothing on that port: refused, then .2 answers.
  auto control = ControlConnection::Make(Config({"127.0.0.1", "127.0.0.2"}, srv.port()), owner);
  ASSERT_TRUE(OpenSync(*control).ok());
  auto t = owner->Topo();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->cluster_name, "fake");
  ASSERT_EQ(t->hosts.size(), 2u);
  EXPECT_EQ(t->hosts[0]->address, "127.0.0.2");
  EXPECT_EQ(t->hosts[1]->address, "127.0.0.3");
  control->Close();
}

TEST(ControlConnectionTest, NoContactPointAnsweringNamesTheFirstFailure) {
  IoPool io(1);
  auto owner = std::make_shared<FakeControlOwner>(&io);
  auto control = ControlConnection::Make(Config({"127.0.0.1", "127.0.0.2"}, RefusedPort()), owner);
  Status s = OpenSync(*control);
  EXPECT_EQ(s.code(), Status::Code::kConnectFailed) << s.ToString();
  EXPECT_NE(s.ToString().find("127.0.0.1"), std::string::npos) << s.ToString();
  EXPECT_EQ(owner->applied, 0);
}

TEST(ControlConnectionTest, StatusDownMarksTheHostAndALostConnectionIsReopened) {
  FakeServer srv;
  srv.SetPeers({{"127.0.0.3", srv.port()}});
  IoPool io(1);
  auto owner = std::make_shared<FakeControlOwner>(&io);
  auto control = ControlConnection::Make(Config({"127.0.0.1"}, srv.port()), owner);
  ASSERT_TRUE(OpenSync(*control).ok());
  ASSERT_EQ(owner->applied, 1);

  // STATUS_CHANGE DOWN 127.0.0.3 on stream -1.
  cql::Bytes body;
  cql::Writer w(&body);
  w.String("STATUS_CHANGE");
  w.String("DOWN");
  cql::Inet inet;
  inet.address = {127, 0, 0, 3};
  inet.port = srv.port();
  w.Inet(inet);
  srv.Send(0, testing::Frame(cql::Opcode::kEvent, -1, body));
  const auto until = std::chrono::steady_clock::now() + 2s;
  while (owner->Topo()->hosts[1]->up() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
  EXPECT_FALSE(owner->Topo()->hosts[1]->up());
  EXPECT_TRUE(owner->Topo()->hosts[0]->up());

  // The connection dies (a frame with an impossible version): a new one is
  // opened after the backoff and reads the topology again.
  srv.Send(0, cql::Bytes(9, 0x7f));
  const auto until2 = std::chrono::steady_clock::now() + 3s;
  while (owner->applied < 2 && std::chrono::steady_clock::now() < until2) std::this_thread::sleep_for(5ms);
  EXPECT_GE(owner->applied, 2);
  EXPECT_GE(srv.connections(), 2);
  control->Close();
}

// An Open whose connection handshakes but never answers the system tables
// fails; the connection it closed arms no reconnection in the background
// (one would later adopt a second connection beside the one a retried Open
// adopts, and leak one of them).
TEST(ControlConnectionTest, AFailedOpenLeavesNoReconnectionBehind) {
  FakeServer srv;
  srv.SetAnswerSystemTables(false);
  srv.SetHandler([](const testing::Request&) { return std::optional<cql::Bytes>(); });
  IoPool io(1);
  auto owner = std::make_shared<FakeControlOwner>(&io);
  ControlConfig config = Config({"127.0.0.1"}, srv.port());
  // Short enough to fail the first Open soon, long enough for the retried
  // Open's system-table queries on a slow (sanitizer) build.
  config.request_timeout = 1000ms;
  auto control = ControlConnection::Make(config, owner);
  EXPECT_FALSE(OpenSync(*control).ok());
  srv.SetAnswerSystemTables(true);
  std::this_thread::sleep_for(400ms);  // 10 times the reconnection backoff
  EXPECT_EQ(srv.connections(), 1);
  EXPECT_EQ(owner->applied, 0);
  // The retried Open adopts its own connection, and only that one.
  ASSERT_TRUE(OpenSync(*control).ok());
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(srv.connections(), 2);
  EXPECT_EQ(owner->applied, 1);
  control->Close();
}

// Close during a reconnection's backoff cancels the backoff's timer: the I/O
// threads stop at once instead of waiting out their grace period.
TEST(ControlConnectionTest, CloseDuringAReconnectionBackoffStopsAtOnce) {
  FakeServer srv;
  IoPool io(1);
  auto owner = std::make_shared<FakeControlOwner>(&io);
  ControlConfig config = Config({"127.0.0.1"}, srv.port());
  config.reconnect = ExponentialBackoff(10000ms, 10000ms);  // 5 to 10 s
  auto control = ControlConnection::Make(config, owner);
  ASSERT_TRUE(OpenSync(*control).ok());
  srv.Send(0, cql::Bytes(9, 0x7f));  // the connection dies: a reconnection waits
  std::this_thread::sleep_for(200ms);
  control->Close();
  const auto start = std::chrono::steady_clock::now();
  io.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1000ms);
}

}  // namespace
}  // namespace cqlstream::net
