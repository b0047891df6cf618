// Copyright (c) cqlstream authors.
//
// The key snapshot rows of an attached split's old generations
// (store/attach.h, docs/schema.md "Attached datasets"). After `attach
// --refresh` commits generation G+1, the k_ rows of generation G stay (a
// Loader opened before the refresh reads them to the end of its epoch) and
// those of G-1 and older are deleted. What G was is remembered in one row of
// the snapshot table itself, beside the sample rows and never one of them:
//
//   k_<dataset> row (seg = kRetiredSeg, idx = RetiredIdx(split)):
//     key := split_len: uint8, split: split_len bytes,
//            entry*          (at most kMaxRetiredSegments)
//     entry := seg: int32 BE (>= 0), count: int64 BE (1 .. 2^31 - 1)
//
// Its bytes are not trusted (DecodeRetired: Corruption naming the problem);
// a row of another split (an idx collision) is left alone, never used.
// Deleting a generation costs one statement per kRetiredDeleteChunk keys
// (the snapshot's partition key is (seg, idx)): as many requests as the
// attach scan's writes.
//
// Thread-safety: free functions; RetireGeneration runs its own workers.
#ifndef CQLSTREAM_STORE_ATTACHED_RETIRED_H_
#define CQLSTREAM_STORE_ATTACHED_RETIRED_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cqlstream/status.h"
#include "net/session.h"

namespace cqlstream::store {

inline constexpr int32_t kRetiredSeg = -1;
inline constexpr size_t kMaxRetiredSegments = 64;
inline constexpr int32_t kRetiredDeleteChunk = 100;

struct RetiredSegment {
  int32_t seg = 0;
  int64_t count = 0;
  bool operator==(const RetiredSegment&) const = default;
};

// The idx of a split's retired row (a stable hash of the name, >= 0).
int32_t RetiredIdx(const std::string& split);
// REQUIRES: split.size() <= 255, segs.size() <= kMaxRetiredSegments.
std::string EncodeRetired(const std::string& split, const std::vector<RetiredSegment>& segs);
// The segments the row lists; NotFound when it is another split's row.
StatusOr<std::vector<RetiredSegment>> DecodeRetired(const std::string& split, std::span<const uint8_t> bytes);

struct RetireReport {
  int64_t deleted_rows = 0;  // k_ rows of older generations deleted
};

// After a refresh of `split` committed, `replaced` being the generation it
// replaced (now kept): deletes the k_ rows of the generation the retired row
// lists, then records `replaced` there. An error leaves the rows it did not
// delete (never read; a later refresh or drop removes them).
StatusOr<RetireReport> RetireGeneration(net::Session& s, const std::string& keyspace, const std::string& dataset,
                                        const std::string& split, const std::vector<RetiredSegment>& replaced,
                                        int concurrency);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_ATTACHED_RETIRED_H_
