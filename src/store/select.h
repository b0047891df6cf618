// Copyright (c) cqlstream authors.
//
// Select: freezes a subset of one split into a Selection (selection file of
// docs/schema.md). Scans the metadata of the split's segments (committed
// indices only), keeps the samples matching every filter, then optionally a
// deterministic fraction:
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

namespace cqlstream::store {

struct SelectOptions {
  std::string split;
  std::vector<std::string> labels;
  std::vector<std::pair<std::string, std::string>> extra;
  std::optional<double> fraction;
  uint64_t seed = 0;
  int concurrency = 16;
};

StatusOr<Selection> Select(net::Session& s, const DatasetInfo& d, const SelectOptions& o);

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
