// Copyright (c) cqlstream authors.
#include "net/connection_registry.h"

#include <algorithm>

#include "net/connection.h"

namespace cqlstream::net {

bool ConnectionRegistry::Add(const std::shared_ptr<Connection>& c) {
  MutexLock l(&mu_);
  if (closed_) return false;
  if (conns_.size() >= prune_at_) {
    std::erase_if(conns_, [](const std::weak_ptr<Connection>& w) { return w.expired(); });
    prune_at_ = std::max<size_t>(64, 2 * conns_.size());
  }
  conns_.push_back(c);
  return true;
}

void ConnectionRegistry::CloseAll(const Status& why) {
  std::vector<std::weak_ptr<Connection>> conns;
  {
    MutexLock l(&mu_);
    closed_ = true;
    conns.swap(conns_);
  }
  for (const auto& w : conns) {
    if (auto c = w.lock()) c->Close(why);
  }
}

}  // namespace cqlstream::net
