// Copyright (c) cqlstream authors.
#include "net/pool.h"

#include <algorithm>
#include <random>
#include <tuple>

#include "net/io_pool.h"

namespace cqlstream::net {

std::optional<uint16_t> ShardAwarePort(const ShardInfo& info, bool tls) {
  return tls ? info.shard_aware_port_ssl : info.shard_aware_port;
}

std::vector<uint16_t> ShardSourcePorts(const ShardInfo& info, int shard, int count) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  routing::ShardPortIterator it = info.SourcePorts(shard, rng());
  std::vector<uint16_t> out;
  while (static_cast<int>(out.size()) < count) {
    auto p = it.Next();
    if (!p) break;
    out.push_back(*p);
  }
  return out;
}

std::shared_ptr<HostPool> HostPool::Make(std::string address, uint16_t port, PoolConfig config,
                                         std::weak_ptr<PoolOwner> owner) {
  return std::make_shared<HostPool>(std::move(address), port, config, std::move(owner));
}

HostPool::HostPool(std::string address, uint16_t port, PoolConfig config, std::weak_ptr<PoolOwner> owner)
    : address_(std::move(address)), port_(port), config_(config), owner_(std::move(owner)) {}

// The connections to open now to reach `wanted` (and the port to open them
// on); counts them as opening.
std::vector<HostPool::ToOpen> HostPool::Missing(uint16_t* port, int wanted) {
  std::vector<ToOpen> out;
  const int limit = growth_limit_.load(std::memory_order_relaxed);
  if (limit > 0) wanted = std::min(wanted, limit);
  std::optional<uint16_t> aware = sharding_ ? ShardAwarePort(*sharding_, config_.tls) : std::nullopt;
  if (aware && config_.shard_aware) {
    // At least one connection per shard, through the shard-aware port with a
    // source port that the server maps to that shard; for the first
    // `served` shards only (PoolConfig::max_shard_connections), and no more
    // than `per_shard` times that many in all, whichever shards the node
    // says they landed on (NAT or a proxy rewrites source ports, and a node
    // may name one shard for all: counted by where they landed only, they
    // would never add up, and each Fill would open more).
    *port = *aware;
    const int n = sharding_->nr_shards;
    const int served = std::min(n, std::max({1, config_.max_shard_connections, wanted}));
    const int per_shard = std::max(1, (wanted + served - 1) / served);
    const int most = served * per_shard;  // < wanted + served: no overflow
    std::vector<int> have(static_cast<size_t>(served), 0);
    int aware_now = 0;  // shard-aware connections open and opening
    for (size_t i = 0; i < conn_shard_.size(); ++i) {
      if (!conn_aware_[i]) continue;
      ++aware_now;
      const int sh = conn_shard_[i];
      if (sh >= 0 && sh < served) ++have[static_cast<size_t>(sh)];
    }
    if (opening_by_shard_.size() < static_cast<size_t>(served)) opening_by_shard_.resize(static_cast<size_t>(served), 0);
    for (int o : opening_by_shard_) aware_now += o;
    for (int sh = 0; sh < served && aware_now < most; ++sh) {
      const size_t k = static_cast<size_t>(sh);
      for (int c = have[k] + opening_by_shard_[k]; c < per_shard && aware_now < most; ++c) {
        out.push_back(ToOpen{sh, ShardSourcePorts(*sharding_, sh, 16)});
        ++opening_by_shard_[k];
        ++aware_now;
      }
    }
  } else {
    for (int n = static_cast<int>(conns_.size()) + opening_; n < wanted; ++n) out.push_back(ToOpen{-1, {}});
  }
  opening_ += static_cast<int>(out.size());
  return out;
}

void HostPool::Fill() {
  auto owner = owner_.lock();
  if (!owner || owner->closed()) return;
  uint16_t port = port_;
  std::vector<ToOpen> to_open;
  bool surplus = false;
  {
    MutexLock l(&mu_);
    if (closed_) return;
    // Read under the lock (as Trim and OnOpened do): a Fill that read an
    // older number before the lock must not undo a newer one's parking.
    const int wanted = owner->ConnectionsPerHost();
    to_open = Missing(&port, wanted);
    surplus = NoteSurplus(wanted);
  }
  if (surplus) ScheduleTrim(*owner);
  auto self = shared_from_this();
  for (ToOpen& t : to_open) {
    Connection::Options o = owner->ConnectionOptionsFor(address_, port);
    o.transport.source_ports = std::move(t.source_ports);
    o.in_flight_total = in_flight_total_;
    std::weak_ptr<PoolOwner> weak = owner_;
    // Weak: the pool owns its connections, so a strong reference back from
    // each connection's callback would be a cycle that outlives the pool
    // whenever the callback cannot run (I/O threads stopped first).
    std::weak_ptr<HostPool> weak_self = self;
    o.on_close = [weak_self, weak](const Status& why) {
      auto pool = weak_self.lock();
      auto owner = weak.lock();
      if (pool && owner) pool->OnConnectionClosed(owner, why);
    };
    const int shard = t.shard;
    Connection::Open(owner->NextIo(), std::move(o),
                     [self, weak, shard](StatusOr<std::shared_ptr<Connection>> c) {
                       if (auto owner = weak.lock()) self->OnOpened(owner, std::move(c), shard);
                     });
  }
}

void HostPool::OnConnectionClosed(const std::shared_ptr<PoolOwner>& owner, const Status& why) {
  std::vector<std::shared_ptr<Connection>> gone;
  {
    MutexLock l(&mu_);
    // Kept so that a later "no open connection" names the cause (a protocol
    // violation, a time-out) rather than only its effect.
    if (why.code() != Status::Code::kCancelled) last_error_ = "connection closed: " + why.ToString();
    for (size_t i = 0; i < conns_.size();) {
      if (conns_[i]->closed()) {
        gone.push_back(conns_[i]);
        EraseConnection(i);
      } else {
        ++i;
      }
    }
    std::erase_if(retiring_, [&gone](const std::shared_ptr<Connection>& c) {
      if (!c->closed()) return false;
      gone.push_back(c);
      return true;
    });
    if (conns_.empty()) {
      up_ = false;
      growth_limit_.store(0, std::memory_order_relaxed);  // down: the limit is learnt anew
      growth_refusals_ = 0;
      growth_probe_ = false;
      if (growth_timer_) growth_timer_->cancel();
    }
  }
  for (const auto& c : gone) owner->OnConnectionClosed(*c);
  ScheduleReconnect(*owner);
}

void HostPool::OnOpened(const std::shared_ptr<PoolOwner>& owner, StatusOr<std::shared_ptr<Connection>> c,
                        int wanted_shard) {
  bool refill = false;
  bool came_up = false;
  bool growth_limited = false;
  bool surplus = false;
  std::shared_ptr<Connection> unwanted;
  const bool session_closed = owner->closed();
  {
    MutexLock l(&mu_);
    --opening_;
    if (wanted_shard >= 0 && static_cast<size_t>(wanted_shard) < opening_by_shard_.size()) {
      --opening_by_shard_[static_cast<size_t>(wanted_shard)];
    }
    if (!c.ok()) {
      last_error_ = c.status().ToString();
      if (conns_.empty()) {
        // Seen down: query plans try it last until a connection opens again
        // (reconnection keeps trying it with backoff).
        ++failures_;
        up_ = false;
      } else {
        // The host is up but takes no more connections (its per-client
        // limit, or our descriptors): the pool stays at what it has and
        // opens; a probe past it later (ScheduleGrowthProbe).
        growth_limited = true;
        growth_limit_.store(std::max(1, static_cast<int>(conns_.size()) + opening_), std::memory_order_relaxed);
        growth_probe_ = false;
        ++growth_refusals_;
      }
    } else if (closed_ || session_closed) {
      unwanted = *c;
    } else {
      std::shared_ptr<Connection> conn = *c;
      int shard = -1;
      if (auto info = ShardInfo::FromSupported(conn->supported())) {
        shard = info->shard;
        if (!sharding_) {
          sharding_ = info;
          refill = true;  // now we know the shards: open the missing ones
        }
      }
      conns_.push_back(conn);
      conn_shard_.push_back(shard);
      conn_aware_.push_back(wanted_shard >= 0);
      conn_parked_.emplace_back();
      failures_ = 0;
      if (growth_probe_) {
        // The host took one past the limit: the refusal is over.
        growth_probe_ = false;
        growth_refusals_ = 0;
        growth_limit_.store(0, std::memory_order_relaxed);
        refill = true;
      }
      came_up = !up_.exchange(true);
      if (conn->closed()) refill = true;  // closed before we stored it: on_close saw nothing
      shrinks_.store(ShrinksLocked(), std::memory_order_relaxed);  // the sharding may be known now
      // The number may have fallen while it was opening: park it now.
      surplus = NoteSurplus(owner->ConnectionsPerHost());
    }
  }
  if (unwanted) return unwanted->Close(Status::Cancelled("session closed"));
  if (came_up) owner->OnPoolUp();
  if (surplus) ScheduleTrim(*owner);
  if (!c.ok()) {
    if (growth_limited) {
      ScheduleGrowthProbe(*owner);
    } else {
      ScheduleReconnect(*owner);
    }
  } else if (refill) {
    Fill();
  }
}

void HostPool::ScheduleReconnect(PoolOwner& owner) {
  if (owner.closed()) return;
  asio::io_context& io = owner.NextIo();
  MutexLock l(&mu_);
  if (closed_ || reconnect_scheduled_) return;
  reconnect_scheduled_ = true;
  if (!timer_) timer_ = std::make_unique<asio::steady_timer>(io);
  timer_->expires_after(config_.reconnect.Delay(failures_ + 1));
  auto self = shared_from_this();
  timer_->async_wait([self](std::error_code ec) {
    {
      MutexLock l(&self->mu_);
      self->reconnect_scheduled_ = false;
    }
    if (!ec) self->Fill();
  });
}

void HostPool::ScheduleGrowthProbe(PoolOwner& owner) {
  if (owner.closed()) return;
  asio::io_context& io = owner.NextIo();
  MutexLock l(&mu_);
  if (closed_ || growth_probe_scheduled_) return;
  growth_probe_scheduled_ = true;
  if (!growth_timer_) growth_timer_ = std::make_unique<asio::steady_timer>(io);
  growth_timer_->expires_after(config_.growth_retry.Delay(growth_refusals_));
  auto self = shared_from_this();
  growth_timer_->async_wait([self](std::error_code ec) {
    bool probe = false;
    {
      MutexLock l(&self->mu_);
      self->growth_probe_scheduled_ = false;
      const int limit = self->growth_limit_.load(std::memory_order_relaxed);
      if (!ec && !self->closed_ && limit > 0 && !self->conns_.empty()) {
        self->growth_probe_ = true;
        self->growth_limit_.store(limit + 1, std::memory_order_relaxed);
        probe = true;
      }
    }
    if (probe) self->Fill();
  });
}

void HostPool::EraseConnection(size_t i) {
  const auto at = static_cast<long>(i);
  conns_.erase(conns_.begin() + at);
  conn_shard_.erase(conn_shard_.begin() + at);
  conn_aware_.erase(conn_aware_.begin() + at);
  conn_parked_.erase(conn_parked_.begin() + at);
}

bool HostPool::ShrinksLocked() const {
  // A shard-aware ScyllaDB pool spreads its connections over the shards: a
  // count alone cannot say which of them are surplus, so it is not shrunk.
  const bool shard_aware = sharding_ && config_.shard_aware && ShardAwarePort(*sharding_, config_.tls);
  return config_.idle_close.count() > 0 && !shard_aware;
}

bool HostPool::NoteSurplus(int wanted) {
  const bool surplus = ShrinksLocked() && static_cast<int>(conns_.size()) > wanted;
  in_use_ = surplus ? static_cast<size_t>(std::max(wanted, 1)) : SIZE_MAX;
  // Each connection counts its own time parked: one parked now starts its
  // wait, one back in use forgets it (an owner that probes fewer
  // connections and goes back reopens nothing, and one parked for good
  // still closes in time however the number moves above it).
  const auto now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < conn_parked_.size(); ++i) {
    if (i < in_use_) {
      conn_parked_[i].reset();
    } else if (!conn_parked_[i]) {
      conn_parked_[i] = now;
    }
  }
  return surplus || !retiring_.empty();
}

std::optional<std::chrono::steady_clock::time_point> HostPool::FirstParked() const {
  std::optional<std::chrono::steady_clock::time_point> first;
  for (const auto& p : conn_parked_) {
    if (p && (!first || *p < *first)) first = p;
  }
  return first;
}

void HostPool::ScheduleTrim(PoolOwner& owner) {
  if (owner.closed()) return;
  asio::io_context& io = owner.NextIo();
  MutexLock l(&mu_);
  if (closed_ || trim_scheduled_) return;
  trim_scheduled_ = true;
  if (!trim_timer_) trim_timer_ = std::make_unique<asio::steady_timer>(io);
  // Retired connections are checked often; a parked one when it is due.
  const auto first = FirstParked();
  if (!retiring_.empty() || !first) {
    trim_timer_->expires_after(kRetireCheck);
  } else {
    trim_timer_->expires_at(*first + config_.idle_close);
  }
  auto self = shared_from_this();
  trim_timer_->async_wait([self](std::error_code ec) {
    {
      MutexLock l(&self->mu_);
      self->trim_scheduled_ = false;
    }
    if (!ec) self->Trim();
  });
}

void HostPool::Trim() {
  auto owner = owner_.lock();
  if (!owner || owner->closed()) return;
  std::vector<std::shared_ptr<Connection>> idle;
  bool again = false;
  {
    MutexLock l(&mu_);
    if (closed_) return;
    // Read under the lock: a number lowered (and parked by Fill) since must
    // not be undone by a stale one.
    const int wanted = owner->ConnectionsPerHost();
    // First the connections retired at an earlier check: no Pick() can hand
    // them out any more, so once nothing is in flight nothing will be. They
    // leave retiring_ when they have closed (OnConnectionClosed, which also
    // moves their byte counts to the owner).
    for (const auto& c : retiring_) {
      if (c->in_flight() == 0 && !c->closed()) idle.push_back(c);
    }
    NoteSurplus(wanted);
    // Parked for idle_close: retired (parked ones are the newest; the
    // oldest have proven they stay up).
    const auto now = std::chrono::steady_clock::now();
    for (size_t i = conns_.size(); i-- > 0;) {
      if (!conn_parked_[i] || now < *conn_parked_[i] + config_.idle_close) continue;
      retiring_.push_back(conns_[i]);
      EraseConnection(i);
    }
    again = NoteSurplus(wanted);
  }
  // Cancelled: not a failure of the host (last_error_ keeps its cause).
  for (const auto& c : idle) c->Close(Status::Cancelled("closed: more connections open than wanted"));
  if (again) ScheduleTrim(*owner);
}

bool HostPool::closed() const {
  MutexLock l(&mu_);
  return closed_;
}

void HostPool::Close(const Status& why) {
  std::vector<std::shared_ptr<Connection>> conns;
  {
    MutexLock l(&mu_);
    closed_ = true;
    conns = conns_;
    conns.insert(conns.end(), retiring_.begin(), retiring_.end());
    if (timer_) timer_->cancel();
    if (growth_timer_) growth_timer_->cancel();
    if (trim_timer_) trim_timer_->cancel();
  }
  for (auto& c : conns) c->Close(why);
}

std::shared_ptr<Connection> HostPool::Pick(std::optional<int64_t> token, const std::vector<const Connection*>& avoid) {
  MutexLock l(&mu_);
  std::optional<int> shard;
  if (token && sharding_) shard = sharding_->ShardOf(*token);
  const size_t in_use = std::min(in_use_, conns_.size());
  if (!shard && in_use > kExactPickUpTo) {
    // Many connections: the less loaded of two in use picked at random (the
    // "power of two choices": loads stay within a few requests of the least
    // loaded's, where a scan of every connection per request touches a cache
    // line each). Falls back to the scan below when neither is usable.
    auto usable = [&avoid](const Connection* c) {
      return !c->closed() && std::find(avoid.begin(), avoid.end(), c) == avoid.end();
    };
    // From an I/O thread (a completion's refill) the two are drawn among the
    // connections that thread serves, when the draws find any: a request
    // handed to another I/O thread's connection is a post that wakes that
    // thread (an epoll_ctl on its interrupter, and its scheduler's lock
    // taken by both). A connection of another thread met on the way is
    // taken instead when it is clearly less loaded, so that the threads'
    // shares of the load stay within a margin of each other (each
    // completion would otherwise refill its own thread's connections, and
    // nothing would pull a busier thread's share back).
    if (const asio::execution_context* here = IoPool::CurrentContext()) {
      std::optional<size_t> local, other;
      int locals = 0;
      for (int draw = 0; draw < kLocalDraws && locals < 2; ++draw) {
        const size_t i = static_cast<size_t>(NextRandom() % in_use);
        if (!usable(conns_[i].get())) continue;
        if (conns_[i]->context() == here) {
          ++locals;
          if (!local || conns_[i]->load() < conns_[*local]->load()) local = i;
        } else if (!other) {
          other = i;
        }
      }
      if (local) {
        const int l = conns_[*local]->load();
        if (other && conns_[*other]->load() + std::max(kLocalSlack, l / 4) < l) return conns_[*other];
        return conns_[*local];
      }
    }
    const size_t a = static_cast<size_t>(NextRandom() % in_use);
    size_t b = static_cast<size_t>(NextRandom() % (in_use - 1));
    if (b >= a) ++b;
    const bool ok[2] = {usable(conns_[a].get()), usable(conns_[b].get())};
    if (ok[0] && ok[1]) return conns_[conns_[b]->load() < conns_[a]->load() ? b : a];
    if (ok[0] || ok[1]) return conns_[ok[0] ? a : b];
  }
  std::shared_ptr<Connection> best;
  std::tuple<bool, bool, bool, int> best_key{};
  for (size_t i = 0; i < conns_.size(); ++i) {
    const auto& c = conns_[i];
    if (c->closed()) continue;
    const bool avoided = std::find(avoid.begin(), avoid.end(), c.get()) != avoid.end();
    const bool on_shard = shard && conn_shard_[i] == *shard;
    // Preference: not already used by this request, then not parked, then
    // the token's shard, then the least loaded.
    auto key = std::make_tuple(!avoided, i < in_use_, on_shard, -c->load());
    if (!best || key > best_key) {
      best = c;
      best_key = key;
    }
  }
  return best;
}

HostPool::State HostPool::state() const {
  MutexLock l(&mu_);
  State s;
  s.open_connections = static_cast<int>(conns_.size());
  s.in_flight = in_flight_total_->load(std::memory_order_relaxed);
  s.shards = sharding_ ? sharding_->nr_shards : 0;
  s.last_error = last_error_;
  s.growth_limit = growth_limit_.load(std::memory_order_relaxed);
  return s;
}

int HostPool::InFlight() const { return in_flight_total_->load(std::memory_order_relaxed); }

uint64_t HostPool::NextRandom() {
  // xorshift64: cheap, and good enough to spread picks.
  uint64_t x = pick_random_;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return pick_random_ = x;
}

std::string HostPool::last_error() const {
  MutexLock l(&mu_);
  return last_error_;
}

void HostPool::ForEachConnection(const std::function<void(const Connection&)>& f) const {
  MutexLock l(&mu_);
  for (const auto& c : conns_) f(*c);
  for (const auto& c : retiring_) f(*c);
}

}  // namespace cqlstream::net
