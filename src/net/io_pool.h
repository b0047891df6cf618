// Copyright (c) cqlstream authors.
//
// IoPool: a fixed set of I/O threads, each running its own asio::io_context.
// A connection is pinned to one context for its whole life, so its state
// needs no locks; connections are spread over the threads round-robin.
//
// Thread-safety: Next(), Stop() and CurrentContext() are thread-safe. Stop()
// (also run by the destructor) lets queued handlers finish, then joins the
// threads; it must not be called from one of the pool's own threads.
#ifndef CQLSTREAM_NET_IO_POOL_H_
#define CQLSTREAM_NET_IO_POOL_H_

#include <asio.hpp>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

namespace cqlstream::net {

class IoPool {
 public:
  explicit IoPool(int threads);
  ~IoPool();
  IoPool(const IoPool&) = delete;
  IoPool& operator=(const IoPool&) = delete;

  asio::io_context& Next();
  asio::io_context& At(size_t i) { return *contexts_[i % contexts_.size()]; }
  size_t size() const { return contexts_.size(); }
  // True when called from one of the pool's threads.
  bool InPoolThread() const;
  // The context whose run() this thread is in (nullptr off every IoPool's
  // threads): a caller on an I/O thread can prefer the connections that
  // thread serves, whose work needs no wake-up of another thread.
  static const asio::execution_context* CurrentContext();
  void Stop();

 private:
  std::vector<std::unique_ptr<asio::io_context>> contexts_;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards_;
  std::vector<std::thread> threads_;
  std::atomic<size_t> next_{0};
  std::atomic<bool> stopped_{false};
};

}  // namespace cqlstream::net

#endif  // CQLSTREAM_NET_IO_POOL_H_
