// Copyright (c) cqlstream authors.
#include "loader/foreign_key_cache.h"

#include <utility>

namespace cqlstream::loader {

ForeignKeyCache::ForeignKeyCache(std::map<int32_t, int64_t> counts, int64_t budget_bytes)
    : counts_(std::move(counts)), budget_(budget_bytes) {}

bool ForeignKeyCache::Find(SampleKey sample, std::string* out) const {
  MutexLock lock(&mu_);
  auto it = tables_.find(KeySegment(sample));
  const int32_t idx = KeyIndex(sample);
  if (it == tables_.end() || idx < 0 || static_cast<size_t>(idx) >= it->second.size()) return false;
  const uint64_t e = it->second[static_cast<size_t>(idx)];
  if (e == 0) return false;
  const size_t len = e & ((uint64_t{1} << kLengthBits) - 1);
  const size_t off = e >> kLengthBits;
  out->assign(reinterpret_cast<const char*>(arena_.data() + off), len);
  return true;
}

bool ForeignKeyCache::Has(SampleKey sample) const {
  MutexLock lock(&mu_);
  auto it = tables_.find(KeySegment(sample));
  const int32_t idx = KeyIndex(sample);
  return it != tables_.end() && idx >= 0 && static_cast<size_t>(idx) < it->second.size() &&
         it->second[static_cast<size_t>(idx)] != 0;
}

bool ForeignKeyCache::Add(SampleKey sample, std::span<const uint8_t> key) {
  if (key.empty() || key.size() >= (size_t{1} << kLengthBits)) return false;
  auto count = counts_.find(KeySegment(sample));
  const int32_t idx = KeyIndex(sample);
  if (count == counts_.end() || idx < 0 || idx >= count->second) return false;
  MutexLock lock(&mu_);
  auto it = tables_.find(count->first);
  const int64_t table_bytes = it == tables_.end() ? count->second * static_cast<int64_t>(sizeof(uint64_t)) : 0;
  if (it != tables_.end() && it->second[static_cast<size_t>(idx)] != 0) return true;  // kept already
  if (charged_ + table_bytes + static_cast<int64_t>(key.size()) > budget_) {
    rejected_++;
    return false;
  }
  if (it == tables_.end()) it = tables_.emplace(count->first, std::vector<uint64_t>(static_cast<size_t>(count->second))).first;
  const uint64_t off = arena_.size();
  arena_.insert(arena_.end(), key.begin(), key.end());
  it->second[static_cast<size_t>(idx)] = (off << kLengthBits) | key.size();
  charged_ += table_bytes + static_cast<int64_t>(key.size());
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
