// Copyright (c) cqlstream authors.
#include "store/attached_scan.h"

#include <fmt/format.h>

#include <span>
#include <utility>

#include "store/attach.h"
#include "store/attached_extra.h"
#include "store/read_again.h"
#include "store/schema.h"
#include "util/mutex.h"

namespace cqlstream::store {
namespace {

bool UsesLabel(const DatasetInfo& d, AttachedLabelType t) {
  return d.label_kind != LabelKind::kNone && t != AttachedLabelType::kNone;
}

// The label cell of a label read (column 1 of row 0, after the key, which
// the caller checked) into `m`, decoded by
// store::AttachedRow with the loader's own checks (an int label in range, no
// negative list entry, a text among the class names, by name), so select,
// split and export see the labels the loader delivers. A target only names
// its file.
Status DecodeLabel(const AttachedRowOptions& o, SampleKey k, const cql::Rows& r, MetaRow* m) {
  if (o.label_kind == LabelKind::kTarget) {
    m->target_path = m->path + ".target";
    return Status::OK();
  }
  AttachedRow row(k, m->path, &o);
  row.OnRowsBegin(r.row_count());
  row.OnCell(0, kAttachedColLabel, r.cell(0, 1));
  if (!row.status().ok()) return row.status();
  if (o.label_kind == LabelKind::kMultiLabel) {
    m->labels = row.labels();
  } else if (row.label() >= 0) {
    m->label = row.label();
  }
  return Status::OK();
}

// Whether every row of `rows` names `bound` (the key as the read bound it)
// in its first cell: a row of another key answers another request.
bool RowsNameKey(const cql::Rows& rows, std::span<const uint8_t> bound) {
  for (int32_t i = 0; i < rows.row_count(); ++i) {
    if (rows.column_count() < 1 || !ForeignKeyMatches(rows.cell(i, 0), bound)) return false;
  }
  return true;
}

}  // namespace

std::string KeyPath(const Value& key) {
  if (key.kind() == Value::Kind::kText) return key.as_text();
  return key.ToString();
}

StatusOr<std::unique_ptr<AttachedSamples>> AttachedSamples::Open(net::Session& s, const DatasetInfo& d,
                                                                 bool with_extra, const std::atomic<bool>* stop) {
  if (!d.attached()) return Status::InvalidArgument(fmt::format("dataset '{}' is not attached", d.name));
  std::unique_ptr<AttachedSamples> out(new AttachedSamples(s, d, stop));
  CQLS_ASSIGN_OR_RETURN(out->a_, AttachedTable::FromSource(d));
  CQLS_ASSIGN_OR_RETURN(out->key_type_, AttachedKeyType(out->a_.key_type));
  CQLS_ASSIGN_OR_RETURN(out->label_type_, ParseAttachedLabelType(out->a_.label_type));
  out->snapshot_table_ = d.keyspace + "." + KeyTableName(d.name);
  // Once per dataset: Options (every ReadMeta, every export/verify read)
  // shares it.
  out->class_index_ = std::make_shared<const ClassNameIndex>(d.class_names);
  CQLS_ASSIGN_OR_RETURN(out->lookup_, s.Prepare(KeyLookupCql(d.keyspace, d.name)));
  for (const auto& sp : d.splits()) {
    if (!out->a_.tables.contains(sp)) {
      return Status::Corruption(fmt::format("dataset '{}' has segments of split '{}' but no table for it", d.name, sp));
    }
    CQLS_RETURN_IF_ERROR(out->PrepareTable(out->a_.tables.at(sp)));
    auto meta = out->a_.metadata_tables.find(sp);
    if (with_extra && meta != out->a_.metadata_tables.end()) {
      CQLS_RETURN_IF_ERROR(out->PrepareExtra(sp, meta->second));
    }
  }
  for (const auto& g : d.segments) {
    if (g.count <= 0) continue;
    CQLS_ASSIGN_OR_RETURN(std::string table, AttachedSegmentTable(d, out->a_, g));
    CQLS_RETURN_IF_ERROR(out->PrepareTable(table));
    // A split's messages name the table its segments were snapshot from
    // when they all agree (always, but while a refresh is half done).
    auto [it, fresh] = out->split_tables_.emplace(g.split, table);
    if (!fresh && it->second != table) it->second = out->a_.tables.at(g.split);
    out->seg_tables_[g.seg] = std::move(table);
  }
  return out;
}

// The data (and label) read of one foreign table, once.
Status AttachedSamples::PrepareTable(const std::string& table) {
  if (data_reads_.contains(table)) return Status::OK();
  CQLS_ASSIGN_OR_RETURN(auto parts, SplitTableName(table));
  const std::string quoted = QuoteIdentifier(parts.first) + "." + QuoteIdentifier(parts.second);
  AttachedTable one = a_;
  one.tables = {{"_", table}};
  CQLS_ASSIGN_OR_RETURN(data_reads_[table], s_.Prepare(one.DataReadCql("_")));
  if (UsesLabel(d_, label_type_)) {
    CQLS_ASSIGN_OR_RETURN(label_reads_[table],
                          s_.Prepare(fmt::format("SELECT {}, {} FROM {} WHERE {} = ?", QuoteIdentifier(a_.key_column),
                                                 QuoteIdentifier(a_.label_column), quoted,
                                                 QuoteIdentifier(a_.key_column))));
  }
  return Status::OK();
}

// The metadata table's read (store/attached_extra.h); its columns from
// system_schema, none of them trusted.
Status AttachedSamples::PrepareExtra(const std::string& split, const std::string& table) {
  auto shape = ReadTableShape(s_, table);
  if (!shape.ok()) return shape.status().WithContext(fmt::format("the metadata table of split '{}'", split));
  std::vector<std::string> names;
  for (const auto& [name, c] : *shape) names.push_back(name);
  const MetadataColumns cols = PickMetadataColumns(names, a_.key_column);
  if (cols.columns.empty()) return Status::OK();
  CQLS_ASSIGN_OR_RETURN(auto parts, SplitTableName(table));
  const std::string quoted = QuoteIdentifier(parts.first) + "." + QuoteIdentifier(parts.second);
  CQLS_ASSIGN_OR_RETURN(extra_reads_[split], s_.Prepare(MetadataReadCql(quoted, a_.key_column, cols.columns)));
  return Status::OK();
}

const std::string& AttachedSamples::TableOf(const std::string& split, SampleKey k) const {
  auto g = seg_tables_.find(KeySegment(k));
  if (g != seg_tables_.end()) return g->second;
  static const std::string kNone;
  auto t = a_.tables.find(split);
  return t == a_.tables.end() ? kNone : t->second;
}

StatusOr<std::optional<net::ResultSet>> AttachedSamples::Run(const net::PreparedPtr& q, std::vector<Value> v,
                                                             int32_t page, SampleKey k, Status* problem) const {
  net::Statement st = net::Statement::Bound(q, std::move(v));
  st.idempotent = true;
  st.check_result_columns = true;  // the answer names the read it answers (net/result_columns.h)
  st.consistency = cql::Consistency::kLocalQuorum;
  st.page_size = page;  // one row is expected; two show that there are more
  auto r = ReadAgainOnCorruption(kReadAttempts, [&] { return s_.Execute(st, stop_); });
  if (r.ok()) return std::optional<net::ResultSet>(std::move(*r));
  if (r.status().code() != Status::Code::kCorruption) return r.status();
  // Answers meant for other reads, every time: this sample's problem, not
  // the end of the scan.
  *problem = r.status().WithContext(fmt::format("sample {} ({} attempts)", FormatKey(k), kReadAttempts));
  return std::optional<net::ResultSet>();
}

AttachedRowOptions AttachedSamples::Options(const std::string& split, bool keep) const {
  AttachedRowOptions o;
  o.label_kind = d_.label_kind;
  o.label_type = label_type_;
  o.class_names = class_index_;
  o.classes = d_.class_names.empty() ? -1 : static_cast<int64_t>(d_.class_names.size());
  auto seg = split_tables_.find(split);
  auto it = a_.tables.find(split);
  o.table = seg != split_tables_.end() ? seg->second : it == a_.tables.end() ? split : it->second;
  o.keep_data = keep;
  o.keep_target = keep;
  return o;
}

StatusOr<std::optional<Value>> AttachedSamples::ForeignKey(SampleKey k, Status* problem) const {
  CQLS_ASSIGN_OR_RETURN(auto r, Run(lookup_, {Value::Int(KeySegment(k)), Value::Int(KeyIndex(k))}, 2, k, problem));
  if (!r) return std::optional<Value>();
  auto key = SnapshotKey(k, r->rows(), key_type_, snapshot_table_);
  if (!key.ok()) {
    *problem = key.status();
    return std::optional<Value>();
  }
  return std::optional<Value>(std::move(*key));
}

StatusOr<MetaRow> AttachedSamples::ReadMeta(const std::string& split, SampleKey k, Status* problem) const {
  MetaRow m;
  m.key = k;
  CQLS_ASSIGN_OR_RETURN(std::optional<Value> key, ForeignKey(k, problem));
  if (!key) return m;
  m.path = KeyPath(*key);
  cql::Bytes bound;  // the key as the reads bind it
  CQLS_RETURN_IF_ERROR(EncodeCell(*key, key_type_, &bound));
  // Both reads select the key first: a row of another key is refused.
  auto another_key = [&](const char* read, const std::string& table) {
    return Status::Corruption(fmt::format("sample {} (key {}): the {} read of {} answered a row of another key",
                                          FormatKey(k), m.path, read, table));
  };
  auto x = extra_reads_.find(split);
  if (x != extra_reads_.end()) {
    CQLS_ASSIGN_OR_RETURN(auto e, Run(x->second, {*key}, 2, k, problem));
    if (!e) return m;
    if (e->rows() != nullptr && !RowsNameKey(*e->rows(), bound)) {
      auto t = a_.metadata_tables.find(split);
      *problem = another_key("metadata", t == a_.metadata_tables.end() ? split : t->second);
      return m;
    }
    if (e->rows() != nullptr) m.extra = ExtraFromRows(*e->rows());
  }
  const std::string& table = TableOf(split, k);
  auto q = label_reads_.find(table);
  if (q == label_reads_.end()) return m;
  CQLS_ASSIGN_OR_RETURN(auto r, Run(q->second, {*key}, 2, k, problem));
  if (!r) return m;
  const cql::Rows* rows = r->rows();
  if (rows != nullptr && !RowsNameKey(*rows, bound)) {
    *problem = another_key("label", table);
    return m;
  }
  if (rows == nullptr || rows->row_count() != 1) {
    const int32_t n = rows == nullptr ? 0 : rows->row_count();
    *problem = n == 0 ? Status::NotFound(fmt::format("sample {} (key {}) has no row in {}", FormatKey(k), m.path, table))
                      : Status::Corruption(fmt::format("sample {} (key {}): {} rows in {}", FormatKey(k), m.path, n, table));
    return m;
  }
  const AttachedRowOptions o = Options(split, /*keep=*/false);
  Status st = DecodeLabel(o, k, *rows, &m);
  if (!st.ok()) *problem = std::move(st);  // names the sample, its key and the table
  return m;
}

Status AttachedSamples::ReadData(const std::string& split, SampleKey k, AttachedRow* row, std::string* key_path,
                                 Status* problem) const {
  CQLS_ASSIGN_OR_RETURN(std::optional<Value> key, ForeignKey(k, problem));
  if (!key) return Status::OK();
  *key_path = KeyPath(*key);
  auto q = data_reads_.find(TableOf(split, k));
  if (q == data_reads_.end()) return Status::InvalidArgument(fmt::format("no table for split '{}'", split));
  cql::Bytes bound;  // the key as the read binds it
  CQLS_RETURN_IF_ERROR(EncodeCell(*key, key_type_, &bound));
  CQLS_ASSIGN_OR_RETURN(auto r, Run(q->second, {*key}, 2, k, problem));
  if (!r) return Status::OK();
  const cql::Rows* rows = r->rows();
  const int32_t n = rows == nullptr ? 0 : rows->row_count();
  // Each row names its key first: a row of another key is an answer meant
  // for another request, never this sample's data.
  for (int32_t i = 0; i < n; ++i) {
    if (rows->column_count() < 1 || !ForeignKeyMatches(rows->cell(i, 0), bound)) {
      *problem = Status::Corruption(fmt::format("sample {} (key {}): the data read of {} answered a row of another key",
                                                FormatKey(k), *key_path, TableOf(split, k)));
      return Status::OK();
    }
  }
  row->OnRowsBegin(n);
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t c = 1; c < rows->column_count(); ++c) row->OnCell(i, c - 1, rows->cell(i, c));
  }
  *problem = row->Finish();
  return Status::OK();
}

Status ScanAttachedMeta(net::Session& s, const DatasetInfo& d, const std::vector<SegmentInfo>& segs, int concurrency,
                        const std::function<Status(const BlockRef&, std::vector<MetaRow>&)>& on_block,
                        const std::function<void(SampleKey, const Status&)>& on_problem,
                        const std::atomic<bool>* stop, bool with_extra) {
  CQLS_ASSIGN_OR_RETURN(auto reader, AttachedSamples::Open(s, d, with_extra, stop));
  std::map<int32_t, std::string> split_of;
  for (const auto& g : segs) split_of[g.seg] = g.split;
  Mutex mu;  // serializes on_problem
  for (const BlockRef& b : CommittedBlocks(segs)) {
    const int32_t first = b.first_idx();
    std::vector<MetaRow> rows(static_cast<size_t>(b.end_idx() - first));
    std::vector<char> ok(rows.size(), 0);
    CQLS_RETURN_IF_ERROR(ParallelFor(
        rows.size(), concurrency,
        [&](size_t i) -> Status {
          const SampleKey k = MakeKey(b.seg, first + static_cast<int32_t>(i));
          Status problem;
          CQLS_ASSIGN_OR_RETURN(rows[i], reader->ReadMeta(split_of[b.seg], k, &problem));
          ok[i] = problem.ok();
          if (!problem.ok() && on_problem) {
            MutexLock l(&mu);
            on_problem(k, problem);
          }
          return Status::OK();
        },
        stop));
    std::vector<MetaRow> good;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (ok[i]) good.push_back(std::move(rows[i]));
    }
    CQLS_RETURN_IF_ERROR(on_block(b, good));
  }
  return Status::OK();
}

}  // namespace cqlstream::store
