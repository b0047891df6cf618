// Copyright (c) cqlstream authors.
//
// The segments table as ingest keeps it (docs/schema.md, "visibility"):
// reading a dataset's segment rows with their write times, claiming the next
// free segment number with a lightweight transaction, sealing a segment that
// an append supersedes, and the statement that advances a segment's
// committed state (count, bytes, max_size, size_hist, next_pos).
//
//   segment row := seg split source_id source fingerprint
//                  count bytes max_size size_hist next_pos state
//   state       : 'open' (count may still grow) | 'sealed' (final)
//
// Every write carries a client timestamp above the row's current write time,
// so an older watermark can never overwrite a newer one.
//
// Nothing read here is trusted blindly: a column of another type than the
// table's is an error naming it (typed getters); a null column reads as 0 / ""
// (a row claimed but never committed has no size_hist).
//
// Thread-safety: free functions, thread-safe (the Session is); the value
// types are plain data.
#ifndef CQLSTREAM_STORE_SEGMENTS_TABLE_H_
#define CQLSTREAM_STORE_SEGMENTS_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cqlstream/status.h"
#include "net/session.h"

namespace cqlstream::store {

// Buckets of segments.size_hist (see SizeBucket, store/ingest.h).
inline constexpr size_t kSizeHistBuckets = 64;

// The committed state of a segment (what its row says).
struct Committed {
  int64_t count = 0;
  int64_t bytes = 0;
  int64_t max_size = 0;
  int64_t next_pos = 0;
  std::vector<int64_t> hist = std::vector<int64_t>(kSizeHistBuckets, 0);
  bool operator==(const Committed&) const = default;
};

// A row of the segments table, as ingest needs it.
struct SegRow {
  int32_t seg = 0;
  std::string split, source_id, fingerprint, state, source;
  Committed c;
  int64_t writetime = 0;  // the latest of writetime(state), writetime(count) (µs)
  bool sealed() const { return state == "sealed"; }
};

// Microseconds since the epoch: the client timestamps of segment writes.
int64_t NowMicros();

// The segment rows of `dataset`, sorted by seg; empty when the keyspace has
// no segments table yet.
StatusOr<std::vector<SegRow>> ReadSegRows(net::Session& s, const std::string& keyspace, const std::string& dataset);

// What a new segment row holds.
struct NewSegment {
  std::string split, source_id, source, fingerprint;
};

// A claimed segment: its number and the write time of its row (the
// transaction's own; later writes of the row must go above it).
struct ClaimedSegment {
  int32_t seg = -1;
  int64_t writetime = 0;
};

// Claims the next free segment number (one above the highest row) with
// INSERT ... IF NOT EXISTS, so that shards on several machines never collide;
// the row starts 'open' with a zero committed state.
StatusOr<ClaimedSegment> ClaimSegment(net::Session& s, const std::string& keyspace, const std::string& dataset,
                                      const NewSegment& seg);

// Seals an open segment that an append replaces (it can never be resumed).
Status SupersedeSegment(net::Session& s, const std::string& keyspace, const std::string& dataset, const SegRow& g,
                        cql::Consistency consistency);

// The prepared statements that advance a segment's committed state: `update`
// keeps it open, `seal` also sets state = 'sealed'.
struct SegmentCommitStatements {
  net::PreparedPtr update;
  net::PreparedPtr seal;
};
StatusOr<SegmentCommitStatements> PrepareSegmentCommit(net::Session& s, const std::string& keyspace);

// The statement that writes `c` into segment `seg` of `dataset` (bound
// values in the order of the prepared statements above), with client
// timestamp `timestamp_us` and the update time `now_ms`.
net::Statement SegmentCommitStatement(const SegmentCommitStatements& p, const std::string& dataset, int32_t seg,
                                      const Committed& c, bool seal, int64_t timestamp_us, int64_t now_ms);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_SEGMENTS_TABLE_H_
