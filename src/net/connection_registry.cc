// Copyright (c) cqlstream authors.
#include "net/connection_registry.h"

#include <algorithm>

#include "net/connection.h"
#include "net/transport.h"

namespace cqlstream::net {

template <typename T>
void ConnectionRegistry::Listed<T>::Add(const std::shared_ptr<T>& t) {
  if (items.size() >= prune_at) {
    std::erase_if(items, [](const std::weak_ptr<T>& w) { return w.expired(); });
    prune_at = std::max<size_t>(64, 2 * items.size());
  }
  items.push_back(t);
}

bool ConnectionRegistry::Add(const std::shared_ptr<Connection>& c) {
  MutexLock l(&mu_);
  if (closed_) return false;
  conns_.Add(c);
  return true;
}

bool ConnectionRegistry::Add(const std::shared_ptr<PendingConnect>& p) {
  MutexLock l(&mu_);
  if (closed_) return false;
  connects_.Add(p);
  return true;
}

void ConnectionRegistry::CloseAll(const Status& why) {
  std::vector<std::weak_ptr<PendingConnect>> connects;
  std::vector<std::weak_ptr<Connection>> conns;
  {
    MutexLock l(&mu_);
    closed_ = true;
    connects.swap(connects_.items);
    conns.swap(conns_.items);
  }
  // The connects first: one that completes meanwhile is refused by Add.
  for (const auto& w : connects) {
    if (auto p = w.lock()) p->Cancel(why);
  }
  for (const auto& w : conns) {
    if (auto c = w.lock()) c->Close(why);
  }
}

}  // namespace cqlstream::net
