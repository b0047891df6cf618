// Copyright (c) cqlstream authors.
//
// ConnectionRegistry: the connections an owner (a session) has opened, from
// before their TCP connect, so that its shutdown can close them all. Once
// handed over, a connection is also held by its pool or control connection,
// which close it; one still in its handshake is held only by its own
// pending requests, and one still connecting (TCP connect, TLS handshake)
// only by its own pending operations, so nothing else could end them: they
// would hold the I/O threads' stop for their time-out and, abandoned there,
// a connection would never be freed.
//
// Ownership: the registry holds weak references (one that ends is dropped
// from it on a later Add). Thread-safety: every method is thread-safe (one
// internal mutex, never held while calling out).
#ifndef CQLSTREAM_NET_CONNECTION_REGISTRY_H_
#define CQLSTREAM_NET_CONNECTION_REGISTRY_H_

#include <memory>
#include <vector>

#include "cqlstream/status.h"
#include "util/mutex.h"

namespace cqlstream::net {

class Connection;
class PendingConnect;

class ConnectionRegistry {
 public:
  // Lists `c`; false when CloseAll has run (the caller closes it instead).
  bool Add(const std::shared_ptr<Connection>& c) EXCLUDES(mu_);
  // Lists a connect under way; false when CloseAll has run (the caller
  // cancels it instead).
  bool Add(const std::shared_ptr<PendingConnect>& p) EXCLUDES(mu_);
  // Closes every listed connection still alive and cancels every listed
  // connect still under way, with `why`, and refuses later ones.
  void CloseAll(const Status& why) EXCLUDES(mu_);

 private:
  // A list of weak references that drops the ended ones when it reaches
  // prune_at (then twice its live size, at least 64).
  template <typename T>
  struct Listed {
    std::vector<std::weak_ptr<T>> items;
    size_t prune_at = 64;
    void Add(const std::shared_ptr<T>& t);
  };

  Mutex mu_;
  Listed<Connection> conns_ GUARDED_BY(mu_);
  Listed<PendingConnect> connects_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;
};

}  // namespace cqlstream::net

#endif  // CQLSTREAM_NET_CONNECTION_REGISTRY_H_
