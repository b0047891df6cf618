// Copyright (c) cqlstream authors.
#include "store/select.h"
#include "util/mutex.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>

#include "store/attached_scan.h"

namespace cqlstream::store {

StatusOr<std::set<int32_t>> ResolveLabelFilter(const DatasetInfo& d, const std::vector<std::string>& labels) {
  std::set<int32_t> out;
  if (labels.empty()) return out;
  if (d.label_kind != LabelKind::kClass && d.label_kind != LabelKind::kMultiLabel) {
    return Status::InvalidArgument(fmt::format("--label: dataset '{}' has label kind '{}' (no classes)", d.name,
                                               LabelKindName(d.label_kind)));
  }
  for (const auto& l : labels) {
    auto it = std::find(d.class_names.begin(), d.class_names.end(), l);
    if (it != d.class_names.end()) {
      out.insert(static_cast<int32_t>(it - d.class_names.begin()));
      continue;
    }
    int32_t v = -1;
    auto [p, ec] = std::from_chars(l.data(), l.data() + l.size(), v);
    // An attached dataset with int labels has no class names: any index.
    const bool any_index = d.attached() && d.class_names.empty();
    if (ec == std::errc() && p == l.data() + l.size() && v >= 0 &&
        (any_index || static_cast<size_t>(v) < d.class_names.size())) {
      out.insert(v);
      continue;
    }
    std::string names;
    for (size_t i = 0; i < d.class_names.size() && i < 20; ++i) names += (i ? ", " : "") + d.class_names[i];
    if (d.class_names.size() > 20) names += ", ...";
    return Status::InvalidArgument(fmt::format("--label '{}': dataset '{}' has no such class (classes: {}; or an "
                                               "index 0..{})",
                                               l, d.name, names, d.class_names.size() - 1));
  }
  return out;
}

StatusOr<std::pair<std::string, std::string>> ParseExtraFilter(std::string_view text) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return Status::InvalidArgument(fmt::format("--extra '{}': use key=value", text));
  }
  return std::pair<std::string, std::string>(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
}

bool Matches(const MetaRow& m, const std::set<int32_t>& labels,
             const std::vector<std::pair<std::string, std::string>>& extra) {
  if (!labels.empty()) {
    bool hit = m.label && labels.count(*m.label);
    for (int32_t l : m.labels) hit = hit || labels.count(l);
    if (!hit) return false;
  }
  for (const auto& [k, v] : extra) {
    auto it = m.extra.find(k);
    if (it == m.extra.end() || it->second != v) return false;
  }
  return true;
}

std::vector<SampleKey> SampleFraction(const std::vector<SampleKey>& keys, double fraction, uint64_t seed) {
  const size_t k = static_cast<size_t>(
      std::llround(std::clamp(fraction, 0.0, 1.0) * static_cast<double>(keys.size())));
  std::vector<std::pair<uint64_t, SampleKey>> ranked;
  ranked.reserve(keys.size());
  for (SampleKey key : keys) {
    uint8_t le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(key >> (8 * i));
    ranked.emplace_back(XXH64(le, sizeof le, seed), key);
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<SampleKey> out;
  for (size_t i = 0; i < k && i < ranked.size(); ++i) out.push_back(ranked[i].second);
  std::sort(out.begin(), out.end());
  return out;
}

Selection NewSelection(const DatasetInfo& d, const std::string& split) {
  Selection sel;
  sel.dataset = d.name;
  sel.split = split;
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  sel.created = buf;
  return sel;
}

namespace {

struct ScannedKey {
  LabeledKey key;
  bool matched = false;
};

// ScanMeta for an attached dataset (store/attached_scan.h): keys and labels
// from the key snapshot and the foreign table. Samples that cannot be read
// are left out, with a warning on stderr that counts them and names the
// first; there are no extra columns to filter on.
Status ScanAttached(net::Session& s, const DatasetInfo& d, const std::vector<SegmentInfo>& segs,
                    const SelectOptions& o,
                    const std::function<Status(const BlockRef&, std::vector<MetaRow>&)>& on_block) {
  if (!o.extra.empty()) {
    return Status::InvalidArgument(
        fmt::format("--extra: dataset '{}' is attached to a table and has no extra columns", d.name));
  }
  int64_t problems = 0;
  std::string first;
  Status st = ScanAttachedMeta(s, d, segs, o.concurrency, on_block, [&](SampleKey, const Status& p) {
    if (problems++ == 0) first = p.message();
  });
  if (problems > 0) {
    std::fprintf(stderr, "cqlstream: WARNING: %lld sample(s) of '%s' could not be read and are not selected; the "
                 "first: %s\n", static_cast<long long>(problems), d.name.c_str(), first.c_str());
  }
  return st;
}

// Every committed sample of o.split with its stratum and whether it matches
// o's label and extra filters, ascending key.
StatusOr<std::vector<ScannedKey>> ScanSplit(net::Session& s, const DatasetInfo& d, const SelectOptions& o) {
  if (o.split.empty()) return Status::InvalidArgument("--split is required");
  const auto segs = d.SplitSegments(o.split);
  bool known = false;
  for (const auto& g : d.segments) known = known || g.split == o.split;
  if (!known) {
    std::string have;
    for (const auto& sp : d.splits()) have += (have.empty() ? "" : ", ") + sp;
    return Status::NotFound(fmt::format("dataset '{}' has no split '{}' (splits: {})", d.name, o.split, have));
  }
  CQLS_ASSIGN_OR_RETURN(auto labels, ResolveLabelFilter(d, o.labels));
  std::vector<ScannedKey> keys;
  Mutex mu;
  auto on_block = [&](const BlockRef&, std::vector<MetaRow>& rows) {
    std::vector<ScannedKey> mine;
    mine.reserve(rows.size());
    for (const auto& m : rows) mine.push_back({{m.key, StratumOf(m.label, m.labels)}, Matches(m, labels, o.extra)});
    MutexLock l(&mu);
    keys.insert(keys.end(), mine.begin(), mine.end());
    return Status::OK();
  };
  if (d.attached()) {
    CQLS_RETURN_IF_ERROR(ScanAttached(s, d, segs, o, on_block));
  } else {
    CQLS_RETURN_IF_ERROR(ScanMeta(s, d, segs, o.concurrency, on_block));
  }
  std::sort(keys.begin(), keys.end(), [](const ScannedKey& a, const ScannedKey& b) { return a.key.key < b.key.key; });
  keys.erase(std::unique(keys.begin(), keys.end(),
                         [](const ScannedKey& a, const ScannedKey& b) { return a.key.key == b.key.key; }),
             keys.end());
  return keys;
}

}  // namespace

StatusOr<std::vector<LabeledKey>> ScanMatching(net::Session& s, const DatasetInfo& d, const SelectOptions& o) {
  CQLS_ASSIGN_OR_RETURN(auto scanned, ScanSplit(s, d, o));
  std::vector<LabeledKey> out;
  for (const auto& k : scanned) {
    if (k.matched) out.push_back(k.key);
  }
  return out;
}

StatusOr<Selection> Select(net::Session& s, const DatasetInfo& d, const SelectOptions& o) {
  if (o.fraction && (*o.fraction < 0 || *o.fraction > 1)) {
    return Status::InvalidArgument(fmt::format("--fraction {} must be within [0, 1]", *o.fraction));
  }
  CQLS_ASSIGN_OR_RETURN(auto scanned, ScanSplit(s, d, o));
  std::vector<SampleKey> keys;
  for (const auto& k : scanned) {
    if (k.matched) keys.push_back(k.key.key);
  }
  if (o.fraction) keys = SampleFraction(keys, *o.fraction, o.seed);
  if (o.invert) {
    // Both lists ascend: the complement is one merge pass.
    std::vector<SampleKey> rest;
    size_t j = 0;
    for (const auto& k : scanned) {
      while (j < keys.size() && keys[j] < k.key.key) ++j;
      if (j == keys.size() || keys[j] != k.key.key) rest.push_back(k.key.key);
    }
    keys = std::move(rest);
  }
  Selection sel = NewSelection(d, o.split);
  sel.keys = std::move(keys);
  std::string q = "split=" + o.split;
  for (const auto& l : o.labels) q += " label=" + l;
  for (const auto& [k, v] : o.extra) q += " extra=" + k + "=" + v;
  if (o.fraction) q += fmt::format(" fraction={} seed={}", *o.fraction, o.seed);
  if (o.invert) q += " invert";
  sel.query = q;
  return sel;
}

}  // namespace cqlstream::store
