// Copyright (c) cqlstream authors.
#include "store/split.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <unordered_set>

namespace cqlstream::store {
namespace {

// Distinct seeds per use, so that balancing and partitioning with one user
// seed do not rank keys the same way.
constexpr uint64_t kPartitionSalt = 0x9e3779b97f4a7c15ull;
constexpr uint64_t kFoldSalt = 0xc2b2ae3d27d4eb4full;
constexpr uint64_t kBalanceSalt = 0x165667b19e3779f9ull;

uint64_t Rank(SampleKey key, uint64_t seed) {
  uint8_t le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(key >> (8 * i));
  return XXH64(le, sizeof le, seed);
}

// The keys grouped by stratum (ascending label; one group when !stratify),
// each group in rank order (ties, which need equal hashes, by key).
std::vector<std::vector<SampleKey>> RankedStrata(const std::vector<LabeledKey>& keys, bool stratify,
                                                 uint64_t seed) {
  std::map<int32_t, std::vector<std::pair<uint64_t, SampleKey>>> groups;
  for (const auto& k : keys) groups[stratify ? k.label : 0].emplace_back(Rank(k.key, seed), k.key);
  std::vector<std::vector<SampleKey>> out;
  for (auto& [label, ranked] : groups) {
    std::sort(ranked.begin(), ranked.end());
    auto& g = out.emplace_back();
    g.reserve(ranked.size());
    for (const auto& [r, key] : ranked) g.push_back(key);
  }
  return out;
}

bool ValidPartName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  }
  return true;
}

}  // namespace

int32_t StratumOf(const std::optional<int32_t>& label, const std::vector<int32_t>& labels) {
  if (label) return *label;
  if (!labels.empty()) return *std::min_element(labels.begin(), labels.end());
  return kNoLabel;
}

StatusOr<std::vector<SplitPart>> ParseSplitParts(std::string_view text) {
  std::vector<SplitPart> parts;
  std::set<std::string> names;
  double sum = 0;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    start = comma + 1;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return Status::InvalidArgument(fmt::format("--into '{}': '{}' is not name=fraction", text, item));
    }
    SplitPart p{std::string(item.substr(0, eq)), 0};
    if (!ValidPartName(p.name)) {
      return Status::InvalidArgument(
          fmt::format("--into: part name '{}' must be 1 to 64 of a-z, 0-9, '_' or '-'", p.name));
    }
    if (!names.insert(p.name).second) {
      return Status::InvalidArgument(fmt::format("--into: part '{}' is named twice", p.name));
    }
    const std::string_view num = item.substr(eq + 1);
    auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), p.fraction);
    if (ec != std::errc() || end != num.data() + num.size() || !std::isfinite(p.fraction) || p.fraction <= 0 ||
        p.fraction > 1) {
      return Status::InvalidArgument(
          fmt::format("--into: fraction '{}' of part '{}' must be a number in (0, 1]", num, p.name));
    }
    sum += p.fraction;
    parts.push_back(std::move(p));
  }
  if (sum > 1 + 1e-9) {
    return Status::InvalidArgument(fmt::format("--into '{}': the fractions sum to {}, more than 1", text, sum));
  }
  return parts;
}

std::vector<std::vector<SampleKey>> PartitionKeys(const std::vector<LabeledKey>& keys,
                                                  const std::vector<SplitPart>& parts, bool stratify, uint64_t seed) {
  std::vector<std::vector<SampleKey>> out(parts.size());
  // Cumulative fractions; a sum within rounding of 1 is 1, so every key lands in a part.
  std::vector<double> cum;
  double c = 0;
  for (const auto& p : parts) cum.push_back(c += p.fraction);
  if (!cum.empty() && cum.back() > 1 - 1e-9) cum.back() = 1;
  for (const auto& stratum : RankedStrata(keys, stratify, seed ^ kPartitionSalt)) {
    const double n = static_cast<double>(stratum.size());
    size_t begin = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      const size_t end = std::min(stratum.size(), static_cast<size_t>(std::llround(n * std::min(cum[i], 1.0))));
      for (size_t r = begin; r < end; ++r) out[i].push_back(stratum[r]);
      begin = std::max(begin, end);
    }
  }
  for (auto& part : out) std::sort(part.begin(), part.end());
  return out;
}

StatusOr<FoldParts> FoldKeys(const std::vector<LabeledKey>& keys, int folds, int fold, bool stratify,
                             uint64_t seed) {
  if (folds < 2) return Status::InvalidArgument(fmt::format("--folds {} must be at least 2", folds));
  if (fold < 0 || fold >= folds) {
    return Status::InvalidArgument(fmt::format("--fold {} must be within [0, {}] (--folds {})", fold, folds - 1, folds));
  }
  FoldParts out;
  uint64_t offset = 0;
  for (const auto& stratum : RankedStrata(keys, stratify, seed ^ kFoldSalt)) {
    for (size_t r = 0; r < stratum.size(); ++r) {
      const bool val = (offset + r) % static_cast<uint64_t>(folds) == static_cast<uint64_t>(fold);
      (val ? out.val : out.train).push_back(stratum[r]);
    }
    offset += stratum.size();
  }
  std::sort(out.train.begin(), out.train.end());
  std::sort(out.val.begin(), out.val.end());
  return out;
}

std::vector<LabeledKey> BalanceClasses(const std::vector<LabeledKey>& keys, uint64_t seed) {
  const auto strata = RankedStrata(keys, /*stratify=*/true, seed ^ kBalanceSalt);
  size_t smallest = SIZE_MAX;
  for (const auto& s : strata) smallest = std::min(smallest, s.size());
  std::unordered_set<SampleKey> kept;
  for (const auto& s : strata) kept.insert(s.begin(), s.begin() + static_cast<ptrdiff_t>(std::min(smallest, s.size())));
  std::vector<LabeledKey> out;
  out.reserve(kept.size());
  for (const auto& k : keys) {
    if (kept.count(k.key)) out.push_back(k);
  }
  return out;
}

}  // namespace cqlstream::store
