// Copyright (c) cqlstream authors.
//
// Split: the pure part of `cqlstream split` (issue 11 §2). Partitions the
// keys of one split into disjoint parts by fraction, into cross-validation
// folds, or balances classes by down-sampling; the CLI scans the metadata
// (store/scan) and writes the parts as selection files.
//
// Every choice is deterministic: a key's rank is xxh64 of the key (8 bytes,
// little-endian) with a seed derived from the user's seed, so the same keys,
// labels and seed always give the same parts, independent of the order the
// keys arrive in.
//
//   Partition   --into a=f1,b=f2,...  (fractions > 0, sum <= 1): inside each
//               stratum (all keys, or one class with --stratify) the keys in
//               rank order are cut at round(n * (f1 + ... + fi)); part i gets
//               the i-th cut. Every key lands in at most one part, and in
//               exactly one when the fractions sum to 1.
//   Folds       --folds K --fold I: inside each stratum, the key of rank r
//               goes to fold (offset + r) mod K, where offset carries on
//               from stratum to stratum (so fold sizes differ by at most one
//               overall); "val" is fold I, "train" all the others.
//   Balance     every class keeps its `min class count` keys of lowest rank.
//
// Strata and classes: a key's stratum is its class label; for multilabel
// datasets the smallest of its labels; keys without a label form one
// stratum of their own (label kNoLabel).
//
// Thread-safety: pure functions on values.
#ifndef CQLSTREAM_STORE_SPLIT_H_
#define CQLSTREAM_STORE_SPLIT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cqlstream/dataset.h"
#include "cqlstream/status.h"

namespace cqlstream::store {

inline constexpr int32_t kNoLabel = -1;

struct LabeledKey {
  SampleKey key = 0;
  int32_t label = kNoLabel;  // the stratum / class (see above)
};

struct SplitPart {
  std::string name;
  double fraction = 0;
};

// Parses "train=0.8,val=0.2": names [a-z0-9_-]{1,64}, unique; fractions
// finite, in (0, 1], summing to at most 1 (+1e-9). Errors name the problem.
StatusOr<std::vector<SplitPart>> ParseSplitParts(std::string_view text);

// The keys of each part (in the order of `parts`), each sorted ascending.
// REQUIRES: parts as ParseSplitParts returns them.
std::vector<std::vector<SampleKey>> PartitionKeys(const std::vector<LabeledKey>& keys,
                                                  const std::vector<SplitPart>& parts, bool stratify, uint64_t seed);

struct FoldParts {
  std::vector<SampleKey> train, val;  // sorted ascending
};
// Cross-validation: fold `fold` of `folds` as "val", the others as "train".
// InvalidArgument unless 2 <= folds and 0 <= fold < folds.
StatusOr<FoldParts> FoldKeys(const std::vector<LabeledKey>& keys, int folds, int fold, bool stratify,
                             uint64_t seed);

// Down-samples every class to the size of the smallest one (classes with
// no key are not classes here). The result keeps the input's order.
std::vector<LabeledKey> BalanceClasses(const std::vector<LabeledKey>& keys, uint64_t seed);

// The stratum of a metadata row: its label, else its smallest label, else kNoLabel.
int32_t StratumOf(const std::optional<int32_t>& label, const std::vector<int32_t>& labels);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_SPLIT_H_
