// Copyright (c) cqlstream authors.
#include "store/catalog.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <functional>

namespace cqlstream::store {

// Catalog reads ask LOCAL_QUORUM, so that what an ingest committed at
// LOCAL_QUORUM is seen. When the live replicas cannot give a quorum
// (Unavailable, or a read timeout/failure with fewer answers than required:
// e.g. two of three RF-3 nodes down) the whole read is repeated at LOCAL_ONE
// with a warning, so that `info` and a new Loader go on as long as one
// replica lives. The one replica may miss a write that the dead ones hold
// (a segment committed while it was down): the warning says so.
bool QuorumUnreachable(const Status& st) {
  const ServerError* e = st.server_error();
  if (e == nullptr) return false;
  switch (e->typed()) {
    case ServerErrorCode::kUnavailable:
      return true;
    case ServerErrorCode::kReadTimeout:
    case ServerErrorCode::kReadFailure:
      return e->alive < e->required;
    default:
      return false;
  }
}

namespace {

std::string Text(const cql::Rows& r, int32_t row, std::string_view col) {
  auto v = r.value(row, r.column_index(col));
  return v.ok() && v->kind() == Value::Kind::kText ? v->as_text() : std::string();
}
int64_t Int(const cql::Rows& r, int32_t row, std::string_view col) {
  auto v = r.value(row, r.column_index(col));
  if (!v.ok()) return 0;
  if (v->kind() == Value::Kind::kInt) return v->as_int();
  if (v->kind() == Value::Kind::kBigint) return v->as_bigint();
  return 0;
}

Status FillDataset(const cql::Rows& r, int32_t row, const std::string& keyspace, DatasetInfo* d) {
  d->keyspace = keyspace;
  d->name = Text(r, row, "name");
  d->layout_version = static_cast<int>(Int(r, row, "layout_version"));
  if (d->layout_version != kLayoutVersion) {
    return Status::Unsupported(fmt::format(
        "dataset '{}' in keyspace '{}' uses layout version {}, but this cqlstream reads layout version {}; "
        "use the cqlstream release that wrote it, or re-ingest the dataset",
        d->name, keyspace, d->layout_version, kLayoutVersion));
  }
  auto created = r.value(row, r.column_index("created"));
  if (created.ok() && created->kind() == Value::Kind::kTimestamp) d->created_ms = created->as_timestamp().millis;
  auto lk = ParseLabelKind(Text(r, row, "label_kind"));
  if (!lk.ok()) return lk.status().WithContext(fmt::format("dataset '{}'", d->name));
  d->label_kind = *lk;
  d->class_names.clear();
  auto cn = r.value(row, r.column_index("class_names"));
  if (cn.ok() && cn->kind() == Value::Kind::kList) {
    for (const auto& v : cn->as_list()) d->class_names.push_back(v.kind() == Value::Kind::kText ? v.as_text() : "");
  }
  d->checksum = Text(r, row, "checksum");
  d->chunk_size = static_cast<int32_t>(Int(r, row, "chunk_size"));
  if (d->chunk_size <= 0) return Status::Corruption(fmt::format("dataset '{}' has chunk size {}", d->name, d->chunk_size));
  d->description = Text(r, row, "description");
  return Status::OK();
}

// Runs `read` at LOCAL_QUORUM, and again at LOCAL_ONE when the quorum cannot
// be reached. `read` must reset its own output at each call.
Status ReadWithFallback(const std::string& keyspace, const std::function<Status(cql::Consistency)>& read) {
  Status st = read(cql::Consistency::kLocalQuorum);
  if (st.ok() || !QuorumUnreachable(st)) return st;
  std::fprintf(stderr,
               "cqlstream: WARNING: the catalog of keyspace '%s' cannot be read at LOCAL_QUORUM (%s); reading it at "
               "LOCAL_ONE: segments committed while the answering replica was down may be missing\n",
               keyspace.c_str(), st.ToString().c_str());
  return read(cql::Consistency::kLocalOne);
}

Status LoadSegments(net::Session& s, const std::string& keyspace, DatasetInfo* d, cql::Consistency cl) {
  d->segments.clear();
  net::Statement st = net::Statement::Query(
      fmt::format("SELECT seg, split, source_id, source, fingerprint, count, bytes, max_size, size_hist, state "
                  "FROM {}.segments WHERE dataset = ?",
                  keyspace),
      {Value::Text(d->name)});
  st.idempotent = true;
  st.consistency = cl;
  return s.ForEachPage(st, [&](const cql::Rows& r) {
    for (int32_t i = 0; i < r.row_count(); ++i) {
      SegmentInfo g;
      g.seg = static_cast<int32_t>(Int(r, i, "seg"));
      g.split = Text(r, i, "split");
      g.source_id = Text(r, i, "source_id");
      g.source = Text(r, i, "source");
      g.fingerprint = Text(r, i, "fingerprint");
      g.count = Int(r, i, "count");
      g.bytes = Int(r, i, "bytes");
      g.max_size = Int(r, i, "max_size");
      g.state = Text(r, i, "state");
      auto h = r.value(i, r.column_index("size_hist"));
      if (h.ok() && h->kind() == Value::Kind::kList) {
        for (const auto& v : h->as_list()) g.size_hist.push_back(v.kind() == Value::Kind::kBigint ? v.as_bigint() : 0);
      }
      d->segments.push_back(std::move(g));
    }
    return Status::OK();
  });
}


constexpr const char* kDatasetColumns =
    "name, layout_version, created, label_kind, class_names, checksum, chunk_size, description";

}  // namespace

bool IsMissingTable(const Status& st) {
  const ServerError* e = st.server_error();
  return e != nullptr && e->typed() == ServerErrorCode::kInvalid &&
         (e->message.find("unconfigured table") != std::string::npos ||
          e->message.find("does not exist") != std::string::npos);
}

StatusOr<DatasetInfo> LoadDataset(net::Session& s, const std::string& keyspace, const std::string& name) {
  CQLS_RETURN_IF_ERROR(ValidateKeyspaceName(keyspace));
  CQLS_RETURN_IF_ERROR(ValidateDatasetName(name));
  DatasetInfo d;
  CQLS_RETURN_IF_ERROR(ReadWithFallback(keyspace, [&](cql::Consistency cl) -> Status {
    net::Statement st = net::Statement::Query(
        fmt::format("SELECT {} FROM {}.datasets WHERE name = ?", kDatasetColumns, keyspace), {Value::Text(name)});
    st.idempotent = true;
    st.consistency = cl;
    auto r = s.Execute(st);
    if (!r.ok()) {
      if (IsMissingTable(r.status())) {
        return Status::NotFound(
            fmt::format("no dataset '{}': keyspace '{}' holds no cqlstream catalog", name, keyspace));
      }
      return r.status();
    }
    const cql::Rows* rows = r->rows();
    if (rows == nullptr || rows->row_count() == 0) {
      return Status::NotFound(fmt::format("no dataset '{}' in keyspace '{}' (see cqlstream ls)", name, keyspace));
    }
    d = DatasetInfo();
    CQLS_RETURN_IF_ERROR(FillDataset(*rows, 0, keyspace, &d));
    return LoadSegments(s, keyspace, &d, cl);
  }));
  std::sort(d.segments.begin(), d.segments.end(), [](const auto& a, const auto& b) { return a.seg < b.seg; });
  return d;
}

StatusOr<std::vector<DatasetInfo>> ListDatasets(net::Session& s, const std::string& keyspace) {
  CQLS_RETURN_IF_ERROR(ValidateKeyspaceName(keyspace));
  std::vector<DatasetInfo> out;
  CQLS_RETURN_IF_ERROR(ReadWithFallback(keyspace, [&](cql::Consistency cl) -> Status {
    out.clear();
    net::Statement st = net::Statement::Query(fmt::format("SELECT {} FROM {}.datasets", kDatasetColumns, keyspace));
    st.idempotent = true;
    st.consistency = cl;
    Status status = s.ForEachPage(st, [&](const cql::Rows& r) {
      for (int32_t i = 0; i < r.row_count(); ++i) {
        DatasetInfo d;
        Status f = FillDataset(r, i, keyspace, &d);
        if (!f.ok() && f.code() != Status::Code::kUnsupported) return f;
        out.push_back(std::move(d));  // listed even when unreadable (layout shown)
      }
      return Status::OK();
    });
    if (!status.ok()) return IsMissingTable(status) ? Status::OK() : status;
    for (auto& d : out) {
      if (d.layout_version == kLayoutVersion) CQLS_RETURN_IF_ERROR(LoadSegments(s, keyspace, &d, cl));
    }
    return Status::OK();
  }));
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

}  // namespace cqlstream::store
