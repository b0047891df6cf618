// Copyright (c) cqlstream authors.
//
// A node restart in the middle of work: the client reconnects and nothing
// hangs; the loader delivers its epoch exactly once across the restart.
// Restarts the default node with scripts/cassandra (down, then up).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <future>
#include <set>
#include <thread>

#include <unistd.h>

#include "cqlstream/loader.h"
#include "dataset_fixture.h"
#include "test_env.h"

namespace cqlstream {
namespace {

int Restart() {
  const std::string s = testing::SourceDir() + "/scripts/cassandra";
  // The log goes to gtest's temporary folder ($TEST_TMPDIR or the system's), not a fixed path.
  const std::string log = ::testing::TempDir() + fmt::format("cqlstream_restart_{}.log", ::getpid());
  const std::string cmd = fmt::format("{0} down > {1} 2>&1 && {0} up --fast-start >> {1} 2>&1", s, log);
  return std::system(cmd.c_str());
}

// What the client read loop saw.
struct ClientCounts {
  std::atomic<bool> stop{false};
  std::atomic<bool> restarted{false};  // set once scripts/cassandra up returned
  std::atomic<int> ok_before{0}, errors{0}, ok_after{0};
  std::atomic<int64_t> longest_ms{0};
};

// Reads single rows of segment 0 until c.stop: counts the reads that
// succeed before and after the restart and those that fail, and times the
// longest call.
void ClientLoop(net::Session& s, const net::PreparedPtr& sel, ClientCounts& c) {
  int i = 0;
  while (!c.stop) {
    net::Statement st = net::Statement::Bound(sel, {Value::Int(0), Value::Int(i++ % 1000)});
    st.idempotent = true;
    st.timeout = std::chrono::milliseconds(2000);
    const auto t0 = std::chrono::steady_clock::now();
    auto r = s.Execute(st);
    const int64_t ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    c.longest_ms = std::max<int64_t>(c.longest_ms, ms);
    if (!r.ok()) {
      ++c.errors;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } else if (c.restarted) {
      ++c.ok_after;
    } else {
      ++c.ok_before;
    }
  }
}

// A loader that can only prefetch a little, so it is reading during the
// restart.
StatusOr<std::unique_ptr<Loader>> OpenSlowLoader() {
  LoaderOptions lo;
  lo.connection = testing::TestOptions();
  lo.connection.keyspace = testing::TestKeyspace();
  lo.connection.reconnect_max = std::chrono::milliseconds(1000);
  lo.dataset = "ldr_restart";
  lo.batch_size = 10;
  lo.memory_bytes = 64 * 1024;
  return Loader::Open(lo);
}

// Reads the loader's epoch, restarting the node (setting c.restarted when
// it is up again) after 20 batches; every sample must hold its written
// bytes. Returns the delivered keys; *error: the loader's error, if any.
std::multiset<SampleKey> ReadAcrossRestart(Loader& l, const testing::SyntheticDataset& d, ClientCounts& c,
                                           std::future<int>* restart, std::string* error) {
  std::multiset<SampleKey> keys;
  for (int b = 0;; ++b) {
    if (b == 20) {
      *restart = std::async(std::launch::async, [&c] {
        const int rc = Restart();
        c.restarted = true;
        return rc;
      });
    }
    auto batch = l.Next();
    if (!batch.ok()) {
      *error = batch.status().ToString();
      break;
    }
    if (!*batch) break;
    for (size_t i = 0; i < (*batch)->size(); ++i) {
      const SampleKey k = (*batch)->keys[i];
      keys.insert(k);
      auto sample = (*batch)->sample(i);
      const auto& want = d.payload.at(k);
      EXPECT_TRUE(sample.size() == want.size() && std::equal(sample.begin(), sample.end(), want.begin()));
      if (::testing::Test::HasFailure()) return keys;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return keys;
}

TEST(NodeRestartTest, ClientAndLoaderRideThroughARestart) {
  auto admin = testing::TestSession();
  ASSERT_NE(admin, nullptr);
  testing::SyntheticSpec spec;
  spec.name = "ldr_restart";
  spec.samples = 3000;
  spec.segments = 2;
  auto d = testing::MakeSyntheticDataset(*admin, testing::TestKeyspace(), spec);
  admin->Close();

  // A client read loop.
  auto o = testing::TestOptions();
  o.reconnect_max = std::chrono::milliseconds(1000);
  auto s = net::Session::Connect(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto sel = (*s)->Prepare(fmt::format("SELECT size FROM {}.d_ldr_restart WHERE seg = ? AND idx = ?",
                                       testing::TestKeyspace()));
  ASSERT_TRUE(sel.ok());
  ClientCounts c;
  std::thread reader([&] { ClientLoop(**s, *sel, c); });

  auto l = OpenSlowLoader();
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  std::future<int> restart;
  std::string error;
  const std::multiset<SampleKey> keys = ReadAcrossRestart(**l, d, c, &restart, &error);
  const bool restarted = restart.valid();
  const int restart_rc = restarted ? restart.get() : -1;
  // Let the client loop see the node again.
  for (int i = 0; i < 600 && c.ok_after < 20; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  c.stop = true;
  reader.join();
  ASSERT_TRUE(restarted) << "the epoch ended before the restart began";
  EXPECT_EQ(restart_rc, 0) << "scripts/cassandra down/up failed: see cqlstream_restart_" << ::getpid() << ".log in "
                           << ::testing::TempDir();
  EXPECT_TRUE(error.empty()) << error;
  EXPECT_EQ(keys.size(), d.payload.size()) << "samples lost or duplicated across the restart";
  EXPECT_EQ(std::set<SampleKey>(keys.begin(), keys.end()).size(), keys.size()) << "duplicates";
  EXPECT_GT(c.ok_before.load(), 0);
  EXPECT_GT(c.errors.load(), 0) << "the restart was not seen by the client";
  EXPECT_GE(c.ok_after.load(), 20) << "the client did not reconnect";
  // Every call returned: bounded by connect + request timeouts and retries.
  EXPECT_LT(c.longest_ms.load(), 30000) << "a call hung";
  auto m = (*l)->Metrics();
  std::printf("[   INFO   ] client: %d ok before, %d errors, %d ok after, longest call %lld ms; loader: %lld retries\n",
              c.ok_before.load(), c.errors.load(), c.ok_after.load(), (long long)c.longest_ms.load(),
              (long long)m.retries);
  (*s)->Close();
}

}  // namespace
}  // namespace cqlstream
