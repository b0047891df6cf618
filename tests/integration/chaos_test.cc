// Copyright (c) cqlstream authors.
//
// Chaos in the loop: exactly-once epochs while the network or the cluster
// fails under the loader, checked against the epoch plan itself.
//
//   ChaosTest (the default node, through FaultProxy on 127.0.0.3):
//     three ranks read one epoch each, out of order and ordered, while the
//     proxy cuts every connection after a random 1-4 MB sent to the client
//     (mid-frame as a rule).
//   ChaosClusterTest (the 3-node `cluster` profile, dataset at RF 3):
//     - node 2 killed with SIGKILL mid-epoch (3 ranks, both modes), then
//       restarted by the test, which waits until the cluster is whole again;
//     - two of three nodes killed: a new Loader still reads an epoch exactly
//       once from the last replica, and `cqlstream info` works (warning about
//       the consistency it fell back to).
//
// Exactly once = each rank delivers every key of its slice of the plan
// (loader::RankSlice over loader::Permutation(seed, epoch)) once, ordered
// mode in the plan's order, each sample byte-identical to what was written
// (ReadEpoch checks bytes and labels against the fixture).
//
// These tests kill cluster nodes: they are the only ones that do, and every
// test restarts what it killed (also when it fails) before it returns.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <thread>

#include "cqlstream/loader.h"
#include "dataset_fixture.h"
#include "fault_proxy.h"
#include "loader/plan.h"
#include "test_env.h"

namespace cqlstream {
namespace {

using testing::Delivered;
using testing::Env;
using testing::MakeSyntheticDataset;
using testing::ReadEpoch;
using testing::SyntheticDataset;
using testing::SyntheticSpec;

constexpr int kWorld = 3;
constexpr uint64_t kSeed = 11;

// The keys rank `rank` must deliver in epoch `epoch`, in plan order, from the
// dataset as the loader read it from the catalog (the committed segments).
std::vector<SampleKey> PlannedKeys(const DatasetInfo& info, const std::string& split, int epoch, int rank) {
  const auto source = loader::SampleSource::FromSegments(info.SplitSegments(split));
  const loader::Permutation perm(source.size(), kSeed, static_cast<uint64_t>(epoch), /*shuffle=*/true);
  const loader::PositionRange slice = loader::RankSlice(source.size(), rank, kWorld);
  std::vector<SampleKey> keys;
  for (uint64_t pos = slice.begin; pos < slice.end; ++pos) keys.push_back(source.KeyAt(perm(pos)));
  return keys;
}

// Checks one rank's epoch against its plan: every planned key once (in plan
// order when ordered), nothing else; the bytes were checked by ReadEpoch.
void ExpectPlanDelivered(const Delivered& got, const std::vector<SampleKey>& planned, bool ordered) {
  ASSERT_TRUE(got.error.empty()) << "epoch failed: " << got.error;
  const std::set<SampleKey> unique(got.keys.begin(), got.keys.end());
  EXPECT_EQ(unique.size(), got.keys.size()) << "samples delivered more than once";
  EXPECT_EQ(unique, std::set<SampleKey>(planned.begin(), planned.end())) << "not the rank's slice of the plan";
  if (ordered) {
    EXPECT_TRUE(got.keys == planned) << "ordered mode left the plan's order";
  }
}

// Runs one epoch on each of kWorld ranks at the same time (as kWorld
// processes would) and checks each against the plan. `during` runs on the
// test thread once every rank has delivered `after_batches` batches.
void RunRanks(LoaderOptions base, const SyntheticDataset& d, bool ordered, int after_batches,
              const std::function<void()>& during, std::chrono::seconds limit) {
  std::vector<std::unique_ptr<Loader>> loaders;
  for (int rank = 0; rank < kWorld; ++rank) {
    LoaderOptions o = base;
    o.rank = rank;
    o.world_size = kWorld;
    o.ordered = ordered;
    o.seed = kSeed;
    o.epochs = 1;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok()) << "rank " << rank << ": " << l.status().ToString();
    loaders.push_back(std::move(*l));
  }
  std::vector<Delivered> head(kWorld);
  for (int rank = 0; rank < kWorld; ++rank) head[rank] = ReadEpoch(*loaders[rank], d, after_batches);
  if (during) during();
  std::vector<std::future<Delivered>> rest;
  for (int rank = 0; rank < kWorld; ++rank) {
    rest.push_back(std::async(std::launch::async, [&, rank] { return ReadEpoch(*loaders[rank], d); }));
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int rank = 0; rank < kWorld; ++rank) {
    SCOPED_TRACE(fmt::format("rank {} of {}, {}", rank, kWorld, ordered ? "ordered" : "out of order"));
    if (rest[rank].wait_until(deadline) != std::future_status::ready) {
      for (auto& l : loaders) l->Close();  // unblocks Next(), so the futures can end
      FAIL() << "the epoch did not end within " << limit.count() << " s";
    }
    Delivered all = head[rank];
    Delivered tail = rest[rank].get();
    all.keys.insert(all.keys.end(), tail.keys.begin(), tail.keys.end());
    all.error = head[rank].error.empty() ? tail.error : head[rank].error;
    const std::vector<SampleKey> planned = PlannedKeys(loaders[rank]->dataset(), base.split, 0, rank);
    ASSERT_EQ(planned.size(), static_cast<size_t>(loaders[rank]->SamplesPerEpoch()));
    ExpectPlanDelivered(all, planned, ordered);
    const LoaderMetrics m = loaders[rank]->Metrics();
    std::printf("[chaos] rank %d %s: %zu samples, %lld retries, %lld timeouts, %lld hedges\n", rank,
                ordered ? "ordered" : "out of order", all.keys.size(), static_cast<long long>(m.retries),
                static_cast<long long>(m.timeouts), static_cast<long long>(m.hedges));
  }
  for (auto& l : loaders) l->Close();
}

// ---------------------------------------------------------------------------
// Connection resets every few MB, on the default node.

TEST(ChaosTest, ExactlyOnceWhileConnectionsAreCutEveryFewMegabytes) {
  auto admin = testing::TestSession();
  ASSERT_NE(admin, nullptr);
  SyntheticSpec spec;
  spec.name = "chaos_proxy";
  spec.samples = 1200;
  spec.segments = 3;
  spec.size = [](int i) -> int64_t { return 8000 + (i * 7919) % 40000; };  // 8-48 KB, ~34 MB in all
  const SyntheticDataset d = MakeSyntheticDataset(*admin, testing::TestKeyspace(), spec);
  admin->Close();

  // Another loopback address, same port (as in LoaderTest.ExactlyOnceThroughInjectedFaults).
  testing::FaultProxy proxy("127.0.0.3", testing::TestOptions().hosts.at(0), 9042);
  ASSERT_TRUE(proxy.ok()) << proxy.error();
  testing::FaultProxy::Faults f;
  f.reset_after_min_bytes = 1 << 20;
  f.reset_after_max_bytes = 4 << 20;
  proxy.SetFaults(f);

  LoaderOptions o;
  o.connection = testing::TestOptions();
  o.connection.hosts = {"127.0.0.3"};
  o.connection.keyspace = testing::TestKeyspace();
  o.connection.connect_timeout = std::chrono::milliseconds(2000);
  o.dataset = spec.name;
  o.split = spec.split;
  o.batch_size = 16;
  o.request_timeout = std::chrono::milliseconds(2000);
  for (bool ordered : {false, true}) {
    const uint64_t resets_before = proxy.stats().resets;
    RunRanks(o, d, ordered, 0, nullptr, std::chrono::seconds(240));
    // 1-4 MB per connection over ~34 MB: there must have been cuts, or the
    // test proved nothing.
    EXPECT_GE(proxy.stats().resets - resets_before, 3u) << "the proxy cut too few connections";
    std::printf("[chaos] %s: %llu connection cuts, %llu connections\n", ordered ? "ordered" : "out of order",
                static_cast<unsigned long long>(proxy.stats().resets - resets_before),
                static_cast<unsigned long long>(proxy.stats().connections.load()));
  }
}

// ---------------------------------------------------------------------------
// Nodes killed with SIGKILL on the 3-node cluster.

// Runs a command; returns its exit status (-1 when it did not exit).
int Shell(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// Output and exit status of a command (stderr included).
std::pair<std::string, int> Capture(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {"popen failed", -1};
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = ::pclose(p);
  return {out, WIFEXITED(rc) ? WEXITSTATUS(rc) : -1};
}

std::string CliPath() {
  const std::string build = Env("CQLSTREAM_BUILD_DIR");
  if (!build.empty()) {
    std::filesystem::path p = std::filesystem::path(build) / "src/cli/cqlstream";
    if (p.is_relative()) p = std::filesystem::path(testing::SourceDir()) / p;
    if (std::filesystem::exists(p)) return p.string();
  }
  // Beside this binary: <build>/tests/integration_tests -> <build>/src/cli/cqlstream.
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (self.parent_path().parent_path() / "src/cli/cqlstream").string();
}

class ChaosClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { keyspace_ = fmt::format("chaos_{}", ::getpid()); }
  static void TearDownTestSuite() { testing::DropClusterKeyspaces({keyspace_}); }

  void SetUp() override {
    hosts_ = Env("CQLSTREAM_TEST_CLUSTER_HOSTS");
    state_ = Env("CQLSTREAM_TEST_CLUSTER_STATE");
    // Not a skip: without the cluster these tests cannot pass.
    ASSERT_FALSE(hosts_.empty() || state_.empty())
        << "CQLSTREAM_TEST_CLUSTER_HOSTS / CQLSTREAM_TEST_CLUSTER_STATE are not set: run through scripts/test, or "
           "start scripts/cassandra up --profile cluster --nodes 3 --heap 768M and export them (127.0.3.1, "
           ".state/cassandra/cluster)";
    ASSERT_EQ(Shell(Cassandra("status") + " > /dev/null 2>&1"), 0) << "the cluster is not whole before the test";
  }

  // Whatever the test did, the cluster is whole again afterwards.
  void TearDown() override {
    if (killed_.empty()) return;
    killed_.clear();
    EXPECT_EQ(RestartKilled(), 0) << "could not restart the killed node(s): " << Cassandra("up ...");
  }

  std::string Cassandra(const std::string& command) const {
    return fmt::format("{}/scripts/cassandra {} --profile cluster", testing::SourceDir(), command);
  }

  pid_t NodePid(int i) const {
    std::ifstream in(fmt::format("{}/node{}/cassandra.pid", state_, i));
    pid_t pid = 0;
    in >> pid;
    return pid;
  }

  // SIGKILL to node i, and waits until the process is gone.
  void Kill(int i) {
    const pid_t pid = NodePid(i);
    ASSERT_GT(pid, 0) << "no pid file for node " << i << " under " << state_;
    ASSERT_EQ(::kill(pid, SIGKILL), 0) << "node " << i << " (pid " << pid << ")";
    killed_.insert(i);
    for (int k = 0; k < 200 && ::kill(pid, 0) == 0; ++k) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  // `up` starts exactly the nodes that are not running and returns when every
  // node answers CQL and sees the others. The settings are scripts/test's.
  int RestartKilled() {
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = Shell(Cassandra("up --nodes 3 --heap 768M --fast-start") + " > /dev/null 2>&1");
    std::printf("[chaos] restarted the killed node(s) in %.1f s (exit %d)\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), rc);
    killed_.clear();
    return rc;
  }

  SyntheticDataset MakeRf3Dataset(const std::string& name, int samples) {
    ConnectionOptions o;
    o.hosts = {hosts_};
    auto s = net::Session::Connect(o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return {};
    testing::MustRun(**s, fmt::format("CREATE KEYSPACE IF NOT EXISTS {} WITH replication = "
                                      "{{'class': 'SimpleStrategy', 'replication_factor': 3}}",
                                      keyspace_));
    SyntheticSpec spec;
    spec.name = name;
    spec.samples = samples;
    spec.segments = 3;
    spec.size = [](int i) -> int64_t { return 2000 + (i * 131) % 6000; };
    spec.consistency = cql::Consistency::kAll;  // every replica holds every row before the epoch
    SyntheticDataset d = MakeSyntheticDataset(**s, keyspace_, spec);
    (*s)->Close();
    return d;
  }

  LoaderOptions Options(const std::string& dataset) const {
    LoaderOptions o;
    o.connection.hosts = {hosts_};
    o.connection.keyspace = keyspace_;
    o.dataset = dataset;
    o.split = "train";
    o.batch_size = 25;
    o.request_timeout = std::chrono::milliseconds(2000);
    return o;
  }

  std::string hosts_, state_;
  std::set<int> killed_;
  static std::string keyspace_;
};
std::string ChaosClusterTest::keyspace_;

TEST_F(ChaosClusterTest, ExactlyOnceWhileANodeIsKilledAndRestarted) {
  const SyntheticDataset d = MakeRf3Dataset("killed", 2400);
  ASSERT_EQ(d.payload.size(), 2400u);
  for (bool ordered : {false, true}) {
    SCOPED_TRACE(ordered ? "ordered" : "out of order");
    const int victim = ordered ? 3 : 2;
    // Every rank has delivered 4 of its 32 batches when the node dies; the
    // node comes back while the ranks read on.
    std::future<int> restart;
    RunRanks(Options("killed"), d, ordered, 4,
             [&] {
               Kill(victim);
               restart = std::async(std::launch::async, [this] {
                 std::this_thread::sleep_for(std::chrono::seconds(2));
                 return RestartKilled();
               });
             },
             std::chrono::seconds(300));
    ASSERT_TRUE(restart.valid());
    EXPECT_EQ(restart.get(), 0) << "node " << victim << " did not come back";
    ASSERT_EQ(Shell(Cassandra("status") + " > /dev/null 2>&1"), 0) << "the cluster is not whole after the test";
  }
}

TEST_F(ChaosClusterTest, ReadsAnEpochWhileOnlyOneReplicaLives) {
  const SyntheticDataset d = MakeRf3Dataset("last_replica", 900);
  ASSERT_EQ(d.payload.size(), 900u);
  Kill(2);
  Kill(3);

  // A new loader, opened after the kills: the catalog and every sample must
  // come from node 1.
  LoaderOptions o = Options("last_replica");
  o.epochs = 1;
  o.seed = kSeed;
  const auto t0 = std::chrono::steady_clock::now();
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok()) << "Loader::Open with one replica alive: " << l.status().ToString();
  auto fut = std::async(std::launch::async, [&] { return ReadEpoch(**l, d); });
  ASSERT_EQ(fut.wait_for(std::chrono::seconds(180)), std::future_status::ready) << "the loader hangs";
  const Delivered got = fut.get();
  std::printf("[chaos] one replica alive: epoch of %zu samples in %.1f s\n", got.keys.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  ExpectPlanDelivered(got, [&] {
    std::vector<SampleKey> all;
    for (int r = 0; r < kWorld; ++r) {
      auto k = PlannedKeys((*l)->dataset(), "train", 0, r);
      all.insert(all.end(), k.begin(), k.end());
    }
    return all;  // world 1: the whole permutation, in order
  }(), /*ordered=*/false);
  (*l)->Close();

  // `cqlstream info` answers from the last replica and says it lowered the
  // consistency to do so.
  const auto [out, rc] = Capture(fmt::format("{} info --hosts {} --keyspace {} last_replica", CliPath(), hosts_,
                                             keyspace_));
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("900"), std::string::npos) << "info does not show the 900 samples:\n" << out;
  EXPECT_NE(out.find("consisten"), std::string::npos) << "no warning about the consistency level:\n" << out;
}

}  // namespace
}  // namespace cqlstream
