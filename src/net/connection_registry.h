// Copyright (c) cqlstream authors.
//
// ConnectionRegistry: the connections an owner (a session) has opened, from
// before their handshake, so that its shutdown can close them all. Once
// handed over, a connection is also held by its pool or control connection,
// which close it; one still in its handshake is held only by its own
// pending requests, so nothing else could close it: it would hold the I/O
// threads' stop for its time-out and, abandoned there, never be freed.
//
// Ownership: the registry holds weak references (a connection that ends is
// dropped from it on a later Add). Thread-safety: every method is
// thread-safe (one internal mutex, never held while calling out).
#ifndef CQLSTREAM_NET_CONNECTION_REGISTRY_H_
#define CQLSTREAM_NET_CONNECTION_REGISTRY_H_

#include <memory>
#include <vector>

#include "cqlstream/status.h"
#include "util/mutex.h"

namespace cqlstream::net {

class Connection;

class ConnectionRegistry {
 public:
  // Lists `c`; false when CloseAll has run (the caller closes it instead).
  bool Add(const std::shared_ptr<Connection>& c) EXCLUDES(mu_);
  // Closes every listed connection still alive with `why`, and refuses
  // later ones.
  void CloseAll(const Status& why) EXCLUDES(mu_);

 private:
  Mutex mu_;
  std::vector<std::weak_ptr<Connection>> conns_ GUARDED_BY(mu_);
  size_t prune_at_ GUARDED_BY(mu_) = 64;  // Add drops the ended ones when the list reaches this
  bool closed_ GUARDED_BY(mu_) = false;
};

}  // namespace cqlstream::net

#endif  // CQLSTREAM_NET_CONNECTION_REGISTRY_H_
