// Copyright (c) cqlstream authors.
#include "net/io_pool.h"

#include <algorithm>
#include <chrono>

namespace cqlstream::net {
namespace {
thread_local const IoPool* tls_pool = nullptr;
thread_local const asio::execution_context* tls_context = nullptr;
}  // namespace

IoPool::IoPool(int threads) {
  const int n = std::max(1, threads);
  for (int i = 0; i < n; ++i) {
    contexts_.push_back(std::make_unique<asio::io_context>(1));
    guards_.push_back(asio::make_work_guard(*contexts_.back()));
  }
  for (int i = 0; i < n; ++i) {
    threads_.emplace_back([this, i] {
      tls_pool = this;
      tls_context = contexts_[static_cast<size_t>(i)].get();
      contexts_[static_cast<size_t>(i)]->run();
    });
  }
}

IoPool::~IoPool() { Stop(); }

asio::io_context& IoPool::Next() {
  return *contexts_[next_.fetch_add(1, std::memory_order_relaxed) % contexts_.size()];
}

bool IoPool::InPoolThread() const { return tls_pool == this; }

const asio::execution_context* IoPool::CurrentContext() { return tls_context; }

void IoPool::Stop() {
  if (stopped_.exchange(true)) return;
  // Let pending work (closing sockets, failing requests) drain: dropping the
  // guards makes run() return once no handler is left.
  for (auto& g : guards_) g.reset();
  // Anything still pending after a grace period (a timer far in the future,
  // a peer that never answers) is abandoned rather than waited for.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    bool all = std::all_of(contexts_.begin(), contexts_.end(), [](auto& c) { return c->stopped(); });
    if (all) break;
    if (std::chrono::steady_clock::now() >= give_up) {
      for (auto& c : contexts_) c->stop();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

}  // namespace cqlstream::net
