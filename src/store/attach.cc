// Copyright (c) cqlstream authors.
#include "store/attach.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <utility>

#include "store/attached_retired.h"
#include "store/catalog.h"
#include "store/segments_table.h"

namespace cqlstream::store {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status Ddl(net::Session& s, const std::string& cql) {
  net::Statement st = net::Statement::Query(cql);
  st.timeout = std::chrono::milliseconds(60000);
  auto r = s.Execute(st);
  if (!r.ok()) return r.status().WithContext(cql.substr(0, cql.find('(')));
  return s.WaitForSchemaAgreement(std::chrono::seconds(60));
}

Status CheckColumn(const TableShape& shape, const std::string& table, const std::string& role,
                   const std::string& column) {
  if (!ValidAttachedIdentifier(column))
    return Status::InvalidArgument(fmt::format("{} column '{}': names must be [A-Za-z0-9_]{{1,48}}", role, column));
  if (!shape.contains(column))
    return Status::InvalidArgument(fmt::format("{} has no column '{}' (the {} column)", table, column, role));
  return Status::OK();
}

Status CheckMetadataTable(net::Session& s, const AttachSpec& spec, const AttachedTable& a) {
  CQLS_ASSIGN_OR_RETURN(TableShape meta, ReadTableShape(s, spec.metadata_table));
  auto it = meta.find(a.key_column);
  if (it == meta.end() || it->second.kind != "partition_key" || it->second.type != a.key_type) {
    return Status::InvalidArgument(fmt::format(
        "metadata table {} must have the data table's key column '{}' ({}) as its partition key", spec.metadata_table,
        a.key_column, a.key_type));
  }
  return Status::OK();
}

net::Statement DeleteSegment(const std::string& keyspace, const std::string& dataset, int32_t seg) {
  net::Statement st = net::Statement::Query(
      fmt::format("DELETE FROM {}.segments WHERE dataset = ? AND seg = ?", keyspace),
      {Value::Text(dataset), Value::Int(seg)});
  st.idempotent = true;
  return st;
}

Status RunSegmentBatch(net::Session& s, const std::vector<net::Statement>& batch, const std::string& what) {
  if (batch.empty()) return Status::OK();
  // One partition (dataset) of the segments table: applied atomically and in
  // isolation, so a reader sees the old segments or the new ones.
  auto r = s.ExecuteBatch(cql::BatchType::kLogged, batch, cql::Consistency::kLocalQuorum,
                          std::chrono::milliseconds(30000));
  if (!r.ok()) return r.status().WithContext(what);
  return Status::OK();
}

// The statements sealing the snapshot's segments with their counts.
StatusOr<std::vector<net::Statement>> SealStatements(net::Session& s, const std::string& keyspace,
                                                     const std::string& dataset, const KeySnapshot& snap) {
  CQLS_ASSIGN_OR_RETURN(SegmentCommitStatements p, PrepareSegmentCommit(s, keyspace));
  std::vector<net::Statement> out;
  const int64_t now = NowMs();
  for (const auto& g : snap.segments) {
    Committed c;
    c.count = g.count;
    c.next_pos = g.count;
    out.push_back(SegmentCommitStatement(p, dataset, g.seg, c, /*seal=*/true, NowMicros(), now));
  }
  for (int32_t seg : snap.empty_claims) out.push_back(DeleteSegment(keyspace, dataset, seg));
  return out;
}

Value TextList(const std::vector<std::string>& v) {
  std::vector<Value> l;
  for (const auto& x : v) l.push_back(Value::Text(x));
  return l.empty() ? Value::Unset() : Value::List(std::move(l));
}

Value TextMap(const std::map<std::string, std::string>& m) {
  ValueMap out;
  for (const auto& [k, v] : m) out.emplace_back(Value::Text(k), Value::Text(v));
  return Value::Map(std::move(out));
}

Status InsertCatalogRow(net::Session& s, const std::string& keyspace, const AttachSpec& spec, const AttachedTable& a,
                        LabelKind kind, const std::vector<std::string>& class_names) {
  net::Statement ins = net::Statement::Query(
      fmt::format("INSERT INTO {}.datasets (name, layout_version, created, label_kind, class_names, checksum, "
                  "chunk_size, description, sample_kind, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS",
                  keyspace),
      {Value::Text(spec.dataset), Value::Int(kLayoutVersion), Value::FromTimestamp(Timestamp{NowMs()}),
       Value::Text(std::string(LabelKindName(kind))), TextList(class_names), Value::Text("none"),
       Value::Int(kDefaultChunkSize), spec.description.empty() ? Value::Unset() : Value::Text(spec.description),
       Value::Text(std::string(SampleKindName(spec.sample_kind))), TextMap(a.ToSource())});
  ins.consistency = cql::Consistency::kLocalQuorum;
  ins.timeout = std::chrono::milliseconds(30000);
  auto r = s.Execute(ins);
  if (!r.ok()) return r.status().WithContext(fmt::format("registering dataset '{}'", spec.dataset));
  const cql::Rows* rows = r->rows();
  auto applied = rows != nullptr && rows->row_count() > 0 ? rows->Get<bool>(0, 0) : StatusOr<bool>(false);
  if (!applied.ok() || !*applied) {
    return Status::AlreadyExists(fmt::format(
        "dataset '{}' was created by another process while this attach ran; its snapshot was not registered",
        spec.dataset));
  }
  return Status::OK();
}

// The catalog update of an attach into an existing dataset, a lightweight
// transaction on the generation this attach started from: of two attaches
// or refreshes of one dataset run at once, the first to commit moves the
// generation on and the other's update is not applied, so that one stops
// here with an error before it touches a segment row (exactly one new
// generation is written).
// `started_from`: the catalog's generation entry as this attach read it.
Status UpdateCatalogRow(net::Session& s, const std::string& keyspace, const std::string& dataset,
                        const AttachedTable& a, const std::vector<std::string>& class_names,
                        const std::string& started_from) {
  net::Statement up = net::Statement::Query(
      fmt::format("UPDATE {}.datasets SET source = ?, class_names = ? WHERE name = ? IF source['generation'] = ?",
                  keyspace),
      {TextMap(a.ToSource()), class_names.empty() ? Value::Null() : TextList(class_names), Value::Text(dataset),
       Value::Text(started_from)});
  up.consistency = cql::Consistency::kLocalQuorum;
  up.timeout = std::chrono::milliseconds(30000);
  auto r = s.Execute(up);
  if (!r.ok()) return r.status().WithContext(fmt::format("updating dataset '{}'", dataset));
  const cql::Rows* rows = r->rows();
  auto applied = rows != nullptr && rows->row_count() > 0 ? rows->Get<bool>(0, 0) : StatusOr<bool>(false);
  if (applied.ok() && *applied) return Status::OK();
  auto now = LoadDataset(s, keyspace, dataset);
  if (!now.ok() && now.status().IsNotFound()) {
    return Status::NotFound(fmt::format(
        "dataset '{}' was dropped by another process while this attach ran; its snapshot was not registered",
        dataset));
  }
  std::string gen = "?";
  if (now.ok() && now->source.contains("generation")) gen = now->source.at("generation").substr(0, 24);
  return Status::AlreadyExists(fmt::format(
      "another attach or refresh of dataset '{}' committed while this one ran (it started from generation {}; the "
      "catalog is now at generation {}): this attach's snapshot was not registered, nothing of it is visible; run "
      "it again if it is still needed",
      dataset, started_from.substr(0, 24), gen));
}

// The dataset's class names after an attach into it: the old list as it is
// (label i stays class_names[i], so the other splits' labels, checkpoints
// and selections keep their meaning), then the texts it did not hold yet,
// sorted among themselves.
std::vector<std::string> MergeClassNames(const std::vector<std::string>& old, const std::vector<std::string>& fresh) {
  std::vector<std::string> out = old;
  const std::set<std::string> known(old.begin(), old.end());
  std::set<std::string> added;
  for (const auto& t : fresh) {
    if (!known.contains(t)) added.insert(t);
  }
  out.insert(out.end(), added.begin(), added.end());
  return out;
}

// The commit of an attach into an existing dataset (new split or refresh).
// `replaced` gets the split's committed segments this attach replaced.
Status CommitIntoExisting(net::Session& s, const std::string& keyspace, const AttachSpec& spec,
                          const DatasetInfo& d, const AttachedTable& a, const KeySnapshot& snap,
                          AttachReport* report, std::vector<RetiredSegment>* replaced) {
  std::vector<std::string> names = d.class_names;
  if (a.label_type == "text") names = MergeClassNames(d.class_names, snap.label_texts);
  if (names.size() > kMaxClasses) return Status::InvalidArgument("more than kMaxClasses label texts");
  auto gen = d.source.find("generation");
  Status updated = UpdateCatalogRow(s, keyspace, spec.dataset, a, names, gen == d.source.end() ? "" : gen->second);
  if (!updated.ok()) {
    // This attach's claimed segments (open, count 0: nothing readable) are
    // removed at once; a failure to do so leaves them to the split's next
    // attach, which deletes unfinished attach segments.
    std::vector<net::Statement> own;
    for (const auto& g : snap.segments) own.push_back(DeleteSegment(keyspace, spec.dataset, g.seg));
    for (int32_t seg : snap.empty_claims) own.push_back(DeleteSegment(keyspace, spec.dataset, seg));
    (void)RunSegmentBatch(s, own, "removing this attach's claimed segments");
    return updated;
  }
  CQLS_ASSIGN_OR_RETURN(auto batch, SealStatements(s, keyspace, spec.dataset, snap));
  CQLS_ASSIGN_OR_RETURN(auto rows, ReadSegRows(s, keyspace, spec.dataset));
  std::set<int32_t> mine;
  for (const auto& g : snap.segments) mine.insert(g.seg);
  for (int32_t seg : snap.empty_claims) mine.insert(seg);
  for (const auto& g : rows) {
    if (g.split != spec.split || mine.contains(g.seg) || !g.source_id.starts_with("attach:")) continue;
    batch.push_back(DeleteSegment(keyspace, spec.dataset, g.seg));
    report->removed_segments.push_back(g.seg);
    if (g.sealed() && g.c.count > 0) replaced->push_back({g.seg, g.c.count});
  }
  return RunSegmentBatch(s, batch, fmt::format("switching split '{}' of '{}' to its new snapshot", spec.split,
                                               spec.dataset));
}

// Before a first attach: segment rows without a catalog row. Those an attach
// left unfinished are deleted; any other is refused.
Status ClearLeftovers(net::Session& s, const std::string& keyspace, const std::string& dataset,
                      AttachReport* report) {
  CQLS_ASSIGN_OR_RETURN(auto rows, ReadSegRows(s, keyspace, dataset));
  std::vector<net::Statement> batch;
  for (const auto& g : rows) {
    if (!g.source_id.starts_with("attach:")) {
      return Status::AlreadyExists(fmt::format(
          "keyspace '{}' holds segments of '{}' without a catalog entry (an unfinished ingest?); run cqlstream drop "
          "{} first",
          keyspace, dataset, dataset));
    }
    batch.push_back(DeleteSegment(keyspace, dataset, g.seg));
    report->removed_segments.push_back(g.seg);
  }
  return RunSegmentBatch(s, batch, "removing an unfinished attach's segments");
}

}  // namespace

StatusOr<TableShape> ReadTableShape(net::Session& s, const std::string& qualified_table) {
  CQLS_ASSIGN_OR_RETURN(auto parts, SplitTableName(qualified_table));
  net::Statement st = net::Statement::Query(
      "SELECT column_name, kind, type FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?",
      {Value::Text(parts.first), Value::Text(parts.second)});
  st.idempotent = true;
  TableShape shape;
  net::Session::ReadBudget budget = SchemaReadBudget(fmt::format("the columns read of table {}", qualified_table));
  CQLS_RETURN_IF_ERROR(s.ForEachPage(
      st,
      [&](const cql::Rows& r) -> Status {
        for (int32_t i = 0; i < r.row_count(); ++i) {
          CQLS_ASSIGN_OR_RETURN(std::string name, r.Get<std::string>(i, 0));
          CQLS_ASSIGN_OR_RETURN(std::string kind, r.Get<std::string>(i, 1));
          CQLS_ASSIGN_OR_RETURN(std::string type, r.Get<std::string>(i, 2));
          shape[name] = TableColumn{kind, type};
        }
        return Status::OK();
      },
      &budget));
  if (shape.empty()) return Status::NotFound(fmt::format("table {} does not exist", qualified_table));
  return shape;
}

StatusOr<AttachedTable> CheckAttachable(const TableShape& shape, const AttachSpec& spec) {
  const std::string& t = spec.table;
  std::vector<std::string> pk, ck;
  for (const auto& [name, c] : shape) {
    if (c.kind == "partition_key") pk.push_back(name);
    if (c.kind == "clustering") ck.push_back(name);
  }
  if (pk.size() != 1) {
    return Status::InvalidArgument(fmt::format(
        "{} has a composite partition key ({} columns): attach needs a single-column partition key, one row per "
        "sample, so that a sample is read by its key alone",
        t, pk.size()));
  }
  if (!ck.empty()) {
    return Status::InvalidArgument(fmt::format(
        "{} has clustering column(s) ({}): a partition then holds many rows, and attach needs exactly one row (one "
        "sample) per key",
        t, fmt::join(ck, ", ")));
  }
  CQLS_RETURN_IF_ERROR(CheckColumn(shape, t, "key", spec.key_column));
  if (spec.key_column != pk[0]) {
    return Status::InvalidArgument(
        fmt::format("key column '{}' is not the partition key of {} (its partition key is '{}')", spec.key_column, t,
                    pk[0]));
  }
  AttachedTable a;
  a.key_column = spec.key_column;
  a.key_type = shape.at(spec.key_column).type;
  if (!AttachableKeyType(a.key_type)) {
    return Status::InvalidArgument(fmt::format(
        "key column '{}' of {} is of type {}: attach takes uuid, timeuuid, bigint, int, text, ascii or blob keys",
        a.key_column, t, a.key_type));
  }
  CQLS_RETURN_IF_ERROR(CheckColumn(shape, t, "data", spec.data_column));
  if (shape.at(spec.data_column).type != "blob") {
    return Status::InvalidArgument(fmt::format("data column '{}' of {} is of type {}: the sample bytes must be a blob",
                                               spec.data_column, t, shape.at(spec.data_column).type));
  }
  a.data_column = spec.data_column;
  if (!spec.label_column.empty()) {
    CQLS_RETURN_IF_ERROR(CheckColumn(shape, t, "label", spec.label_column));
    a.label_column = spec.label_column;
    a.label_type = shape.at(spec.label_column).type;
    if (!AttachableLabelType(a.label_type)) {
      return Status::InvalidArgument(fmt::format(
          "label column '{}' of {} is of type {}: attach takes int, list<int>, set<int>, blob or text labels",
          a.label_column, t, a.label_type));
    }
  }
  if (spec.label_kind) CQLS_RETURN_IF_ERROR(CheckLabelKind(a.label_type, *spec.label_kind));
  a.tables[spec.split] = spec.table;
  if (!spec.metadata_table.empty()) a.metadata_tables[spec.split] = spec.metadata_table;
  a.generation = 1;
  CQLS_RETURN_IF_ERROR(a.Validate());
  a.generation = 0;
  return a;
}

Status CheckAttachCompatible(const DatasetInfo& d, const AttachedTable& old, const AttachedTable& fresh,
                             LabelKind kind, const AttachSpec& spec) {
  if (old.key_column != fresh.key_column || old.key_type != fresh.key_type || old.data_column != fresh.data_column ||
      old.label_column != fresh.label_column || old.label_type != fresh.label_type) {
    return Status::InvalidArgument(fmt::format(
        "dataset '{}' is attached with key {} {}, data {}, label {} {}; every split must share them (asked: key {} "
        "{}, data {}, label {} {})",
        d.name, old.key_column, old.key_type, old.data_column, old.label_column.empty() ? "-" : old.label_column,
        old.label_type, fresh.key_column, fresh.key_type, fresh.data_column,
        fresh.label_column.empty() ? "-" : fresh.label_column, fresh.label_type));
  }
  if (kind != d.label_kind) {
    return Status::InvalidArgument(fmt::format("dataset '{}' has label kind {}, asked for {}", d.name,
                                               LabelKindName(d.label_kind), LabelKindName(kind)));
  }
  const bool has = old.tables.contains(spec.split);
  if (has && old.tables.at(spec.split) != fresh.tables.at(spec.split)) {
    // The split's samples are the keys of its table: another table is another
    // dataset (its checkpoints and selections would silently mean other rows).
    return Status::InvalidArgument(fmt::format(
        "split '{}' of dataset '{}' is attached to {}, not {}: --refresh takes a new snapshot of the same table; "
        "attach {} under another dataset name, or drop '{}' first",
        spec.split, d.name, old.tables.at(spec.split), fresh.tables.at(spec.split), fresh.tables.at(spec.split),
        d.name));
  }
  if (has && !spec.refresh) {
    return Status::AlreadyExists(fmt::format(
        "split '{}' of dataset '{}' is attached already (to {}); --refresh takes a new snapshot of it", spec.split,
        d.name, old.tables.at(spec.split)));
  }
  if (!has && spec.refresh) {
    return Status::NotFound(fmt::format("--refresh: dataset '{}' has no split '{}' to refresh", d.name, spec.split));
  }
  return Status::OK();
}

StatusOr<AttachReport> Attach(net::Session& s, const std::string& keyspace, const AttachSpec& spec) {
  CQLS_RETURN_IF_ERROR(ValidateGeneratedKeyspace(keyspace));
  CQLS_RETURN_IF_ERROR(ValidateDatasetName(spec.dataset));
  CQLS_ASSIGN_OR_RETURN(TableShape shape, ReadTableShape(s, spec.table));
  CQLS_ASSIGN_OR_RETURN(AttachedTable fresh, CheckAttachable(shape, spec));
  if (!spec.metadata_table.empty()) CQLS_RETURN_IF_ERROR(CheckMetadataTable(s, spec, fresh));
  const LabelKind kind = spec.label_kind.value_or(DefaultLabelKind(fresh.label_type));
  AttachReport report;
  CQLS_RETURN_IF_ERROR(EnsureKeyspace(s, keyspace, spec.replication, spec.replication_given, &report.keyspace_note));
  CQLS_RETURN_IF_ERROR(EnsureCatalog(s, keyspace));
  auto existing = LoadDataset(s, keyspace, spec.dataset);
  if (!existing.ok() && !existing.status().IsNotFound()) return existing.status();
  AttachedTable a = fresh;
  if (existing.ok()) {
    if (!existing->attached()) {
      return Status::AlreadyExists(fmt::format(
          "dataset '{}' is a native dataset (written by cqlstream ingest); attach needs another name", spec.dataset));
    }
    CQLS_ASSIGN_OR_RETURN(a, AttachedTable::FromSource(*existing));
    CQLS_RETURN_IF_ERROR(CheckAttachCompatible(*existing, a, fresh, kind, spec));
    a.tables[spec.split] = spec.table;
    a.metadata_tables.erase(spec.split);
    if (!spec.metadata_table.empty()) a.metadata_tables[spec.split] = spec.metadata_table;
    a.generation += 1;
  } else {
    if (spec.refresh) return Status::NotFound(fmt::format("--refresh: no dataset '{}' to refresh", spec.dataset));
    CQLS_RETURN_IF_ERROR(ClearLeftovers(s, keyspace, spec.dataset, &report));
    a.generation = 1;
  }
  CQLS_RETURN_IF_ERROR(Ddl(s, KeyTableCql(keyspace, spec.dataset)));
  CQLS_ASSIGN_OR_RETURN(report.snapshot, WriteKeySnapshot(s, keyspace, spec.dataset, a, spec.split, spec.scan));
  if (existing.ok()) {
    std::vector<RetiredSegment> replaced;
    CQLS_RETURN_IF_ERROR(CommitIntoExisting(s, keyspace, spec, *existing, a, report.snapshot, &report, &replaced));
    if (spec.refresh && replaced.size() <= kMaxRetiredSegments) {
      auto retired = RetireGeneration(s, keyspace, spec.dataset, spec.split, replaced, spec.scan.concurrency);
      if (retired.ok()) {
        report.deleted_key_rows = retired->deleted_rows;
      } else {
        report.retire_note = retired.status().ToString();
      }
    }
  } else {
    CQLS_ASSIGN_OR_RETURN(auto batch, SealStatements(s, keyspace, spec.dataset, report.snapshot));
    CQLS_RETURN_IF_ERROR(RunSegmentBatch(s, batch, fmt::format("sealing the snapshot of '{}'", spec.dataset)));
    CQLS_RETURN_IF_ERROR(InsertCatalogRow(s, keyspace, spec, a, kind, report.snapshot.label_texts));
    report.created = true;
  }
  report.table = a;
  return report;
}

}  // namespace cqlstream::store
