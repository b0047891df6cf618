// Copyright (c) cqlstream authors.
//
// The token ring of a Murmur3Partitioner cluster and the replica placement of
// a keyspace on it.
//
// Ring: every host owns the tokens listed in the "tokens" column of
// system.local / system.peers(_v2). Sorted, the tokens t_0 < t_1 < ... <
// t_{n-1} cut the ring into n ranges; range i is (t_{i-1}, t_i] and belongs
// to the owner of t_i (its primary owner), range 0 being the wrapping range
// (t_{n-1}, t_0]. A token equal to a ring token belongs to that token's range.
// The ring's token space is (-2^63, 2^63 - 1]; -2^63 is the minimum token,
// which no stored key has (Murmur3Token gives it only to the empty key, which
// servers refuse as a partition key). It falls in the wrapping range.
//
// Replicas of range i (the order of Cassandra's calculateNaturalReplicas;
// the first replica is the primary owner):
//   SimpleStrategy          walk the ring clockwise from t_i (wrapping) and
//                           take each host not yet taken until RF hosts.
//   NetworkTopologyStrategy the same walk, taking a host for its datacenter
//                           while that DC still needs replicas: a host on a
//                           rack not yet used in its DC is taken; a host on a
//                           used rack is taken only while the DC has fewer
//                           racks than its RF and its allowance of RF - racks
//                           rack repeats is not used up. A DC needs
//                           min(RF, its hosts) replicas; only hosts with
//                           tokens count, and racks are per DC. (Current
//                           Cassandra and ScyllaDB. The older variant that
//                           appends rack repeats after the distinct racks, as
//                           in the DataStax C++ driver, picks the same hosts
//                           in another order.)
//   EverywhereStrategy      (ScyllaDB) every host: the primary owner first,
//                           then the others in one fixed cyclic order (that
//                           of a walk from the ring's first token), so the
//                           map stays O(tokens + hosts) in size. (ScyllaDB
//                           itself gives these replicas in no set order.)
//   LocalStrategy           no replica list: each node serves its own local
//                           copy, so Replicas() is empty (any host will do).
//
// Thread-safety: TokenRing and ReplicaMap are immutable after Build(); all
// methods are const and safe to call from any number of threads. Copies are
// cheap (they share the immutable data). Spans and references returned by
// Replicas(), Ranges(), tokens() and hosts() point into that shared data:
// they stay valid while any copy of the map (or ring) they came from is
// alive. These accessors are deleted on temporaries.
#ifndef CQLSTREAM_NET_ROUTING_TOKEN_RING_H_
#define CQLSTREAM_NET_ROUTING_TOKEN_RING_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cqlstream/status.h"

namespace cqlstream::routing {

inline constexpr int64_t kMinToken = std::numeric_limits<int64_t>::min();
inline constexpr int64_t kMaxToken = std::numeric_limits<int64_t>::max();

// The token range (start, end]: the tokens t with start < t <= end.
// Ranges produced here never wrap and are never empty: start < end.
// The bounds go straight into "token(pk) > ? AND token(pk) <= ?".
struct TokenRange {
  int64_t start;  // exclusive
  int64_t end;    // inclusive
  friend bool operator==(const TokenRange&, const TokenRange&) = default;
};

// The whole ring, (-2^63, 2^63 - 1].
inline constexpr TokenRange kFullRing{kMinToken, kMaxToken};

// Splits `range` into n contiguous ranges of sizes differing by at most one
// token, in increasing order; they cover `range` exactly. When the range
// holds fewer than n tokens it gives one range per token.
// Errors: InvalidArgument when n < 1 or range.start >= range.end.
StatusOr<std::vector<TokenRange>> SplitTokenRange(TokenRange range, int n);
// SplitTokenRange(kFullRing, n): the n ranges of a parallel full-table scan.
StatusOr<std::vector<TokenRange>> SplitTokenRange(int n);

// One token as written in the "tokens" set<text> of system.local/peers.
// Errors: InvalidArgument unless `text` is a base-10 int64 (optional '-').
StatusOr<int64_t> ParseToken(std::string_view text);
StatusOr<std::vector<int64_t>> ParseTokens(const std::vector<std::string>& texts);

// A host as the ring sees it.
struct RingHost {
  int id = 0;  // the caller's handle for the host (e.g. an index into its
               // host table); Replicas() returns these. Unique per ring.
  std::string datacenter;
  std::string rack;
  std::vector<int64_t> tokens;  // any order; a host without tokens owns nothing
};

class TokenRing {
 public:
  // Errors: InvalidArgument when two hosts have the same id, when two hosts
  // list the same token, or when no host has a token.
  static StatusOr<TokenRing> Build(std::vector<RingHost> hosts);

  // Number of tokens, which is the number of ranges (>= 1).
  size_t size() const;
  // The sorted tokens t_0 < ... < t_{n-1}. Like hosts(), it points into the
  // ring's shared data, so it is not available on a temporary ring.
  std::span<const int64_t> tokens() const&;
  std::span<const int64_t> tokens() const&& = delete;
  // The index i of the range (t_{i-1}, t_i] holding `token`: the first ring
  // token >= token, or 0 (the wrapping range) when there is none. O(log n).
  size_t RangeIndexOf(int64_t token) const;
  // The primary owner (host id) of range i. REQUIRES: i < size().
  int OwnerOfRange(size_t i) const;
  int PrimaryOwner(int64_t token) const { return OwnerOfRange(RangeIndexOf(token)); }

  // The hosts given to Build(), in the order given (with their tokens).
  const std::vector<RingHost>& hosts() const&;
  const std::vector<RingHost>& hosts() const&& = delete;

  // The ranges whose primary owner is `host_id`, split at the wrap point and
  // merged where contiguous, in increasing order. Empty for an unknown host
  // or a host without tokens. Over all hosts they cover the ring exactly once.
  std::vector<TokenRange> PrimaryRanges(int host_id) const;
  // PrimaryRanges() of every host that owns a token.
  std::map<int, std::vector<TokenRange>> PrimaryRangesByHost() const;

 private:
  struct Data;
  explicit TokenRing(std::shared_ptr<const Data> data) : data_(std::move(data)) {}
  friend class ReplicaMap;

  std::shared_ptr<const Data> data_;
};

// A keyspace's replication, parsed from system_schema.keyspaces.replication.
struct ReplicationStrategy {
  enum class Kind { kSimple, kNetworkTopology, kLocal, kEverywhere };
  Kind kind = Kind::kSimple;
  int replication_factor = 0;             // kSimple
  std::map<std::string, int> dc_factors;  // kNetworkTopology: DC -> RF

  // `replication` holds 'class' (full or short name: SimpleStrategy,
  // NetworkTopologyStrategy, LocalStrategy, EverywhereStrategy) and the
  // factors: 'replication_factor' for SimpleStrategy, one entry per DC for
  // NetworkTopologyStrategy. A factor is "N" or the transient form "N/T"
  // (N replicas of which T transient): the full count N is used.
  // Errors: InvalidArgument for a missing class, a bad or missing factor, or
  // 'replication_factor' in a NetworkTopologyStrategy map (servers expand it
  // per DC before storing); Unsupported for another strategy class or a
  // tablets keyspace ('initial_tablets').
  static StatusOr<ReplicationStrategy> Parse(const std::map<std::string, std::string>& replication);
};

// The replicas of every range of a ring for one replication strategy,
// precomputed so that a lookup is a binary search.
class ReplicaMap {
 public:
  // Errors: NotFound for a NetworkTopologyStrategy whose datacenters with a
  // positive RF have no host in the ring (the message lists both sets of DCs).
  static StatusOr<ReplicaMap> Build(const TokenRing& ring, const ReplicationStrategy& strategy);
  // Parse() then Build().
  static StatusOr<ReplicaMap> Build(const TokenRing& ring,
                                    const std::map<std::string, std::string>& replication);

  // The replicas (host ids) of the range holding `token`, primary first.
  // O(log n). Empty for LocalStrategy or a replication factor of 0.
  // The span points into this map's data (see the lifetime rule above); the
  // calls are deleted on temporaries, whose data could die with them.
  std::span<const int> Replicas(int64_t token) const&;
  std::span<const int> Replicas(int64_t token) const&& = delete;
  // The replicas of range i of the ring. REQUIRES: i < ring().size().
  std::span<const int> ReplicasOfRange(size_t i) const&;
  std::span<const int> ReplicasOfRange(size_t i) const&& = delete;

  const TokenRing& ring() const { return ring_; }
  const ReplicationStrategy& strategy() const;

  // Every range of the ring with its replicas, the wrapping one split in two
  // (n + 1 pieces; fewer when a ring token is -2^63 or 2^63 - 1, as empty
  // pieces are left out), in increasing token order: what a parallel scan
  // needs to send each "token(pk) > start AND token(pk) <= end" query to a
  // replica. Split large pieces further with SplitTokenRange().
  struct ReplicatedRange {
    TokenRange range;
    std::span<const int> replicas;
  };
  std::vector<ReplicatedRange> Ranges() const&;
  std::vector<ReplicatedRange> Ranges() const&& = delete;

 private:
  struct Data;
  ReplicaMap(TokenRing ring, std::shared_ptr<const Data> data)
      : ring_(std::move(ring)), data_(std::move(data)) {}

  TokenRing ring_;
  std::shared_ptr<const Data> data_;
};

}  // namespace cqlstream::routing

#endif  // CQLSTREAM_NET_ROUTING_TOKEN_RING_H_
