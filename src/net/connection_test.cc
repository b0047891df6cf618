// Copyright (c) cqlstream authors.
//
// Connection and session behaviour that a real node cannot show on demand:
// stream ids under timeouts, backpressure, broken streams, authentication
// exchanges, and ScyllaDB shard awareness (protocol level, against the
// in-process fake server).
#include "net/connection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <thread>
#include <vector>

#include "cql/frame_decoder_harness.h"
#include "net/fake_server_test_util.h"
#include "net/io_pool.h"
#include "net/routing/murmur3.h"
#include "net/routing/sharding.h"
#include "net/session.h"

namespace cqlstream::net {
namespace {

using testing::FakeServer;
using testing::Frame;
using namespace std::chrono_literals;

cql::Bytes SetKeyspaceBody(const std::string& ks) {
  cql::Bytes b;
  cql::Writer w(&b);
  w.Int(0x0003);
  w.String(ks);
  return b;
}

class ConnectionTest : public ::testing::Test {
 protected:
  std::shared_ptr<Connection> Open(FakeServer& srv, int max_streams = cql::kMaxStreams,
                                   uint32_t max_frame = cql::kMaxBodySize) {
    Connection::Options o;
    o.transport.host = "127.0.0.1";
    o.transport.port = srv.port();
    o.transport.connect_timeout = 2000ms;
    o.max_streams = max_streams;
    o.max_frame_bytes = max_frame;
    std::promise<StatusOr<std::shared_ptr<Connection>>> p;
    Connection::Open(io_.Next(), o, [&](StatusOr<std::shared_ptr<Connection>> c) { p.set_value(std::move(c)); });
    auto c = p.get_future().get();
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? *c : nullptr;
  }
  static std::future<StatusOr<Reply>> Query(Connection& c, const std::string& q, std::chrono::milliseconds t = 2000ms) {
    auto p = std::make_shared<std::promise<StatusOr<Reply>>>();
    auto f = p->get_future();
    auto frame = cql::EncodeQuery(q, cql::QueryParameters{});
    c.Send(std::move(*frame), nullptr, t, [p](StatusOr<Reply> r) { p->set_value(std::move(r)); });
    return f;
  }
  // Requests of `kind` seen by the server whose query is `q`.
  static std::vector<testing::Request> Seen(FakeServer& s, const std::string& q) {
    std::vector<testing::Request> out;
    for (auto& r : s.requests()) {
      if (r.query == q) out.push_back(r);
    }
    return out;
  }
  // Whether `f` became true within 10 s (generous: sanitizer builds on a
  // loaded machine are slow); callers assert it.
  [[nodiscard]] static bool WaitFor(const std::function<bool()>& f) {
    for (int i = 0; i < 2000; ++i) {
      if (f()) return true;
      std::this_thread::sleep_for(5ms);
    }
    return f();
  }
  IoPool io_{1};
};

TEST_F(ConnectionTest, AnswersAreMatchedByStreamIdInAnyOrder) {
  FakeServer srv;
  srv.SetHandler([](const testing::Request&) { return std::nullopt; });  // answer later, by hand
  auto c = Open(srv);
  ASSERT_NE(c, nullptr);
  auto a = Query(*c, "A"), b = Query(*c, "B"), d = Query(*c, "C");
  ASSERT_TRUE(WaitFor([&] { return Seen(srv, "C").size() == 1; }));
  ASSERT_EQ(Seen(srv, "A").size(), 1u);
  // Answer in reverse order; each answer names its request.
  for (const char* q : {"C", "B", "A"}) {
    auto r = Seen(srv, q)[0];
    srv.Send(r.connection, Frame(cql::Opcode::kResult, r.header.stream, SetKeyspaceBody(q)));
  }
  std::vector<std::pair<std::future<StatusOr<Reply>>*, std::string>> expect = {{&a, "A"}, {&b, "B"}, {&d, "C"}};
  for (auto& [f, want] : expect) {
    auto r = f->get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    auto* res = std::get_if<cql::Result>(&r->response->message);
    ASSERT_NE(res, nullptr);
    EXPECT_EQ(std::get<cql::ResultSetKeyspace>(*res).keyspace, want);
  }
}

TEST_F(ConnectionTest, TimedOutStreamIdIsRetiredUntilItsLateAnswer) {
  FakeServer srv;
  srv.SetHandler([](const testing::Request& r) -> std::optional<cql::Bytes> {
    if (r.query == "B" || r.query == "C") return Frame(cql::Opcode::kResult, r.header.stream, SetKeyspaceBody(r.query));
    return std::nullopt;  // "A" is slow
  });
  auto c = Open(srv, /*max_streams=*/2);
  ASSERT_NE(c, nullptr);
  // A's timeout leaves room for C's round trip on a slow (sanitizer) build:
  // if nothing at all were read before it fires, the connection would close.
  auto a = Query(*c, "A", 1000ms);
  // Other answers keep arriving after A was sent, so the connection is alive
  // (a connection that hears nothing at all is closed instead: see below).
  ASSERT_TRUE(Query(*c, "C").get().ok());
  auto ra = a.get();
  ASSERT_FALSE(ra.ok());
  EXPECT_TRUE(ra.status().IsTimeout()) << ra.status().ToString();
  const int16_t a_stream = Seen(srv, "A")[0].header.stream;
  // The next request must not get A's stream id.
  auto rb = Query(*c, "B").get();
  ASSERT_TRUE(rb.ok()) << rb.status().ToString();
  EXPECT_NE(Seen(srv, "B")[0].header.stream, a_stream);
  // A's late answer arrives (with a misleading body): it is dropped, not
  // delivered to anyone, and the id becomes usable again.
  auto late = Seen(srv, "A")[0];
  srv.Send(late.connection, Frame(cql::Opcode::kResult, late.header.stream, SetKeyspaceBody("LATE")));
  ASSERT_TRUE(WaitFor([&] { return c->load() == 0; })) << "the late answer frees the retired id";
  // Free ids are taken oldest first: the other id (freed before A's) comes
  // first, then A's.
  for (int i = 0; i < 2; ++i) {
    auto rc = Query(*c, "C").get();
    ASSERT_TRUE(rc.ok()) << rc.status().ToString();
    EXPECT_EQ(std::get<cql::ResultSetKeyspace>(std::get<cql::Result>(rc->response->message)).keyspace, "C");
    EXPECT_EQ(Seen(srv, "C").back().header.stream == a_stream, i == 1) << "request " << i;
  }
  EXPECT_FALSE(c->closed());
  EXPECT_EQ(c->stats().timeouts, 1u);
}

TEST_F(ConnectionTest, RequestsOfManyTimeoutsExpireEarliestDeadlineFirst) {
  FakeServer srv;
  srv.SetHandler([](const testing::Request& r) -> std::optional<cql::Bytes> {
    if (r.query == "FAST") return Frame(cql::Opcode::kResult, r.header.stream, SetKeyspaceBody(r.query));
    return std::nullopt;  // "LONG" and "SHORT" are answered by hand, or never
  });
  auto c = Open(srv);
  ASSERT_NE(c, nullptr);
  // Past the handshake's deadlines (Open's 2 s connect timeout), whose
  // timer would otherwise cut SHORT's wait short by chance.
  std::this_thread::sleep_for(2100ms);
  // The long timeout first, then a shorter one: the later request's deadline
  // is the earlier one. SHORT is sent once LONG is out (its timer armed), so
  // that SHORT's earlier deadline has to move the armed timer.
  auto long_wait = Query(*c, "LONG", 6000ms);
  ASSERT_TRUE(WaitFor([&] { return Seen(srv, "LONG").size() == 1; }));
  const auto short_sent = std::chrono::steady_clock::now();
  auto short_wait = Query(*c, "SHORT", 1000ms);
  // Answered requests, each with a timeout of its own: their deadlines are
  // left behind (some before SHORT's, some after), and none of them may time
  // out or hide the pending ones'. Their answers also keep the connection
  // alive (one that hears nothing at all is closed instead).
  for (int i = 0; i < 20; ++i) {
    auto r = Query(*c, "FAST", std::chrono::milliseconds(900 + 7 * i)).get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  auto rs = short_wait.get();
  const auto short_waited = std::chrono::steady_clock::now() - short_sent;
  ASSERT_FALSE(rs.ok());
  EXPECT_TRUE(rs.status().IsTimeout()) << rs.status().ToString();
  EXPECT_NE(rs.status().message().find("within 1000 ms"), std::string::npos) << rs.status().ToString();
  // At its own deadline, not LONG's (6 s): generous for a slow build.
  EXPECT_LT(short_waited, 4000ms);
  // The longer deadline is still ahead: its request waits on, and its
  // answer reaches it.
  EXPECT_EQ(long_wait.wait_for(0ms), std::future_status::timeout);
  EXPECT_EQ(c->stats().timeouts, 1u);
  auto r = Seen(srv, "LONG")[0];
  srv.Send(r.connection, Frame(cql::Opcode::kResult, r.header.stream, SetKeyspaceBody("LONG")));
  auto rl = long_wait.get();
  ASSERT_TRUE(rl.ok()) << rl.status().ToString();
  EXPECT_EQ(c->stats().timeouts, 1u);
  EXPECT_FALSE(c->closed());
}

TEST_F(ConnectionTest, AnsweredRequestsDeadlinesAreDroppedWithoutLosingPendingOnes) {
  FakeServer srv;
  srv.SetHandler([](const testing::Request& r) -> std::optional<cql::Bytes> {
    if (r.query == "FAST") return Frame(cql::Opcode::kResult, r.header.stream, SetKeyspaceBody(r.query));
    return std::nullopt;  // "SHORT" and "LONG" are never answered
  });
  auto c = Open(srv);
  ASSERT_NE(c, nullptr);
  auto short_wait = Query(*c, "SHORT", 2500ms);
  auto long_wait = Query(*c, "LONG", 4000ms);
  // 300 answered requests whose deadlines lie behind SHORT's, in rounds of
  // 50 at once (quick even on a slow build): the timer armed for SHORT keeps
  // their entries until the heap's compaction drops them (at 128 entries,
  // more than once here), which must keep SHORT's and LONG's.
  for (int round = 0; round < 6; ++round) {
    std::vector<std::future<StatusOr<Reply>>> fast;
    for (int i = 0; i < 50; ++i) fast.push_back(Query(*c, "FAST", 20000ms));
    for (auto& f : fast) {
      auto r = f.get();
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    }
  }
  // The compactions ran while both were pending.
  ASSERT_EQ(short_wait.wait_for(0ms), std::future_status::timeout) << "300 answers took longer than 2.5 s";
  ASSERT_EQ(short_wait.wait_for(10s), std::future_status::ready) << "SHORT's deadline was lost";
  auto rs = short_wait.get();
  ASSERT_FALSE(rs.ok());
  EXPECT_NE(rs.status().message().find("within 2500 ms"), std::string::npos) << rs.status().ToString();
  ASSERT_EQ(long_wait.wait_for(10s), std::future_status::ready) << "LONG's deadline was lost";
  auto rl = long_wait.get();
  ASSERT_FALSE(rl.ok());
  EXPECT_NE(rl.status().message().find("within 4000 ms"), std::string::npos) << rl.status().ToString();
  EXPECT_EQ(c->stats().timeouts, 2u);
  EXPECT_FALSE(c->closed());
}

TEST_F(ConnectionTest, AnAnswerRepeatedLaterMeetsAFreeIdNotTheNextRequest) {
  // A peer that repeats an answer after the request that followed it was
  // sent: the next request got another id (free ids are taken oldest first),
  // so the repeat names an id with no request, a protocol error that closes
  // the connection, and the next request never receives the stale answer.
  FakeServer srv;
  srv.SetHandler([](const testing::Request& r) -> std::optional<cql::Bytes> {
    if (r.query == "FIRST") return Frame(cql::Opcode::kResult, r.header.stream, SetKeyspaceBody("FIRST"));
    return std::nullopt;  // "NEXT" waits
  });
  auto c = Open(srv);
  ASSERT_NE(c, nullptr);
  auto first = Query(*c, "FIRST").get();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto next = Query(*c, "NEXT");
  ASSERT_TRUE(WaitFor([&] { return Seen(srv, "NEXT").size() == 1; }));
  const auto f = Seen(srv, "FIRST")[0];
  EXPECT_NE(Seen(srv, "NEXT")[0].header.stream, f.header.stream);
  srv.Send(f.connection, Frame(cql::Opcode::kResult, f.header.stream, SetKeyspaceBody("FIRST")));
  auto r = next.get();
  ASSERT_FALSE(r.ok()) << "the next request must not be answered with the repeat";
  EXPECT_TRUE(r.status().IsConnectionLost()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("which has no request"), std::string::npos) << r.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return c->closed(); }));
}

TEST_F(ConnectionTest, ASharedFrameIsSentManyTimesOnOwnStreamsAndNeverModified) {
  // The attempts and hedges of one execution send one shared frame: each send
  // gets its own stream id in its own header, and the shared bytes keep id 0.
  // The server holds its answers until all four sends are on the wire: an
  // answer frees its stream id, so an early one would let a later send reuse it.
  FakeServer srv;
  srv.SetHandler([](const testing::Request& r) -> std::optional<cql::Bytes> {
    if (r.query == "SHARED") return std::nullopt;
    return Frame(cql::Opcode::kResult, r.header.stream, SetKeyspaceBody(r.query));
  });
  auto c1 = Open(srv), c2 = Open(srv);
  ASSERT_NE(c1, nullptr);
  ASSERT_NE(c2, nullptr);
  auto frame = cql::EncodeQuery("SHARED", cql::QueryParameters{});
  ASSERT_TRUE(frame.ok());
  const cql::Bytes original = frame->bytes;
  auto shared = std::make_shared<const cql::RequestFrame>(std::move(*frame));
  std::vector<std::future<StatusOr<Reply>>> replies;
  for (Connection* c : {c1.get(), c1.get(), c1.get(), c2.get()}) {
    auto p = std::make_shared<std::promise<StatusOr<Reply>>>();
    replies.push_back(p->get_future());
    c->Send(shared, nullptr, 2000ms, [p](StatusOr<Reply> r) { p->set_value(std::move(r)); });
  }
  ASSERT_TRUE(WaitFor([&] { return Seen(srv, "SHARED").size() == 4u; }));
  for (const auto& r : Seen(srv, "SHARED")) {
    srv.Send(r.connection, Frame(cql::Opcode::kResult, r.header.stream, SetKeyspaceBody(r.query)));
  }
  for (auto& f : replies) {
    auto r = f.get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(std::get<cql::ResultSetKeyspace>(std::get<cql::Result>(r->response->message)).keyspace, "SHARED");
  }
  const auto seen = Seen(srv, "SHARED");
  ASSERT_EQ(seen.size(), 4u);
  std::set<std::pair<int, int16_t>> streams;
  for (const auto& r : seen) streams.emplace(r.connection, r.header.stream);
  EXPECT_EQ(streams.size(), 4u) << "each send has its own stream on its connection";
  EXPECT_EQ(shared->bytes, original) << "the shared frame is never patched";
  // A frame without a header is refused without being sent.
  auto p = std::make_shared<std::promise<StatusOr<Reply>>>();
  auto bad = p->get_future();
  c1->Send(std::make_shared<const cql::RequestFrame>(cql::RequestFrame{cql::Opcode::kQuery, cql::Bytes{0x04, 0}, {}}),
           nullptr, 2000ms,
           [p](StatusOr<Reply> r) { p->set_value(std::move(r)); });
  auto rb = bad.get();
  ASSERT_FALSE(rb.ok());
  EXPECT_EQ(rb.status().code(), Status::Code::kInternal) << rb.status().ToString();
  EXPECT_NE(rb.status().message().find("has no header"), std::string::npos) << rb.status().ToString();
  EXPECT_EQ(c1->in_flight(), 0);
  ASSERT_TRUE(Query(*c1, "AFTER").get().ok()) << "the connection still works";
}

TEST_F(ConnectionTest, SplicedBlobsReachTheServerAsTheFlatFrameAndAreLetGoOnceWritten) {
  // Frames with splices, large (written from the blob where it lies) and
  // small (copied whole), between plain frames: the server sees each body as
  // its flat encoding; the connection holds a blob no longer than its frame.
  FakeServer srv;
  srv.SetHandler([](const testing::Request& r) -> std::optional<cql::Bytes> {
    return Frame(cql::Opcode::kResult, r.header.stream, SetKeyspaceBody(r.query));
  });
  auto c = Open(srv);
  ASSERT_NE(c, nullptr);
  auto blob = std::make_shared<cql::Bytes>(3 * cql::kSplicedBlobBytes);
  for (size_t i = 0; i < blob->size(); ++i) (*blob)[i] = static_cast<uint8_t>(i * 13);
  std::weak_ptr<const cql::Bytes> watch = blob;
  cql::QueryParameters p;
  p.values = {Value::Int(1), Value::Shared(*blob, blob), Value::Int(2)};
  auto large = cql::EncodeQuery("LARGE", p);
  ASSERT_TRUE(large.ok());
  ASSERT_EQ(large->splices.size(), 1u);
  const cql::Bytes large_flat = large->Flatten();
  // A small frame with a splice: a 100-byte blob cut out of its encoding.
  p.values = {Value::Ref(std::span<const uint8_t>(*blob).first(100))};
  auto small = cql::EncodeQuery("SMALL", p);
  ASSERT_TRUE(small.ok());
  const cql::Bytes small_flat = small->bytes;
  const size_t cut = small->bytes.size() - 100;  // the blob is the last thing in the body
  ASSERT_TRUE(std::equal(blob->begin(), blob->begin() + 100, small_flat.begin() + static_cast<std::ptrdiff_t>(cut)));
  small->bytes.erase(small->bytes.begin() + static_cast<std::ptrdiff_t>(cut),
                     small->bytes.begin() + static_cast<std::ptrdiff_t>(cut + 100));
  small->splices.push_back(cql::Splice{cut, std::span<const uint8_t>(*blob).first(100), blob});
  ASSERT_EQ(small->Flatten(), small_flat);
  blob.reset();
  auto shared = std::make_shared<const cql::RequestFrame>(std::move(*large));
  std::vector<std::future<StatusOr<Reply>>> replies;
  auto send = [&](std::shared_ptr<const cql::RequestFrame> f) {
    auto pr = std::make_shared<std::promise<StatusOr<Reply>>>();
    replies.push_back(pr->get_future());
    c->Send(std::move(f), nullptr, 10000ms, [pr](StatusOr<Reply> r) { pr->set_value(std::move(r)); });
  };
  replies.push_back(Query(*c, "PLAIN", 10000ms));
  send(shared);
  send(std::make_shared<const cql::RequestFrame>(std::move(*small)));
  send(shared);
  replies.push_back(Query(*c, "PLAIN", 10000ms));
  for (auto& f : replies) {
    auto r = f.get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  const auto want = [](const cql::Bytes& flat) { return cql::Bytes(flat.begin() + cql::kHeaderSize, flat.end()); };
  ASSERT_EQ(Seen(srv, "LARGE").size(), 2u);
  for (const auto& r : Seen(srv, "LARGE")) {
    EXPECT_EQ(r.header.length, large_flat.size() - cql::kHeaderSize);
    EXPECT_EQ(r.body, want(large_flat));
  }
  ASSERT_EQ(Seen(srv, "SMALL").size(), 1u);
  EXPECT_EQ(Seen(srv, "SMALL")[0].body, want(small_flat));
  EXPECT_EQ(Seen(srv, "PLAIN").size(), 2u);
  shared.reset();
  EXPECT_TRUE(WaitFor([&] { return watch.expired(); })) << "every write is done: nothing holds the blob";
}

TEST_F(ConnectionTest, StartupGoesOutWithOptionsAndWaitsForSupported) {
  // A new connection sends STARTUP without waiting for SUPPORTED (one round
  // trip less before it carries data). This server answers OPTIONS only
  // after it has read STARTUP, and then after READY: the connection opens,
  // and with the server's SUPPORTED options.
  FakeServer srv;
  srv.SetHoldSupportedUntilStartup(true);
  srv.SetSupported({{"SCYLLA_SHARD", {"3"}}});
  srv.SetHandler([](const testing::Request& r) -> std::optional<cql::Bytes> {
    return Frame(cql::Opcode::kResult, r.header.stream, SetKeyspaceBody(r.query));
  });
  auto c = Open(srv);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->supported().count("SCYLLA_SHARD"), 1u) << "SUPPORTED arrived after READY and still counts";
  EXPECT_EQ(c->supported().at("SCYLLA_SHARD"), std::vector<std::string>{"3"});
  const auto seen = srv.requests();
  ASSERT_GE(seen.size(), 2u);
  EXPECT_EQ(seen[0].header.opcode, cql::Opcode::kOptions);
  EXPECT_EQ(seen[1].header.opcode, cql::Opcode::kStartup);
  auto r = Query(*c, "AFTER").get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(std::get<cql::ResultSetKeyspace>(std::get<cql::Result>(r->response->message)).keyspace, "AFTER");
}

TEST_F(ConnectionTest, AHandshakeThatFailsTwiceReportsOnce) {
  // OPTIONS and STARTUP are both pending when the server hangs up: both
  // fail, and Open's callback hears one error (OPTIONS'; STARTUP's answer
  // waits behind it and is dropped).
  FakeServer srv;
  srv.SetMaxConnections(0);
  Connection::Options o;
  o.transport.host = "127.0.0.1";
  o.transport.port = srv.port();
  o.transport.connect_timeout = 2000ms;
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto first = std::make_shared<std::promise<Status>>();
  Connection::Open(io_.Next(), o, [calls, first](StatusOr<std::shared_ptr<Connection>> c) {
    if (calls->fetch_add(1) == 0) first->set_value(c.status());
  });
  const Status st = first->get_future().get();
  EXPECT_FALSE(st.ok());
  // Give a second call time to happen (the second failure follows the
  // first on the same I/O thread, at once).
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(calls->load(), 1) << st.ToString();
}

TEST_F(ConnectionTest, RequestsWaitForAFreeStreamIdInOrder) {
  FakeServer srv;
  srv.SetHandler([](const testing::Request&) { return std::nullopt; });
  auto c = Open(srv, /*max_streams=*/4);
  ASSERT_NE(c, nullptr);
  std::vector<std::future<StatusOr<Reply>>> fs;
  // A request's timeout counts from its submission, waiting included: ten
  // serial round trips on a slow build get room.
  for (int i = 0; i < 10; ++i) fs.push_back(Query(*c, "Q" + std::to_string(i), 20000ms));
  auto seen = [&] {
    int n = 0;
    for (auto& r : srv.requests()) n += r.query.rfind("Q", 0) == 0;
    return n;
  };
  // Only four requests may be on the wire: once four are, a fifth does not follow.
  ASSERT_TRUE(WaitFor([&] { return seen() >= 4; }));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(seen(), 4);
  EXPECT_EQ(c->in_flight(), 10);
  // Answering frees ids; the waiting requests go out in submission order.
  std::set<std::string> answered;
  for (int round = 0; round < 10; ++round) {
    ASSERT_TRUE(WaitFor([&] { return seen() > static_cast<int>(answered.size()); }));
    for (auto& r : srv.requests()) {
      if (r.query.rfind("Q", 0) == 0 && answered.insert(r.query).second) {
        srv.Send(r.connection, Frame(cql::Opcode::kResult, r.header.stream, SetKeyspaceBody(r.query)));
        break;
      }
    }
  }
  for (int i = 0; i < 10; ++i) {
    auto r = fs[static_cast<size_t>(i)].get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(std::get<cql::ResultSetKeyspace>(std::get<cql::Result>(r->response->message)).keyspace,
              "Q" + std::to_string(i));
  }
  std::vector<std::string> order;
  for (auto& r : srv.requests()) {
    if (r.query.rfind("Q", 0) == 0) order.push_back(r.query);
  }
  ASSERT_EQ(order.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], "Q" + std::to_string(i));
}

TEST_F(ConnectionTest, StreamSlotsGrowOnDemandUpToMaxStreams) {
  FakeServer srv;
  srv.SetHandler([](const testing::Request&) { return std::nullopt; });  // answer later, by hand
  auto c = Open(srv, /*max_streams=*/300);
  ASSERT_NE(c, nullptr);
  // A new connection makes room for a few ids, not for all it may use.
  EXPECT_EQ(c->stats().stream_slots, 64);
  std::vector<std::future<StatusOr<Reply>>> fs;
  for (int i = 0; i < 400; ++i) fs.push_back(Query(*c, "Q" + std::to_string(i), 20000ms));
  auto seen = [&] {
    std::vector<testing::Request> out;
    for (auto& r : srv.requests()) {
      if (r.query.rfind("Q", 0) == 0) out.push_back(r);
    }
    return out;
  };
  // 300 go out on 300 distinct ids below the limit; 100 wait for one.
  ASSERT_TRUE(WaitFor([&] { return seen().size() >= 300; }));
  std::this_thread::sleep_for(50ms);
  auto out = seen();
  ASSERT_EQ(out.size(), 300u);
  std::set<int16_t> ids;
  for (auto& r : out) {
    EXPECT_GE(r.header.stream, 0);
    EXPECT_LT(r.header.stream, 300);
    ids.insert(r.header.stream);
  }
  EXPECT_EQ(ids.size(), 300u);
  EXPECT_EQ(c->stats().stream_slots, 300);
  // Every request is answered on its own id, the waiting ones included.
  std::set<std::string> answered;
  while (answered.size() < 400) {
    ASSERT_TRUE(WaitFor([&] { return seen().size() > answered.size(); }));
    for (auto& r : seen()) {
      if (answered.insert(r.query).second) {
        srv.Send(r.connection, Frame(cql::Opcode::kResult, r.header.stream, SetKeyspaceBody(r.query)));
      }
    }
  }
  for (int i = 0; i < 400; ++i) {
    auto r = fs[static_cast<size_t>(i)].get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(std::get<cql::ResultSetKeyspace>(std::get<cql::Result>(r->response->message)).keyspace,
              "Q" + std::to_string(i));
  }
  EXPECT_EQ(c->stats().stream_slots, 300);
  EXPECT_FALSE(c->closed());
}

TEST_F(ConnectionTest, MalformedFrameClosesTheConnectionAndFailsWhatIsPending) {
  FakeServer srv;
  srv.SetHandler([](const testing::Request&) { return std::nullopt; });
  auto c = Open(srv);
  ASSERT_NE(c, nullptr);
  auto a = Query(*c, "A");
  ASSERT_TRUE(WaitFor([&] { return Seen(srv, "A").size() == 1; }));
  // Version byte of a request (no response bit): a protocol violation.
  srv.Send(Seen(srv, "A")[0].connection, cql::Bytes{0x04, 0, 0, 0, 0x08, 0, 0, 0, 0});
  auto r = a.get();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsConnectionLost()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("ProtocolError"), std::string::npos) << r.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return c->closed(); }));
  EXPECT_TRUE(c->closed());
  auto later = Query(*c, "B").get();
  EXPECT_FALSE(later.ok());
}

TEST_F(ConnectionTest, OversizedFrameIsRefused) {
  FakeServer srv;
  srv.SetHandler([](const testing::Request& r) -> std::optional<cql::Bytes> {
    cql::Bytes h(cql::kHeaderSize);
    cql::FrameHeader fh;
    fh.version = cql::kProtocolVersion | cql::kResponseBit;
    fh.stream = r.header.stream;
    fh.opcode = cql::Opcode::kResult;
    fh.length = 1 << 20;  // larger than this client accepts
    cql::EncodeHeader(fh, h.data());
    return h;
  });
  auto c = Open(srv, cql::kMaxStreams, /*max_frame=*/64 * 1024);
  ASSERT_NE(c, nullptr);
  auto r = Query(*c, "A").get();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("FrameTooLarge"), std::string::npos) << r.status().ToString();
}

TEST_F(ConnectionTest, ASilentPeerMakesTheConnectionDefunct) {
  FakeServer srv;
  srv.SetHandler([](const testing::Request&) { return std::nullopt; });
  auto c = Open(srv);
  ASSERT_NE(c, nullptr);
  auto r = Query(*c, "A", 100ms).get();
  EXPECT_TRUE(r.status().IsTimeout());
  ASSERT_TRUE(WaitFor([&] { return c->closed(); }));
  EXPECT_TRUE(c->closed()) << "nothing came back at all: the connection should be closed";
}

// A sink that takes its one cell into memory of its own and says when the
// decoder gave that memory back.
class LandingSink final : public cql::CellSink {
 public:
  explicit LandingSink(size_t size) : mem(size, 0xEE) {}
  Status OnRowsBegin(const cql::RowsMetadata&, int32_t) override { return Status::OK(); }
  std::span<uint8_t> CellDestination(int32_t, int32_t, int32_t size) override {
    return static_cast<size_t>(size) == mem.size() ? std::span<uint8_t>(mem) : std::span<uint8_t>();
  }
  Status OnCell(int32_t, int32_t, std::optional<cql::ByteView>) override {
    cells++;
    return Status::OK();
  }
  void OnCellAbandoned(int32_t, int32_t) override { abandoned++; }
  cql::Bytes mem;
  std::atomic<int> cells{0}, abandoned{0};
};

// A request that times out while its answer arrives into a sink's memory:
// the rest would land in memory its caller has given up, so the connection
// closes (failing what else is in flight), and the sink hears that the
// decoder gave the memory back. Bytes the server sends after that land
// nowhere. Before, the connection read on into the sink's memory.
TEST_F(ConnectionTest, ATimeoutWhileAnAnswerArrivesIntoASinkClosesAndGivesTheMemoryBack) {
  FakeServer srv;
  srv.SetHandler([](const testing::Request&) { return std::nullopt; });  // answered by hand
  auto c = Open(srv);
  ASSERT_NE(c, nullptr);
  const cql::Bytes cell = cql::testing::Pattern(64 << 10, 9);
  auto sink = std::make_shared<LandingSink>(cell.size());
  auto p = std::make_shared<std::promise<StatusOr<Reply>>>();
  auto a = p->get_future();
  c->Send(*cql::EncodeQuery("A", cql::QueryParameters{}), sink, 1000ms,
          [p](StatusOr<Reply> r) { p->set_value(std::move(r)); });
  auto b = Query(*c, "B", 5000ms);  // never answered
  ASSERT_TRUE(WaitFor([&] { return Seen(srv, "B").size() == 1; }));
  const testing::Request req = Seen(srv, "A")[0];
  const cql::Bytes f = Frame(cql::Opcode::kResult, req.header.stream, cql::testing::RowsBody(1, {{cell}}));
  const size_t cut = f.size() - cell.size() / 2;
  srv.Send(req.connection, cql::Bytes(f.begin(), f.begin() + static_cast<std::ptrdiff_t>(cut)));
  auto ra = a.get();
  ASSERT_FALSE(ra.ok());
  EXPECT_TRUE(ra.status().IsTimeout()) << ra.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return sink->abandoned.load() == 1; }));
  EXPECT_TRUE(c->closed());
  // What came before the timeout is in place (read after the decoder let
  // go: `abandoned` orders its writes before these reads).
  const auto half = static_cast<std::ptrdiff_t>(cell.size() / 2);
  EXPECT_TRUE(std::equal(cell.begin(), cell.begin() + half, sink->mem.begin()));
  auto rb = b.get();
  ASSERT_FALSE(rb.ok());
  EXPECT_NE(rb.status().message().find("timed out after 1000 ms while it was still arriving"), std::string::npos)
      << rb.status().ToString();
  // The rest, sent now, reaches nothing.
  srv.Send(req.connection, cql::Bytes(f.begin() + static_cast<std::ptrdiff_t>(cut), f.end()));
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(sink->cells.load(), 0);
  EXPECT_EQ(sink->abandoned.load(), 1);
  EXPECT_TRUE(std::all_of(sink->mem.begin() + half, sink->mem.end(), [](uint8_t x) { return x == 0xEE; }));
}

TEST_F(ConnectionTest, PasswordAuthenticatorExchange) {
  FakeServer srv;
  srv.SetRequireAuth(true);
  srv.SetHandler([](const testing::Request& r) -> std::optional<cql::Bytes> {
    if (r.header.opcode != cql::Opcode::kAuthResponse) return std::nullopt;
    cql::Reader rd(r.body);
    std::optional<cql::ByteView> tok;
    EXPECT_TRUE(rd.BytesValue(&tok).ok());
    const std::string token(tok->begin(), tok->end());
    cql::Bytes body;
    cql::Writer w(&body);
    if (token == std::string("\0alice\0s3cret", 13)) {  // SASL PLAIN
      w.BytesValue(std::nullopt);
      return Frame(cql::Opcode::kAuthSuccess, r.header.stream, body);
    }
    w.Int(0x0100);
    w.String("Provided username alice and/or password are incorrect");
    return Frame(cql::Opcode::kError, r.header.stream, body);
  });
  auto open = [&](const std::string& user, const std::string& password) {
    Connection::Options o;
    o.transport.host = "127.0.0.1";
    o.transport.port = srv.port();
    o.transport.connect_timeout = 2000ms;
    o.username = user;
    o.password = Secret(password);
    std::promise<StatusOr<std::shared_ptr<Connection>>> p;
    Connection::Open(io_.Next(), o, [&](StatusOr<std::shared_ptr<Connection>> c) { p.set_value(std::move(c)); });
    return p.get_future().get();
  };
  auto good = open("alice", "s3cret");
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  auto bad = open("alice", "hunter2");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kAuthError);
  EXPECT_NE(bad.status().message().find("incorrect"), std::string::npos) << bad.status().ToString();
  EXPECT_EQ(bad.status().message().find("hunter2"), std::string::npos) << "the password leaked into an error";
  auto none = open("", "");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Status::Code::kAuthError);
  EXPECT_NE(none.status().message().find("no credentials"), std::string::npos) << none.status().ToString();
}

// --- ScyllaDB shard awareness --------------------------------------------------

cql::Bytes PreparedBody() {
  cql::Bytes b;
  cql::Writer w(&b);
  w.Int(0x0004);
  const uint8_t id[] = {0xAB, 0xCD};
  w.ShortBytes(cql::ByteView(id, 2));
  // Bind metadata: global spec, one column, one pk component (index 0).
  w.Int(0x0001);
  w.Int(1);
  w.Int(1);
  w.Short(0);
  w.String("ks");
  w.String("t");
  w.String("k");
  w.Short(0x0009);  // int
  // Result metadata: no metadata.
  w.Int(0x0004);
  w.Int(0);
  return b;
}

cql::Bytes VoidBody() {
  cql::Bytes b;
  cql::Writer w(&b);
  w.Int(0x0001);
  return b;
}

TEST(ShardAwareSessionTest, OneConnectionPerShardThroughTheShardAwarePortAndShardRouting) {
  constexpr int kShards = 4;
  constexpr int kIgnoreMsb = 12;
  FakeServer srv({0, 0});  // port(0): regular, port(1): shard-aware
  const uint16_t aware = srv.port(1);
  srv.SetSupportedFn([&](const testing::Request& r) {
    // On the shard-aware port the shard is the client's source port modulo
    // the shard count; on the regular port the server picks one.
    const int shard = r.accepted_port == aware ? r.client_port % kShards : r.connection % kShards;
    return std::map<std::string, std::vector<std::string>>{
        {"SCYLLA_SHARD", {std::to_string(shard)}},
        {"SCYLLA_NR_SHARDS", {std::to_string(kShards)}},
        {"SCYLLA_PARTITIONER", {"org.apache.cassandra.dht.Murmur3Partitioner"}},
        {"SCYLLA_SHARDING_ALGORITHM", {"biased-token-round-robin"}},
        {"SCYLLA_SHARDING_IGNORE_MSB", {std::to_string(kIgnoreMsb)}},
        {"SCYLLA_SHARD_AWARE_PORT", {std::to_string(aware)}},
    };
  });
  srv.SetHandler([](const testing::Request& r) -> std::optional<cql::Bytes> {
    if (r.header.opcode == cql::Opcode::kPrepare) return Frame(cql::Opcode::kResult, r.header.stream, PreparedBody());
    return Frame(cql::Opcode::kResult, r.header.stream, VoidBody());
  });
  ConnectionOptions o;
  o.hosts = {"127.0.0.1"};
  o.port = srv.port(0);
  o.connections_per_host = kShards;
  o.io_threads = 1;
  auto s = Session::Connect(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  // Connections to every shard through the shard-aware port, each from a
  // source port that maps to its shard.
  std::map<int, uint16_t> shard_ports;
  for (int i = 0; i < 400 && shard_ports.size() < kShards; ++i) {
    for (auto& r : srv.requests()) {
      if (r.header.opcode == cql::Opcode::kStartup && r.accepted_port == aware) {
        shard_ports[r.client_port % kShards] = r.client_port;
      }
    }
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_EQ(shard_ports.size(), static_cast<size_t>(kShards));
  for (auto& [shard, port] : shard_ports) EXPECT_GE(port, routing::kMinShardAwareSourcePort);
  auto hosts = (*s)->Hosts();
  ASSERT_EQ(hosts.size(), 1u);
  EXPECT_EQ(hosts[0].shards, kShards);

  // Each EXECUTE travels on a connection of its token's shard.
  auto prep = (*s)->Prepare("SELECT v FROM ks.t WHERE k = ?");
  ASSERT_TRUE(prep.ok()) << prep.status().ToString();
  std::set<int> shards_used;
  for (int k = 0; k < 40; ++k) {
    ASSERT_TRUE((*s)->Execute(Statement::Bound(*prep, {Value::Int(k)})).ok());
    uint8_t key[4];
    cql::StoreU32(key, static_cast<uint32_t>(k));
    const int want = routing::ShardOfToken(routing::Murmur3Token(key), kShards, kIgnoreMsb);
    // The last EXECUTE the server saw.
    testing::Request last;
    for (auto& r : srv.requests()) {
      if (r.header.opcode == cql::Opcode::kExecute) last = r;
    }
    // The shard the fake server assigned to that connection.
    const int got = last.accepted_port == aware ? last.client_port % kShards : last.connection % kShards;
    EXPECT_EQ(got, want) << "key " << k;
    shards_used.insert(want);
  }
  EXPECT_EQ(shards_used.size(), static_cast<size_t>(kShards));
  (*s)->Close();
}

}  // namespace
}  // namespace cqlstream::net
