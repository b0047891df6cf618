// Copyright (c) cqlstream authors.
#include "store/dataset_view.h"

#include <algorithm>
#include <map>
#include <utility>

#include "net/session.h"
#include "store/attached_scan.h"
#include "store/catalog.h"
#include "store/pack.h"
#include "util/mutex.h"

namespace cqlstream::store {

StatusOr<std::unique_ptr<DatasetView>> DatasetView::Open(const ConnectionOptions& connection,
                                                         const std::string& dataset,
                                                         std::shared_ptr<const std::atomic<bool>> stop) {
  CQLS_RETURN_IF_ERROR(ValidateDatasetName(dataset));
  net::SessionOptions so;
  so.watch_events = false;
  so.stop = std::move(stop);
  CQLS_ASSIGN_OR_RETURN(std::shared_ptr<net::Session> session, net::Session::Connect(connection, so));
  auto info = LoadDataset(*session, connection.keyspace, dataset);
  if (!info.ok()) {
    session->Close();  // a session opened for a dataset that is not there
    return info.status();
  }
  session->SetStop(nullptr);
  return std::unique_ptr<DatasetView>(new DatasetView(std::move(session), std::move(info).value()));
}

DatasetView::DatasetView(std::shared_ptr<net::Session> session, DatasetInfo info)
    : session_(std::move(session)), info_(std::move(info)) {}

DatasetView::~DatasetView() { Close(); }

void DatasetView::Close() { session_->Close(); }

Status DatasetView::Pack(const PackOptions& o, PackReport* report) const {
  *report = PackReport();
  CQLS_ASSIGN_OR_RETURN(const DatasetInfo now, LoadDataset(*session_, info_.keyspace, info_.name));
  return PackDataset(*session_, now, o, report);
}

std::vector<SampleKey> DatasetView::SplitKeys(const std::string& split) const {
  std::vector<SampleKey> out;
  out.reserve(static_cast<size_t>(info_.Count(split)));
  for (const auto& g : info_.SplitSegments(split)) {
    for (int64_t i = 0; i < g.count; ++i) out.push_back(MakeKey(g.seg, static_cast<int32_t>(i)));
  }
  return out;
}

StatusOr<std::vector<DatasetView::Row>> DatasetView::Metadata(const std::optional<std::string>& split,
                                                              int concurrency, const std::atomic<bool>* stop) const {
  if (concurrency < 1 || concurrency > 1024) return Status::InvalidArgument("concurrency must be in [1, 1024]");
  std::vector<SegmentInfo> segs;
  std::map<int32_t, std::string> split_of;
  bool known = !split;
  for (const auto& g : info_.segments) {
    if ((!split || g.split == *split) && g.count > 0) segs.push_back(g);
    split_of[g.seg] = g.split;
    known = known || g.split == *split;
  }
  if (!known) {
    std::string have;
    for (const auto& sp : info_.splits()) have += (have.empty() ? "" : ", ") + sp;
    return Status::NotFound("dataset '" + info_.name + "' has no split '" + *split + "' (splits: " + have + ")");
  }
  std::vector<Row> rows;
  Mutex mu;
  auto on_block = [&](const BlockRef&, std::vector<MetaRow>& block) {
    if (stop != nullptr && stop->load()) return Status::Cancelled("interrupted");
    MutexLock l(&mu);
    for (auto& r : block) rows.push_back(Row{std::move(r), {}});
    return Status::OK();
  };
  if (info_.attached()) {
    // store/attached_scan.h: key, label and the metadata table's columns; a
    // sample that cannot be read is a row whose extra["_problem"] says why.
    auto on_problem = [&](SampleKey k, const Status& p) {
      Row r;
      r.meta.key = k;
      r.meta.extra["_problem"] = p.ToString().substr(0, 1024);
      MutexLock l(&mu);
      rows.push_back(std::move(r));
    };
    CQLS_RETURN_IF_ERROR(
        ScanAttachedMeta(*session_, info_, segs, concurrency, on_block, on_problem, stop, /*with_extra=*/true));
  } else {
    CQLS_RETURN_IF_ERROR(ScanMeta(*session_, info_, segs, concurrency, on_block));
  }
  std::sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) { return x.meta.key < y.meta.key; });
  for (auto& r : rows) r.split = split_of[KeySegment(r.meta.key)];
  return rows;
}

}  // namespace cqlstream::store
