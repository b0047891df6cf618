// Copyright (c) cqlstream authors.
#include "loader/foreign_key_cache.h"

#include <cstring>
#include <utility>

namespace cqlstream::loader {

ForeignKeyCache::ForeignKeyCache(std::map<int32_t, int64_t> counts, int64_t budget_bytes) : budget_(budget_bytes) {
  MutexLock lock(&mu_);
  for (const auto& [seg, count] : counts) {
    Segment g;
    g.count = count;
    g.dense = count * static_cast<int64_t>(sizeof(uint64_t)) <= budget_bytes / 4;
    segs_.emplace(seg, std::move(g));
  }
}

uint64_t ForeignKeyCache::EntryOf(const Segment& g, int32_t idx) const {
  if (idx < 0 || idx >= g.count) return 0;
  if (g.dense) return g.table.empty() ? 0 : g.table[static_cast<size_t>(idx)];
  auto it = g.map.find(idx);
  return it == g.map.end() ? 0 : it->second;
}

bool ForeignKeyCache::Find(SampleKey sample, std::string* out) const {
  MutexLock lock(&mu_);
  auto it = segs_.find(KeySegment(sample));
  if (it == segs_.end()) return false;
  const uint64_t e = EntryOf(it->second, KeyIndex(sample));
  if (e == 0) return false;
  const size_t len = e & (kBlockBytes - 1);
  const uint64_t off = e >> kBlockBits;
  const uint8_t* block = blocks_[static_cast<size_t>(off >> kBlockBits)].get();
  out->assign(reinterpret_cast<const char*>(block + (off & (kBlockBytes - 1))), len);
  return true;
}

bool ForeignKeyCache::Has(SampleKey sample) const {
  MutexLock lock(&mu_);
  auto it = segs_.find(KeySegment(sample));
  return it != segs_.end() && EntryOf(it->second, KeyIndex(sample)) != 0;
}

bool ForeignKeyCache::Add(SampleKey sample, std::span<const uint8_t> key) {
  if (key.empty() || key.size() >= kBlockBytes) return false;
  const int32_t idx = KeyIndex(sample);
  MutexLock lock(&mu_);
  auto it = segs_.find(KeySegment(sample));
  if (it == segs_.end() || idx < 0 || idx >= it->second.count) return false;
  Segment& g = it->second;
  if (EntryOf(g, idx) != 0) return true;  // kept already
  // What this key costs: its entry (a dense table on the segment's first
  // key, or one sparse entry) and a new block if the last one is full.
  const int64_t entry = g.dense ? (g.table.empty() ? g.count * static_cast<int64_t>(sizeof(uint64_t)) : 0)
                                : kSparseEntryBytes;
  const bool new_block = blocks_.empty() || used_ + key.size() > kBlockBytes;
  const int64_t cost = entry + (new_block ? static_cast<int64_t>(kBlockBytes) : 0);
  if (charged_ + cost > budget_) {
    rejected_++;
    return false;
  }
  if (new_block) {
    blocks_.push_back(std::make_unique<uint8_t[]>(kBlockBytes));
    used_ = 0;
  }
  const uint64_t off = ((blocks_.size() - 1) << kBlockBits) | used_;
  std::memcpy(blocks_.back().get() + used_, key.data(), key.size());
  used_ += key.size();
  const uint64_t e = (off << kBlockBits) | key.size();
  if (g.dense) {
    if (g.table.empty()) g.table.assign(static_cast<size_t>(g.count), 0);
    g.table[static_cast<size_t>(idx)] = e;
  } else {
    g.map.emplace(idx, e);
  }
  charged_ += cost;
  keys_++;
  return true;
}

int64_t ForeignKeyCache::keys() const {
  MutexLock lock(&mu_);
  return keys_;
}

int64_t ForeignKeyCache::bytes() const {
  MutexLock lock(&mu_);
  return charged_;
}

int64_t ForeignKeyCache::rejected() const {
  MutexLock lock(&mu_);
  return rejected_;
}

}  // namespace cqlstream::loader
