// Copyright (c) cqlstream authors.
#include "net/connection.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "net/connection_registry.h"

namespace cqlstream::net {
namespace {

constexpr const char* kDriverName = "cqlstream";
constexpr const char* kDriverVersion = "0.1.0";

}  // namespace

const ServerError* Reply::server_error() const {
  if (!response) return nullptr;
  return std::get_if<ServerError>(&response->message);
}

Connection::Connection(std::unique_ptr<Transport> t, Options o)
    : transport_(std::move(t)),
      opts_(std::move(o)),
      executor_(transport_->executor()),
      peer_(transport_->peer()),
      local_port_(transport_->local_port()),
      decoder_(cql::FrameDecoder::Options{opts_.max_frame_bytes, 64 << 10},
               [this](int16_t stream) -> std::shared_ptr<cql::CellSink> {
                 // Only a request still in flight gets its sink, and only once:
                 // the answer to a retired (timed-out) request, or a second
                 // frame on a stream whose answer is already decoded but not yet
                 // dispatched (a peer that repeats itself), is buffered instead,
                 // and Dispatch treats it as the protocol violation it is.
                 if (stream < 0 || static_cast<size_t>(stream) >= slots_.size()) return nullptr;
                 Slot& s = slots_[static_cast<size_t>(stream)];
                 if (s.state != SlotState::kInFlight || s.sink_taken) return nullptr;
                 s.sink_taken = true;
                 return s.sink;
               }),
      max_streams_(std::clamp(opts_.max_streams, 1, cql::kMaxStreams)),
      timer_(executor_) {
  GrowSlots();
}

void Connection::GrowSlots() {
  const size_t from = slots_.size();
  const size_t to = std::min(static_cast<size_t>(max_streams_), std::max<size_t>(kInitialStreamSlots, 2 * from));
  slots_.resize(to);
  // Called only when no id is free: the new ids are handed out lowest first.
  for (size_t i = from; i < to; ++i) free_ids_.push_back(static_cast<int16_t>(i));
  stream_slots_.store(static_cast<int>(to), std::memory_order_relaxed);
}

Connection::~Connection() = default;

ConnectionStats Connection::stats() const {
  ConnectionStats s;
  s.requests = stats_.requests.load(std::memory_order_relaxed);
  s.timeouts = stats_.timeouts.load(std::memory_order_relaxed);
  s.bytes_written = stats_.bytes_written.load(std::memory_order_relaxed);
  s.bytes_read = stats_.bytes_read.load(std::memory_order_relaxed);
  s.write_calls = stats_.write_calls.load(std::memory_order_relaxed);
  // The decoder counters are read racily on purpose: they are monotonic
  // 64-bit counters used for metrics only.
  s.direct_bytes = direct_bytes_.load(std::memory_order_relaxed);
  s.copied_bytes = copied_bytes_.load(std::memory_order_relaxed);
  s.stream_slots = stream_slots_.load(std::memory_order_relaxed);
  return s;
}

void Connection::Open(asio::io_context& io, Options options, OpenCallback callback) {
  TransportOptions topts = options.transport;
  std::shared_ptr<ConnectionRegistry> registry = options.registry;
  std::shared_ptr<PendingConnect> pending =
      ConnectTransport(io, std::move(topts),
                       [options = std::move(options), callback = std::move(callback)](
                           StatusOr<std::unique_ptr<Transport>> t) mutable {
                         if (!t.ok()) return callback(t.status());
                         OpenOn(std::move(t).value(), std::move(options), std::move(callback));
                       });
  // A connect that completes before it is listed is refused by OpenOn's Add
  // instead (CloseAll closes the list before it cancels).
  if (registry && !registry->Add(pending)) pending->Cancel(Status::Cancelled("session closed"));
}

void Connection::OpenOn(std::unique_ptr<Transport> transport, Options options, OpenCallback callback) {
  std::shared_ptr<Connection> c(new Connection(std::move(transport), std::move(options)));
  if (c->opts_.registry && !c->opts_.registry->Add(c)) {
    c->Close(Status::Cancelled("session closed"));
    return callback(Status::Cancelled("session closed"));
  }
  asio::post(c->executor_, [c, callback = std::move(callback)]() mutable {
    c->StartReading();
    c->Handshake(std::move(callback));
  });
}

// --- Handshake: OPTIONS -> SUPPORTED and STARTUP -> READY | AUTHENTICATE
// ..., then REGISTER when events are wanted. OPTIONS and STARTUP go out
// together: what STARTUP asks for does not depend on SUPPORTED, and a new
// connection then carries data one round trip sooner (two after its TCP
// connect instead of three: at 200 ms RTT, 200 ms of every connection the
// loader adds while it ramps up). A server reads a connection's frames in
// order (Cassandra decodes OPTIONS, then STARTUP, from one buffer); ScyllaDB
// may answer them in either order, so STARTUP's answer waits for SUPPORTED.
void Connection::Handshake(OpenCallback cb) {
  auto self = shared_from_this();
  // The steps' shared state; every callback runs on this connection's I/O
  // thread, one at a time.
  // (When the connection closes, both pending requests fail; STARTUP's
  // failure, held behind OPTIONS', is dropped with it: cb hears once.)
  struct Steps {
    bool supported = false;  // SUPPORTED (or OPTIONS' other answer) is in
    std::optional<StatusOr<Reply>> startup;  // STARTUP's answer, while SUPPORTED is not
  };
  auto steps = std::make_shared<Steps>();
  auto fail = [self, cb](Status s) {
    self->CloseOnIoThread(s);
    cb(std::move(s));
  };
  auto finish = [self, cb, fail]() {
    if (self->opts_.event_types.empty()) {
      self->handshake_done_ = true;
      return cb(self);
    }
    self->SendInternal(cql::EncodeRegister(self->opts_.event_types), [self, cb, fail](StatusOr<Reply> r) {
      if (!r.ok()) return fail(r.status().WithContext("REGISTER"));
      if (const ServerError* e = r->server_error()) {
        return fail(Status::FromServer(std::make_shared<ServerError>(*e)).WithContext("REGISTER"));
      }
      if (!r->response || !std::holds_alternative<cql::Ready>(r->response->message)) {
        return fail(Status::ProtocolError("unexpected answer to REGISTER"));
      }
      self->handshake_done_ = true;
      cb(self);
    });
  };
  auto on_auth = [self, fail, finish](StatusOr<Reply> r) {
    if (!r.ok()) return fail(r.status().WithContext("authentication"));
    if (const ServerError* e = r->server_error()) {
      // The server's message names the user, never the password.
      return fail(Status::AuthError(fmt::format("authentication as '{}' failed: {}", self->opts_.username,
                                                e->message)));
    }
    if (r->response && std::holds_alternative<cql::AuthSuccess>(r->response->message)) return finish();
    if (r->response && std::holds_alternative<cql::AuthChallenge>(r->response->message)) {
      return fail(Status::AuthError(
          "server sent an AUTH_CHALLENGE; only PasswordAuthenticator (SASL PLAIN) is supported"));
    }
    fail(Status::ProtocolError("unexpected answer to AUTH_RESPONSE"));
  };
  auto on_startup = [self, fail, finish, on_auth](StatusOr<Reply> r) {
    if (!r.ok()) return fail(r.status().WithContext("STARTUP"));
    if (const ServerError* e = r->server_error()) {
      return fail(Status::FromServer(std::make_shared<ServerError>(*e)).WithContext("STARTUP"));
    }
    if (!r->response) return fail(Status::ProtocolError("unexpected answer to STARTUP"));
    if (std::holds_alternative<cql::Ready>(r->response->message)) return finish();
    if (auto* a = std::get_if<cql::Authenticate>(&r->response->message)) {
      if (self->opts_.username.empty()) {
        return fail(Status::AuthError(fmt::format(
            "{} requires authentication ({}) but no credentials were given "
            "(--username with --password-file, or CQLSTREAM_USERNAME/CQLSTREAM_PASSWORD)",
            self->peer_, a->authenticator)));
      }
      cql::Bytes token = cql::PlainSaslToken(self->opts_.username, self->opts_.password.reveal());
      auto frame = cql::EncodeAuthResponse(cql::ByteView(token));
      std::fill(token.begin(), token.end(), uint8_t{0});
      return self->SendInternal(std::move(frame), on_auth);
    }
    fail(Status::ProtocolError("unexpected answer to STARTUP"));
  };
  SendInternal(cql::EncodeOptions(), [self, fail, on_startup, steps](StatusOr<Reply> r) {
    if (!r.ok()) return fail(r.status().WithContext("OPTIONS"));
    if (r->response) {
      if (auto* s = std::get_if<cql::Supported>(&r->response->message)) self->supported_ = s->options;
    }
    steps->supported = true;
    if (steps->startup) on_startup(*std::exchange(steps->startup, std::nullopt));
  });
  const std::map<std::string, std::string> startup{
      {"CQL_VERSION", "3.0.0"}, {"DRIVER_NAME", kDriverName}, {"DRIVER_VERSION", kDriverVersion}};
  SendInternal(cql::EncodeStartup(startup), [on_startup, steps](StatusOr<Reply> r) {
    if (!steps->supported) {
      steps->startup = std::move(r);
      return;
    }
    on_startup(std::move(r));
  });
}

void Connection::SendInternal(cql::RequestFrame f, std::function<void(StatusOr<Reply>)> next) {
  Submit(std::make_shared<const cql::RequestFrame>(std::move(f)), nullptr, opts_.transport.connect_timeout,
         std::move(next), /*pooled=*/false);
}

// --- Submission (any thread) -----------------------------------------------

void Connection::Send(cql::RequestFrame frame, std::shared_ptr<cql::CellSink> sink,
                      std::chrono::milliseconds timeout, ReplyCallback callback) {
  Send(std::make_shared<const cql::RequestFrame>(std::move(frame)), std::move(sink), timeout, std::move(callback));
}

void Connection::Send(std::shared_ptr<const cql::RequestFrame> frame, std::shared_ptr<cql::CellSink> sink,
                      std::chrono::milliseconds timeout, ReplyCallback callback) {
  Submit(std::move(frame), std::move(sink), timeout, std::move(callback), /*pooled=*/true);
}

void Connection::Submit(std::shared_ptr<const cql::RequestFrame> frame, std::shared_ptr<cql::CellSink> sink,
                        std::chrono::milliseconds timeout, ReplyCallback callback, bool pooled) {
  if (frame == nullptr || frame->bytes.size() < cql::kHeaderSize) {
    // An encoder's bug, never the server's: nothing is sent.
    Status why = Status::Internal(fmt::format("request to {}: a frame of {} bytes has no header", peer_,
                                              frame == nullptr ? 0 : frame->bytes.size()));
    asio::post(executor_, [cb = std::move(callback), why = std::move(why)]() mutable { cb(std::move(why)); });
    return;
  }
  Request r{std::move(frame), std::move(sink), std::chrono::steady_clock::now() + timeout, timeout,
            std::move(callback), pooled};
  CountInFlight(1, pooled);
  bool post = false;
  {
    MutexLock l(&submit_mu_);
    submitted_.push_back(std::move(r));
    if (!drain_posted_) drain_posted_ = post = true;
  }
  if (post) asio::post(executor_, [self = shared_from_this()] { self->DrainSubmitted(); });
}

void Connection::Close(Status why) {
  asio::post(executor_, [self = shared_from_this(), why = std::move(why)]() mutable {
    self->CloseOnIoThread(std::move(why));
  });
}

// --- I/O thread ---------------------------------------------------------------

void Connection::DrainSubmitted() {
  std::vector<Request> batch;
  {
    MutexLock l(&submit_mu_);
    batch.swap(submitted_);
    drain_posted_ = false;
  }
  for (auto& r : batch) Admit(std::move(r));
  StartWrite();
  ArmTimer();
}

void Connection::Admit(Request&& r) {
  if (closed()) {
    CountInFlight(-1, r.pooled);
    r.callback(close_reason_);
    return;
  }
  if (free_ids_.empty() && slots_.size() < static_cast<size_t>(max_streams_)) GrowSlots();
  if (free_ids_.empty()) {
    // Backpressure: wait for a stream id, still bounded by the deadline.
    r.wait_seq = next_wait_seq_++;
    PushDeadline(Deadline{r.deadline, r.timeout.count(), -1, r.wait_seq});
    waiting_.push_back(std::move(r));
    return;
  }
  const int16_t id = free_ids_.front();
  free_ids_.pop_front();
  Slot& s = slots_[static_cast<size_t>(id)];
  s.state = SlotState::kInFlight;
  ++s.generation;
  s.sink_taken = false;
  s.sink = std::move(r.sink);
  s.callback = std::move(r.callback);
  s.deadline = r.deadline;
  s.pooled = r.pooled;
  PushDeadline(Deadline{r.deadline, r.timeout.count(), id, s.generation});
  const cql::RequestFrame& frame = *r.frame;
  const bool copy = frame.size() <= kCopiedFrameBytes;
  cql::Bytes& owned = OwnedPiece(copy ? frame.size() : cql::kHeaderSize);
  const size_t at = owned.size();
  if (copy) {
    frame.ForEachPiece(0, [&owned](std::span<const uint8_t> p) { owned.insert(owned.end(), p.begin(), p.end()); });
  } else {
    owned.insert(owned.end(), frame.bytes.begin(), frame.bytes.begin() + cql::kHeaderSize);
  }
  cql::PatchStreamId(owned.data() + at, id);
  if (!copy) write_queue_.push_back(WritePiece{{}, std::move(r.frame)});
  stats_.requests.fetch_add(1, std::memory_order_relaxed);
}

// The owned piece at the end of the write queue when it has `room` bytes to
// spare, else a new one.
cql::Bytes& Connection::OwnedPiece(size_t room) {
  if (write_queue_.empty() || write_queue_.back().shared != nullptr ||
      write_queue_.back().owned.size() + room > kOwnedPieceBytes) {
    write_queue_.emplace_back().owned.reserve(std::max(room, size_t{4096}));
  }
  return write_queue_.back().owned;
}

void Connection::StartWrite() {
  if (write_in_progress_ || write_queue_.empty() || closed()) return;
  writing_.swap(write_queue_);
  std::vector<asio::const_buffer> bufs;
  bufs.reserve(writing_.size());
  for (const auto& p : writing_) {
    if (p.shared == nullptr) {
      bufs.emplace_back(p.owned.data(), p.owned.size());
    } else {
      p.shared->ForEachPiece(cql::kHeaderSize,
                             [&bufs](std::span<const uint8_t> b) { bufs.emplace_back(b.data(), b.size()); });
    }
  }
  write_in_progress_ = true;
  stats_.write_calls.fetch_add(1, std::memory_order_relaxed);
  transport_->AsyncWrite(std::move(bufs), [self = shared_from_this()](std::error_code ec, size_t n) {
    self->OnWritten(ec, n);
  });
}

void Connection::OnWritten(std::error_code ec, size_t n) {
  write_in_progress_ = false;
  writing_.clear();
  if (ec) {
    if (!closed()) CloseOnIoThread(Status::ConnectionLost(fmt::format("write to {} failed: {}", peer_, ec.message())));
    return;
  }
  stats_.bytes_written.fetch_add(n, std::memory_order_relaxed);
  StartWrite();
}

void Connection::StartReading() {
  if (closed()) {
    decoder_.Abandon();  // no read in flight, and none to come (OnRead)
    return;
  }
  std::span<uint8_t> target = decoder_.ReadTarget();
  transport_->AsyncReadSome(target, [self = shared_from_this()](std::error_code ec, size_t n) {
    self->OnRead(ec, n);
  });
}

void Connection::OnRead(std::error_code ec, size_t n) {
  // No read is in flight here. Unless another one starts, the decoder is
  // done with: a cell destination it holds (a caller's memory) is given back
  // (FrameDecoder::Abandon), now that nothing can write into it any more.
  if (TakeRead(ec, n)) {
    StartWrite();  // requests admitted when stream ids were freed
    ArmTimer();
    StartReading();
  } else {
    decoder_.Abandon();
  }
}

// Whether the connection reads on.
bool Connection::TakeRead(std::error_code ec, size_t n) {
  if (closed()) return false;
  if (ec) {
    std::string why = ec == asio::error::eof ? "the server closed the connection" : ec.message();
    CloseOnIoThread(Status::ConnectionLost(fmt::format("connection to {} lost: {}", peer_, why)));
    return false;
  }
  stats_.bytes_read.fetch_add(n, std::memory_order_relaxed);
  last_read_ = std::chrono::steady_clock::now();
  const uint64_t d0 = decoder_.direct_bytes(), c0 = decoder_.copied_bytes();
  Status s = decoder_.Commit(n, &frames_);
  direct_bytes_.fetch_add(decoder_.direct_bytes() - d0, std::memory_order_relaxed);
  copied_bytes_.fetch_add(decoder_.copied_bytes() - c0, std::memory_order_relaxed);
  for (auto& f : frames_) {
    if (closed()) break;
    Dispatch(std::move(f));
  }
  frames_.clear();
  if (!s.ok()) {
    CloseOnIoThread(s.WithContext(fmt::format("connection to {}", peer_)));
    return false;
  }
  return !closed();
}

void Connection::Dispatch(cql::DecodedFrame&& f) {
  const int16_t stream = f.header.stream;
  if (stream == cql::kEventStream) {
    if (f.header.opcode != cql::Opcode::kEvent) return;
    auto r = cql::DecodeResponse(f.header, std::move(f.body));
    if (!r.ok()) return CloseOnIoThread(r.status().WithContext("EVENT"));
    if (auto* e = std::get_if<cql::Event>(&r->message); e && opts_.on_event) opts_.on_event(*e);
    return;
  }
  if (stream < 0 || static_cast<size_t>(stream) >= slots_.size() ||
      slots_[static_cast<size_t>(stream)].state == SlotState::kFree) {
    return CloseOnIoThread(Status::ProtocolError(
        fmt::format("{} answered stream {}, which has no request", peer_, stream)));
  }
  Slot& slot = slots_[static_cast<size_t>(stream)];
  if (slot.state == SlotState::kRetired) {
    // The late answer to a timed-out request: drop it, the id is free again.
    --retired_;
    retired_count_.store(retired_, std::memory_order_relaxed);
    FreeSlot(stream);
    return;
  }
  Reply rep;
  rep.header = f.header;
  if (f.streamed) {
    rep.streamed = true;
    rep.rows_metadata = std::move(f.rows_metadata);
    rep.row_count = f.row_count;
    rep.sink_status = std::move(f.sink_status);
    rep.warnings = std::move(f.warnings);
  } else {
    auto r = cql::DecodeResponse(f.header, std::move(f.body));
    if (!r.ok()) {
      return CloseOnIoThread(r.status().WithContext(
          fmt::format("malformed {} from {}", cql::OpcodeName(f.header.opcode), peer_)));
    }
    // A Rows answer to a request with a sink always streams through it; a
    // buffered one is a frame the decoder did not attribute to this request
    // (e.g. a repeated frame on a reused stream id): the stream is confused.
    if (slot.sink && !slot.sink_taken) {
      const auto* res = std::get_if<cql::Result>(&r->message);
      if (res && std::holds_alternative<cql::Rows>(*res)) {
        return CloseOnIoThread(Status::ProtocolError(
            fmt::format("{} sent a rows answer on stream {} that does not match its request", peer_, stream)));
      }
    }
    rep.warnings = r->warnings;
    rep.response = std::move(r).value();
  }
  ReplyCallback cb = std::move(slot.callback);
  const bool pooled = slot.pooled;
  FreeSlot(stream);
  CountInFlight(-1, pooled);
  cb(std::move(rep));
}

void Connection::FreeSlot(int16_t stream) {
  Slot& s = slots_[static_cast<size_t>(stream)];
  s.state = SlotState::kFree;
  s.sink.reset();
  s.callback = nullptr;
  free_ids_.push_back(stream);
  if (!waiting_.empty() && !closed()) {
    Request r = std::move(waiting_.front());
    waiting_.pop_front();
    Admit(std::move(r));
  }
}

void Connection::PushDeadline(const Deadline& d) {
  // Entries of answered requests are not looked at after each read
  // (ArmTimer), so they pile up behind the armed timer until it fires. When
  // the heap reaches twice what the last compaction left (or twice the
  // requests in flight, or kMinDeadlineCompaction, if more), they are
  // dropped here: each compaction scans at most twice as many entries as
  // pushes since the last one (O(1) amortized), and the heap stays within
  // twice the larger of what is pending and kMinDeadlineCompaction.
  if (deadlines_.size() >= compact_at_) {
    std::erase_if(deadlines_, [this](const Deadline& e) { return Stale(e); });
    std::make_heap(deadlines_.begin(), deadlines_.end(), LaterDeadline{});
    compact_at_ = 2 * std::max({deadlines_.size(), static_cast<size_t>(std::max(in_flight(), 0)),
                                kMinDeadlineCompaction});
  }
  deadlines_.push_back(d);
  std::push_heap(deadlines_.begin(), deadlines_.end(), LaterDeadline{});
  if (!timer_armed_ || d.at < timer_at_) check_deadlines_ = true;
}

void Connection::PopDeadline() {
  std::pop_heap(deadlines_.begin(), deadlines_.end(), LaterDeadline{});
  deadlines_.pop_back();
}

bool Connection::Stale(const Deadline& d) const {
  if (d.stream < 0) {
    // A waiting request's entry: stale once it left the queue. waiting_ is
    // in wait_seq order, so those before its front have (the ones a timeout
    // took from the middle stay until OnTimer reaches them).
    return waiting_.empty() || static_cast<int32_t>(d.generation - waiting_.front().wait_seq) < 0;
  }
  const Slot& s = slots_[static_cast<size_t>(d.stream)];
  return s.state != SlotState::kInFlight || s.generation != d.generation;
}

void Connection::ArmTimer() {
  if (closed()) return;
  // Called after every read and every batch admitted, so it reads neither
  // the heap nor the requests' slots while it need not (each a cache miss
  // on a connection among hundreds): while the armed timer comes no later
  // than the earliest deadline, there is nothing to do, whether that
  // deadline's request is still pending or not, and only a push of a
  // deadline before the armed timer's or the timer firing (OnTimer) changes
  // that (check_deadlines_). Then stale tops are dropped until a pending
  // one, or one at or after the armed timer, is on top. Other stale entries
  // go when the timer reaches them (OnTimer) or in PushDeadline's
  // compaction.
  if (timer_armed_ && !check_deadlines_) return;
  check_deadlines_ = false;
  while (!deadlines_.empty()) {
    const Deadline& top = deadlines_.front();
    if (timer_armed_ && timer_at_ <= top.at) return;
    if (!Stale(top)) break;
    PopDeadline();
  }
  if (deadlines_.empty()) return;
  const auto earliest = deadlines_.front().at;
  timer_armed_ = true;
  timer_at_ = earliest;
  timer_.expires_at(earliest);
  timer_.async_wait([self = shared_from_this()](std::error_code ec) {
    if (ec == asio::error::operation_aborted) return;  // re-armed or closed
    self->timer_armed_ = false;
    self->OnTimer();
  });
}

void Connection::OnTimer() {
  if (closed()) return;
  const auto now = std::chrono::steady_clock::now();
  bool check_waiting = false;
  bool silent = false;
  std::optional<Deadline> cut;  // a request whose answer timed out while it arrived into a sink's destination
  // Earliest first. A callback may close the connection (the handshake's
  // do, synchronously), which clears the heap: hence the closed() check
  // after each; Send and Close only post.
  while (!deadlines_.empty() && deadlines_.front().at <= now) {
    const Deadline d = deadlines_.front();
    PopDeadline();
    if (d.stream < 0) {
      check_waiting = true;
      continue;
    }
    if (Stale(d)) continue;
    Slot& s = slots_[static_cast<size_t>(d.stream)];
    // Retire the id: it stays reserved until the late answer arrives.
    s.state = SlotState::kRetired;
    ++retired_;
    retired_count_.store(retired_, std::memory_order_relaxed);
    // Nothing at all came back since this request was sent: the peer (or
    // the path to it) is gone. Close rather than feed it more requests.
    if (last_read_ < d.at - std::chrono::milliseconds(d.timeout_ms)) silent = true;
    if (decoder_.directing_stream() == d.stream) cut = d;
    s.sink.reset();
    ReplyCallback cb = std::move(s.callback);
    s.callback = nullptr;
    CountInFlight(-1, s.pooled);
    stats_.timeouts.fetch_add(1, std::memory_order_relaxed);
    cb(Status::Timeout(fmt::format("no answer from {} within {} ms", peer_, d.timeout_ms)));
    if (closed()) return;
  }
  if (check_waiting) {
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (it->deadline <= now) {
        ReplyCallback cb = std::move(it->callback);
        const auto ms = it->timeout.count();
        const bool pooled = it->pooled;
        it = waiting_.erase(it);
        CountInFlight(-1, pooled);
        stats_.timeouts.fetch_add(1, std::memory_order_relaxed);
        cb(Status::Timeout(fmt::format("no free stream id on the connection to {} within {} ms", peer_, ms)));
        if (closed()) return;
      } else {
        ++it;
      }
    }
  }
  if (silent) {
    return CloseOnIoThread(Status::ConnectionLost(
        fmt::format("connection to {} is defunct: requests timed out while nothing arrived", peer_)));
  }
  if (cut) {
    // The rest of that answer would be read into memory its caller has
    // given up on (CellSink::OnCellAbandoned), and every answer behind it
    // waits on it: the connection is closed, which ends the read in flight.
    return CloseOnIoThread(Status::ConnectionLost(fmt::format(
        "connection to {} closed: the answer on stream {} timed out after {} ms while it was still arriving",
        peer_, cut->stream, cut->timeout_ms)));
  }
  if (retired_ >= std::max(2, max_streams_ / 4)) {
    return CloseOnIoThread(Status::ConnectionLost(fmt::format(
        "connection to {} is defunct: {} requests timed out without an answer", peer_, retired_)));
  }
  ArmTimer();
}

void Connection::FailAll(const Status& why) {
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (s.state == SlotState::kInFlight) {
      ReplyCallback cb = std::move(s.callback);
      const bool pooled = s.pooled;
      s = Slot{SlotState::kFree, s.generation, false, nullptr, nullptr, {}, false};
      CountInFlight(-1, pooled);
      cb(why);
    } else {
      s.state = SlotState::kFree;
      s.sink.reset();
    }
  }
  retired_ = 0;
  retired_count_.store(0, std::memory_order_relaxed);
  while (!waiting_.empty()) {
    Request r = std::move(waiting_.front());
    waiting_.pop_front();
    CountInFlight(-1, r.pooled);
    r.callback(why);
  }
  std::vector<Request> batch;
  {
    MutexLock l(&submit_mu_);
    batch.swap(submitted_);
  }
  for (auto& r : batch) {
    CountInFlight(-1, r.pooled);
    r.callback(why);
  }
}

void Connection::CloseOnIoThread(Status why) {
  if (closed()) return;
  if (why.ok()) why = Status::ConnectionLost(fmt::format("connection to {} closed", peer_));
  closed_.store(true, std::memory_order_release);
  timer_.cancel();
  transport_->Close();
  // Requests in flight did nothing wrong: whatever broke the connection (a
  // protocol violation, an oversized frame, a reset), for them it is a lost
  // connection, which callers may retry elsewhere. The reason is kept.
  close_reason_ = why.code() == Status::Code::kConnectionLost || why.code() == Status::Code::kCancelled
                      ? why
                      : Status::ConnectionLost(fmt::format("connection to {} closed: {}", peer_, why.ToString()));
  FailAll(close_reason_);
  deadlines_.clear();
  if (handshake_done_ && opts_.on_close) opts_.on_close(why);
}

}  // namespace cqlstream::net
