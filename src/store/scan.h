// Copyright (c) cqlstream authors.
//
// Reading a dataset's metadata table (m_<name>) for the management commands
// and for ingest's append mode:
//
//  * by segment blocks: partition (seg, block) holds indices
//    [block * 1024, block * 1024 + 1024); only indices below the segment's
//    committed count are returned (docs/schema.md: readers never look at
//    idx >= count);
//  * by token ranges: a full-table scan split into ranges
//    "token(seg, block) > ? AND token(seg, block) <= ?" run in parallel
//    (SplitTokenRange), for statistics over the whole dataset.
//
// Thread-safety: the functions run their callbacks on worker threads, several
// at once; callbacks synchronize what they share.
#ifndef CQLSTREAM_STORE_SCAN_H_
#define CQLSTREAM_STORE_SCAN_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cqlstream/dataset.h"
#include "cqlstream/status.h"
#include "net/session.h"

namespace cqlstream::store {

inline constexpr int kBlockShift = 10;  // 1024 samples per metadata partition

struct MetaRow {
  SampleKey key = 0;
  std::string path;
  std::string target_path;
  std::optional<int32_t> label;
  std::vector<int32_t> labels;
  int64_t size = 0;
  int64_t image_size = 0;
  int64_t checksum = 0;
  std::map<std::string, std::string> extra;
};

struct BlockRef {
  int32_t seg = 0;
  int32_t block = 0;
  int64_t count = 0;  // the segment's committed count
  int32_t first_idx() const { return block << kBlockShift; }
  // One past the last committed index of the block.
  int32_t end_idx() const;
};

// The blocks holding the committed samples of `segs`, by (seg, block).
std::vector<BlockRef> CommittedBlocks(const std::vector<SegmentInfo>& segs);

// SELECT seg, block, idx, path, target_path, label, labels, size,
// image_size, checksum, extra FROM ks.m_<name> WHERE seg = ? AND block = ?
std::string MetaBlockQuery(const DatasetInfo& d);
// The rows of one block with idx < count, ascending idx. The answer must
// carry the query's columns (net::Statement::check_result_columns) and only
// rows of this block, each idx once in ascending order: anything else is
// read again (3 times in all), then a Corruption naming the block.
StatusOr<std::vector<MetaRow>> ReadMetaBlock(net::Session& s, const net::PreparedPtr& query, const BlockRef& b,
                                             cql::Consistency cl = cql::Consistency::kLocalQuorum);

// Runs fn(i) for i in [0, n) on `threads` threads (each i once). The first
// error stops the others from taking new work and is returned; `stop` (if
// given) stops them with Cancelled.
Status ParallelFor(size_t n, int threads, const std::function<Status(size_t)>& fn,
                   const std::atomic<bool>* stop = nullptr);

// Reads the committed metadata of `segs` block by block, `concurrency`
// blocks at a time; on_block runs on worker threads.
Status ScanMeta(net::Session& s, const DatasetInfo& d, const std::vector<SegmentInfo>& segs, int concurrency,
                const std::function<Status(const BlockRef&, std::vector<MetaRow>&)>& on_block);

// Full scan of m_<name> split into `ranges` token ranges, `concurrency` at a
// time, selecting seg, block, idx and then `columns` (CQL text, e.g. "label,
// labels"); on_page runs on worker threads for every page. Rows of every
// segment and index are returned, committed or not: callers filter by the
// segments' counts. Each range's rows must come in its order, each once
// (store/meta_scan_order.h): a page that does not is a Corruption, and no
// row of it is handed over.
Status ScanMetaByTokenRanges(net::Session& s, const DatasetInfo& d, const std::string& columns, int ranges,
                             int concurrency, const std::function<Status(const cql::Rows&)>& on_page);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_SCAN_H_
