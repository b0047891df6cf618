// Copyright (c) cqlstream authors.
#include "store/stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>

#include "store/scan.h"
#include "util/mutex.h"

namespace cqlstream::store {

std::vector<int64_t> MergeHistograms(const std::vector<std::vector<int64_t>>& hists) {
  std::vector<int64_t> out;
  for (const auto& h : hists) {
    if (h.size() > out.size()) out.resize(h.size(), 0);
    for (size_t b = 0; b < h.size(); ++b) out[b] += h[b];
  }
  return out;
}

int64_t HistogramQuantile(const std::vector<int64_t>& hist, int64_t max_size, double q) {
  int64_t n = 0;
  for (int64_t c : hist) n += c;
  if (n == 0) return 0;
  const double target = std::clamp(q, 0.0, 1.0) * static_cast<double>(n);
  int64_t cum = 0;
  for (size_t b = 0; b < hist.size(); ++b) {
    if (hist[b] == 0) continue;
    if (static_cast<double>(cum + hist[b]) >= target) {
      const double lo = std::ldexp(1.0, static_cast<int>(b));
      double hi = std::ldexp(1.0, static_cast<int>(b) + 1) - 1;
      if (max_size > 0) hi = std::min(hi, static_cast<double>(max_size));
      hi = std::max(hi, lo);
      const double frac = (target - static_cast<double>(cum)) / static_cast<double>(hist[b]);
      return static_cast<int64_t>(std::llround(lo + (hi - lo) * std::clamp(frac, 0.0, 1.0)));
    }
    cum += hist[b];
  }
  return max_size;
}

SizeSummary SummarizeSizes(const std::vector<int64_t>& hist, int64_t max_size) {
  SizeSummary s;
  for (size_t b = 0; b < hist.size(); ++b) {
    if (hist[b] > 0 && s.count == 0) s.min_at_least = static_cast<int64_t>(1) << b;
    s.count += hist[b];
  }
  s.median = HistogramQuantile(hist, max_size, 0.5);
  s.p99 = HistogramQuantile(hist, max_size, 0.99);
  s.max = max_size;
  return s;
}

StatusOr<std::map<std::string, std::vector<int64_t>>> ClassCounts(net::Session& s, const DatasetInfo& d, int ranges,
                                                                 int concurrency, int64_t most_uncommitted) {
  std::map<std::string, std::vector<int64_t>> out;
  std::map<int32_t, std::pair<std::string, int64_t>> segs;  // seg -> (split, count)
  int64_t committed = 0;
  for (const auto& g : d.segments) {
    segs[g.seg] = {g.split, g.count};
    out[g.split].assign(d.class_names.size(), 0);
    // idx is an int: no segment commits more (and the sum fits: at most
    // kMaxSegments of them).
    committed += std::clamp<int64_t>(g.count, 0, int64_t{1} << 31);
  }
  // An attached dataset has no metadata table of its own.
  if (d.attached()) return out;
  if (d.label_kind != LabelKind::kClass && d.label_kind != LabelKind::kMultiLabel) return out;
  const int64_t most = std::max(most_uncommitted, committed);
  std::atomic<int64_t> uncommitted{0};
  Mutex mu;
  const size_t k = d.class_names.size();
  CQLS_RETURN_IF_ERROR(
      ScanMetaByTokenRanges(s, d, "label, labels", ranges, concurrency, [&](const cql::Rows& r) {
        std::map<std::string, std::vector<int64_t>> local;
        int64_t skipped = 0;
        for (int32_t i = 0; i < r.row_count(); ++i) {
          auto seg = r.value(i, 0);
          auto idx = r.value(i, 2);
          if (!seg.ok() || !idx.ok() || seg->kind() != Value::Kind::kInt || idx->kind() != Value::Kind::kInt) continue;
          auto it = segs.find(seg->as_int());
          if (it == segs.end() || idx->as_int() >= it->second.second) {  // not committed
            ++skipped;
            continue;
          }
          auto& counts = local[it->second.first];
          if (counts.empty()) counts.assign(k, 0);
          auto label = r.value(i, 3);
          if (label.ok() && label->kind() == Value::Kind::kInt && label->as_int() >= 0 &&
              static_cast<size_t>(label->as_int()) < k) {
            counts[static_cast<size_t>(label->as_int())]++;
          }
          auto labels = r.value(i, 4);
          if (labels.ok() && labels->kind() == Value::Kind::kList) {
            for (const auto& v : labels->as_list()) {
              if (v.kind() == Value::Kind::kInt && v.as_int() >= 0 && static_cast<size_t>(v.as_int()) < k) {
                counts[static_cast<size_t>(v.as_int())]++;
              }
            }
          }
        }
        if (uncommitted.fetch_add(skipped) + skipped > most) {
          return Status::Unsupported(fmt::format(
              "the class-count scan of {}.{} met more than {} rows past the committed samples, the most it reads "
              "past the dataset's {} committed ones (or the server pages without end; --no-class-counts skips "
              "the scan)",
              d.keyspace, d.meta_table(), most, committed));
        }
        MutexLock l(&mu);
        for (const auto& [split, counts] : local) {
          auto& dst = out[split];
          for (size_t c = 0; c < counts.size(); ++c) dst[c] += counts[c];
        }
        return Status::OK();
      }));
  return out;
}

std::string HumanBytes(double b) {
  if (b < 1000) return fmt::format("{:.0f} B", b);
  if (b < 1e6) return fmt::format("{:.1f} kB", b / 1e3);
  if (b < 1e9) return fmt::format("{:.1f} MB", b / 1e6);
  if (b < 1e12) return fmt::format("{:.2f} GB", b / 1e9);
  return fmt::format("{:.2f} TB", b / 1e12);
}

}  // namespace cqlstream::store
