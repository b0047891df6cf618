// Copyright (c) cqlstream authors.
//
// ScyllaDB shard awareness: the "Intranode sharding" protocol extension
// (scylladb/scylladb docs/dev/protocol-extensions.md).
//
// A ScyllaDB node splits its data among `nr_shards` CPU shards. The SUPPORTED
// response to OPTIONS tells a connection which shard serves it and how tokens
// map to shards:
//
//   SCYLLA_SHARD                 this connection's shard, 0 <= shard < nr_shards
//   SCYLLA_NR_SHARDS             shards on the node
//   SCYLLA_SHARDING_ALGORITHM    "biased-token-round-robin" (the only one defined)
//   SCYLLA_SHARDING_IGNORE_MSB   the algorithm's parameter (0..63; 12 by default)
//   SCYLLA_PARTITIONER           e.g. org.apache.cassandra.dht.Murmur3Partitioner
//   SCYLLA_SHARD_AWARE_PORT      optional: the shard-aware CQL port (19042 by default)
//   SCYLLA_SHARD_AWARE_PORT_SSL  optional: the same with TLS (19142 by default)
//
// Shard of a token (biased-token-round-robin):
//   shard = ((uint128)((uint64)(token + 2^63) << ignore_msb) * nr_shards) >> 64
// (the shift discards the bits beyond bit 63).
//
// On the shard-aware port the node hands a new connection to shard
// `client_source_port % nr_shards`. To reach shard s, bind the local socket
// to such a port before connect(); ShardPortIterator lists the candidates so
// the caller can try them in turn (a port may be in use). The assignment is
// only a request: confirm it with SCYLLA_SHARD of the new connection's own
// SUPPORTED response (NAT or a proxy between client and node rewrites ports).
//
// Thread-safety: ShardingInfo is an immutable value once parsed (const
// methods only); a ShardPortIterator is a small value to be used by one thread.
// Ownership: both are self-contained values; Parse() copies what it keeps
// from the SUPPORTED options.
#ifndef CQLSTREAM_NET_ROUTING_SHARDING_H_
#define CQLSTREAM_NET_ROUTING_SHARDING_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cqlstream/status.h"

namespace cqlstream::routing {

// The IANA dynamic/ephemeral port range, which the drivers use for
// shard-aware source ports.
inline constexpr uint16_t kMinShardAwareSourcePort = 49152;
inline constexpr uint16_t kMaxShardAwareSourcePort = 65535;

inline constexpr std::string_view kBiasedTokenRoundRobin = "biased-token-round-robin";

// The local ports p in [lo, hi] with p % nr_shards == shard, each exactly
// once: in increasing order starting at the candidate number
// (start_offset % size()), wrapping around to the lowest candidate. Pass a
// random start_offset so that clients (and connections of one client) spread
// over the range; the sequence is a pure function of the arguments.
// The sequence is empty when no port of the range maps to the shard, or when
// the arguments are invalid (nr_shards < 1, shard outside [0, nr_shards),
// lo > hi).
class ShardPortIterator {
 public:
  ShardPortIterator() = default;  // empty
  ShardPortIterator(int shard, int nr_shards, uint64_t start_offset,
                    uint16_t lo = kMinShardAwareSourcePort, uint16_t hi = kMaxShardAwareSourcePort);

  // The next candidate, or nullopt once all were returned.
  std::optional<uint16_t> Next();

  size_t size() const { return count_; }                  // candidates in all
  size_t remaining() const { return count_ - emitted_; }  // not yet returned

 private:
  uint32_t first_ = 0;  // lowest candidate port
  uint32_t step_ = 1;   // nr_shards
  size_t count_ = 0;
  size_t start_ = 0;    // index of the first candidate returned
  size_t emitted_ = 0;
};

// The sharding parameters of one ScyllaDB node, as read from SUPPORTED.
struct ShardingInfo {
  int shard = 0;        // the shard of the connection that received SUPPORTED
  int nr_shards = 1;    // >= 1
  int ignore_msb = 0;   // 0..63
  std::string partitioner;  // as sent; empty if absent
  std::string algorithm;    // always kBiasedTokenRoundRobin once parsed
  std::optional<uint16_t> shard_aware_port;
  std::optional<uint16_t> shard_aware_port_ssl;

  using Options = std::map<std::string, std::vector<std::string>>;

  // Parses the SUPPORTED options (the first value of each key is used).
  // Errors:
  //   NotFound       no SCYLLA_* sharding key at all (e.g. Apache Cassandra);
  //   ProtocolError  a required key missing or empty, a value that is not a
  //                  base-10 number in range (nr_shards 1..65535, shard <
  //                  nr_shards, ignore_msb 0..63, ports 1..65535);
  //   Unsupported    a sharding algorithm other than biased-token-round-robin.
  static StatusOr<ShardingInfo> Parse(const Options& supported);

  // Parse() as an optional: nullopt on any error, with the reason (the
  // Status's ToString()) in *why_not when why_not is not null.
  static std::optional<ShardingInfo> FromSupported(const Options& supported,
                                                   std::string* why_not = nullptr);

  // The shard of this node that owns `token` (0 <= result < nr_shards).
  int ShardOf(int64_t token) const;

  // The shard the node assigns to a connection from `source_port` on the
  // shard-aware port.
  int ShardOfSourcePort(uint16_t source_port) const { return source_port % nr_shards; }

  // Source ports in [49152, 65535] that land on `shard`; see ShardPortIterator.
  ShardPortIterator SourcePorts(int shard, uint64_t random_offset) const {
    return ShardPortIterator(shard, nr_shards, random_offset);
  }
};

// The shard-of-token arithmetic on its own (used by ShardingInfo::ShardOf).
// REQUIRES: nr_shards >= 1, 0 <= ignore_msb <= 63.
int ShardOfToken(int64_t token, int nr_shards, int ignore_msb);

}  // namespace cqlstream::routing

#endif  // CQLSTREAM_NET_ROUTING_SHARDING_H_
