// Copyright (c) cqlstream authors.
//
// Select: freezes a subset of one split into a Selection (selection file of
// docs/schema.md). Scans the metadata of the split's segments (committed
// indices only), keeps the samples matching every filter, then optionally a
// deterministic fraction (an attached dataset is filtered by the label of
// its foreign rows, store/attached_scan.h; --extra is refused there):
//
//   --label L      (repeatable) class name or class index; a sample matches
//                  when its label (class) or any of its labels (multilabel)
//                  is one of them
//   --extra k=v    (repeatable) extra[k] == v; all must match
//   --fraction F --seed X
//                  keeps round(F * n) of the n matching samples: those with
//                  the smallest xxh64(key64 as 8 little-endian bytes, seed X).
//                  The same inputs always give the same keys, and a larger
//                  fraction gives a superset.
//   --invert       the complement, within the split, of what the options
//                  above select (of every sample when no option is given:
//                  an empty selection)
//
// Thread-safety: Select runs on the calling thread plus scan workers.
#ifndef CQLSTREAM_STORE_SELECT_H_
#define CQLSTREAM_STORE_SELECT_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cqlstream/dataset.h"
#include "cqlstream/status.h"
#include "net/session.h"
#include "store/scan.h"
#include "store/split.h"

namespace cqlstream::store {

struct SelectOptions {
  std::string split;
  std::vector<std::string> labels;
  std::vector<std::pair<std::string, std::string>> extra;
  std::optional<double> fraction;
  uint64_t seed = 0;
  bool invert = false;
  int concurrency = 16;
};

StatusOr<Selection> Select(net::Session& s, const DatasetInfo& d, const SelectOptions& o);

// The samples of o.split that match o's label and extra filters (fraction
// and invert are not applied), each with its stratum (store/split.h
// StratumOf), in ascending key order. NotFound names the splits when the
// dataset has no split o.split. What `cqlstream split` partitions.
StatusOr<std::vector<LabeledKey>> ScanMatching(net::Session& s, const DatasetInfo& d, const SelectOptions& o);

// The empty Selection of d's split with `created` set to now (UTC) and the
// dataset and split names filled in.
Selection NewSelection(const DatasetInfo& d, const std::string& split);

// Class indices for --label values (names first, then indices). Errors name
// the value and the dataset's classes; a dataset without classes refuses.
StatusOr<std::set<int32_t>> ResolveLabelFilter(const DatasetInfo& d, const std::vector<std::string>& labels);
// Parses "k=v" (k not empty).
StatusOr<std::pair<std::string, std::string>> ParseExtraFilter(std::string_view text);
bool Matches(const MetaRow& m, const std::set<int32_t>& labels,
             const std::vector<std::pair<std::string, std::string>>& extra);
// The deterministic fraction described above; `keys` sorted, result sorted.
std::vector<SampleKey> SampleFraction(const std::vector<SampleKey>& keys, double fraction, uint64_t seed);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_SELECT_H_
