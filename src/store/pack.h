// Copyright (c) cqlstream authors.
//
// The packed layout (docs/schema.md, "Packed layout"): an optional second
// copy of a dataset's small samples, many to a partition, which the loader
// reads one partition per pack (LoaderOptions::packed). The data table
// d_<name> stays as it is and stays the source of truth: retries, Fetch,
// verify and export read it, and a sample missing from its pack is read
// from it alone.
//
//   p_<name>  ((seg, pack), idx): the columns of a data row, one row per sample
//   packs     ((dataset), seg): which segments are packed, how, and when
//
// Membership: the samples of a segment of `count` samples go into
// F = floor(count / P) packs of exactly P samples by a keyed permutation
// rho of [0, count) (util/permutation.h, keyed by the pack seed and the
// segment): pack j holds idx rho(j*P + m) for m in [0, P). The other
// count - F*P samples (rho(F*P ...)) are in no pack. A random membership,
// not runs of the listing: ingest numbers samples in path order, so runs
// would put one class folder in a pack.
//
// Only sealed segments whose samples are one row each (max_size at most a
// chunk and at most kMaxPackSampleBytes) are packed; P * max_size stays
// within kMaxPackBytes, and a split has one P (the packed order needs one). A sample whose row fails its checks when packed
// (size, checksum) is left out of its pack (PackReport counts it); the
// loader reads it alone, where its own check names it.
//
// Nothing read here is trusted: a packs row is checked against its segment
// (DecodePackRow, ValidatePack) before the loader uses it.
//
// Thread-safety: free functions are thread-safe (the Session is);
// PackMembership is immutable; PackDataset calls on_progress from worker
// threads, one at a time.
#ifndef CQLSTREAM_STORE_PACK_H_
#define CQLSTREAM_STORE_PACK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cql/response.h"
#include "cqlstream/dataset.h"
#include "cqlstream/status.h"
#include "net/session.h"
#include "store/pack_options.h"
#include "util/permutation.h"

namespace cqlstream::store {

// Which samples a segment's packs hold (see the file comment).
class PackMembership {
 public:
  // REQUIRES: pack_size >= 1, count >= 0.
  PackMembership(int64_t count, int32_t pack_size, int64_t seed, int32_t seg);
  int64_t packs() const { return packs_; }                          // F
  int64_t leftovers() const { return count_ - packs_ * pack_size_; }  // in no pack
  int32_t pack_size() const { return pack_size_; }
  int64_t seed() const { return seed_; }
  // The idx of member m of pack j. REQUIRES: j < packs(), 0 <= m < pack_size.
  int32_t Member(int64_t j, int32_t m) const;
  // The idx of leftover t. REQUIRES: t < leftovers().
  int32_t Leftover(int64_t t) const;

 private:
  int64_t count_;
  int32_t pack_size_;
  int64_t packs_;
  int64_t seed_;
  KeyedPermutation rho_;
};

// Samples per pack for a segment whose max_size hint is `max_size`:
// `wanted`, lowered so that a pack stays within kMaxPackBytes; 0 when the
// segment cannot be packed (samples of more than one row or larger than
// kMaxPackSampleBytes, or an unknown size).
int32_t PackSizeFor(int64_t max_size, int32_t chunk_size, int32_t wanted);

// Checks a packs row against the segment it names (`g`: null when the
// dataset has no such segment): Corruption naming the problem (a pack size
// outside [kMinPackSize, kMaxPackSize], counts that do not add up, a count
// other than the segment's, a pack size the segment's max_size does not
// allow).
Status ValidatePack(const PackInfo& p, const SegmentInfo* g, const DatasetInfo& d);

// --- tables and statements (CQL text) --------------------------------------
std::string PacksTableCql(const std::string& keyspace);
std::string PackTableCql(const DatasetInfo& d);
// The loader's read of one pack's members: bound values seg int, pack int,
// idx list<int>; the columns of DataReadQuery (store/sample_row.h), one row
// per member that the pack holds, so the coalesced reader's row demultiplexer
// applies unchanged.
std::string PackReadQuery(const DatasetInfo& d);
// Bound values: seg, pack, idx, size, image_size, checksum, label, labels,
// data, and the write's timestamp (us).
std::string PackInsertQuery(const DatasetInfo& d);
// Bound values: the timestamp (us), seg, pack: the pack's partition as it
// was before a write at a later timestamp (PackDataset sends it first in
// each pack's batch, so that a pack partition holds only the rows written
// with it, whatever an earlier, failed run left there).
std::string PackClearQuery(const DatasetInfo& d);

// One row of `SELECT seg, count, pack_size, seed, packed, left_out FROM
// packs`: the typed getters refuse cells of another type; nulls read as 0
// (ValidatePack then refuses what does not add up).
StatusOr<PackInfo> DecodePackRow(const cql::Rows& r, int32_t row);
// The packs rows of `dataset`, by seg; empty when the keyspace has no packs
// table (nothing was ever packed). Rows are not validated here.
StatusOr<std::vector<PackInfo>> ReadPacks(net::Session& s, const std::string& keyspace, const std::string& dataset);

// --- cqlstream pack (PackOptions, PackReport: store/pack_options.h) ---------
// Builds the packs of every sealed, packable segment of `d` (one split or
// all) that is not packed yet with its split's pack size, reading each sample with
// the loader's data read and checking it (one row, size, checksum), writing
// each pack as one single-partition batch, and the segment's packs row
// last, so that a loader never sees a half-written segment as packed.
// Unsupported for an attached dataset; InvalidArgument for a pack size or
// concurrency out of range.
Status PackDataset(net::Session& s, const DatasetInfo& d, const PackOptions& o, PackReport* report);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_PACK_H_
