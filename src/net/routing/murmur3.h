// Copyright (c) cqlstream authors.
//
// The token of a partition key under Cassandra's Murmur3Partitioner, and the
// routing key (the bytes that get hashed) of a possibly composite key.
//
// Murmur3Partitioner uses Cassandra's own variant of MurmurHash3 x64_128 with
// seed 0: the token is the first 64-bit half (h1) of the result. It differs
// from the reference MurmurHash3 in one place: the 1..15 tail bytes are read as
// Java (signed) bytes, i.e. sign-extended before they are shifted into k1/k2.
// A hash of INT64_MIN (the ring's minimum token, which no key may own) maps to
// INT64_MAX. The one exception is the empty key, whose token is INT64_MIN
// (as in Cassandra's Murmur3Partitioner.getToken; servers refuse empty
// partition keys, so no row has it).
//
//   routing key (one column)      := the column's serialized value, as is
//   routing key (n > 1 columns)   := n * ( len:u16 (big-endian) value:len bytes 0x00 )
//
// The values are the CQL-serialized bytes of the partition-key columns in the
// order of the table's PRIMARY KEY definition (for a prepared statement: the
// pk indexes of its bind metadata).
//
// Thread-safety: plain functions of their arguments. A Murmur3Hasher is a
// value; one object must not be updated from two threads at once.
// Ownership: nothing here keeps a pointer to its inputs after returning.
#ifndef CQLSTREAM_NET_ROUTING_MURMUR3_H_
#define CQLSTREAM_NET_ROUTING_MURMUR3_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "cqlstream/status.h"

namespace cqlstream::routing {

// The token of `key` (the routing key's bytes) under Murmur3Partitioner.
// INT64_MIN only for an empty key.
int64_t Murmur3Token(std::span<const uint8_t> key);

// The routing key of a partition key made of `components` (the serialized
// values, in partition-key order): one component -> its bytes unchanged;
// several -> each as [u16 big-endian length][bytes][0x00].
// Errors: InvalidArgument when `components` is empty, or when a component of
// a composite key is longer than 65535 bytes (its length does not fit the u16).
StatusOr<std::vector<uint8_t>> RoutingKey(const std::vector<std::span<const uint8_t>>& components);

// RoutingKey's composite layout, built in place by a caller that encodes
// each component straight into the key (the session, per request): reserve
// kComponentLengthBytes at `at` (key->resize(at + kComponentLengthBytes)),
// append the component's serialized bytes, then CloseComponent(key, at)
// writes their length into the reserved bytes and appends the 0x00. False,
// with nothing written, when the component is longer than 65535 bytes
// (RoutingKey's InvalidArgument).
// Inline: it runs for every request.
inline constexpr size_t kComponentLengthBytes = 2;
inline constexpr size_t kMaxComponentSize = 0xFFFF;  // of a composite key: what its u16 length holds
inline bool CloseComponent(std::vector<uint8_t>* key, size_t at) {
  const size_t len = key->size() - at - kComponentLengthBytes;
  if (len > kMaxComponentSize) return false;
  (*key)[at] = static_cast<uint8_t>(len >> 8);
  (*key)[at + 1] = static_cast<uint8_t>(len & 0xFF);
  key->push_back(0);
  return true;
}

// Murmur3Token(RoutingKey(components)) without building the routing key.
// Same errors as RoutingKey.
StatusOr<int64_t> PartitionKeyToken(const std::vector<std::span<const uint8_t>>& components);

// Cassandra's normalisation of a raw hash into a token: INT64_MIN (reserved as
// the ring's minimum) becomes INT64_MAX; every other value is unchanged.
constexpr int64_t NormalizeMurmur3Token(int64_t h1) {
  return h1 == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max() : h1;
}

// Incremental form of Murmur3Token: Update() with the key's bytes in any
// number of pieces, then Token(). The result does not depend on how the bytes
// were split. Token() does not change the state; more bytes may follow.
class Murmur3Hasher {
 public:
  Murmur3Hasher() = default;

  void Update(std::span<const uint8_t> bytes);
  // The token of all bytes given so far (as Murmur3Token of their concatenation).
  int64_t Token() const;

 private:
  void Block(uint64_t k1, uint64_t k2);

  uint64_t h1_ = 0;
  uint64_t h2_ = 0;
  uint64_t total_ = 0;       // bytes given so far
  uint8_t buf_[16] = {};     // the pending partial block: total_ % 16 bytes
};

}  // namespace cqlstream::routing

#endif  // CQLSTREAM_NET_ROUTING_MURMUR3_H_
