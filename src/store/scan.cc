// Copyright (c) cqlstream authors.
#include "store/scan.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>

#include "net/routing/token_ring.h"
#include "store/catalog.h"
#include "store/meta_scan_order.h"
#include "store/read_again.h"
#include "util/mutex.h"

namespace cqlstream::store {

int32_t BlockRef::end_idx() const {
  const int64_t end = std::min<int64_t>(count, static_cast<int64_t>(first_idx()) + (1 << kBlockShift));
  return static_cast<int32_t>(end);
}

std::vector<BlockRef> CommittedBlocks(const std::vector<SegmentInfo>& segs) {
  std::vector<BlockRef> out;
  for (const auto& g : segs) {
    if (g.count <= 0) continue;
    const int64_t blocks = (g.count + (1 << kBlockShift) - 1) >> kBlockShift;
    for (int64_t b = 0; b < blocks; ++b) out.push_back(BlockRef{g.seg, static_cast<int32_t>(b), g.count});
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.seg != b.seg ? a.seg < b.seg : a.block < b.block; });
  return out;
}

std::string MetaBlockQuery(const DatasetInfo& d) {
  return fmt::format(
      "SELECT seg, block, idx, path, target_path, label, labels, size, image_size, checksum, extra FROM {}.{} "
      "WHERE seg = ? AND block = ?",
      d.keyspace, d.meta_table());
}

namespace {

// One row of MetaBlockQuery's answer (typed getters: a column of another
// type than the table's is an error naming it; a null reads as empty).
Status DecodeMetaRow(const cql::Rows& r, int32_t i, int32_t seg, int32_t idx, MetaRow* m) {
  m->key = MakeKey(seg, idx);
  CQLS_ASSIGN_OR_RETURN(auto path, r.GetOptional<std::string>(i, 3));
  m->path = path.value_or("");
  CQLS_ASSIGN_OR_RETURN(auto target, r.GetOptional<std::string>(i, 4));
  m->target_path = target.value_or("");
  CQLS_ASSIGN_OR_RETURN(m->label, r.GetOptional<int32_t>(i, 5));
  CQLS_ASSIGN_OR_RETURN(auto labels, r.GetOptional<std::vector<int32_t>>(i, 6));
  m->labels = labels.value_or(std::vector<int32_t>());
  CQLS_ASSIGN_OR_RETURN(auto size, r.GetOptional<int64_t>(i, 7));
  m->size = size.value_or(0);
  CQLS_ASSIGN_OR_RETURN(auto image_size, r.GetOptional<int64_t>(i, 8));
  m->image_size = image_size.value_or(0);
  CQLS_ASSIGN_OR_RETURN(auto checksum, r.GetOptional<int64_t>(i, 9));
  m->checksum = checksum.value_or(0);
  using TextMap = std::map<std::string, std::string>;
  CQLS_ASSIGN_OR_RETURN(auto extra, r.GetOptional<TextMap>(i, 10));
  if (extra) m->extra.insert(extra->begin(), extra->end());
  return Status::OK();
}

}  // namespace

StatusOr<std::vector<MetaRow>> ReadMetaBlock(net::Session& s, const net::PreparedPtr& query, const BlockRef& b,
                                             cql::Consistency cl) {
  net::Statement st = net::Statement::Bound(query, {Value::Int(b.seg), Value::Int(b.block)});
  st.idempotent = true;
  st.consistency = cl;
  st.page_size = 2048;
  // The answer names its statement (its columns) and each row its sample
  // (seg, block, idx, in clustering order): a row of another block, or one
  // twice, is an answer meant for another request, not this block's. Such
  // an answer (a Corruption) is read again, kReadAttempts times in all
  // (store/read_again.h).
  st.check_result_columns = true;
  const int32_t end = b.end_idx();
  std::vector<MetaRow> out;
  Status status = ReadAgainOnCorruption(kReadAttempts, [&] {
    out.clear();
    int64_t last = -1;
    return s.ForEachPage(st, [&](const cql::Rows& r) {
      for (int32_t i = 0; i < r.row_count(); ++i) {
        CQLS_ASSIGN_OR_RETURN(int32_t seg, r.Get<int32_t>(i, 0));
        CQLS_ASSIGN_OR_RETURN(int32_t block, r.Get<int32_t>(i, 1));
        CQLS_ASSIGN_OR_RETURN(int32_t idx, r.Get<int32_t>(i, 2));
        if (seg != b.seg || block != b.block || idx < b.first_idx() || (idx >> kBlockShift) != b.block) {
          return Status::Corruption(
              fmt::format("the answer holds a row of segment {} block {} (idx {})", seg, block, idx));
        }
        if (idx <= last) return Status::Corruption(fmt::format("the answer holds idx {} after idx {}", idx, last));
        last = idx;
        if (idx >= end) continue;
        MetaRow m;
        CQLS_RETURN_IF_ERROR(DecodeMetaRow(r, i, b.seg, idx, &m));
        out.push_back(std::move(m));
      }
      return Status::OK();
    });
  });
  if (!status.ok()) {
    return status.WithContext(fmt::format("reading metadata of segment {} block {}", b.seg, b.block));
  }
  return out;
}

Status ParallelFor(size_t n, int threads, const std::function<Status(size_t)>& fn, const std::atomic<bool>* stop) {
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  Mutex mu;
  Status first;
  auto work = [&] {
    for (;;) {
      if (failed.load() || (stop != nullptr && stop->load())) return;
      const size_t i = next.fetch_add(1);
      if (i >= n) return;
      Status st = fn(i);
      if (!st.ok()) {
        MutexLock l(&mu);
        if (first.ok()) first = st;
        failed = true;
        return;
      }
    }
  };
  const size_t t = std::min<size_t>(n, static_cast<size_t>(std::max(1, threads)));
  std::vector<std::thread> pool;
  for (size_t i = 1; i < t; ++i) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  if (!first.ok()) return first;
  if (stop != nullptr && stop->load()) return Status::Cancelled("interrupted");
  return Status::OK();
}

Status ScanMeta(net::Session& s, const DatasetInfo& d, const std::vector<SegmentInfo>& segs, int concurrency,
                const std::function<Status(const BlockRef&, std::vector<MetaRow>&)>& on_block) {
  const auto blocks = CommittedBlocks(segs);
  if (blocks.empty()) return Status::OK();
  CQLS_ASSIGN_OR_RETURN(net::PreparedPtr q, s.Prepare(MetaBlockQuery(d)));
  return ParallelFor(blocks.size(), concurrency, [&](size_t i) -> Status {
    CQLS_ASSIGN_OR_RETURN(auto rows, ReadMetaBlock(s, q, blocks[i]));
    return on_block(blocks[i], rows);
  });
}

Status ScanMetaByTokenRanges(net::Session& s, const DatasetInfo& d, const std::string& columns, int ranges,
                             int concurrency, const std::function<Status(const cql::Rows&)>& on_page) {
  CQLS_ASSIGN_OR_RETURN(auto split, routing::SplitTokenRange(std::max(1, ranges)));
  CQLS_ASSIGN_OR_RETURN(
      net::PreparedPtr q,
      s.Prepare(fmt::format("SELECT seg, block, idx, {} FROM {}.{} WHERE token(seg, block) > ? AND token(seg, block) "
                            "<= ?",
                            columns, d.keyspace, d.meta_table())));
  // As catalog reads do (store/catalog.h): a range the live replicas cannot
  // read at LOCAL_QUORUM is read again at LOCAL_ONE, with one warning per scan,
  // so that `info` goes on while one replica lives. A range is only read
  // again when its first page failed, so no row is handed over twice.
  std::atomic<bool> warned{false};
  return ParallelFor(split.size(), concurrency, [&](size_t i) -> Status {
    net::Statement st = net::Statement::Bound(q, {Value::Bigint(split[i].start), Value::Bigint(split[i].end)});
    st.idempotent = true;
    st.consistency = cql::Consistency::kLocalQuorum;
    st.page_size = 5000;
    bool any_page = false;
    MetaScanOrder order(split[i].start, split[i].end, d.keyspace + "." + d.meta_table());
    auto counted = [&](const cql::Rows& rows) {
      any_page = true;
      CQLS_RETURN_IF_ERROR(order.Page(rows));
      return on_page(rows);
    };
    Status r = s.ForEachPage(st, counted);
    if (!r.ok() && !any_page && QuorumUnreachable(r)) {
      if (!warned.exchange(true)) {
        std::fprintf(stderr,
                     "cqlstream: WARNING: %s.%s cannot be read at LOCAL_QUORUM (%s); reading it at LOCAL_ONE: rows "
                     "written while the answering replica was down may be missing\n",
                     d.keyspace.c_str(), d.meta_table().c_str(), r.ToString().c_str());
      }
      st.consistency = cql::Consistency::kLocalOne;
      r = s.ForEachPage(st, counted);  // `order` has seen no row: no page was handed over
    }
    if (!r.ok()) return r.WithContext(fmt::format("scanning token range ({}, {}]", split[i].start, split[i].end));
    return Status::OK();
  });
}

}  // namespace cqlstream::store
