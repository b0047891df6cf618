// Copyright (c) cqlstream authors.
#include "loader/checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <set>

namespace cqlstream::loader {

Ranges Normalize(Ranges r) {
  std::sort(r.begin(), r.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
  Ranges out;
  for (const auto& x : r) {
    if (x.begin >= x.end) continue;
    if (!out.empty() && x.begin <= out.back().end) {
      out.back().end = std::max(out.back().end, x.end);
    } else {
      out.push_back(x);
    }
  }
  return out;
}

Ranges Subtract(const Ranges& a, const Ranges& b) {
  Ranges out;
  size_t j = 0;
  for (const auto& x : a) {
    uint64_t cur = x.begin;
    while (j < b.size() && b[j].end <= cur) ++j;
    size_t k = j;
    while (cur < x.end) {
      if (k >= b.size() || b[k].begin >= x.end) {
        out.push_back({cur, x.end});
        break;
      }
      if (b[k].begin > cur) out.push_back({cur, b[k].begin});
      cur = std::max(cur, b[k].end);
      ++k;
    }
  }
  return out;
}

uint64_t CountPositions(const Ranges& r) {
  uint64_t n = 0;
  for (const auto& x : r) n += x.size();
  return n;
}

namespace {

constexpr char kMagic[8] = {'C', 'Q', 'L', 'S', 'C', 'K', 'P', '1'};

template <typename T>
void Put(std::string* out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) {
    out->push_back(static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff));
  }
}

class In {
 public:
  explicit In(std::string_view s) : s_(s) {}
  template <typename T>
  bool Get(T* v) {
    if (pos_ + sizeof(T) > s_.size()) return false;
    uint64_t x = 0;
    for (size_t i = 0; i < sizeof(T); ++i) x |= static_cast<uint64_t>(static_cast<uint8_t>(s_[pos_ + i])) << (8 * i);
    pos_ += sizeof(T);
    *v = static_cast<T>(x);
    return true;
  }
  bool GetRanges(Ranges* r) {
    uint64_t n = 0;
    if (!Get(&n) || n > (s_.size() - pos_) / 16) return false;
    for (uint64_t i = 0; i < n; ++i) {
      PositionRange x;
      if (!Get(&x.begin) || !Get(&x.end) || x.begin > x.end) return false;
      if (!r->empty() && x.begin < r->back().end) return false;  // must be sorted and disjoint
      r->push_back(x);
    }
    return true;
  }
  bool done() const { return pos_ == s_.size(); }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

std::string Checkpoint::Encode() const {
  std::string out(kMagic, sizeof kMagic);
  Put<uint32_t>(&out, kVersion);
  Put<uint64_t>(&out, fingerprint);
  Put<uint64_t>(&out, seed);
  Put<uint8_t>(&out, shuffle ? 1 : 0);
  Put<uint8_t>(&out, drop_last ? 1 : 0);
  Put<uint64_t>(&out, n);
  Put<int64_t>(&out, epoch);
  Put<int32_t>(&out, world);
  Put<int32_t>(&out, rank);
  Put<int32_t>(&out, batch_size);
  Put<int64_t>(&out, batches_delivered);
  for (const Ranges* r : {&assigned, &done}) {
    Put<uint64_t>(&out, r->size());
    for (const auto& x : *r) {
      Put<uint64_t>(&out, x.begin);
      Put<uint64_t>(&out, x.end);
    }
  }
  return out;
}

StatusOr<Checkpoint> Checkpoint::Decode(std::string_view bytes) {
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return Status::InvalidArgument("not a cqlstream loader checkpoint (bad magic)");
  }
  In in(bytes.substr(sizeof kMagic));
  Checkpoint c;
  uint32_t version = 0;
  uint8_t shuffle = 0, drop_last = 0;
  if (!in.Get(&version)) return Status::Corruption("truncated checkpoint");
  if (version != kVersion) {
    return Status::Unsupported(fmt::format("checkpoint version {} (this cqlstream reads {})", version, kVersion));
  }
  if (!in.Get(&c.fingerprint) || !in.Get(&c.seed) || !in.Get(&shuffle) || !in.Get(&drop_last) || !in.Get(&c.n) ||
      !in.Get(&c.epoch) || !in.Get(&c.world) || !in.Get(&c.rank) || !in.Get(&c.batch_size) ||
      !in.Get(&c.batches_delivered) || !in.GetRanges(&c.assigned) || !in.GetRanges(&c.done) || !in.done()) {
    return Status::Corruption("malformed loader checkpoint");
  }
  c.shuffle = shuffle != 0;
  c.drop_last = drop_last != 0;
  if (c.world < 1 || c.rank < 0 || c.rank >= c.world) {
    return Status::Corruption(fmt::format("checkpoint has rank {} of world size {}", c.rank, c.world));
  }
  for (const Ranges* r : {&c.assigned, &c.done}) {
    if (!r->empty() && r->back().end > c.n) return Status::Corruption("checkpoint positions beyond the epoch");
  }
  return c;
}

StatusOr<Ranges> RemainingFor(const std::vector<Checkpoint>& cps, int rank, int world) {
  if (cps.empty()) return Status::InvalidArgument("no checkpoint given");
  const Checkpoint& a = cps.front();
  for (const auto& c : cps) {
    if (c.fingerprint != a.fingerprint || c.n != a.n) {
      return Status::InvalidArgument("checkpoints come from different sample sets (dataset changed?)");
    }
    if (c.seed != a.seed || c.shuffle != a.shuffle) {
      return Status::InvalidArgument("checkpoints come from loaders with different seeds or shuffle settings");
    }
    if (c.epoch != a.epoch) {
      return Status::InvalidArgument(fmt::format("checkpoints are at different epochs ({} and {}); take them at "
                                                 "the same point (same batch count) on every rank",
                                                 a.epoch, c.epoch));
    }
  }
  if (cps.size() == 1 && a.world == world && a.rank == rank) {
    return Subtract(a.assigned, a.done);
  }
  // All ranks of the previous run are needed to know what is left.
  std::set<int> ranks;
  for (const auto& c : cps) {
    if (c.world != a.world) return Status::InvalidArgument("checkpoints come from runs with different world sizes");
    if (!ranks.insert(c.rank).second) {
      return Status::InvalidArgument(fmt::format("two checkpoints for rank {}", c.rank));
    }
  }
  if (static_cast<int>(ranks.size()) != a.world) {
    return Status::InvalidArgument(fmt::format(
        "resuming with world size {} (rank {}) from a run of world size {} needs the checkpoints of all {} "
        "ranks, got {}",
        world, rank, a.world, a.world, ranks.size()));
  }
  Ranges remaining;
  for (const auto& c : cps) {
    for (const auto& r : Subtract(c.assigned, c.done)) remaining.push_back(r);
  }
  remaining = Normalize(std::move(remaining));
  return SplitRanges(remaining, rank, world);
}

}  // namespace cqlstream::loader
