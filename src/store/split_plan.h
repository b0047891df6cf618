// Copyright (c) cqlstream authors.
//
// The per-split decision of an ingest: what a run does with one split of its
// source, given the segment rows the dataset already holds. Pure functions
// (no database): the caller reads the segments table, scans committed paths
// where the decision asks for it, and writes.
//
// For the split's (source_id, fingerprint) among the rows of the same split:
//
//   same source, same fingerprint, sealed  -> complete   (nothing to write)
//   same source, same fingerprint, open    -> resume     (that segment, from
//                                             its next_pos)
//   same source, other fingerprints only   -> append     (a new segment with
//                                             the paths those segments have
//                                             not committed; their open
//                                             segments are superseded), or
//                                             nothing new when no path is left
//   no segment of this source              -> new        (a new segment)
//
// In every case but complete, paths committed by the source's other segments
// are left out of the listing (a resumed segment continues such a filtered
// listing). New and appended segments are checked for samples that other
// sources committed under the same path and size (CheckForeignPaths in
// ingest.cc).
//
// Thread-safety: value types and pure functions.
#ifndef CQLSTREAM_STORE_SPLIT_PLAN_H_
#define CQLSTREAM_STORE_SPLIT_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cqlstream/status.h"
#include "store/segments_table.h"
#include "store/source.h"

namespace cqlstream::store {

enum class SplitAction { kNew, kResume, kAppend, kComplete, kNothingNew };
// "new", "resumed", "appended", "complete", "nothing new" (SplitResult::action).
const char* SplitActionName(SplitAction a);

// What to do with one split, before its listing is filtered.
struct SplitDecision {
  SplitAction action = SplitAction::kNew;
  std::optional<SegRow> segment;   // complete / resume: the segment with the same fingerprint
  std::vector<SegRow> exclude;     // the source's other segments: their committed paths are left out
  std::vector<SegRow> supersede;   // append: the source's open segments, sealed before writing
  bool check_foreign = false;      // new / append: check other sources' paths
};

// The decision for `split` whose shard listing has `source_id` and
// `fingerprint`, given every segment row of the dataset (`rows`, in seg
// order). Of several segments with the same fingerprint the last one counts.
SplitDecision DecideSplit(const std::vector<SegRow>& rows, const std::string& split, const std::string& source_id,
                          const std::string& fingerprint);

// The plan of one split: the decision settled against the filtered listing.
struct SplitPlan {
  std::string split;
  std::string source_id;
  std::string fingerprint;
  std::vector<const SourceItem*> items;  // the segment's listing (borrowed from the source listing)
  SplitAction action = SplitAction::kNew;
  int32_t seg = -1;
  Committed start;         // the segment's committed state when the run starts
  int64_t writetime = 0;   // its row's write time (segment writes go above it)
  std::vector<SegRow> supersede;

  // Items (and listed bytes) from start.next_pos on.
  size_t remaining() const;
  int64_t remaining_bytes() const;
  bool writes() const {
    return action == SplitAction::kNew || action == SplitAction::kResume || action == SplitAction::kAppend;
  }
};

// Settles `decision` for a split whose listing, without the paths committed
// by decision.exclude, is `items`: an append with nothing left becomes
// nothing new; a resumed segment whose next_pos / count do not fit the
// listing (0 <= count <= next_pos <= items) is Corruption (naming the
// segment and `dataset`).
StatusOr<SplitPlan> SettleSplit(const SplitDecision& decision, std::string split, std::string source_id,
                                std::string fingerprint, std::vector<const SourceItem*> items,
                                const std::string& dataset);

// The listed size of an item (image plus target), at least 1: what the
// memory budget reserves before the item is read.
int64_t ListedSize(const SourceItem& it);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_SPLIT_PLAN_H_
