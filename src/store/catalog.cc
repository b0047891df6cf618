// Copyright (c) cqlstream authors.
#include "store/catalog.h"

#include <fmt/format.h>

#include <algorithm>

namespace cqlstream::store {
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

Status LoadSegments(net::Session& s, const std::string& keyspace, DatasetInfo* d) {
  d->segments.clear();
  net::Statement st = net::Statement::Query(
      fmt::format("SELECT seg, split, source_id, source, fingerprint, count, bytes, max_size, size_hist, state "
                  "FROM {}.segments WHERE dataset = ?",
                  keyspace),
      {Value::Text(d->name)});
  st.idempotent = true;
  st.consistency = cql::Consistency::kLocalQuorum;
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

bool IsMissingTable(const Status& s) {
  const ServerError* e = s.server_error();
  return e != nullptr && e->typed() == ServerErrorCode::kInvalid &&
         (e->message.find("unconfigured table") != std::string::npos ||
          e->message.find("does not exist") != std::string::npos);
}

constexpr const char* kDatasetColumns =
    "name, layout_version, created, label_kind, class_names, checksum, chunk_size, description";

}  // namespace

StatusOr<DatasetInfo> LoadDataset(net::Session& s, const std::string& keyspace, const std::string& name) {
  CQLS_RETURN_IF_ERROR(ValidateKeyspaceName(keyspace));
  CQLS_RETURN_IF_ERROR(ValidateDatasetName(name));
  net::Statement st = net::Statement::Query(
      fmt::format("SELECT {} FROM {}.datasets WHERE name = ?", kDatasetColumns, keyspace), {Value::Text(name)});
  st.idempotent = true;
  st.consistency = cql::Consistency::kLocalQuorum;
  auto r = s.Execute(st);
  if (!r.ok()) {
    if (IsMissingTable(r.status())) {
      return Status::NotFound(fmt::format("no dataset '{}': keyspace '{}' holds no cqlstream catalog", name, keyspace));
    }
    return r.status();
  }
  const cql::Rows* rows = r->rows();
  if (rows == nullptr || rows->row_count() == 0) {
    return Status::NotFound(fmt::format("no dataset '{}' in keyspace '{}' (see cqlstream ls)", name, keyspace));
  }
  DatasetInfo d;
  CQLS_RETURN_IF_ERROR(FillDataset(*rows, 0, keyspace, &d));
  CQLS_RETURN_IF_ERROR(LoadSegments(s, keyspace, &d));
  std::sort(d.segments.begin(), d.segments.end(), [](const auto& a, const auto& b) { return a.seg < b.seg; });
  return d;
}

StatusOr<std::vector<DatasetInfo>> ListDatasets(net::Session& s, const std::string& keyspace) {
  CQLS_RETURN_IF_ERROR(ValidateKeyspaceName(keyspace));
  std::vector<DatasetInfo> out;
  net::Statement st = net::Statement::Query(fmt::format("SELECT {} FROM {}.datasets", kDatasetColumns, keyspace));
  st.idempotent = true;
  st.consistency = cql::Consistency::kLocalQuorum;
  Status status = s.ForEachPage(st, [&](const cql::Rows& r) {
    for (int32_t i = 0; i < r.row_count(); ++i) {
      DatasetInfo d;
      Status f = FillDataset(r, i, keyspace, &d);
      if (!f.ok() && f.code() != Status::Code::kUnsupported) return f;
      out.push_back(std::move(d));  // listed even when unreadable (layout shown)
    }
    return Status::OK();
  });
  if (!status.ok()) {
    if (IsMissingTable(status)) return out;
    return status;
  }
  for (auto& d : out) {
    if (d.layout_version == kLayoutVersion) CQLS_RETURN_IF_ERROR(LoadSegments(s, keyspace, &d));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

std::string DataReadQuery(const DatasetInfo& d) {
  return fmt::format(
      "SELECT seg, idx, size, image_size, checksum, label, labels, data FROM {}.{} WHERE seg = ? AND idx = ?",
      d.keyspace, d.data_table());
}

}  // namespace cqlstream::store
