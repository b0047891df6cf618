// Copyright (c) cqlstream authors.
#include "store/catalog.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <set>

#include "store/source.h"

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

// A column by name with the typed getters (a column of another type, or a
// missing one, is an error naming it); `fallback` when the cell is null.
template <typename T>
StatusOr<T> Column(const cql::Rows& r, int32_t row, std::string_view col, T fallback = T()) {
  CQLS_ASSIGN_OR_RETURN(std::optional<T> v, r.GetOptional<T>(row, col));
  return v ? std::move(*v) : std::move(fallback);
}

Status FillDataset(const cql::Rows& r, int32_t row, const std::string& keyspace, DatasetInfo* d) {
  d->keyspace = keyspace;
  CQLS_ASSIGN_OR_RETURN(d->name, Column<std::string>(r, row, "name"));
  CQLS_ASSIGN_OR_RETURN(d->layout_version, Column<int32_t>(r, row, "layout_version"));
  if (d->layout_version != kLayoutVersion) {
    return Status::Unsupported(fmt::format(
        "dataset '{}' in keyspace '{}' uses layout version {}, but this cqlstream reads layout version {}; "
        "use the cqlstream release that wrote it, or re-ingest the dataset",
        d->name, keyspace, d->layout_version, kLayoutVersion));
  }
  CQLS_ASSIGN_OR_RETURN(auto created, r.GetOptional<Value>(row, "created"));
  if (created && created->kind() == Value::Kind::kTimestamp) d->created_ms = created->as_timestamp().millis;
  CQLS_ASSIGN_OR_RETURN(std::string label_kind, Column<std::string>(r, row, "label_kind"));
  auto lk = ParseLabelKind(label_kind);
  if (!lk.ok()) return lk.status().WithContext(fmt::format("dataset '{}'", d->name));
  d->label_kind = *lk;
  CQLS_ASSIGN_OR_RETURN(d->class_names, Column<std::vector<std::string>>(r, row, "class_names"));
  CQLS_ASSIGN_OR_RETURN(d->checksum, Column<std::string>(r, row, "checksum"));
  CQLS_ASSIGN_OR_RETURN(d->chunk_size, Column<int32_t>(r, row, "chunk_size"));
  if (d->chunk_size <= 0) return Status::Corruption(fmt::format("dataset '{}' has chunk size {}", d->name, d->chunk_size));
  CQLS_ASSIGN_OR_RETURN(d->description, Column<std::string>(r, row, "description"));
  // Columns added after the first release (schema.cc's EnsureCatalog adds
  // them to older catalogs): absent in a catalog an older cqlstream made and
  // no newer one has touched, read as their defaults then.
  if (r.column_index("sample_kind") >= 0) {
    CQLS_ASSIGN_OR_RETURN(std::string kind, Column<std::string>(r, row, "sample_kind", "image"));
    auto sk = ParseSampleKind(kind);
    if (!sk.ok()) return sk.status().WithContext(fmt::format("dataset '{}'", d->name));
    d->sample_kind = *sk;
  }
  if (r.column_index("preprocess") >= 0) {
    CQLS_ASSIGN_OR_RETURN(d->preprocess, Column<std::string>(r, row, "preprocess"));
  }
  if (r.column_index("source") >= 0) {
    CQLS_ASSIGN_OR_RETURN(d->source, (Column<std::map<std::string, std::string>>(r, row, "source")));
  }
  return Status::OK();
}

StatusOr<SegmentInfo> DecodeSegment(const cql::Rows& r, int32_t i) {
  SegmentInfo g;
  CQLS_ASSIGN_OR_RETURN(g.seg, r.Get<int32_t>(i, "seg"));
  CQLS_ASSIGN_OR_RETURN(g.split, Column<std::string>(r, i, "split"));
  CQLS_ASSIGN_OR_RETURN(g.source_id, Column<std::string>(r, i, "source_id"));
  CQLS_ASSIGN_OR_RETURN(g.source, Column<std::string>(r, i, "source"));
  CQLS_ASSIGN_OR_RETURN(g.fingerprint, Column<std::string>(r, i, "fingerprint"));
  CQLS_ASSIGN_OR_RETURN(g.count, Column<int32_t>(r, i, "count"));
  CQLS_ASSIGN_OR_RETURN(g.bytes, Column<int64_t>(r, i, "bytes"));
  CQLS_ASSIGN_OR_RETURN(g.max_size, Column<int64_t>(r, i, "max_size"));
  CQLS_ASSIGN_OR_RETURN(g.state, Column<std::string>(r, i, "state"));
  CQLS_ASSIGN_OR_RETURN(g.size_hist, Column<std::vector<int64_t>>(r, i, "size_hist"));
  return g;
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

// Reads `d`'s segments within `budget`.
Status LoadSegments(net::Session& s, const std::string& keyspace, DatasetInfo* d, cql::Consistency cl,
                    net::Session::ReadBudget* budget) {
  d->segments.clear();
  net::Statement st = net::Statement::Query(
      fmt::format("SELECT dataset, seg, split, source_id, source, fingerprint, count, bytes, max_size, size_hist, "
                  "state FROM {}.segments WHERE dataset = ?",
                  keyspace),
      {Value::Text(d->name)});
  st.idempotent = true;
  st.consistency = cl;
  std::optional<int32_t> last;
  return s.ForEachPage(
      st,
      [&](const cql::Rows& r) {
        for (int32_t i = 0; i < r.row_count(); ++i) {
          CQLS_RETURN_IF_ERROR(CheckSegmentRowDataset(r, i, d->name));
          CQLS_ASSIGN_OR_RETURN(SegmentInfo g, DecodeSegment(r, i));
          CQLS_RETURN_IF_ERROR(CheckNextSegment(g.seg, &last, d->name));
          CQLS_RETURN_IF_ERROR(CheckSegmentSizes(g.seg, g.count, g.bytes, g.max_size, d->name));
          d->segments.push_back(std::move(g));
        }
        return Status::OK();
      },
      budget);
}


// Every column: `*`, so that a catalog made by an older release (without the
// later columns) is read too; FillDataset picks the columns by name.
constexpr const char* kDatasetColumns = "*";

}  // namespace

Status CheckSegmentRowDataset(const cql::Rows& r, int32_t row, const std::string& dataset) {
  CQLS_ASSIGN_OR_RETURN(std::string got, r.Get<std::string>(row, "dataset"));
  if (got == dataset) return Status::OK();
  return Status::Corruption(fmt::format("the segments read of dataset '{}' answered a row of dataset '{}'", dataset,
                                        got.substr(0, 64)));
}

Status CheckNextSegment(int32_t seg, std::optional<int32_t>* last, const std::string& dataset) {
  if (*last && seg <= **last) {
    return Status::Corruption(fmt::format(
        "the segments read of dataset '{}' answered segment {} after segment {} (a dataset's segment rows come in "
        "order, each once)",
        dataset, seg, **last));
  }
  *last = seg;
  return Status::OK();
}

Status CheckSegmentSizes(int32_t seg, int64_t count, int64_t bytes, int64_t max_size, const std::string& dataset) {
  if (count >= 0 && bytes >= 0 && max_size >= 0 && static_cast<uint64_t>(max_size) <= kMaxPayloadBytes) {
    return Status::OK();
  }
  return Status::Corruption(fmt::format(
      "segment {} of dataset '{}' says count {}, bytes {} and max_size {}: no count or size is below 0, and no "
      "stored sample is larger than {} bytes",
      seg, dataset, count, bytes, max_size, kMaxPayloadBytes));
}

net::Session::ReadBudget SegmentsReadBudget(const std::string& keyspace, const std::string& dataset) {
  return {fmt::format("the segments read of dataset '{}' in keyspace '{}'", dataset, keyspace), kMaxSegments,
          kMaxCatalogReadBytes};
}

net::Session::ReadBudget SchemaReadBudget(std::string what) {
  return {std::move(what), kMaxSchemaRows, kMaxSchemaReadBytes};
}

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
    if (d.name != name || rows->row_count() != 1) {
      // The row names its dataset: another one's is an answer meant for
      // another request.
      return Status::Corruption(fmt::format("the catalog read of dataset '{}' in keyspace '{}' answered {} row(s), "
                                            "the first of dataset '{}'",
                                            name, keyspace, rows->row_count(), d.name.substr(0, 64)));
    }
    net::Session::ReadBudget budget = SegmentsReadBudget(keyspace, name);
    return LoadSegments(s, keyspace, &d, cl, &budget);
  }));
  return d;  // segments in seg order: LoadSegments refuses any other (CheckNextSegment)
}

StatusOr<std::vector<DatasetInfo>> ListDatasets(net::Session& s, const std::string& keyspace) {
  CQLS_RETURN_IF_ERROR(ValidateKeyspaceName(keyspace));
  std::vector<DatasetInfo> out;
  CQLS_RETURN_IF_ERROR(ReadWithFallback(keyspace, [&](cql::Consistency cl) -> Status {
    out.clear();
    net::Statement st = net::Statement::Query(fmt::format("SELECT {} FROM {}.datasets", kDatasetColumns, keyspace));
    st.idempotent = true;
    st.consistency = cl;
    // A dataset's segments are read within its own budget, as LoadDataset
    // reads them; the whole listing, datasets and their segments, within
    // kListingBudgets of those more, and the datasets' rows (a server
    // listing datasets without end must not read each one's).
    net::Session::ReadBudget budget{
        fmt::format("the catalog read of keyspace '{}' (its datasets and all their segments)", keyspace),
        kMaxDatasets + kListingBudgets * kMaxSegments, kListingBudgets * kMaxCatalogReadBytes};
    std::set<std::string> names;
    Status status = s.ForEachPage(
        st,
        [&](const cql::Rows& r) {
          for (int32_t i = 0; i < r.row_count(); ++i) {
            DatasetInfo d;
            Status f = FillDataset(r, i, keyspace, &d);
            if (!f.ok() && f.code() != Status::Code::kUnsupported) return f;
            if (static_cast<int64_t>(out.size()) >= kMaxDatasets) {
              return Status::Unsupported(fmt::format("keyspace '{}' lists more than {} datasets, the most cqlstream "
                                                     "lists (or the server pages without end)",
                                                     keyspace, kMaxDatasets));
            }
            if (!names.insert(d.name).second) {
              return Status::Corruption(fmt::format("the catalog read of keyspace '{}' answered dataset '{}' twice",
                                                    keyspace, d.name.substr(0, 64)));
            }
            out.push_back(std::move(d));  // listed even when unreadable (layout shown)
          }
          return Status::OK();
        },
        &budget);
    if (!status.ok()) return IsMissingTable(status) ? Status::OK() : status;
    for (auto& d : out) {
      if (d.layout_version != kLayoutVersion) continue;
      net::Session::ReadBudget segments = SegmentsReadBudget(keyspace, d.name.substr(0, 64));
      CQLS_RETURN_IF_ERROR(LoadSegments(s, keyspace, &d, cl, &segments));
      CQLS_RETURN_IF_ERROR(budget.Take(segments.rows, segments.bytes));
    }
    return Status::OK();
  }));
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

}  // namespace cqlstream::store
