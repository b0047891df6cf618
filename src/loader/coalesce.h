// Copyright (c) cqlstream authors.
//
// Coalesced reads of small samples (no sockets here): which samples may
// share a request, how the samples issued together are grouped, and how one
// answer of a grouped read is handed out to the samples it holds.
//
// A sample may share a request when its dataset is native (layout 1) and its
// segment's max_size hint is at most one chunk (so it is exactly one row) and
// at most kCoalesceMaxSampleBytes. Samples issued together (one Refill: the
// same window opening) that live in the same segment and on the same
// replicas (net::Session::ReplicaSetOf of their partition's token; one set
// on a single node) are grouped, in issue order, into one
// `SELECT ... WHERE seg = ? AND idx IN ?` of at most `cap` keys
// (CoalesceCap), sent to one of those replicas: the node that answers holds
// every key it was asked for, so no key costs a hop between nodes (a
// coordinator fetches the keys it does not hold from their replicas, one
// internal read each). The plan order (the per-sample shuffle) is not
// changed, only samples issued at the same moment share a request. A group
// holds at most kCoalesceMaxGroupBytes of samples by its segment's max_size
// hint (GroupLimitForSize). The read is sent unpaged with PER PARTITION
// LIMIT 2 (store::DataReadManyQuery): Cassandra reads the keys of a paged
// IN one after another through its multi-partition pager, and starts them
// all at once unpaged (docs/benchmarks-tiny.md "Tiny samples: unpaged groups");
// the limit bounds the answer to two rows per key. By the hint, a
// group's bytes stay below ScyllaDB's soft limit for unpaged reads (1 MiB,
// above which it warns); rows that break the hint (a wrong max_size, a
// damaged sample's second row) can pass it, and past the hard limit (100
// MiB by default) the read fails and its samples are read alone. A group
// of one is read as a single sample, not as an IN of one key.
//
// CoalescedSink receives the rows of such an answer and passes each row to
// the sink of the sample whose key the row carries (the row's first two
// cells, seg and idx, come before its other cells: DataReadQuery's column
// order). A row for a key that was not asked for, or a key cell that is not
// an int, is an error of the whole request (error()); from then on no cell
// is passed to any member, so an answer can never write into another
// sample's memory. Each member sink sees its rows numbered from 0, as in a
// single-sample answer, so its own checks (store::SampleRowCells) apply
// unchanged.
//
// Thread-safety: SegmentGrouper and CoalescedSink are single-owner objects
// (one Refill; one answer's decoder); no locking.
#ifndef CQLSTREAM_LOADER_COALESCE_H_
#define CQLSTREAM_LOADER_COALESCE_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cql/frame_decoder.h"
#include "cqlstream/dataset.h"
#include "cqlstream/status.h"
#include "util/mix.h"

namespace cqlstream::loader {

// The largest sample (by its segment's max_size hint) that is read coalesced.
inline constexpr int64_t kCoalesceMaxSampleBytes = 16 << 10;
// LoaderOptions::coalesce: 0 picks kDefaultCoalesce keys per request; at
// most kMaxCoalesce (ScyllaDB refuses more than 100 partition keys in one
// IN by default: max_partition_key_restrictions_per_query).
inline constexpr int kDefaultCoalesce = 64;
inline constexpr int kMaxCoalesce = 100;
// The sample bytes one group may hold (by the max_size hint): half of
// ScyllaDB's 1 MiB (its page size, and its soft limit for an unpaged
// read's memory), leaving room for the rows' other cells.
inline constexpr int64_t kCoalesceMaxGroupBytes = 512 << 10;

// SegmentGrouper::Add's `pack` for the foreign reads of an attached dataset.
inline constexpr int32_t kForeignReadGroup = -2;

// Keys per group for samples of at most `seg_max_size` bytes:
// kCoalesceMaxGroupBytes / seg_max_size, at least 1; 0 (no limit beyond
// CoalesceCap's) for a size <= 0.
size_t GroupLimitForSize(int64_t seg_max_size);

// Whether the samples of a segment whose max_size hint is `seg_max_size`
// (< 0: unknown) in a dataset of `chunk_size` (<= 0: unknown) may share a
// request: one row each, and small.
bool Coalescible(int64_t seg_max_size, int32_t chunk_size);

// InvalidArgument unless `option` (LoaderOptions::coalesce) is in
// [0, kMaxCoalesce].
Status CheckCoalesceOption(int option);

// Keys per request for a window of `window` samples: the option (0: the
// default) but at most a quarter of the window, so that a small window still
// keeps several requests in flight; at least 1.
int CoalesceCap(int option, int window);

// Groups items (tasks) by segment and replica set, in the order they are
// added; a group is handed out when it reaches `cap` items, the rest by
// TakeAll().
template <class T>
class SegmentGrouper {
 public:
  explicit SegmentGrouper(int cap) : cap_(cap < 1 ? 1 : static_cast<size_t>(cap)) {}

  // Adds `item` of segment `seg` whose partition lives on the replicas
  // `replicas` (an id; 0: unknown, one set); returns the group it
  // completes, if any. `limit` (> 0): the groups of `seg` are full at
  // min(cap, limit) items.
  //
  // `pack` >= 0 (packed reads, loader/packed_order.h): the item is a member
  // of that pack of `seg`, grouped with the other members only (`replicas`
  // unused: a pack is one partition) and full at `limit` (its pack size)
  // whatever the cap: a pack read is one partition at the node however
  // many members it names.
  //
  // `pack` = kForeignReadGroup: an attached dataset's foreign read, grouped
  // as other items are but apart from the key lookups of the same segment
  // and replicas.
  std::optional<std::vector<T>> Add(int32_t seg, T item, size_t limit = 0, uint64_t replicas = 0,
                                    int32_t pack = -1) {
    const Key key = pack >= 0 ? Key{seg, 0, pack} : Key{seg, replicas, pack};
    auto [it, fresh] = open_.try_emplace(key, groups_.size());
    if (fresh) groups_.emplace_back();
    std::vector<T>& g = groups_[it->second];
    g.push_back(std::move(item));
    const size_t size = pack >= 0 ? std::max<size_t>(limit, 1) : (limit > 0 ? std::min(cap_, limit) : cap_);
    if (g.size() < size) return std::nullopt;
    std::vector<T> full = std::move(g);
    g.clear();
    open_.erase(it);  // the next item of this segment starts a new group
    return full;
  }

  // The groups not yet full, in the order of their first item (empty ones
  // left out); the grouper is empty afterwards.
  std::vector<std::vector<T>> TakeAll() {
    std::vector<std::vector<T>> out;
    for (auto& g : groups_) {
      if (!g.empty()) out.push_back(std::move(g));
    }
    groups_.clear();
    open_.clear();
    return out;
  }

 private:
  struct Key {
    int32_t seg;
    uint64_t replicas;
    int32_t pack;  // -1: not a pack group; kForeignReadGroup: foreign reads
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return SplitMix64(static_cast<uint32_t>(k.seg) ^ (static_cast<uint64_t>(static_cast<uint32_t>(k.pack)) << 32)) ^
             k.replicas;
    }
  };
  size_t cap_;
  std::unordered_map<Key, size_t, KeyHash> open_;  // (segment, replicas) -> its open group in groups_
  std::vector<std::vector<T>> groups_;
};

// The sink of one grouped answer: passes each row to the member whose key
// it carries (see the file comment).
class CoalescedSink final : public cql::CellSink {
 public:
  struct Member {
    SampleKey key;
    std::shared_ptr<cql::CellSink> sink;
  };
  // `members`: distinct keys of one segment.
  explicit CoalescedSink(std::vector<Member> members);

  Status OnRowsBegin(const cql::RowsMetadata& metadata, int32_t rows) override;
  std::span<uint8_t> CellDestination(int32_t row, int32_t col, int32_t size) override;
  Status OnCell(int32_t row, int32_t col, std::optional<cql::ByteView> data) override;
  void OnCellAbandoned(int32_t row, int32_t col) override;

  // The first problem of the answer as a whole (a key not asked for, a
  // malformed key cell), or OK.
  const Status& error() const { return err_; }
  // Rows passed to member `i` (0: the answer did not hold it).
  int32_t rows_of(size_t i) const { return rows_[i]; }
  size_t size() const { return members_.size(); }
  // Rows in the answer.
  int32_t rows() const { return rows_total_; }

 private:
  void Fail(std::string what);

  std::vector<Member> members_;                      // in the caller's order
  std::vector<std::pair<SampleKey, size_t>> by_key_;  // sorted: key -> index
  std::vector<int32_t> rows_;                         // by index
  int32_t rows_total_ = 0;
  // The row being read: its seg cell (passed on with the idx cell) and its
  // member, once the idx cell named it.
  int32_t row_ = -1;
  std::optional<int32_t> seg_;
  std::optional<size_t> member_;
  int32_t member_row_ = 0;
  Status err_;
};

}  // namespace cqlstream::loader

#endif  // CQLSTREAM_LOADER_COALESCE_H_
