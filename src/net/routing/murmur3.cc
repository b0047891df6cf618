// Copyright (c) cqlstream authors.
#include "net/routing/murmur3.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace cqlstream::routing {
namespace {

constexpr uint64_t kC1 = 0x87c37b91114253d5ULL;
constexpr uint64_t kC2 = 0x4cf5ad432745937fULL;

constexpr uint64_t Rotl(uint64_t v, int n) { return (v << n) | (v >> (64 - n)); }

constexpr uint64_t Fmix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

// Full 16-byte blocks are read as two little-endian 64-bit words (unsigned
// bytes; only the tail is sign-extended).
uint64_t LoadLe64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A tail byte as Java reads it: a signed byte widened to long.
constexpr uint64_t SignExtended(uint8_t b) {
  return static_cast<uint64_t>(static_cast<int64_t>(static_cast<int8_t>(b)));
}

Status CheckComponents(const std::vector<std::span<const uint8_t>>& components) {
  if (components.empty()) {
    return Status::InvalidArgument("routing key: a partition key has at least one component");
  }
  if (components.size() == 1) return Status::OK();
  for (size_t i = 0; i < components.size(); ++i) {
    if (components[i].size() > kMaxComponentSize) {
      return Status::InvalidArgument(
          "routing key: component " + std::to_string(i) + " of a composite partition key is " +
          std::to_string(components[i].size()) + " bytes; at most 65535 fit its u16 length");
    }
  }
  return Status::OK();
}

}  // namespace

void Murmur3Hasher::Block(uint64_t k1, uint64_t k2) {
  k1 *= kC1;
  k1 = Rotl(k1, 31);
  k1 *= kC2;
  h1_ ^= k1;
  h1_ = Rotl(h1_, 27);
  h1_ += h2_;
  h1_ = h1_ * 5 + 0x52dce729;

  k2 *= kC2;
  k2 = Rotl(k2, 33);
  k2 *= kC1;
  h2_ ^= k2;
  h2_ = Rotl(h2_, 31);
  h2_ += h1_;
  h2_ = h2_ * 5 + 0x38495ab5;
}

void Murmur3Hasher::Update(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return;  // (data() may be null: keep it away from memcpy)
  size_t pending = static_cast<size_t>(total_ % 16);
  total_ += bytes.size();
  const uint8_t* p = bytes.data();
  size_t n = bytes.size();
  if (pending > 0) {
    size_t take = std::min(n, 16 - pending);
    std::memcpy(buf_ + pending, p, take);
    pending += take;
    p += take;
    n -= take;
    if (pending < 16) return;  // still a partial block; n == 0 here
    Block(LoadLe64(buf_), LoadLe64(buf_ + 8));
  }
  for (; n >= 16; p += 16, n -= 16) Block(LoadLe64(p), LoadLe64(p + 8));
  if (n > 0) std::memcpy(buf_, p, n);
}

int64_t Murmur3Hasher::Token() const {
  if (total_ == 0) return std::numeric_limits<int64_t>::min();  // Cassandra: empty key -> MINIMUM
  uint64_t h1 = h1_;
  uint64_t h2 = h2_;
  const size_t tail = static_cast<size_t>(total_ % 16);

  if (tail > 8) {
    uint64_t k2 = 0;
    for (size_t i = tail; i-- > 8;) k2 ^= SignExtended(buf_[i]) << ((i - 8) * 8);
    k2 *= kC2;
    k2 = Rotl(k2, 33);
    k2 *= kC1;
    h2 ^= k2;
  }
  if (tail > 0) {
    uint64_t k1 = 0;
    for (size_t i = std::min<size_t>(tail, 8); i-- > 0;) k1 ^= SignExtended(buf_[i]) << (i * 8);
    k1 *= kC1;
    k1 = Rotl(k1, 31);
    k1 *= kC2;
    h1 ^= k1;
  }

  h1 ^= total_;
  h2 ^= total_;
  h1 += h2;
  h2 += h1;
  h1 = Fmix(h1);
  h2 = Fmix(h2);
  h1 += h2;
  // (h2 += h1 would give the second half, which the partitioner does not use.)
  return NormalizeMurmur3Token(static_cast<int64_t>(h1));
}

int64_t Murmur3Token(std::span<const uint8_t> key) {
  Murmur3Hasher h;
  h.Update(key);
  return h.Token();
}

StatusOr<std::vector<uint8_t>> RoutingKey(const std::vector<std::span<const uint8_t>>& components) {
  CQLS_RETURN_IF_ERROR(CheckComponents(components));
  if (components.size() == 1) {
    return std::vector<uint8_t>(components[0].begin(), components[0].end());
  }
  size_t size = 0;
  for (const auto& c : components) size += kComponentLengthBytes + c.size() + 1;
  std::vector<uint8_t> key;
  key.reserve(size);
  for (const auto& c : components) {
    const size_t at = key.size();
    key.resize(at + kComponentLengthBytes);
    key.insert(key.end(), c.begin(), c.end());
    CloseComponent(&key, at);  // CheckComponents bounded every size
  }
  return key;
}

StatusOr<int64_t> PartitionKeyToken(const std::vector<std::span<const uint8_t>>& components) {
  CQLS_RETURN_IF_ERROR(CheckComponents(components));
  Murmur3Hasher h;
  if (components.size() == 1) {
    h.Update(components[0]);
    return h.Token();
  }
  for (const auto& c : components) {
    const uint8_t len[2] = {static_cast<uint8_t>(c.size() >> 8),
                            static_cast<uint8_t>(c.size() & 0xFF)};
    const uint8_t end = 0;
    h.Update(len);
    h.Update(c);
    h.Update(std::span<const uint8_t>(&end, 1));
  }
  return h.Token();
}

}  // namespace cqlstream::routing
