// Copyright (c) cqlstream authors.
//
// The proxy over real loopback sockets: latency, jitter without reordering,
// FIN propagation, the W/RTT limit, the rate cap and connect failures. Timing
// tolerances are generous because the machine may be busy.
#include "wan/proxy.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "wan/bulk.h"
#include "wan/proxy_internal.h"

namespace cqlstream::wan {
namespace {

using std::chrono::milliseconds;
using Seconds = std::chrono::duration<double>;

// Both data paths (splice through kernel pipes, copies through user space)
// must behave the same.
class ProxyTest : public ::testing::TestWithParam<bool> {
 protected:
  ProxyOptions Options() const {
    ProxyOptions o;
    o.zero_copy = GetParam();
    // Timers on time on a busy machine (best effort: refused without
    // CAP_SYS_NICE, and then the tolerances below still apply).
    o.realtime_priority = 10;
    return o;
  }
};

std::unique_ptr<Proxy> StartProxy(uint16_t target_port, ProxyOptions o) {
  o.mappings = {MappingSpec{{"127.0.0.1", 0}, {"127.0.0.1", target_port}}};
  auto p = Proxy::Start(o);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? std::move(p).value() : nullptr;
}

int ListenAny(uint16_t* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(::listen(fd, 8), 0);
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

int Connect(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  timeval tv{10, 0};  // no test hangs forever
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

template <typename Pred>
bool WaitFor(Pred pred, double seconds) {
  auto end = std::chrono::steady_clock::now() + Seconds(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return pred();
}

// Accepts one connection on `lfd` and echoes small messages back without
// delay (TCP_NODELAY) until the client's FIN, then closes its side too.
std::thread SmallEcho(int lfd) {
  return std::thread([lfd] {
    int fd = ::accept(lfd, nullptr, nullptr);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    char buf[256];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) ::send(fd, buf, static_cast<size_t>(n), MSG_NOSIGNAL);
    ::close(fd);
  });
}

TEST_P(ProxyTest, DelaysEachDirectionAndChargesTheHandshake) {
  uint16_t port = 0;
  int lfd = ListenAny(&port);
  std::thread echo = SmallEcho(lfd);
  ProxyOptions o = Options();
  o.delay = milliseconds(20);
  auto proxy = StartProxy(port, o);
  ASSERT_NE(proxy, nullptr);

  auto t0 = std::chrono::steady_clock::now();
  int fd = Connect(proxy->listen_endpoints()[0].port);
  char c = 'x';
  ASSERT_EQ(::send(fd, &c, 1, 0), 1);
  ASSERT_EQ(::recv(fd, &c, 1, 0), 1);
  double first = Seconds(std::chrono::steady_clock::now() - t0).count();
  // Handshake (1 RTT) + request (D) + response (D) = 80 ms.
  EXPECT_GE(first, 0.0795);
  EXPECT_LT(first, 0.080 + 1.0);  // late only by scheduling (generous: CI machines are busy)

  std::vector<double> rtts;
  for (int i = 0; i < 7; ++i) {
    auto t = std::chrono::steady_clock::now();
    ASSERT_EQ(::send(fd, &c, 1, 0), 1);
    ASSERT_EQ(::recv(fd, &c, 1, 0), 1);
    rtts.push_back(Seconds(std::chrono::steady_clock::now() - t).count());
    EXPECT_GE(rtts.back(), 0.0399) << i;  // never early
  }
  // Rarely late: the median ignores a scheduling hiccup on a busy machine
  // (how late is measured by cqlstream-wan-validate, not asserted here).
  std::sort(rtts.begin(), rtts.end());
  EXPECT_LT(rtts[rtts.size() / 2], 0.040 + 0.5);
  // Our FIN reaches the server D later; its close comes back D after that.
  auto t = std::chrono::steady_clock::now();
  ::shutdown(fd, SHUT_WR);
  EXPECT_EQ(::recv(fd, &c, 1, 0), 0);
  EXPECT_GE(Seconds(std::chrono::steady_clock::now() - t).count(), 0.0399);
  ::close(fd);
  echo.join();
  ::close(lfd);
  auto stats = proxy->Stats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].accepted, 1u);
  EXPECT_EQ(stats[0].bytes_up, 8u);
  EXPECT_EQ(stats[0].bytes_down, 8u);
  // Every timed byte is counted once in the lateness buckets.
  uint64_t late_counted = 0;
  for (uint64_t b : stats[0].late_bytes) late_counted += b;
  EXPECT_EQ(late_counted, 16u);
  EXPECT_TRUE(WaitFor([&] { return proxy->Stats()[0].active == 0; }, 2));
}

TEST_P(ProxyTest, TheRoundTripChangesForAnOpenConnection) {
  uint16_t port = 0;
  int lfd = ListenAny(&port);
  std::thread echo = SmallEcho(lfd);
  ProxyOptions o = Options();
  o.delay = milliseconds(5);
  o.change_after = milliseconds(400);
  o.changed_delay = milliseconds(40);
  auto proxy = StartProxy(port, o);
  ASSERT_NE(proxy, nullptr);
  const auto started = std::chrono::steady_clock::now();
  int fd = Connect(proxy->listen_endpoints()[0].port);
  char c = 'x';
  auto rtt = [&] {
    auto t = std::chrono::steady_clock::now();
    EXPECT_EQ(::send(fd, &c, 1, 0), 1);
    EXPECT_EQ(::recv(fd, &c, 1, 0), 1);
    return Seconds(std::chrono::steady_clock::now() - t).count();
  };
  (void)rtt();  // the handshake's
  // Round trips before the change, then after it (a margin either side:
  // only the lower bounds are asserted, as late is a busy machine's doing).
  std::vector<double> before, after;
  while (std::chrono::steady_clock::now() - started < milliseconds(200)) before.push_back(rtt());
  std::this_thread::sleep_until(started + milliseconds(500));
  for (int i = 0; i < 3; ++i) after.push_back(rtt());
  std::printf("round trips before the change: %zu, lowest %.1f ms; after: lowest %.1f ms\n", before.size(),
              *std::min_element(before.begin(), before.end()) * 1e3,
              *std::min_element(after.begin(), after.end()) * 1e3);
  ASSERT_FALSE(before.empty());
  EXPECT_GE(*std::min_element(before.begin(), before.end()), 0.0099);  // never early
  EXPECT_LT(*std::min_element(before.begin(), before.end()), 0.040);   // not yet the new one
  EXPECT_GE(*std::min_element(after.begin(), after.end()), 0.0799);    // the new round trip, never early
  ::shutdown(fd, SHUT_WR);
  EXPECT_EQ(::recv(fd, &c, 1, 0), 0);
  ::close(fd);
  echo.join();
  ::close(lfd);
}

TEST(TimerGridTest, RoundsUpToOnePercentOfTheDelayAtMostAMillisecond) {
  using proxy_internal::OnTimerGrid;
  using proxy_internal::TimerGrid;
  using std::chrono::microseconds;
  EXPECT_EQ(TimerGrid(milliseconds(0)), Nanos{0});
  EXPECT_EQ(TimerGrid(milliseconds(5)), microseconds(50));
  EXPECT_EQ(TimerGrid(milliseconds(50)), microseconds(500));
  EXPECT_EQ(TimerGrid(milliseconds(100)), milliseconds(1));
  EXPECT_EQ(TimerGrid(milliseconds(1000)), milliseconds(1));
  const TimePoint on(milliseconds(7000));
  EXPECT_EQ(OnTimerGrid(on, milliseconds(1)), on);  // on the grid: unchanged
  EXPECT_EQ(OnTimerGrid(on + microseconds(1), milliseconds(1)), on + milliseconds(1));
  EXPECT_EQ(OnTimerGrid(on + microseconds(999), milliseconds(1)), on + milliseconds(1));
  EXPECT_EQ(OnTimerGrid(on + microseconds(1), Nanos{0}), on + microseconds(1));  // no grid
  // Events due at about the same time share one wake-up, none is early.
  for (int us = 1; us <= 1000; us += 37) {
    const TimePoint t = on + microseconds(us);
    EXPECT_EQ(OnTimerGrid(t, milliseconds(1)), on + milliseconds(1));
    EXPECT_GE(OnTimerGrid(t, milliseconds(1)), t);
  }
  EXPECT_EQ(OnTimerGrid(TimePoint::min(), milliseconds(1)), TimePoint::min());
}

TEST(MappingStatsTest, LateQuantilesAreBucketBounds) {
  MappingStats s;
  EXPECT_EQ(s.LateQuantileMs(0.99), 0);  // nothing timed
  s.late_bytes[0] = 90;                  // <= 1 ms
  s.late_bytes[2] = 9;                   // <= 5 ms
  s.late_bytes[kLateBuckets - 1] = 1;    // > 100 ms
  EXPECT_EQ(s.LateQuantileMs(0.5), 1);
  EXPECT_EQ(s.LateQuantileMs(0.9), 1);
  EXPECT_EQ(s.LateQuantileMs(0.95), 5);
  EXPECT_EQ(s.LateQuantileMs(0.99), 5);
  EXPECT_TRUE(std::isinf(s.LateQuantileMs(0.999)));
}

TEST_P(ProxyTest, JitterKeepsEveryByteInOrderAndPassesTheFin) {
  constexpr uint64_t kBytes = 24 << 20;
  auto src = BulkSource::Start(kBytes);
  ASSERT_TRUE(src.ok());
  ProxyOptions o = Options();
  o.delay = milliseconds(2);
  o.jitter = milliseconds(4);
  o.window_bytes = 3 << 20;  // several kernel pipes per direction
  o.read_chunk = 64 << 10;  // many chunks, many chances to reorder
  auto proxy = StartProxy((*src)->port(), o);
  ASSERT_NE(proxy, nullptr);
  auto sink = BulkSink::Start("127.0.0.1", proxy->listen_endpoints()[0].port, 2, /*verify=*/true);
  ASSERT_TRUE(sink.ok());
  EXPECT_TRUE(WaitFor([&] { return (*sink)->eofs() == 2; }, 30));
  EXPECT_EQ((*sink)->bytes(), 2 * kBytes);
  EXPECT_EQ((*sink)->errors(), 0);
  EXPECT_TRUE((*sink)->verify_status().ok()) << (*sink)->verify_status().ToString();
  EXPECT_EQ(proxy->Stats()[0].bytes_down, 2 * kBytes);
}

// Zero delay: the pass-through, the timed splice path and the timed copy
// path must all forward every byte in order and pass the FIN on.
enum class ZeroDelayPath { kPassThrough, kTimedSplice, kTimedCopy };
class ZeroDelayTest : public ::testing::TestWithParam<ZeroDelayPath> {
 protected:
  ProxyOptions Options() const {
    ProxyOptions o;
    o.zero_copy = GetParam() != ZeroDelayPath::kTimedCopy;
    o.force_timed = GetParam() == ZeroDelayPath::kTimedSplice;
    return o;
  }
};

TEST_P(ZeroDelayTest, ForwardsEveryByteAndTheFin) {
  constexpr uint64_t kBytes = 40 << 20;
  auto src = BulkSource::Start(kBytes);
  ASSERT_TRUE(src.ok());
  ProxyOptions o = Options();
  o.window_bytes = 1 << 20;
  auto proxy = StartProxy((*src)->port(), o);
  ASSERT_NE(proxy, nullptr);
  auto sink = BulkSink::Start("127.0.0.1", proxy->listen_endpoints()[0].port, 3, /*verify=*/true);
  ASSERT_TRUE(sink.ok());
  EXPECT_TRUE(WaitFor([&] { return (*sink)->eofs() == 3; }, 30));
  EXPECT_EQ((*sink)->bytes(), 3 * kBytes);
  EXPECT_TRUE((*sink)->verify_status().ok()) << (*sink)->verify_status().ToString();
  EXPECT_EQ(proxy->Stats()[0].bytes_down, 3 * kBytes);
}

TEST_P(ZeroDelayTest, EchoesAndPassesTheClientFin) {
  uint16_t port = 0;
  int lfd = ListenAny(&port);
  std::thread echo([lfd] {
    int fd = ::accept(lfd, nullptr, nullptr);
    std::vector<char> buf(1 << 16);
    ssize_t n;
    while ((n = ::recv(fd, buf.data(), buf.size(), 0)) > 0) {
      ::send(fd, buf.data(), static_cast<size_t>(n), MSG_NOSIGNAL);
    }
    ::close(fd);
  });
  auto proxy = StartProxy(port, Options());
  ASSERT_NE(proxy, nullptr);
  int fd = Connect(proxy->listen_endpoints()[0].port);
  std::string sent;
  for (int i = 0; i < 1000; ++i) sent += "message " + std::to_string(i) + ";";
  ASSERT_EQ(::send(fd, sent.data(), sent.size(), 0), static_cast<ssize_t>(sent.size()));
  ::shutdown(fd, SHUT_WR);
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) got.append(buf, static_cast<size_t>(n));
  EXPECT_EQ(n, 0);  // orderly EOF once the server closed
  EXPECT_EQ(got, sent);
  ::close(fd);
  echo.join();
  ::close(lfd);
  EXPECT_TRUE(WaitFor([&] { return proxy->Stats()[0].active == 0; }, 2));
}

// Writing into a socket whose peer is gone raises SIGPIPE for splice(2)
// (which has no MSG_NOSIGNAL); this process does not ignore SIGPIPE, so the
// proxy must keep it from killing us.
TEST_P(ZeroDelayTest, ClientsVanishingMidStreamDoNotKillTheProcess) {
  auto src = BulkSource::Start();
  ASSERT_TRUE(src.ok());
  auto proxy = StartProxy((*src)->port(), Options());
  ASSERT_NE(proxy, nullptr);
  for (int i = 0; i < 20; ++i) {
    auto sink = BulkSink::Start("127.0.0.1", proxy->listen_endpoints()[0].port, 2, false);
    ASSERT_TRUE(sink.ok());
    ASSERT_TRUE(WaitFor([&] { return (*sink)->bytes() > (1u << 20); }, 10));
    (*sink)->Stop();  // closes with unread data: the proxy's next writes fail
  }
  EXPECT_TRUE(WaitFor([&] { return proxy->Stats()[0].active == 0; }, 5));
  EXPECT_EQ(proxy->Stats()[0].accepted, 40u);
}

INSTANTIATE_TEST_SUITE_P(Paths, ProxyTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Splice" : "Copy"; });

INSTANTIATE_TEST_SUITE_P(Paths, ZeroDelayTest,
                         ::testing::Values(ZeroDelayPath::kPassThrough, ZeroDelayPath::kTimedSplice,
                                           ZeroDelayPath::kTimedCopy),
                         [](const auto& info) {
                           switch (info.param) {
                             case ZeroDelayPath::kPassThrough: return "PassThrough";
                             case ZeroDelayPath::kTimedSplice: return "TimedSplice";
                             case ZeroDelayPath::kTimedCopy: return "TimedCopy";
                           }
                           return "Unknown";
                         });

// The sink's bytes per second from `start` (taken before the sink
// connected) until `seconds` later: an upper bound that holds however the
// proxy's threads are scheduled. (A rate over a later window does not: a
// proxy starved of CPU before the window delivers its backlog inside it.)
double RateSince(BulkSink& sink, std::chrono::steady_clock::time_point start, double seconds) {
  std::this_thread::sleep_for(Seconds(seconds) - (std::chrono::steady_clock::now() - start));
  const uint64_t bytes = sink.bytes();
  return static_cast<double>(bytes) / Seconds(std::chrono::steady_clock::now() - start).count();
}

TEST_P(ProxyTest, OneConnectionMovesWindowPerRtt) {
  auto src = BulkSource::Start();
  ASSERT_TRUE(src.ok());
  ProxyOptions o = Options();
  o.delay = milliseconds(25);
  o.window_bytes = 256 << 10;
  auto proxy = StartProxy((*src)->port(), o);
  ASSERT_NE(proxy, nullptr);
  const auto start = std::chrono::steady_clock::now();
  auto sink = BulkSink::Start("127.0.0.1", proxy->listen_endpoints()[0].port, 1, false);
  ASSERT_TRUE(sink.ok());
  const double expect = (256 << 10) / 0.050;  // 5.24 MB/s
  // 26 RTTs: at most 27 windows (the first goes out at once), within 10%.
  double rate = RateSince(**sink, start, 1.3);
  // The window must never let more through than W per RTT. (That it lets
  // close to that through is a performance property, which a loaded CI
  // machine cannot promise: cqlstream-wan-validate measures it.)
  EXPECT_LE(rate, expect * 1.10);
  EXPECT_GT(rate, 0.0);
}

TEST_P(ProxyTest, RateCapIsSharedByConnections) {
  auto src = BulkSource::Start();
  ASSERT_TRUE(src.ok());
  ProxyOptions o = Options();
  o.delay = milliseconds(1);
  o.window_bytes = 0;  // unlimited: only the link limits
  o.rate_bytes_per_sec = 10'000'000;
  auto proxy = StartProxy((*src)->port(), o);
  ASSERT_NE(proxy, nullptr);
  const auto start = std::chrono::steady_clock::now();
  auto sink = BulkSink::Start("127.0.0.1", proxy->listen_endpoints()[0].port, 3, false);
  ASSERT_TRUE(sink.ok());
  double rate = RateSince(**sink, start, 1.3);
  // Shared by all connections: never above the cap (closeness to the cap is
  // measured by cqlstream-wan-validate, not here).
  EXPECT_LE(rate, 10e6 * 1.10);
  EXPECT_GT(rate, 0.0);
}

TEST_P(ProxyTest, UnreachableTargetClosesTheClient) {
  uint16_t dead_port = 0;
  ::close(ListenAny(&dead_port));  // nothing listens there any more
  auto proxy = StartProxy(dead_port, Options());
  ASSERT_NE(proxy, nullptr);
  int fd = Connect(proxy->listen_endpoints()[0].port);
  char c;
  EXPECT_LE(::recv(fd, &c, 1, 0), 0);  // EOF or reset, not a hang
  ::close(fd);
  EXPECT_TRUE(WaitFor([&] { return proxy->Stats()[0].connect_failures == 1; }, 2));
}

TEST(ProxyOptionsTest, RejectsBadOptions) {
  ProxyOptions o;
  EXPECT_FALSE(Proxy::Start(o).ok());  // no mapping
  o.mappings = {MappingSpec{{"not-an-ip", 0}, {"127.0.0.1", 1}}};
  EXPECT_FALSE(Proxy::Start(o).ok());
  o.mappings = {MappingSpec{{"127.0.0.1", 0}, {"127.0.0.1", 1}}};
  o.threads = 0;
  EXPECT_FALSE(Proxy::Start(o).ok());
  o.threads = 1;
  o.realtime_priority = 100;
  EXPECT_FALSE(Proxy::Start(o).ok());
  o.realtime_priority = 0;
  o.change_after = std::chrono::milliseconds(-1);
  EXPECT_FALSE(Proxy::Start(o).ok());
}

}  // namespace
}  // namespace cqlstream::wan
