// Copyright (c) cqlstream authors.
//
// Bulk-transfer endpoints on loopback for validating cqlstream-wan (and for
// its tests): a BulkSource server that streams a fixed pseudo-random byte
// pattern to every connection it accepts, and a BulkSink that opens n client
// connections, reads as fast as it can, counts the bytes and optionally
// checks them against the pattern (catching lost, duplicated or reordered
// bytes). Blocking POSIX sockets, one thread per connection: simple and cheap
// enough to keep up with loopback TCP.
//
// Ownership: each object owns its sockets and threads; Stop() (also run by the
// destructor) shuts the sockets down and joins the threads. BulkSink::Stop()
// resets its connections (abortive close), so the sender fails at once.
//
// Thread-safety: Start/Stop from one controlling thread; the counters may be
// read from any thread at any time.
#ifndef CQLSTREAM_BENCH_WAN_BULK_H_
#define CQLSTREAM_BENCH_WAN_BULK_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cqlstream/status.h"

namespace cqlstream::wan {

// The byte at stream offset i of every BulkSource connection.
uint8_t BulkPatternByte(uint64_t i);

class BulkSource {
 public:
  // Listens on 127.0.0.1 (any free port). bytes_per_connection == 0: write
  // until the peer goes away; otherwise write that many bytes, then close.
  // `nice` != 0: the writer threads' nice value (best effort; negative
  // values need CAP_SYS_NICE), to keep them on time on a busy machine.
  static StatusOr<std::unique_ptr<BulkSource>> Start(uint64_t bytes_per_connection = 0, int nice = 0);
  ~BulkSource();
  BulkSource(const BulkSource&) = delete;
  BulkSource& operator=(const BulkSource&) = delete;

  uint16_t port() const { return port_; }
  uint64_t accepted() const { return accepted_.load(std::memory_order_relaxed); }
  void Stop();

 private:
  BulkSource() = default;
  void AcceptLoop();
  void WriteLoop(int fd);

  int listen_fd_ = -1;
  uint16_t port_ = 0;
  uint64_t limit_ = 0;
  int nice_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> accepted_{0};
  std::thread accept_thread_;
  std::mutex mu_;
  std::vector<int> fds_;              // guarded by mu_
  std::vector<std::thread> writers_;  // guarded by mu_
};

class BulkSink {
 public:
  // Opens n connections to host:port and starts reading (or, when `paused`,
  // waits for SetPaused(false) before the first read). `nice` as above.
  static StatusOr<std::unique_ptr<BulkSink>> Start(const std::string& host, uint16_t port, int n,
                                                   bool verify, bool paused = false, int nice = 0);
  ~BulkSink();
  BulkSink(const BulkSink&) = delete;
  BulkSink& operator=(const BulkSink&) = delete;

  // Bytes received so far, all connections together.
  uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  // Connections that saw an orderly EOF from the peer.
  int eofs() const { return eofs_.load(std::memory_order_relaxed); }
  // Connections that failed (reset, error) before Stop().
  int errors() const { return errors_.load(std::memory_order_relaxed); }
  // First pattern mismatch (verify mode), or OK.
  Status verify_status() const;
  // A paused sink stops reading after the recv in progress (TCP then stalls
  // the sender); used to measure two paths in alternation.
  void SetPaused(bool paused);
  void Stop();

 private:
  BulkSink() = default;
  void ReadLoop(int fd, bool verify, int nice);

  std::atomic<bool> stop_{false};
  std::atomic<bool> paused_{false};
  std::condition_variable resume_;  // with mu_
  std::atomic<uint64_t> bytes_{0};
  std::atomic<int> eofs_{0};
  std::atomic<int> errors_{0};
  mutable std::mutex mu_;
  Status verify_status_;  // guarded by mu_
  std::vector<int> fds_;
  std::vector<std::thread> readers_;
};

}  // namespace cqlstream::wan

#endif  // CQLSTREAM_BENCH_WAN_BULK_H_
