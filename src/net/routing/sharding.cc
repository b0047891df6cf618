// Copyright (c) cqlstream authors.
#include "net/routing/sharding.h"

#include <cassert>
#include <charconv>
#include <string>

namespace cqlstream::routing {
namespace {

constexpr const char* kShard = "SCYLLA_SHARD";
constexpr const char* kNrShards = "SCYLLA_NR_SHARDS";
constexpr const char* kAlgorithm = "SCYLLA_SHARDING_ALGORITHM";
constexpr const char* kIgnoreMsb = "SCYLLA_SHARDING_IGNORE_MSB";
constexpr const char* kPartitioner = "SCYLLA_PARTITIONER";
constexpr const char* kPort = "SCYLLA_SHARD_AWARE_PORT";
constexpr const char* kPortSsl = "SCYLLA_SHARD_AWARE_PORT_SSL";

// The first value of `key`: nullptr when the key is absent; an error when it
// is present without a value.
StatusOr<const std::string*> First(const ShardingInfo::Options& options, const char* key) {
  auto it = options.find(key);
  if (it == options.end()) return static_cast<const std::string*>(nullptr);
  if (it->second.empty()) {
    return Status::ProtocolError(std::string("SUPPORTED option ") + key + " has no value");
  }
  return &it->second.front();
}

// A base-10 number in [lo, hi]: digits only (no sign, no spaces).
StatusOr<uint64_t> Number(const std::string& text, const char* key, uint64_t lo, uint64_t hi) {
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || v < lo || v > hi) {
    return Status::ProtocolError(std::string("SUPPORTED option ") + key + "='" + text +
                                 "' is not a number in [" + std::to_string(lo) + ", " +
                                 std::to_string(hi) + "]");
  }
  return v;
}

StatusOr<uint64_t> RequiredNumber(const ShardingInfo::Options& options, const char* key,
                                  uint64_t lo, uint64_t hi) {
  CQLS_ASSIGN_OR_RETURN(const std::string* text, First(options, key));
  if (text == nullptr) {
    return Status::ProtocolError(std::string("SUPPORTED has ScyllaDB sharding options but no ") +
                                 key);
  }
  return Number(*text, key, lo, hi);
}

StatusOr<std::optional<uint16_t>> OptionalPort(const ShardingInfo::Options& options,
                                               const char* key) {
  CQLS_ASSIGN_OR_RETURN(const std::string* text, First(options, key));
  if (text == nullptr) return std::optional<uint16_t>();
  CQLS_ASSIGN_OR_RETURN(uint64_t port, Number(*text, key, 1, 65535));
  return std::optional<uint16_t>(static_cast<uint16_t>(port));
}

}  // namespace

ShardPortIterator::ShardPortIterator(int shard, int nr_shards, uint64_t start_offset, uint16_t lo,
                                     uint16_t hi) {
  if (nr_shards < 1 || shard < 0 || shard >= nr_shards || lo > hi) return;  // empty
  const uint32_t n = static_cast<uint32_t>(nr_shards);
  // The lowest port >= lo with port % n == shard.
  const uint32_t first = lo + (static_cast<uint32_t>(shard) + n - lo % n) % n;
  if (first > hi) return;  // empty
  first_ = first;
  step_ = n;
  count_ = (hi - first) / n + 1;
  start_ = static_cast<size_t>(start_offset % count_);
}

std::optional<uint16_t> ShardPortIterator::Next() {
  if (emitted_ >= count_) return std::nullopt;
  const size_t index = (start_ + emitted_) % count_;
  ++emitted_;
  return static_cast<uint16_t>(first_ + index * step_);
}

int ShardOfToken(int64_t token, int nr_shards, int ignore_msb) {
  assert(nr_shards >= 1 && ignore_msb >= 0 && ignore_msb <= 63);
  uint64_t biased = static_cast<uint64_t>(token) + (uint64_t{1} << 63);  // token - INT64_MIN
  biased <<= ignore_msb;
  // The high 64 bits of biased * nr_shards without 128-bit integers (as in the
  // extension's Java example): split biased into 32-bit halves. Exact for any
  // nr_shards < 2^32: no partial product or sum reaches 2^64.
  const uint64_t n = static_cast<uint64_t>(nr_shards);
  const uint64_t lo = biased & 0xffffffffULL;
  const uint64_t hi = biased >> 32;
  return static_cast<int>((hi * n + ((lo * n) >> 32)) >> 32);
}

int ShardingInfo::ShardOf(int64_t token) const {
  return ShardOfToken(token, nr_shards, ignore_msb);
}

StatusOr<ShardingInfo> ShardingInfo::Parse(const Options& supported) {
  bool any = false;
  for (const char* key : {kShard, kNrShards, kAlgorithm, kIgnoreMsb}) {
    any = any || supported.count(key) > 0;
  }
  if (!any) {
    return Status::NotFound("SUPPORTED has no ScyllaDB sharding options (not a ScyllaDB node)");
  }

  ShardingInfo info;
  CQLS_ASSIGN_OR_RETURN(uint64_t nr_shards, RequiredNumber(supported, kNrShards, 1, 65535));
  CQLS_ASSIGN_OR_RETURN(uint64_t shard, RequiredNumber(supported, kShard, 0, nr_shards - 1));
  CQLS_ASSIGN_OR_RETURN(uint64_t ignore_msb, RequiredNumber(supported, kIgnoreMsb, 0, 63));
  info.nr_shards = static_cast<int>(nr_shards);
  info.shard = static_cast<int>(shard);
  info.ignore_msb = static_cast<int>(ignore_msb);

  CQLS_ASSIGN_OR_RETURN(const std::string* algorithm, First(supported, kAlgorithm));
  if (algorithm == nullptr) {
    return Status::ProtocolError(std::string("SUPPORTED has ScyllaDB sharding options but no ") +
                                 kAlgorithm);
  }
  if (*algorithm != kBiasedTokenRoundRobin) {
    return Status::Unsupported("ScyllaDB sharding algorithm '" + *algorithm +
                               "' (only biased-token-round-robin is supported)");
  }
  info.algorithm = *algorithm;

  CQLS_ASSIGN_OR_RETURN(const std::string* partitioner, First(supported, kPartitioner));
  if (partitioner != nullptr) info.partitioner = *partitioner;
  CQLS_ASSIGN_OR_RETURN(info.shard_aware_port, OptionalPort(supported, kPort));
  CQLS_ASSIGN_OR_RETURN(info.shard_aware_port_ssl, OptionalPort(supported, kPortSsl));
  return info;
}

std::optional<ShardingInfo> ShardingInfo::FromSupported(const Options& supported,
                                                        std::string* why_not) {
  auto parsed = Parse(supported);
  if (!parsed.ok()) {
    if (why_not != nullptr) *why_not = parsed.status().ToString();
    return std::nullopt;
  }
  if (why_not != nullptr) why_not->clear();
  return std::move(parsed).value();
}

}  // namespace cqlstream::routing
