// Copyright (c) cqlstream authors.
//
// The loader against the real node: exactly-once delivery over ranks, seeds,
// batch sizes, drop_last and both assembly modes; content and labels;
// reshuffling per epoch; reproducible ordered mode; chunked samples;
// checkpoints with the same and another world size; missing samples; the
// byte budget; faults injected by a proxy.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <chrono>
#include <future>
#include <map>
#include <set>
#include <thread>

#include "cqlstream/loader.h"
#include "dataset_fixture.h"
#include "fault_proxy.h"
#include "shared_dataset_suite.h"
#include "test_env.h"

namespace cqlstream {
namespace {

using testing::Delivered;
using testing::MakeSyntheticDataset;
using testing::ReadEpoch;
using testing::SyntheticDataset;
using testing::SyntheticSpec;

class LoaderTest : public testing::SharedDatasetSuite<LoaderTest> {
 public:
  static SyntheticDataset Make(net::Session& s) {
    SyntheticSpec spec;
    spec.name = "ldr";
    spec.samples = 600;
    spec.segments = 3;
    spec.chunk_size = 4096;
    // Mostly small samples, some chunked ones (up to 5 chunks).
    spec.size = [](int i) -> int64_t { return i % 50 == 0 ? 4096 * 4 + 123 : 200 + (i * 37) % 700; };
    return MakeSyntheticDataset(s, testing::TestKeyspace(), spec);
  }
};

TEST_F(LoaderTest, ExactlyOncePerEpochAcrossRanksSeedsBatchSizesAndModes) {
  struct Case {
    int world, batch;
    uint64_t seed;
    bool drop_last, ordered;
  };
  const std::vector<Case> cases = {
      {1, 32, 0, false, false}, {1, 7, 1, true, true},   {2, 1, 7, false, true},  {2, 64, 3, true, false},
      {3, 16, 5, false, false}, {3, 50, 2, true, true},  {4, 10, 9, false, true}, {5, 33, 4, true, false},
      {6, 8, 11, false, false}, {7, 20, 13, true, true}, {8, 5, 17, false, false}, {8, 16, 19, true, true},
  };
  const size_t n = data_->payload.size();
  for (const auto& c : cases) {
    SCOPED_TRACE(fmt::format("world {} batch {} seed {} drop_last {} ordered {}", c.world, c.batch, c.seed,
                             c.drop_last, c.ordered));
    std::vector<std::future<Delivered>> ranks;
    std::vector<int64_t> expected_batches(static_cast<size_t>(c.world));
    for (int r = 0; r < c.world; ++r) {
      ranks.push_back(std::async(std::launch::async, [&, r] {
        LoaderOptions o = testing::TestLoaderOptions("ldr");
        o.batch_size = c.batch;
        o.seed = c.seed;
        o.rank = r;
        o.world_size = c.world;
        o.drop_last = c.drop_last;
        o.ordered = c.ordered;
        auto l = Loader::Open(o);
        if (!l.ok()) {
          Delivered d;
          d.error = l.status().ToString();
          return d;
        }
        expected_batches[static_cast<size_t>(r)] = (*l)->BatchesPerEpoch();
        auto d = ReadEpoch(**l, *data_);
        EXPECT_TRUE((*l)->Done());
        return d;
      }));
    }
    std::multiset<SampleKey> all;
    size_t delivered = 0;
    for (int r = 0; r < c.world; ++r) {
      Delivered d = ranks[static_cast<size_t>(r)].get();
      ASSERT_TRUE(d.error.empty()) << d.error;
      EXPECT_EQ(static_cast<int64_t>(d.batch_sizes.size()), expected_batches[static_cast<size_t>(r)]);
      for (size_t i = 0; i + 1 < d.batch_sizes.size(); ++i) {
        EXPECT_EQ(d.batch_sizes[i], static_cast<size_t>(c.batch));
      }
      if (c.drop_last && !d.batch_sizes.empty()) {
        EXPECT_EQ(d.batch_sizes.back(), static_cast<size_t>(c.batch));
      }
      all.insert(d.keys.begin(), d.keys.end());
      delivered += d.keys.size();
    }
    std::set<SampleKey> unique(all.begin(), all.end());
    EXPECT_EQ(unique.size(), all.size()) << "a sample was delivered twice";
    if (!c.drop_last) {
      EXPECT_EQ(delivered, n) << "samples lost";
    } else {
      // Every rank delivers floor(n / world / batch) full batches.
      EXPECT_EQ(delivered, static_cast<size_t>(c.world) * (n / static_cast<size_t>(c.world) / c.batch) * c.batch);
    }
  }
}

TEST_F(LoaderTest, EachEpochIsAFreshShuffleAndOrderedModeIsReproducible) {
  LoaderOptions o = testing::TestLoaderOptions("ldr");
  o.batch_size = 25;
  o.seed = 3;
  o.epochs = 2;
  o.ordered = true;
  auto a = Loader::Open(o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  Delivered e0 = ReadEpoch(**a, *data_);
  Delivered e1 = ReadEpoch(**a, *data_);
  ASSERT_TRUE(e0.error.empty() && e1.error.empty()) << e0.error << e1.error;
  EXPECT_EQ(e0.keys.size(), data_->payload.size());
  EXPECT_EQ(e1.keys.size(), data_->payload.size());
  EXPECT_NE(e0.keys, e1.keys) << "epoch 1 repeats epoch 0's order";
  EXPECT_EQ(std::set<SampleKey>(e0.keys.begin(), e0.keys.end()), std::set<SampleKey>(e1.keys.begin(), e1.keys.end()));
  auto end = (*a)->Next();
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(*end, nullptr);
  EXPECT_TRUE((*a)->Done());

  // Ordered mode again with the same options: bit-for-bit the same batches.
  auto b = Loader::Open(o);
  ASSERT_TRUE(b.ok());
  Delivered f0 = ReadEpoch(**b, *data_);
  EXPECT_EQ(f0.keys, e0.keys);
  EXPECT_EQ(f0.digest, e0.digest);
  EXPECT_EQ(f0.batch_sizes, e0.batch_sizes);
}

TEST_F(LoaderTest, OutOfOrderDeliversTheSameSetWithChecksumsVerified) {
  LoaderOptions o = testing::TestLoaderOptions("ldr");
  o.batch_size = 40;
  o.verify_checksums = true;
  o.shuffle = false;
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  Delivered d = ReadEpoch(**l, *data_);
  ASSERT_TRUE(d.error.empty()) << d.error;
  EXPECT_EQ(std::set<SampleKey>(d.keys.begin(), d.keys.end()).size(), data_->payload.size());
  auto m = (*l)->Metrics();
  EXPECT_EQ(m.images, static_cast<int64_t>(data_->payload.size()));
  EXPECT_GT(m.window, 0);
  EXPECT_GT(m.latency_p50_ms, 0);
  EXPECT_GE(m.connections_wanted, 1);  // the controller's count (open ones may still be opening)
  EXPECT_GE(m.connections, 1);
  EXPECT_EQ(m.ignored_peer_rows, 0);  // a real node's system.peers names no host twice
  // Every data read checked its answer's columns, as bytes: the node
  // encodes them as it encoded the PREPARED answer's.
  EXPECT_EQ(m.columns_decoded, 0);
}

// Next(interrupted) whose check says yes returns Cancelled("interrupted")
// when no batch is ready, and takes nothing: an epoch read with such a call
// before every plain one still delivers each sample exactly once.
TEST_F(LoaderTest, AnInterruptedNextTakesNoBatch) {
  LoaderOptions o = testing::TestLoaderOptions("ldr");
  o.batch_size = 40;
  o.epochs = 1;
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  int asked = 0;
  const std::function<bool()> yes = [&asked] {
    ++asked;
    return true;
  };
  std::vector<SampleKey> keys;
  int interrupted = 0;
  auto take = [&](const BatchPtr& b) {
    for (size_t i = 0; b && i < b->size(); ++i) keys.push_back(b->keys[i]);
  };
  for (int step = 0; step < 10000; ++step) {
    auto cut = (*l)->Next(yes);
    if (!cut.ok()) {
      ASSERT_EQ(cut.status().code(), Status::Code::kCancelled) << cut.status().ToString();
      EXPECT_EQ(cut.status().message(), "interrupted");
      ++interrupted;
    } else if (!*cut) {
      break;  // the epoch's end, reached by a call that found it ready
    } else {
      take(*cut);  // a batch was ready: an interrupted wait takes one only then
    }
    auto next = (*l)->Next();
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    if (!*next) break;
    take(*next);
  }
  EXPECT_GT(interrupted, 0) << "no call found its batch not ready yet";
  EXPECT_EQ(asked, interrupted) << "asked only where it would wait";
  EXPECT_EQ(keys.size(), data_->payload.size());
  EXPECT_EQ(std::set<SampleKey>(keys.begin(), keys.end()).size(), data_->payload.size());
  EXPECT_TRUE((*l)->Done());
}

// A checkpoint taken after an interrupted Next is the one taken before it
// (the call took nothing), and resuming from it delivers the rest of the
// epoch exactly once.
TEST_F(LoaderTest, AnInterruptedNextLeavesTheCheckpointAsItWas) {
  LoaderOptions o = testing::TestLoaderOptions("ldr");
  o.batch_size = 20;
  o.seed = 3;
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  Delivered first = ReadEpoch(**l, *data_, 2);
  ASSERT_TRUE(first.error.empty()) << first.error;
  const std::function<bool()> yes = [] { return true; };
  std::string before = (*l)->State();
  bool interrupted = false;
  for (int step = 0; step < 1000 && !interrupted; ++step) {
    auto cut = (*l)->Next(yes);
    if (!cut.ok()) {
      ASSERT_EQ(cut.status().code(), Status::Code::kCancelled) << cut.status().ToString();
      interrupted = true;
      break;
    }
    ASSERT_TRUE(*cut) << "the epoch ended before any call found its batch not ready";
    for (size_t i = 0; i < (*cut)->size(); ++i) first.keys.push_back((*cut)->keys[i]);
    before = (*l)->State();  // a batch was ready: taken without asking
  }
  ASSERT_TRUE(interrupted) << "no call found its batch not ready";
  EXPECT_EQ((*l)->State(), before) << "an interrupted Next moved the checkpoint";
  (*l)->Close();
  EXPECT_EQ(testing::ResumeEpoch(o, before, first.keys, *data_).size(), data_->payload.size());
}

TEST_F(LoaderTest, ResumeWithTheSameAndWithAnotherWorldSize) {
  const size_t n = data_->payload.size();
  // Same world size: rank 1 of 2 stops after 3 batches and resumes.
  {
    LoaderOptions o = testing::TestLoaderOptions("ldr");
    o.batch_size = 20;
    o.seed = 21;
    o.rank = 1;
    o.world_size = 2;
    auto a = Loader::Open(o);
    ASSERT_TRUE(a.ok());
    Delivered first = ReadEpoch(**a, *data_, 3);
    ASSERT_EQ(first.keys.size(), 60u);
    std::string state = (*a)->State();
    (*a)->Close();
    EXPECT_EQ(testing::ResumeEpoch(o, state, first.keys, *data_).size(), n / 2);
  }
  // Three ranks checkpoint mid-epoch; two ranks finish the epoch.
  {
    std::set<SampleKey> all;
    std::vector<std::string> states;
    for (int r = 0; r < 3; ++r) {
      LoaderOptions o = testing::TestLoaderOptions("ldr");
      o.batch_size = 16;
      o.seed = 5;
      o.rank = r;
      o.world_size = 3;
      auto a = Loader::Open(o);
      ASSERT_TRUE(a.ok());
      Delivered part = ReadEpoch(**a, *data_, r + 1);  // ranks stop at different points
      for (SampleKey k : part.keys) ASSERT_TRUE(all.insert(k).second);
      states.push_back((*a)->State());
    }
    size_t rest_total = 0;
    for (int r = 0; r < 2; ++r) {
      LoaderOptions o = testing::TestLoaderOptions("ldr");
      o.batch_size = 16;
      o.seed = 5;
      o.rank = r;
      o.world_size = 2;
      auto b = Loader::Open(o);
      ASSERT_TRUE(b.ok());
      Status rs = (*b)->Restore(states);
      ASSERT_TRUE(rs.ok()) << rs.ToString();
      Delivered rest = ReadEpoch(**b, *data_);
      ASSERT_TRUE(rest.error.empty()) << rest.error;
      rest_total += rest.keys.size();
      for (SampleKey k : rest.keys) EXPECT_TRUE(all.insert(k).second) << "delivered twice: " << FormatKey(k);
    }
    EXPECT_EQ(all.size(), n);
    EXPECT_GT(rest_total, 0u);
    // Only one rank's state is not enough for another world size.
    LoaderOptions o = testing::TestLoaderOptions("ldr");
    o.seed = 5;
    o.rank = 0;
    o.world_size = 2;
    o.batch_size = 16;
    auto c = Loader::Open(o);
    ASSERT_TRUE(c.ok());
    Status bad = (*c)->Restore({states[0]});
    EXPECT_FALSE(bad.ok());
    // A different seed is refused.
    o.seed = 6;
    auto d = Loader::Open(o);
    ASSERT_TRUE(d.ok());
    EXPECT_FALSE((*d)->Restore(states).ok());
  }
}

TEST_F(LoaderTest, TheFirstWindowsConnectionsOpenBeforeItsFirstRequest) {
  // 100-kB samples: the first window of 32 needs, two doublings on,
  // ceil(4 x 32 x 100,000 / 2 MiB) = 7 connections (WindowController::
  // InitialConnections), all hosts together (the session opens
  // ceil(7 / hosts) on each); they open before anything is read. (That
  // they are asked for before the statements are prepared, so that they
  // open during those round trips, is what bench/startup.sh measures.) A
  // fixed window keeps the connections the user set.
  auto s = testing::TestSession();
  ASSERT_NE(s, nullptr);
  int up = 0;
  for (const auto& h : s->Hosts()) up += h.up ? 1 : 0;
  ASSERT_GE(up, 1);
  SyntheticSpec spec;
  spec.name = "ldr_conns";
  spec.samples = 48;
  spec.segments = 1;
  spec.size = [](int) -> int64_t { return 100000; };
  auto d = MakeSyntheticDataset(*s, testing::TestKeyspace(), spec);
  s->Close();
  {
    LoaderOptions o = testing::TestLoaderOptions("ldr_conns");
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    const int want = std::max(7, o.connection.connections_per_host * up);
    auto m = (*l)->Metrics();
    EXPECT_EQ(m.connections_wanted, want);
    EXPECT_EQ(m.in_flight, 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while ((m = (*l)->Metrics()).connections < want && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_GE(m.connections, want);
    EXPECT_LE(m.connections, (want + up - 1) / up * up);
    EXPECT_EQ(m.images, 0);
    Delivered got = ReadEpoch(**l, d);
    ASSERT_TRUE(got.error.empty()) << got.error;
    EXPECT_EQ(got.keys.size(), d.payload.size());
  }
  LoaderOptions o = testing::TestLoaderOptions("ldr_conns");
  o.adaptive = false;
  o.max_in_flight = 8;
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ((*l)->Metrics().connections_wanted, o.connection.connections_per_host * up);
}

TEST_F(LoaderTest, TheByteBudgetHolds) {
  // Samples of nearly one size, so that the only estimate in the accounting
  // (bytes of requests whose size is not known yet, counted at the mean) is
  // close to the truth.
  auto s = testing::TestSession();
  ASSERT_NE(s, nullptr);
  SyntheticSpec spec;
  spec.name = "ldr_budget";
  spec.samples = 800;
  spec.segments = 2;
  spec.size = [](int i) -> int64_t { return 2000 + (i * 7) % 100; };
  auto d = MakeSyntheticDataset(*s, testing::TestKeyspace(), spec);
  s->Close();
  // Out-of-order with ~4 batches in the budget (the pool keeps 1 buffer),
  // and both modes with ~8 (it keeps 3 and recycles them while batches
  // under assembly hold their kept pages; ordered mode has many open).
  struct Case {
    bool ordered;
    int batch_size;
  };
  for (Case c : {Case{false, 16}, Case{false, 8}, Case{true, 8}}) {
    SCOPED_TRACE(fmt::format("{} batch {}", c.ordered ? "ordered" : "out-of-order", c.batch_size));
    LoaderOptions o = testing::TestLoaderOptions("ldr_budget");
    o.batch_size = c.batch_size;
    o.ordered = c.ordered;
    o.memory_bytes = 128 * 1024;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    int64_t peak = 0;
    size_t got = 0;
    std::vector<BatchPtr> held;
    for (;;) {
      auto b = (*l)->Next();
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      if (!*b) break;
      got += (*b)->size();
      held.push_back(*b);
      if (held.size() > 2) held.erase(held.begin());  // the consumer keeps two batches alive
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // and is slower than the loader
      peak = std::max(peak, (*l)->Metrics().memory_bytes);
    }
    EXPECT_EQ(got, d.payload.size());
    // The budget may be exceeded by at most one sample (a request is always
    // allowed when none is in flight) plus the spread of sizes.
    std::printf("[   INFO   ] %s, batch %d: budget %lld bytes, peak charged %lld bytes\n",
                c.ordered ? "ordered" : "out-of-order", c.batch_size, (long long)o.memory_bytes, (long long)peak);
    EXPECT_LE(peak, o.memory_bytes + 2 * 2100) << "peak " << peak;
    EXPECT_GT(peak, o.memory_bytes / 2) << "the loader did not use its budget";
    // The loader's own peak covers every charge, not only those seen
    // between batches: within the same bound, plus the kept pages of one
    // batch buffer (at most 1.25 batches' bytes and a page), which a batch
    // released at that moment counts twice (MemoryAccount::peak).
    const int64_t loader_peak = (*l)->Metrics().memory_peak_bytes;
    std::printf("[   INFO   ] the loader's peak: %lld bytes\n", (long long)loader_peak);
    EXPECT_GE(loader_peak, peak);
    EXPECT_LE(loader_peak, o.memory_bytes + 2 * 2100 + static_cast<int64_t>(1.25 * c.batch_size * 2100) + 4096);
  }
}

TEST_F(LoaderTest, MissingSampleIsNamedOrSkipped) {
  auto s = testing::TestSession();
  ASSERT_NE(s, nullptr);
  SyntheticSpec spec;
  spec.name = "ldr_missing";
  spec.samples = 120;
  spec.segments = 1;
  auto d = MakeSyntheticDataset(*s, testing::TestKeyspace(), spec);
  const SampleKey gone = MakeKey(0, 17);
  testing::MustRun(*s, fmt::format("DELETE FROM {}.d_ldr_missing WHERE seg = 0 AND idx = 17", testing::TestKeyspace()));
  {
    LoaderOptions o = testing::TestLoaderOptions("ldr_missing");
    o.batch_size = 10;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok());
    std::string err;
    size_t got = 0;
    for (;;) {
      auto b = (*l)->Next();
      if (!b.ok()) {
        err = b.status().ToString();
        break;
      }
      if (!*b) break;
      got += (*b)->size();
    }
    EXPECT_NE(err.find("0:17"), std::string::npos) << err;
    EXPECT_LT(got, 120u) << "the missing sample cannot have been delivered";
    EXPECT_NE(err.find(d.path.at(gone)), std::string::npos) << "the error should name the path: " << err;
  }
  {
    LoaderOptions o = testing::TestLoaderOptions("ldr_missing");
    o.batch_size = 10;
    o.on_missing = OnMissing::kSkip;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok());
    d.payload.erase(gone);
    Delivered r = ReadEpoch(**l, d);
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(r.keys.size(), 119u);
    EXPECT_EQ((*l)->Metrics().skipped, 1);
  }
  s->Close();
}

TEST_F(LoaderTest, FetchReadsGivenKeysInOrder) {
  LoaderOptions o = testing::TestLoaderOptions("ldr");
  o.batch_size = 8;
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  std::vector<SampleKey> want = {MakeKey(3, 5), MakeKey(0, 0), MakeKey(6, 100), MakeKey(0, 50)};
  // Fetch runs beside the epoch stream.
  auto first = (*l)->Next();
  ASSERT_TRUE(first.ok() && *first);
  auto b = (*l)->Fetch(want);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ((*b)->size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ((*b)->keys[i], want[i]);
    auto s = (*b)->sample(i);
    const auto& p = data_->payload.at(want[i]);
    EXPECT_TRUE(s.size() == p.size() && std::equal(s.begin(), s.end(), p.begin())) << FormatKey(want[i]);
    EXPECT_EQ((*b)->labels[i], data_->label.at(want[i]));
  }
  // Keys the dataset does not have are refused up front.
  auto bad = (*l)->Fetch({MakeKey(0, 100000)});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("0:100000"), std::string::npos);
  auto too_many = (*l)->Fetch(std::vector<SampleKey>(9, MakeKey(0, 1)));
  EXPECT_FALSE(too_many.ok());
  // The epoch stream is unaffected.
  Delivered rest = ReadEpoch(**l, *data_);
  ASSERT_TRUE(rest.error.empty()) << rest.error;
  EXPECT_EQ(rest.keys.size() + (*first)->size(), data_->payload.size());
}

// Fetch(keys, interrupted) whose check says yes returns Cancelled
// ("interrupted") at its first wait; the reads it sent end on their own and
// the last one to end drops the call (Metrics().fetches back to 0) and gives
// its batch back; the loader goes on serving Fetch and Next. Were the
// abandoned calls kept, each would hold a batch buffer of its own.
TEST_F(LoaderTest, AnInterruptedFetchGivesBackWhatItsReadsTook) {
  LoaderOptions o = testing::TestLoaderOptions("ldr");
  o.batch_size = 8;
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  std::vector<SampleKey> want;
  for (int32_t i = 0; i < 8; ++i) want.push_back(MakeKey(0, i * 20));
  // The metrics once no fetch and no read is in flight (or 10 s passed).
  auto settled = [&] {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    LoaderMetrics m = (*l)->Metrics();
    while ((m.fetches > 0 || m.in_flight > 0) && std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      m = (*l)->Metrics();
    }
    return m;
  };
  // What plain fetches leave charged: the pool's buffers (two when the
  // answers came out of order: the batch was copied into a second one).
  int64_t plain = 0;
  for (int i = 0; i < 2; ++i) {
    auto b = (*l)->Fetch(want);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    ASSERT_EQ((*b)->size(), want.size());
    b->reset();
    plain = std::max(plain, settled().memory_bytes);
  }
  ASSERT_GT(plain, 0);
  int asked = 0;
  const std::function<bool()> yes = [&asked] {
    ++asked;
    return true;
  };
  constexpr int kCalls = 5;
  int interrupted = 0;
  for (int i = 0; i < kCalls; ++i) {
    auto cut = (*l)->Fetch(want, yes);
    if (cut.ok()) continue;  // every answer came before its first wait (a busy machine)
    ASSERT_EQ(cut.status().code(), Status::Code::kCancelled) << cut.status().ToString();
    EXPECT_EQ(cut.status().message(), "interrupted");
    ++interrupted;
    const LoaderMetrics m = settled();
    ASSERT_EQ(m.fetches, 0) << "call " << i << ": the abandoned fetch was kept";
    ASSERT_EQ(m.in_flight, 0) << "call " << i;
  }
  EXPECT_GT(interrupted, 0) << "every fetch found its batch ready at once";
  EXPECT_EQ(asked, interrupted);
  EXPECT_LE(settled().memory_bytes, 2 * plain) << "the abandoned fetches kept their batches";
  auto again = (*l)->Fetch(want);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_EQ((*again)->size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ((*again)->keys[i], want[i]);
  Delivered all = ReadEpoch(**l, *data_);
  ASSERT_TRUE(all.error.empty()) << all.error;
  EXPECT_EQ(all.keys.size(), data_->payload.size());
}

TEST_F(LoaderTest, ExactlyOnceThroughInjectedFaults) {
  // The proxy listens on another loopback address, same port.
  testing::FaultProxy proxy("127.0.0.2", "127.0.0.1", 9042);
  ASSERT_TRUE(proxy.ok()) << proxy.error();
  testing::FaultProxy::Faults f;
  // Per response frame.
  f.delay_p = 0.02;
  f.delay_max = std::chrono::milliseconds(200);
  f.reset_p = 0.002;
  f.truncate_p = 0.002;
  f.duplicate_p = 0.005;
  f.blackhole_p = 0.001;
  proxy.SetFaults(f);
  for (bool ordered : {false, true}) {
    SCOPED_TRACE(ordered ? "ordered" : "out of order");
    LoaderOptions o = testing::TestLoaderOptions("ldr");
    o.connection.hosts = {"127.0.0.2"};
    o.connection.connect_timeout = std::chrono::milliseconds(2000);
    o.batch_size = 24;
    o.ordered = ordered;
    o.request_timeout = std::chrono::milliseconds(800);
    o.epochs = 2;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    for (int epoch = 0; epoch < 2; ++epoch) {
      auto fut = std::async(std::launch::async, [&] { return ReadEpoch(**l, *data_); });
      ASSERT_EQ(fut.wait_for(std::chrono::seconds(120)), std::future_status::ready) << "the loader hangs";
      Delivered d = fut.get();
      ASSERT_TRUE(d.error.empty()) << d.error;
      std::set<SampleKey> unique(d.keys.begin(), d.keys.end());
      EXPECT_EQ(unique.size(), d.keys.size()) << "duplicates in epoch " << epoch;
      EXPECT_EQ(unique.size(), data_->payload.size()) << "samples lost in epoch " << epoch;
    }
    auto m = (*l)->Metrics();
    std::printf("[   INFO   ] faults: %llu resets %llu truncations %llu duplicates %llu blackholes %llu delays; "
                "loader: %lld retries %lld timeouts %lld hedges %lld duplicates dropped\n",
                (unsigned long long)proxy.stats().resets.load(), (unsigned long long)proxy.stats().truncations.load(),
                (unsigned long long)proxy.stats().duplicates.load(), (unsigned long long)proxy.stats().blackholes.load(),
                (unsigned long long)proxy.stats().delays.load(), (long long)m.retries, (long long)m.timeouts,
                (long long)m.hedges, (long long)m.duplicates_dropped);
  }
  EXPECT_GT(proxy.stats().resets + proxy.stats().truncations + proxy.stats().duplicates, 0u);
}

}  // namespace
}  // namespace cqlstream
