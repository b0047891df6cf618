// Copyright (c) cqlstream authors.
#include "wan/wan_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

namespace cqlstream::wan {
namespace {

using std::chrono::milliseconds;
using std::chrono::microseconds;

const TimePoint kT0 = TimePoint{} + std::chrono::hours(1);

TEST(LinkTest, UncappedLinkDoesNotDelay) {
  Link link(0);
  EXPECT_EQ(link.Serialize(kT0, 1 << 30), kT0);
}

TEST(LinkTest, SerializesAtRate) {
  Link link(1'000'000);  // 1 MB/s: 1 byte per microsecond
  EXPECT_EQ(link.Serialize(kT0, 1000), kT0 + milliseconds(1));
  // Arrives while the link is busy: queues behind the first chunk.
  EXPECT_EQ(link.Serialize(kT0 + microseconds(500), 500), kT0 + microseconds(1500));
  // Arrives after the link went idle: starts at its arrival.
  EXPECT_EQ(link.Serialize(kT0 + milliseconds(10), 2000), kT0 + milliseconds(12));
}

TEST(LinkTest, NoDriftFromRounding) {
  Link link(3);  // 3 bytes/s: one byte is 333,333,333.33 ns
  TimePoint t{};
  for (int i = 0; i < 3000; ++i) t = link.Serialize(kT0, 1);
  EXPECT_EQ(t, kT0 + std::chrono::seconds(1000));
}

TEST(PipeModelTest, DelaysByOneWayDelayAndReturnsCreditOneRttAfterRead) {
  PipeModel m({.delay = milliseconds(25), .jitter = {}, .window = 1000}, nullptr, 1);
  EXPECT_EQ(m.Credit(kT0), 1000u);
  TimePoint rel = m.OnRead(600, kT0);
  EXPECT_EQ(rel, kT0 + milliseconds(25));
  EXPECT_EQ(m.Credit(kT0), 400u);
  EXPECT_EQ(m.in_flight(), 600u);
  m.OnDelivered(600, rel);
  // The acknowledgement needs another D: credit is back at read + RTT.
  EXPECT_EQ(m.Credit(kT0 + milliseconds(50) - microseconds(1)), 400u);
  EXPECT_EQ(m.Credit(kT0 + milliseconds(50)), 1000u);
  EXPECT_EQ(m.in_flight(), 0u);
}

TEST(PipeModelTest, TheDelayChangesAtItsTimeAndBytesKeepTheirOrder) {
  // 10 ms one way, 100 ms from 1 s on: bytes read after the change take the
  // new delay; when it falls again, no byte passes one read before it, and
  // no credit returns before one queued earlier.
  const TimePoint at = kT0 + std::chrono::seconds(1);
  PipeModel rise({.delay = milliseconds(10), .changed_delay = milliseconds(100), .change_at = at}, nullptr, 1);
  EXPECT_EQ(rise.DelayAt(kT0), milliseconds(10));
  EXPECT_EQ(rise.OnRead(10, kT0 + milliseconds(500)), kT0 + milliseconds(510));
  EXPECT_EQ(rise.OnRead(10, kT0 + milliseconds(1000)), kT0 + milliseconds(1100));
  PipeModel fall({.delay = milliseconds(100), .changed_delay = milliseconds(10), .change_at = at, .window = 100},
                 nullptr, 1);
  const TimePoint before = fall.OnRead(10, kT0 + milliseconds(990));  // released at 1,090 ms
  EXPECT_EQ(before, kT0 + milliseconds(1090));
  EXPECT_EQ(fall.OnRead(10, kT0 + milliseconds(1000)), before);  // 1,010 ms would pass the first
  EXPECT_EQ(fall.OnRead(10, kT0 + milliseconds(1100)), kT0 + milliseconds(1110));
  fall.OnDelivered(10, kT0 + milliseconds(995));   // before the change: credit at 1,095 ms
  fall.OnDelivered(10, kT0 + milliseconds(1001));  // after: 1,011 ms, but not before the first
  EXPECT_EQ(fall.Credit(kT0 + milliseconds(1094)), 70u);
  EXPECT_EQ(fall.Credit(kT0 + milliseconds(1095)), 90u);
  // To no delay at all, with a credit return still queued: the next waits
  // for it instead of returning at once.
  PipeModel to_zero({.delay = milliseconds(20), .changed_delay = Nanos(0), .change_at = kT0 + milliseconds(100),
                     .window = 100},
                    nullptr, 1);
  (void)to_zero.OnRead(10, kT0);
  (void)to_zero.OnRead(10, kT0 + milliseconds(100));  // released at once
  to_zero.OnDelivered(10, kT0 + milliseconds(99));    // credit at 119 ms
  to_zero.OnDelivered(10, kT0 + milliseconds(101));   // at 101 ms, but not before the first
  EXPECT_EQ(to_zero.Credit(kT0 + milliseconds(118)), 80u);
  EXPECT_EQ(to_zero.Credit(kT0 + milliseconds(119)), 100u);
  // With nothing queued, at once.
  (void)to_zero.OnRead(10, kT0 + milliseconds(200));
  to_zero.OnDelivered(10, kT0 + milliseconds(200));
  EXPECT_EQ(to_zero.Credit(kT0 + milliseconds(200)), 100u);
}

TEST(PipeModelTest, WindowCreditArithmetic) {
  PipeModel m({.delay = milliseconds(10), .jitter = {}, .window = 100}, nullptr, 1);
  (void)m.OnRead(60, kT0);
  (void)m.OnRead(40, kT0 + milliseconds(1));
  EXPECT_EQ(m.Credit(kT0 + milliseconds(1)), 0u);
  EXPECT_EQ(m.TimeCreditReaches(1), TimePoint::max());  // nothing delivered yet

  m.OnDelivered(60, kT0 + milliseconds(10));
  m.OnDelivered(40, kT0 + milliseconds(12));  // sink was slow: credit later
  EXPECT_EQ(m.TimeCreditReaches(1), kT0 + milliseconds(20));
  EXPECT_EQ(m.TimeCreditReaches(60), kT0 + milliseconds(20));
  EXPECT_EQ(m.TimeCreditReaches(61), kT0 + milliseconds(22));
  EXPECT_EQ(m.TimeCreditReaches(1000), kT0 + milliseconds(22));  // clamped to W
  EXPECT_EQ(m.Credit(kT0 + milliseconds(19)), 0u);
  EXPECT_EQ(m.Credit(kT0 + milliseconds(20)), 60u);
  EXPECT_LE(m.TimeCreditReaches(60), kT0 + milliseconds(20));
  EXPECT_EQ(m.Credit(kT0 + milliseconds(30)), 100u);
}

TEST(PipeModelTest, ZeroDelayReturnsCreditAtDelivery) {
  PipeModel m({.delay = {}, .jitter = {}, .window = 64}, nullptr, 1);
  EXPECT_EQ(m.OnRead(64, kT0), kT0);
  EXPECT_EQ(m.Credit(kT0), 0u);
  m.OnDelivered(64, kT0);
  EXPECT_EQ(m.Credit(kT0), 64u);
}

TEST(PipeModelTest, UnlimitedWindow) {
  PipeModel m({.delay = milliseconds(5), .jitter = {}, .window = 0}, nullptr, 1);
  EXPECT_EQ(m.Credit(kT0), kUnlimited);
  (void)m.OnRead(1ull << 40, kT0);
  EXPECT_EQ(m.Credit(kT0), kUnlimited);
}

TEST(PipeModelTest, JitterNeverReorders) {
  const auto d = milliseconds(20);
  const auto j = milliseconds(30);
  PipeModel m({.delay = d, .jitter = j, .window = kUnlimited}, nullptr, 7);
  TimePoint prev{};
  int at_floor = 0;  // releases held back by an earlier, later-jittered chunk
  TimePoint max_extra{};
  for (int i = 0; i < 10000; ++i) {
    TimePoint now = kT0 + microseconds(100 * i);
    TimePoint rel = m.OnRead(100, now);
    ASSERT_GE(rel, prev) << "reordered at chunk " << i;
    ASSERT_GE(rel, now + d);
    // Either its own delay (<= D + J) or held behind its predecessor.
    ASSERT_TRUE(rel <= now + d + j || rel == prev) << i;
    if (rel == prev) ++at_floor;
    max_extra = std::max(max_extra, TimePoint{} + (rel - now - d));
    prev = rel;
  }
  EXPECT_GT(at_floor, 100);  // jitter larger than the spacing must hold chunks back
  EXPECT_GT(max_extra - TimePoint{}, milliseconds(25));  // the jitter range is used
  TimePoint fin = m.OnEof(kT0 + std::chrono::seconds(1));
  EXPECT_GE(fin, prev);
}

TEST(PipeModelTest, JitterIsReproducibleFromSeed) {
  auto run = [](uint64_t seed) {
    PipeModel m({.delay = milliseconds(1), .jitter = milliseconds(50), .window = kUnlimited},
                nullptr, seed);
    std::vector<TimePoint> out;
    for (int i = 0; i < 100; ++i) out.push_back(m.OnRead(1, kT0 + milliseconds(100 * i)));
    return out;
  };
  EXPECT_EQ(run(3), run(3));
  EXPECT_NE(run(3), run(4));
}

TEST(PipeModelTest, FloorChargesTheHandshake) {
  PipeModel m({.delay = milliseconds(10), .jitter = {}, .window = kUnlimited}, nullptr, 1);
  m.SetReleaseFloor(kT0 + milliseconds(30));  // accept + 3D
  EXPECT_EQ(m.OnRead(1, kT0), kT0 + milliseconds(30));
  EXPECT_EQ(m.OnRead(1, kT0 + milliseconds(25)), kT0 + milliseconds(35));
}

TEST(PipeModelTest, RateCapIsSharedAcrossPipes) {
  Link link(1'000'000);
  PipeModel a({.delay = milliseconds(10), .jitter = {}, .window = kUnlimited}, &link, 1);
  PipeModel b({.delay = milliseconds(10), .jitter = {}, .window = kUnlimited}, &link, 2);
  EXPECT_EQ(a.OnRead(1000, kT0), kT0 + milliseconds(11));
  EXPECT_EQ(b.OnRead(1000, kT0), kT0 + milliseconds(12));  // queued behind a
  EXPECT_EQ(a.OnRead(1000, kT0), kT0 + milliseconds(13));
}

// A discrete-event run of `n` greedy pipes (the source always has data, the
// sink takes bytes the moment they are released) on one link. Returns the
// bytes each pipe delivered in [warmup, warmup + measure).
std::vector<double> SimulateGreedy(int n, const PipeParams& params, uint64_t rate,
                                   uint64_t chunk, Nanos warmup, Nanos measure) {
  Link link(rate);
  struct Sim {
    std::unique_ptr<PipeModel> model;
    std::deque<std::pair<TimePoint, uint64_t>> releases;
    double delivered = 0;
  };
  std::vector<Sim> pipes(n);
  for (int i = 0; i < n; ++i) pipes[i].model = std::make_unique<PipeModel>(params, &link, i + 1);
  const TimePoint start = kT0 + warmup, end = start + measure;
  TimePoint t = kT0;
  while (t < end) {
    for (Sim& p : pipes) {
      while (!p.releases.empty() && p.releases.front().first <= t) {
        p.model->OnDelivered(p.releases.front().second, t);
        if (t >= start) p.delivered += static_cast<double>(p.releases.front().second);
        p.releases.pop_front();
      }
    }
    for (Sim& p : pipes) {
      uint64_t credit = p.model->Credit(t);
      while (credit > 0) {
        uint64_t take = std::min(credit, chunk);
        p.releases.emplace_back(p.model->OnRead(take, t), take);
        credit -= take;
      }
    }
    TimePoint next = TimePoint::max();
    for (Sim& p : pipes) {
      if (!p.releases.empty()) next = std::min(next, p.releases.front().first);
      next = std::min(next, p.model->TimeCreditReaches(1));
    }
    if (next <= t) next = t + Nanos(1);
    t = next;
  }
  std::vector<double> rates;
  const double secs = std::chrono::duration<double>(measure).count();
  for (Sim& p : pipes) rates.push_back(p.delivered / secs);
  return rates;
}

TEST(PipeModelTest, SinglePipeSteadyStateIsWindowOverRtt) {
  for (auto d : {milliseconds(5), milliseconds(25), milliseconds(100)}) {
    const uint64_t w = 4 << 20;
    auto r = SimulateGreedy(1, {.delay = d, .jitter = {}, .window = w}, 0, 256 << 10,
                            10 * 2 * d, 200 * 2 * d);
    const double expect = static_cast<double>(w) / std::chrono::duration<double>(2 * d).count();
    EXPECT_NEAR(r[0], expect, expect * 0.01) << "D=" << d.count();
  }
}

TEST(PipeModelTest, ManyPipesAreCappedByTheSharedRate) {
  const uint64_t w = 1 << 20;
  const auto d = milliseconds(10);
  // 4 pipes could do 4 * W / RTT = 210 MB/s; the link allows 50 MB/s.
  auto r = SimulateGreedy(4, {.delay = d, .jitter = {}, .window = w}, 50'000'000, 64 << 10,
                          milliseconds(500), std::chrono::seconds(20));
  double total = 0;
  for (double x : r) {
    total += x;
    EXPECT_NEAR(x, 12.5e6, 12.5e6 * 0.05);  // FIFO link: fair shares
  }
  EXPECT_NEAR(total, 50e6, 50e6 * 0.01);
  // Below the cap every pipe gets its W / RTT.
  auto r2 = SimulateGreedy(4, {.delay = d, .jitter = {}, .window = w}, 1'000'000'000, 64 << 10,
                           milliseconds(500), std::chrono::seconds(5));
  for (double x : r2) {
    const double expect = static_cast<double>(w) / 0.020;
    // Serialization adds W / R to each round trip: W / (RTT + nW/R) at worst.
    EXPECT_NEAR(x, expect, expect * 0.2);
    EXPECT_LE(x, expect * 1.001);
  }
}

}  // namespace
}  // namespace cqlstream::wan
