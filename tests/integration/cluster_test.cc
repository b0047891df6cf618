// Copyright (c) cqlstream authors.
//
// The client and the loader against a real 3-node cluster (the `cluster`
// profile of scripts/cassandra on 127.0.3.1-3; scripts/test starts it for
// tests named *Cluster* and passes CQLSTREAM_TEST_CLUSTER_HOSTS and
// CQLSTREAM_TEST_CLUSTER_STATE):
//   - the whole topology from one contact point;
//   - token-aware routing, checked against the server's own token() of each
//     key and the ring's tokens as the nodes report them (not against the
//     client's Murmur3 and replica map, which is what is under test);
//   - a loader epoch while one replica hangs (SIGSTOP: the process keeps
//     its sockets open and answers nothing, the worst kind of failure), and
//     a clean epoch after it resumes: exactly-once in both;
//   - coalesced reads of small samples grouped by replica set: an epoch
//     over a keyspace of RF 1 costs (almost) no message between the nodes,
//     counted by the nodes themselves (system_views.internode_outbound).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "cqlstream/loader.h"
#include "dataset_fixture.h"
#include "net/session.h"
#include "test_env.h"

namespace cqlstream {
namespace {

using testing::Delivered;
using testing::Env;
using testing::MakeSyntheticDataset;
using testing::ReadEpoch;
using testing::SyntheticDataset;
using testing::SyntheticSpec;

// An inet cell (4 or 16 raw bytes) as text; IPv4 only here.
std::string InetText(const Value& v) {
  if (v.kind() != Value::Kind::kBlob || v.as_blob().size() != 4) return v.ToString();
  const auto b = v.as_blob();
  return fmt::format("{}.{}.{}.{}", int{b[0]}, int{b[1]}, int{b[2]}, int{b[3]});
}

// Resumes a stopped node whatever happens to the test.
class Resume {
 public:
  explicit Resume(pid_t pid) : pid_(pid) {}
  ~Resume() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
  }
  Resume(const Resume&) = delete;
  Resume& operator=(const Resume&) = delete;

 private:
  pid_t pid_;
};

class ClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { keyspace_ = fmt::format("cl_{}", ::getpid()); }
  static void TearDownTestSuite() {
    testing::DropClusterKeyspaces({keyspace_ + "_rf1", keyspace_ + "_rf3"});
  }

  void SetUp() override {
    hosts_ = Env("CQLSTREAM_TEST_CLUSTER_HOSTS");
    state_ = Env("CQLSTREAM_TEST_CLUSTER_STATE");
    // Not a skip: without the cluster these tests cannot pass.
    ASSERT_FALSE(hosts_.empty() || state_.empty())
        << "CQLSTREAM_TEST_CLUSTER_HOSTS / CQLSTREAM_TEST_CLUSTER_STATE are not set: run through scripts/test, or "
           "start scripts/cassandra up --profile cluster and export them (127.0.3.1, .state/cassandra/cluster)";
  }

  ConnectionOptions Options() const {
    ConnectionOptions o;
    o.hosts = {hosts_};  // one contact point: the others must be discovered
    return o;
  }

  std::shared_ptr<net::Session> Connect() {
    auto s = net::Session::Connect(Options());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : nullptr;
  }

  // The test keyspace of replication factor `rf` (SimpleStrategy), created
  // when missing.
  std::string KeyspaceOfRf(net::Session& s, int rf) const {
    const std::string ks = fmt::format("{}_rf{}", keyspace_, rf);
    testing::MustRun(s, fmt::format("CREATE KEYSPACE IF NOT EXISTS {} WITH replication = "
                                    "{{'class': 'SimpleStrategy', 'replication_factor': {}}}",
                                    ks, rf));
    return ks;
  }

  // A loader of `dataset`'s train split in `ks` through the cluster.
  LoaderOptions LoaderOf(const std::string& ks, const std::string& dataset, uint64_t seed) const {
    LoaderOptions o;
    o.connection = Options();
    o.connection.keyspace = ks;
    o.dataset = dataset;
    o.split = "train";
    o.batch_size = 50;
    o.seed = seed;
    return o;
  }

  // An epoch that ended without error and delivered each of `samples` once.
  static void ExpectExactlyOnce(const Delivered& d, size_t samples) {
    ASSERT_TRUE(d.error.empty()) << "epoch failed: " << d.error;
    const std::set<SampleKey> unique(d.keys.begin(), d.keys.end());
    EXPECT_EQ(unique.size(), d.keys.size()) << "samples delivered more than once";
    EXPECT_EQ(unique.size(), samples);
  }

  pid_t NodePid(int i) const {
    std::ifstream in(fmt::format("{}/node{}/cassandra.pid", state_, i));
    pid_t pid = 0;
    in >> pid;
    return pid;
  }

  std::string hosts_, state_;
  static std::string keyspace_;
};
std::string ClusterTest::keyspace_;

TEST_F(ClusterTest, DiscoversEveryNodeAndRoutesEachKeyToItsOwner) {
  auto s = Connect();
  ASSERT_NE(s, nullptr);
  std::set<std::string> addresses;
  for (const auto& h : s->Hosts()) {
    addresses.insert(h.address);
    EXPECT_TRUE(h.up) << h.address;
    EXPECT_EQ(h.token_count, 16u) << h.address;  // num_tokens of scripts/cassandra
    EXPECT_EQ(h.datacenter, "dc1") << h.address;
  }
  EXPECT_EQ(addresses, (std::set<std::string>{"127.0.3.1", "127.0.3.2", "127.0.3.3"}));
  // Each node's peers rows name the two others: none is left out as naming
  // a host already listed (net/control.h BuildTopology).
  EXPECT_EQ(s->IgnoredPeerRows(), 0);

  // RF 1: each key lives on exactly one node, so the node that answers a
  // token-aware request must be that node.
  const std::string ks = KeyspaceOfRf(*s, 1);
  testing::MustRun(*s, fmt::format("CREATE TABLE IF NOT EXISTS {}.t (k int PRIMARY KEY, v blob)", ks));
  constexpr int kKeys = 300;
  for (int k = 0; k < kKeys; ++k) {
    auto r = s->Execute(net::Statement::Query(fmt::format("INSERT INTO {}.t (k, v) VALUES (?, ?)", ks),
                                              {Value::Int(k), Value::Blob(std::vector<uint8_t>(16, uint8_t(k)))}));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  // The ring as the nodes report it, from one node (system.local + peers).
  std::map<int64_t, std::string> ring;  // token -> owner
  auto add_tokens = [&](const std::string& q) {
    net::Statement st = net::Statement::Query(q);
    st.target_host = "127.0.3.1";
    auto r = s->Execute(st);
    ASSERT_TRUE(r.ok() && r->rows()) << q << ": " << r.status().ToString();
    const cql::Rows& rows = *r->rows();
    for (int32_t i = 0; i < rows.row_count(); ++i) {
      auto addr = rows.value(i, 0);
      auto tokens = rows.value(i, 1);
      ASSERT_TRUE(addr.ok() && tokens.ok());
      for (const auto& t : tokens->as_list()) ring[std::stoll(t.as_text())] = InetText(*addr);
    }
  };
  add_tokens("SELECT rpc_address, tokens FROM system.local");
  add_tokens("SELECT rpc_address, tokens FROM system.peers");
  ASSERT_EQ(ring.size(), 48u);

  auto read = s->Prepare(fmt::format("SELECT v FROM {}.t WHERE k = ?", ks));
  auto token = s->Prepare(fmt::format("SELECT token(k) FROM {}.t WHERE k = ?", ks));
  ASSERT_TRUE(read.ok() && token.ok());
  std::map<std::string, int> per_owner;
  int mismatches = 0;
  for (int k = 0; k < kKeys; ++k) {
    auto t = s->Execute(net::Statement::Bound(*token, {Value::Int(k)}));
    ASSERT_TRUE(t.ok() && t->rows() && t->rows()->row_count() == 1) << t.status().ToString();
    const int64_t tok = t->rows()->value(0, 0)->as_bigint();
    // The owner of token t is the node with the first ring token >= t (wrapping).
    auto it = ring.lower_bound(tok);
    const std::string owner = it == ring.end() ? ring.begin()->second : it->second;
    auto r = s->Execute(net::Statement::Bound(*read, {Value::Int(k)}));
    ASSERT_TRUE(r.ok() && r->rows() && r->rows()->row_count() == 1) << r.status().ToString();
    const auto cell = r->rows()->value(0, 0);  // keeps the value alive while its bytes are viewed
    ASSERT_TRUE(cell.ok()) << cell.status().ToString();
    const auto v = cell->as_blob();
    EXPECT_EQ(std::vector<uint8_t>(v.begin(), v.end()), std::vector<uint8_t>(16, uint8_t(k)));
    const std::string answered = r->host.substr(0, r->host.rfind(':'));  // "address:port"
    if (answered != owner) ++mismatches;
    ++per_owner[owner];
  }
  EXPECT_EQ(mismatches, 0) << "reads answered by a node that does not own the key";
  EXPECT_EQ(per_owner.size(), 3u) << "300 keys should spread over all 3 nodes";
  s->Close();
}

// Messages the nodes have sent to each other so far (their own counters:
// system_views.internode_outbound on each node); -1 when one cannot be read.
int64_t InternodeMessages(net::Session& s) {
  int64_t total = 0;
  for (const auto& h : s.Hosts()) {
    net::Statement st = net::Statement::Query("SELECT sent_count FROM system_views.internode_outbound");
    st.target_host = h.address;
    auto r = s.Execute(st);
    if (!r.ok() || !r->rows()) {
      ADD_FAILURE() << h.address << ": " << r.status().ToString();
      return -1;
    }
    for (int32_t i = 0; i < r->rows()->row_count(); ++i) {
      auto v = r->rows()->value(i, 0);
      if (!v.ok()) {
        ADD_FAILURE() << h.address << ": " << v.status().ToString();
        return -1;
      }
      total += v->as_bigint();
    }
  }
  return total;
}

// A coalesced read sent to a node that does not hold some of its keys makes
// that node fetch each of them from its replica (a message there and back).
// Grouped by replica set, every key of a request lives on the node it is
// sent to: with RF 1 on three nodes an epoch of 1,500 small samples costs
// the nodes no internal reads (grouped by segment alone, about two thirds
// of the keys in groups: 1,430 messages in a run here, against 0 to 82 by
// replica set). What remains is gossip, a few messages per second.
TEST_F(ClusterTest, CoalescedReadsGoToTheNodeHoldingEveryKey) {
  auto s = Connect();
  ASSERT_NE(s, nullptr);
  const std::string ks = KeyspaceOfRf(*s, 1);
  SyntheticSpec spec;
  spec.name = "small";
  spec.samples = 1500;
  spec.segments = 2;
  spec.chunk_size = 4096;
  spec.size = [](int i) -> int64_t { return 300 + (i * 53) % 900; };
  const SyntheticDataset data = MakeSyntheticDataset(*s, ks, spec);
  ASSERT_EQ(data.payload.size(), 1500u);
  // The dataset's tables are new: their schema reaches every node before
  // the count starts (its messages are not the epoch's).
  ASSERT_TRUE(s->WaitForSchemaAgreement().ok());

  LoaderOptions o = LoaderOf(ks, "small", 11);
  // A first window of 512 issues a third of the epoch at once: large groups
  // from the start, as a long epoch has once its window has grown.
  o.initial_window = 512;
  auto opened = Loader::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Loader& l = **opened;
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t before = InternodeMessages(*s);
  const Delivered epoch = ReadEpoch(l, data);
  const int64_t after = InternodeMessages(*s);
  const double epoch_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ExpectExactlyOnce(epoch, data.payload.size());
  const LoaderMetrics m = l.Metrics();
  l.Close();
  s->Close();
  ASSERT_GE(before, 0);
  ASSERT_GE(after, before);
  std::printf("[cluster] coalesced epoch: %lld samples in %lld requests of several, %.1f s, %lld internode messages\n",
              static_cast<long long>(m.coalesced_samples), static_cast<long long>(m.coalesced_requests), epoch_s,
              static_cast<long long>(after - before));
  // Coalescing took place: hundreds of samples were read in groups (650 to
  // 1,184 in 13 runs here), each of which, grouped by segment alone, would
  // have cost about 1.3 messages (1,430 messages for 1,151 samples).
  EXPECT_GT(m.coalesced_samples, 300) << "samples read in groups";
  EXPECT_EQ(m.ignored_peer_rows, 0);  // three real nodes, each listed once
  EXPECT_LT(m.coalesced_requests * 2, m.coalesced_samples);
  // Allowed: gossip, each node a few messages per second, and whatever
  // else the nodes say to each other meanwhile (up to 82 messages in a
  // 0.4 s epoch under ASan here), up to a quarter of a message per grouped sample: a group
  // across replicas costs about 1.3 (two per key read elsewhere).
  EXPECT_LT(after - before, 60 + static_cast<int64_t>(30 * epoch_s) + m.coalesced_samples / 4)
      << "the nodes read keys for each other";
}

TEST_F(ClusterTest, LoaderEpochIsExactlyOnceWhileAReplicaHangs) {
  auto s = Connect();
  ASSERT_NE(s, nullptr);
  const std::string ks = KeyspaceOfRf(*s, 3);
  SyntheticSpec spec;
  spec.name = "hung";
  spec.samples = 3000;
  spec.segments = 3;
  spec.size = [](int i) -> int64_t { return 2000 + (i * 131) % 6000; };
  spec.consistency = cql::Consistency::kAll;  // every replica holds every row before the epoch
  const SyntheticDataset data = MakeSyntheticDataset(*s, ks, spec);
  ASSERT_EQ(data.payload.size(), 3000u);
  s->Close();

  const pid_t victim = NodePid(2);
  ASSERT_GT(victim, 0) << "no pid file for node 2 under " << state_;
  ASSERT_EQ(::kill(victim, 0), 0) << "node 2 (pid " << victim << ") is not running";

  LoaderOptions o = LoaderOf(ks, "hung", 5);
  o.epochs = 2;
  auto opened = Loader::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Loader& l = **opened;


  // Epoch 1: node 2 hangs after the third batch and stays hung to the end.
  std::optional<Resume> resume;
  const auto t0 = std::chrono::steady_clock::now();
  Delivered epoch1 = ReadEpoch(l, data, 3);
  ASSERT_TRUE(epoch1.error.empty()) << epoch1.error;
  ASSERT_EQ(epoch1.batch_sizes.size(), 3u) << "the epoch ended before node 2 was stopped";
  ASSERT_EQ(::kill(victim, SIGSTOP), 0);
  resume.emplace(victim);
  const Delivered rest = ReadEpoch(l, data);
  epoch1.keys.insert(epoch1.keys.end(), rest.keys.begin(), rest.keys.end());
  epoch1.error = rest.error;
  const double hung_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ExpectExactlyOnce(epoch1, data.payload.size());
  const LoaderMetrics m1 = l.Metrics();
  // Requests to the hung node were in flight when it stopped: they must have
  // been hedged or retried elsewhere (that is how the epoch finished).
  EXPECT_GT(m1.hedges + m1.retries + m1.timeouts, 0) << "nothing was in flight on node 2?";
  std::printf("[cluster] epoch with node 2 hung: %.1f s, %lld hedges (%lld won), %lld retries, %lld timeouts\n",
              hung_s, static_cast<long long>(m1.hedges), static_cast<long long>(m1.hedge_wins),
              static_cast<long long>(m1.retries), static_cast<long long>(m1.timeouts));

  // Epoch 2: node 2 is back.
  resume.reset();
  ExpectExactlyOnce(ReadEpoch(l, data), data.payload.size());
  EXPECT_TRUE(l.Done());
  l.Close();
}

}  // namespace
}  // namespace cqlstream
