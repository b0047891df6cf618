// Copyright (c) cqlstream authors.
//
// Connection: one CQL v4 connection to one server, multiplexing up to
// 32,768 requests in flight by stream id.
//
//  * Send() may be called from any thread. Requests are queued, coalesced
//    into few write syscalls (one gather-write of everything queued), and
//    matched to responses by stream id; responses may come back in any order.
//  * Every request has a deadline. When it passes, the request completes with
//    Status::Timeout, but its stream id is *retired*, not freed: it stays
//    reserved until the late answer arrives (which is then dropped), so a late
//    answer is never delivered to a newer request that reused the id. If a
//    quarter of the ids (at least 2) are retired, or a request times out
//    while nothing at all arrived since it was sent, the connection is
//    considered defunct and closed.
//  * Free stream ids are handed out oldest first (a FIFO), so an id that was
//    just answered is taken again only after every other free id: a peer that
//    repeats an answer a little later meets a free id (a protocol error that
//    closes the connection) rather than a newer request on a reused id, whose
//    sink would receive the stale rows.
//  * Backpressure: when every stream id is in use, further requests wait in
//    a FIFO inside the connection (still subject to their deadlines).
//  * A malformed or oversized frame, a read/write error or EOF closes the
//    connection: every request in flight or waiting completes with
//    ConnectionLost (or ProtocolError / FrameTooLarge naming the problem), and
//    later Send() calls complete at once with ConnectionLost.
//  * A request may carry a CellSink: the cells of its Rows result are then
//    delivered to the sink as they arrive, possibly straight into memory the
//    sink names (see cql/frame_decoder.h), and the Reply carries only the
//    result metadata. A request that times out while its answer is arriving
//    into such memory closes the connection (the rest would land in memory
//    its caller has given up, and every answer behind it waits on it); the
//    sink hears when the last read into its memory has ended
//    (CellSink::OnCellAbandoned).
//
// Thread-safety: Send(), Close() and the accessors are thread-safe. All
// callbacks (reply callbacks, sink callbacks, event and close handlers) run on
// the connection's I/O thread; they must not block.
// Ownership: Connection objects are shared (std::shared_ptr); the I/O
// operations hold a reference until they complete, so a Connection lives
// until it is closed and its operations have drained.
#ifndef CQLSTREAM_NET_CONNECTION_H_
#define CQLSTREAM_NET_CONNECTION_H_

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cql/frame.h"
#include "cql/frame_decoder.h"
#include "cql/request.h"
#include "cql/response.h"
#include "cqlstream/options.h"
#include "cqlstream/status.h"
#include "net/transport.h"
#include "util/mutex.h"

namespace cqlstream::net {

class ConnectionRegistry;

// What came back for one request.
struct Reply {
  cql::FrameHeader header;
  // The decoded response for buffered frames (every frame without a sink, and
  // non-Rows results of requests with a sink).
  std::optional<cql::Response> response;
  // A Rows result delivered through the request's CellSink.
  bool streamed = false;
  cql::RowsMetadata rows_metadata;  // streamed only
  int32_t row_count = 0;            // streamed only
  Status sink_status;               // streamed only: the sink's first error
  std::vector<std::string> warnings;

  // The ServerError if the response is an ERROR, else nullptr.
  const ServerError* server_error() const;
};

using ReplyCallback = std::function<void(StatusOr<Reply>)>;

struct ConnectionStats {
  uint64_t requests = 0;
  uint64_t timeouts = 0;
  uint64_t bytes_written = 0;
  uint64_t bytes_read = 0;
  uint64_t write_calls = 0;
  uint64_t direct_bytes = 0;  // cell bytes read straight into sink memory
  uint64_t copied_bytes = 0;  // cell bytes copied from the receive buffer into sink memory
  int stream_slots = 0;       // stream ids the connection has made room for (grows on demand)
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  struct Options {
    TransportOptions transport;
    std::string username;  // PasswordAuthenticator credentials, if any
    Secret password;
    uint32_t max_frame_bytes = cql::kMaxBodySize;
    int max_streams = cql::kMaxStreams;  // <= 32768; smaller in tests
    // When set, Open lists the connect and then the connection here, from
    // before its TCP connect (its owner's shutdown cancels or closes it
    // there: net/connection_registry.h); a registry already closed fails the
    // open with Cancelled.
    std::shared_ptr<ConnectionRegistry> registry;
    // When set, REGISTER for these event types and deliver EVENTs here.
    std::vector<std::string> event_types;
    std::function<void(const cql::Event&)> on_event;
    // Called once when the connection closes after having been opened.
    std::function<void(const Status&)> on_close;
    // When set, the connection also counts the requests sent through Send()
    // in flight here (a pool's total over its connections, read without
    // scanning them; not the handshake's own requests, sent before the pool
    // hands the connection out); the connection holds a reference, so the
    // counter outlives the pool.
    std::shared_ptr<std::atomic<int>> in_flight_total;
  };

  using OpenCallback = std::function<void(StatusOr<std::shared_ptr<Connection>>)>;

  // Connects, negotiates (OPTIONS/SUPPORTED, STARTUP, authentication,
  // REGISTER) and hands out a ready connection. The callback runs on `io`'s
  // thread exactly once. Errors: ConnectFailed, TlsError, AuthError (with the
  // server's message, never the password), ProtocolError.
  static void Open(asio::io_context& io, Options options, OpenCallback callback);
  // Same, over an already connected transport (tests, fault injection).
  static void OpenOn(std::unique_ptr<Transport> transport, Options options, OpenCallback callback);

  // Queues a request. `frame` is an encoded request with stream id 0.
  // `callback` runs exactly once on the I/O thread.
  void Send(cql::RequestFrame frame, std::shared_ptr<cql::CellSink> sink,
            std::chrono::milliseconds timeout, ReplyCallback callback);
  // Same, for a frame shared with other sends (the attempts and hedges of one
  // execution, on any connections): the bytes are never modified. A small
  // frame (up to 4 KiB, splices included) is copied into the write buffer
  // with its stream id; of a larger one only the 9-byte header is, and its
  // body is written from the shared bytes and its splices, which the
  // connection holds until they are written. A frame shorter than a header
  // fails the request (Internal).
  void Send(std::shared_ptr<const cql::RequestFrame> frame, std::shared_ptr<cql::CellSink> sink,
            std::chrono::milliseconds timeout, ReplyCallback callback);

  // Closes the connection; pending requests complete with `why`.
  void Close(Status why);

  bool closed() const { return closed_.load(std::memory_order_acquire); }
  // Requests submitted and not yet answered or failed: sent, waiting for a
  // stream id, or not yet taken by the I/O thread (not counting retired ids).
  int in_flight() const { return in_flight_.load(std::memory_order_relaxed); }
  // Load for choosing a connection: requests in flight plus retired ids (a
  // connection whose requests time out must not look idle).
  int load() const { return in_flight() + retired_count_.load(std::memory_order_relaxed); }
  std::string peer() const { return peer_; }
  uint16_t local_port() const { return local_port_; }
  // The SUPPORTED options the server sent during the handshake.
  const std::map<std::string, std::vector<std::string>>& supported() const { return supported_; }
  asio::any_io_executor executor() const { return executor_; }
  // The execution context whose thread runs this connection (compared with
  // IoPool::CurrentContext(); never dereferenced by callers).
  const asio::execution_context* context() const { return context_; }
  ConnectionStats stats() const;

  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

 private:
  struct Request {
    std::shared_ptr<const cql::RequestFrame> frame;  // stream id 0, shared, never modified
    std::shared_ptr<cql::CellSink> sink;
    std::chrono::steady_clock::time_point deadline;
    std::chrono::milliseconds timeout;
    ReplyCallback callback;
    bool pooled;  // counted in opts_.in_flight_total (sent through Send())
    uint32_t wait_seq = 0;  // its place in waiting_ (next_wait_seq_), while there
  };
  enum class SlotState : uint8_t { kFree, kInFlight, kRetired };
  struct Slot {
    SlotState state = SlotState::kFree;
    uint32_t generation = 0;
    bool sink_taken = false;  // the decoder already has this request's sink
    std::shared_ptr<cql::CellSink> sink;
    ReplyCallback callback;
    std::chrono::steady_clock::time_point deadline;
    bool pooled = false;  // Request::pooled
  };
  struct Deadline {
    std::chrono::steady_clock::time_point at;
    int64_t timeout_ms;  // the request's timeout (messages, the silent-peer check)
    int16_t stream;      // -1: a request waiting for a stream id
    uint32_t generation;  // the slot's generation; for stream -1 the request's wait_seq
  };
  // Orders deadlines_ as a min-heap: the earliest deadline on top.
  struct LaterDeadline {
    bool operator()(const Deadline& a, const Deadline& b) const { return a.at > b.at; }
  };
  void PushDeadline(const Deadline& d);
  void PopDeadline();
  // Whether the deadline's request is no longer waiting for an answer or a
  // stream id (answered, retired, or gone from the waiting queue).
  bool Stale(const Deadline& d) const;

  Connection(std::unique_ptr<Transport> t, Options o);
  void Handshake(OpenCallback cb);
  void StartReading();
  void OnRead(std::error_code ec, size_t n);
  bool TakeRead(std::error_code ec, size_t n);
  void Dispatch(cql::DecodedFrame&& f);
  void DrainSubmitted();
  void Admit(Request&& r);
  void StartWrite();
  void OnWritten(std::error_code ec, size_t n);
  void ArmTimer();
  void OnTimer();
  void FreeSlot(int16_t stream);
  void FailAll(const Status& why);
  void CloseOnIoThread(Status why);
  // Handshake-only: send a request and continue with `next`.
  void SendInternal(cql::RequestFrame f, std::function<void(StatusOr<Reply>)> next);
  // Both Send()s and SendInternal(): `pooled` as in Request.
  void Submit(std::shared_ptr<const cql::RequestFrame> frame, std::shared_ptr<cql::CellSink> sink,
              std::chrono::milliseconds timeout, ReplyCallback callback, bool pooled);

  std::unique_ptr<Transport> transport_;
  Options opts_;
  asio::any_io_executor executor_;
  std::string peer_;
  uint16_t local_port_ = 0;
  cql::FrameDecoder decoder_;
  std::map<std::string, std::vector<std::string>> supported_;

  // Cross-thread submission queue.
  Mutex submit_mu_;
  std::vector<Request> submitted_ GUARDED_BY(submit_mu_);
  bool drain_posted_ GUARDED_BY(submit_mu_) = false;

  // I/O-thread state.
  // One slot per stream id handed out so far: slots_ grows (doubling, from
  // kInitialStreamSlots) only when every id is taken, up to max_streams_.
  // All 32,768 up front cost 2.5 MB per connection (measured peak RSS of
  // a loader with 64 connections: +140-190 MB over one with 6-9), paid by
  // every connection though a loader's keep a few dozen requests each.
  // The constructor and Admit grow it; nothing holds a reference to a slot
  // across a growth.
  static constexpr int kInitialStreamSlots = 64;
  void GrowSlots();
  const int max_streams_;
  std::vector<Slot> slots_;
  std::deque<int16_t> free_ids_;  // oldest freed first (see the header comment)
  int retired_ = 0;
  std::deque<Request> waiting_;  // no free stream id yet, in wait_seq order
  uint32_t next_wait_seq_ = 0;
  // What is queued for writing, as pieces of one gathered write: a piece owns
  // bytes (small frames copied whole with their stream id, one after the
  // other, and the patched headers of large frames) or refers to the body of
  // a large shared frame (everything after its header), which is never
  // copied. Small frames share a piece so that a write of many small requests
  // stays one buffer, not two per request.
  struct WritePiece {
    cql::Bytes owned;
    std::shared_ptr<const cql::RequestFrame> shared;  // set: write it after its header
  };
  // Frames up to this size are copied into an owned piece (cheaper than a
  // buffer of their own); larger ones are written from the shared frame.
  static constexpr size_t kCopiedFrameBytes = 4096;
  // An owned piece stops growing at this size (a new one starts).
  static constexpr size_t kOwnedPieceBytes = 64 << 10;
  cql::Bytes& OwnedPiece(size_t room);
  std::vector<WritePiece> write_queue_;
  std::vector<WritePiece> writing_;  // stable while a write is in progress (buffers point into it)
  bool write_in_progress_ = false;
  // Deadlines, a binary min-heap by time (LaterDeadline): push and pop are
  // O(log n), the earliest is on top, whatever mix of timeouts the callers
  // use. Entries of answered requests are dropped lazily (OnTimer,
  // PushDeadline's compaction, ArmTimer only when needed): the check reads
  // the request's slot, and doing it after every read (one FIFO per timeout
  // value, each front checked) was Connection::ArmTimer's 2.1% of the
  // loader's CPU samples at 200 ms RTT with 256 connections, 0.8-1.3% at
  // RTT 0 (docs/benchmarks-long-rtt.md, "Connection deadlines").
  std::vector<Deadline> deadlines_;
  // PushDeadline drops answered requests' entries when the heap reaches
  // compact_at_: twice the larger of what the last compaction left, the
  // requests in flight, and kMinDeadlineCompaction.
  static constexpr size_t kMinDeadlineCompaction = 64;
  size_t compact_at_ = 2 * kMinDeadlineCompaction;
  // A deadline before the armed timer's (or with no timer armed) was pushed
  // since ArmTimer last looked: it must look at the top again. While a
  // timer is armed and this is false, the heap's top is at or after
  // timer_at_ (pops and compaction only move the top later).
  bool check_deadlines_ = false;
  asio::steady_timer timer_;
  std::chrono::steady_clock::time_point timer_at_{};
  bool timer_armed_ = false;
  std::vector<cql::DecodedFrame> frames_;  // scratch for Commit
  bool handshake_done_ = false;

  std::atomic<bool> closed_{false};
  // Read by Pick() beside load() (executor_ is initialized before it).
  const asio::execution_context* const context_ =
      &asio::query(executor_, asio::execution::context_as<asio::execution_context&>);
  std::atomic<int> in_flight_{0};  // changed only through CountInFlight
  // in_flight_, and opts_.in_flight_total for a request sent through Send().
  void CountInFlight(int delta, bool pooled) {
    in_flight_.fetch_add(delta, std::memory_order_relaxed);
    if (pooled && opts_.in_flight_total) opts_.in_flight_total->fetch_add(delta, std::memory_order_relaxed);
  }
  std::atomic<int> retired_count_{0};
  std::atomic<int> stream_slots_{0};  // slots_.size(), for stats()
  std::chrono::steady_clock::time_point last_read_ = std::chrono::steady_clock::now();
  Status close_reason_;  // set on the I/O thread before closed_

  struct AtomicStats {
    std::atomic<uint64_t> requests{0}, timeouts{0}, bytes_written{0}, bytes_read{0}, write_calls{0};
  };
  AtomicStats stats_;
  std::atomic<uint64_t> direct_bytes_{0};
  std::atomic<uint64_t> copied_bytes_{0};
};

}  // namespace cqlstream::net

#endif  // CQLSTREAM_NET_CONNECTION_H_
