// Copyright (c) cqlstream authors.
//
// Statistics for `cqlstream info`: per-split totals and size distributions
// from the segments' size histograms (no data read), and per-class sample
// counts from a parallel token-range scan of the metadata table.
//
// Size approximations: size_hist bucket b holds the sizes in [2^b, 2^(b+1)).
// A quantile is interpolated linearly inside the bucket where the cumulative
// count crosses it (the bucket's upper end clamped to the largest size);
// min is the lower end of the first non-empty bucket; max is exact
// (segments.max_size). The error is below a factor of 2 by construction.
//
// Thread-safety: pure functions, and ClassCounts (runs scan workers).
#ifndef CQLSTREAM_STORE_STATS_H_
#define CQLSTREAM_STORE_STATS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cqlstream/dataset.h"
#include "cqlstream/status.h"
#include "net/session.h"

namespace cqlstream::store {

struct SizeSummary {
  int64_t count = 0;
  int64_t min_at_least = 0;  // lower bound of the smallest size
  int64_t median = 0;        // approximate
  int64_t p99 = 0;           // approximate
  int64_t max = 0;           // exact
};

// Sums histograms bucket by bucket.
std::vector<int64_t> MergeHistograms(const std::vector<std::vector<int64_t>>& hists);
SizeSummary SummarizeSizes(const std::vector<int64_t>& hist, int64_t max_size);
// Approximate q-quantile (0 <= q <= 1) of a histogram.
int64_t HistogramQuantile(const std::vector<int64_t>& hist, int64_t max_size, double q);

// The rows past the committed ones a class-count scan reads before it
// gives up, unless the dataset has more committed samples (then as many as
// it has). Such rows have an idx past its segment's committed count (what
// an unfinished write leaves: an ingest's commit interval, 2 s, and the
// writes in flight; a Writer's, which its caller sets) or a segment the
// catalog does not list (a catalog read at LOCAL_ONE from a stale replica,
// or a dataset made again over the tables of one half dropped). The order
// check (store/meta_scan_order.h) makes each row come once, so the
// committed rows a scan counts are bounded by the catalog (as honest as
// the server); without this bound a server paging on with rows no sample
// explains would keep `info` reading without end.
inline constexpr int64_t kMostUncommittedRows = int64_t{1} << 22;

// Committed samples per split and class: result[split][class index]
// (size = class count). Labels of multilabel datasets count once per label.
// More than max(`most_uncommitted`, committed samples) rows past the
// committed ones end the scan with Unsupported naming the table. An
// attached dataset (no metadata table) gets its splits with no counts.
StatusOr<std::map<std::string, std::vector<int64_t>>> ClassCounts(net::Session& s, const DatasetInfo& d, int ranges,
                                                                 int concurrency,
                                                                 int64_t most_uncommitted = kMostUncommittedRows);

// "1.5 MB", "820 kB", "27 B" (powers of 1000).
std::string HumanBytes(double bytes);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_STATS_H_
