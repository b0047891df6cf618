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
  std::atomic<bool> stop{false};
  std::atomic<int> ok_before{0}, errors{0}, ok_after{0};
  std::atomic<bool> restarted{false};
  std::atomic<int64_t> longest_ms{0};
  std::thread reader([&] {
    int i = 0;
    while (!stop) {
      net::Statement st = net::Statement::Bound(*sel, {Value::Int(0), Value::Int(i++ % 1000)});
      st.idempotent = true;
      st.timeout = std::chrono::milliseconds(2000);
      const auto t0 = std::chrono::steady_clock::now();
      auto r = (*s)->Execute(st);
      const int64_t ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
      longest_ms = std::max<int64_t>(longest_ms, ms);
      if (!r.ok()) {
        ++errors;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      } else if (restarted) {
        ++ok_after;
      } else {
        ++ok_before;
      }
    }
  });

  // A loader that can only prefetch a little, so it is reading during the
  // restart.
  LoaderOptions lo;
  lo.connection = testing::TestOptions();
  lo.connection.keyspace = testing::TestKeyspace();
  lo.connection.reconnect_max = std::chrono::milliseconds(1000);
  lo.dataset = "ldr_restart";
  lo.batch_size = 10;
  lo.memory_bytes = 64 * 1024;
  auto l = Loader::Open(lo);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  std::multiset<SampleKey> keys;
  std::future<int> restart;
  std::string error;
  for (int b = 0;; ++b) {
    if (b == 20) restart = std::async(std::launch::async, [&] { int rc = Restart(); restarted = true; return rc; });
    auto batch = (*l)->Next();
    if (!batch.ok()) {
      error = batch.status().ToString();
      break;
    }
    if (!*batch) break;
    for (size_t i = 0; i < (*batch)->size(); ++i) {
      const SampleKey k = (*batch)->keys[i];
      keys.insert(k);
      auto sample = (*batch)->sample(i);
      const auto& want = d.payload.at(k);
      ASSERT_TRUE(sample.size() == want.size() && std::equal(sample.begin(), sample.end(), want.begin()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(restart.valid());
  EXPECT_EQ(restart.get(), 0) << "scripts/cassandra down/up failed: see cqlstream_restart_" << ::getpid() << ".log in " << ::testing::TempDir();
  // Let the client loop see the node again.
  for (int i = 0; i < 600 && ok_after < 20; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  stop = true;
  reader.join();
  EXPECT_TRUE(error.empty()) << error;
  EXPECT_EQ(keys.size(), d.payload.size()) << "samples lost or duplicated across the restart";
  EXPECT_EQ(std::set<SampleKey>(keys.begin(), keys.end()).size(), keys.size()) << "duplicates";
  EXPECT_GT(ok_before.load(), 0);
  EXPECT_GT(errors.load(), 0) << "the restart was not seen by the client";
  EXPECT_GE(ok_after.load(), 20) << "the client did not reconnect";
  // Every call returned: bounded by connect + request timeouts and retries.
  EXPECT_LT(longest_ms.load(), 30000) << "a call hung";
  auto m = (*l)->Metrics();
  std::printf("[   INFO   ] client: %d ok before, %d errors, %d ok after, longest call %lld ms; loader: %lld retries\n",
              ok_before.load(), errors.load(), ok_after.load(), (long long)longest_ms.load(), (long long)m.retries);
  (*s)->Close();
}

}  // namespace
}  // namespace cqlstream
