// Copyright (c) cqlstream authors.
#include "store/schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <set>

#include "store/catalog.h"
#include "util/cql_keywords.h"

namespace cqlstream::store {
namespace {

bool ValidDcName(std::string_view dc) {
  if (dc.empty() || dc.size() > 64) return false;
  for (char c : dc) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool ParseDecimal(std::string_view s, int* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

std::string ShortClass(std::string_view cls) {
  const size_t dot = cls.rfind('.');
  return std::string(dot == std::string_view::npos ? cls : cls.substr(dot + 1));
}

// The text of a cell, or "" (null / not text).
std::string TextCell(const cql::Rows& r, int32_t row, int32_t col) {
  auto v = r.value(row, col);
  return v.ok() && v->kind() == Value::Kind::kText ? v->as_text() : std::string();
}

net::Statement Read(std::string q, std::vector<Value> v = {}) {
  net::Statement st = net::Statement::Query(std::move(q), std::move(v));
  st.idempotent = true;
  st.consistency = cql::Consistency::kLocalQuorum;
  return st;
}

StatusOr<bool> KeyspaceExists(net::Session& s, const std::string& keyspace,
                              std::map<std::string, std::string>* replication) {
  auto r = s.Execute(Read("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?",
                          {Value::Text(keyspace)}));
  if (!r.ok()) return r.status();
  const cql::Rows* rows = r->rows();
  if (rows == nullptr || rows->row_count() == 0) return false;
  auto v = rows->value(0, 0);
  if (v.ok() && v->kind() == Value::Kind::kMap && replication != nullptr) {
    for (const auto& [k, val] : v->as_map()) {
      if (k.kind() == Value::Kind::kText && val.kind() == Value::Kind::kText) (*replication)[k.as_text()] = val.as_text();
    }
  }
  return true;
}

// column name -> "kind type" of a table; empty when the table does not exist.
StatusOr<std::map<std::string, std::string>> TableColumns(net::Session& s, const std::string& keyspace,
                                                          const std::string& table) {
  std::map<std::string, std::string> out;
  net::Session::ReadBudget budget = SchemaReadBudget(fmt::format("the columns read of table {}.{}", keyspace, table));
  Status st = s.ForEachPage(
      Read("SELECT column_name, kind, type FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?",
           {Value::Text(keyspace), Value::Text(table)}),
      [&](const cql::Rows& r) {
        for (int32_t i = 0; i < r.row_count(); ++i) {
          out[TextCell(r, i, 0)] = TextCell(r, i, 1) + " " + TextCell(r, i, 2);
        }
        return Status::OK();
      },
      &budget);
  if (!st.ok()) return st;
  return out;
}

Status CheckTable(net::Session& s, const std::string& keyspace, const std::string& table,
                  const std::map<std::string, std::string>& expected) {
  CQLS_ASSIGN_OR_RETURN(auto cols, TableColumns(s, keyspace, table));
  if (cols == expected) return Status::OK();
  std::vector<std::string> diff;
  for (const auto& [name, def] : expected) {
    auto it = cols.find(name);
    if (it == cols.end()) diff.push_back(fmt::format("missing {} ({})", name, def));
    else if (it->second != def) diff.push_back(fmt::format("{} is '{}', layout 1 wants '{}'", name, it->second, def));
  }
  for (const auto& [name, def] : cols) {
    if (!expected.count(name)) diff.push_back(fmt::format("unexpected column {} ({})", name, def));
  }
  std::string joined;
  for (size_t i = 0; i < diff.size() && i < 8; ++i) joined += (i ? "; " : "") + diff[i];
  return Status::AlreadyExists(fmt::format(
      "table {}.{} exists but is not a cqlstream layout-1 table ({}); drop it or choose another dataset name",
      keyspace, table, joined));
}

std::string JoinNames(const std::vector<std::string>& names, size_t max) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < max; ++i) out += (i ? ", " : "") + fmt::format("'{}'", names[i]);
  if (names.size() > max) out += fmt::format(" and {} more", names.size() - max);
  return out;
}

}  // namespace

// --- Replication -----------------------------------------------------------------

StatusOr<Replication> Replication::Parse(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument(fmt::format(
        "invalid --replication '{}': {} (use simple:RF, e.g. simple:3, or nts:DC=RF[,DC=RF...], e.g. nts:dc1=3,dc2=2)",
        text, why));
  };
  Replication r;
  if (text.starts_with("simple:")) {
    r.kind = Kind::kSimple;
    if (!ParseDecimal(text.substr(7), &r.replication_factor)) return bad("the replication factor is not a number");
    if (r.replication_factor < 1 || r.replication_factor > 99) return bad("the replication factor must be 1..99");
    return r;
  }
  if (text.starts_with("nts:")) {
    r.kind = Kind::kNetworkTopology;
    std::string_view rest = text.substr(4);
    std::set<std::string> seen;
    int total = 0;
    while (!rest.empty() || r.dc_factors.empty()) {
      const size_t comma = rest.find(',');
      std::string_view item = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      const size_t eq = item.find('=');
      if (eq == std::string_view::npos) return bad(fmt::format("'{}' is not DC=RF", item));
      std::string dc(item.substr(0, eq));
      int rf = 0;
      if (!ValidDcName(dc)) return bad(fmt::format("'{}' is not a data center name ([A-Za-z0-9_.-]{{1,64}})", dc));
      if (!ParseDecimal(item.substr(eq + 1), &rf) || rf < 0 || rf > 99) {
        return bad(fmt::format("the replication factor of '{}' must be 0..99", dc));
      }
      if (!seen.insert(dc).second) return bad(fmt::format("data center '{}' is given twice", dc));
      total += rf;
      r.dc_factors.emplace_back(std::move(dc), rf);
      if (comma == std::string_view::npos) break;
      if (rest.empty()) return bad("a data center is missing after ','");
    }
    if (total == 0) return bad("at least one data center needs a positive replication factor");
    return r;
  }
  return bad("it must start with 'simple:' or 'nts:'");
}

std::string Replication::ToCql() const {
  if (kind == Kind::kSimple) {
    return fmt::format("{{'class': 'SimpleStrategy', 'replication_factor': '{}'}}", replication_factor);
  }
  std::string out = "{'class': 'NetworkTopologyStrategy'";
  for (const auto& [dc, rf] : dc_factors) out += fmt::format(", '{}': '{}'", dc, rf);
  return out + "}";
}

std::string Replication::ToString() const {
  if (kind == Kind::kSimple) return fmt::format("simple:{}", replication_factor);
  std::string out = "nts:";
  for (size_t i = 0; i < dc_factors.size(); ++i) {
    out += fmt::format("{}{}={}", i ? "," : "", dc_factors[i].first, dc_factors[i].second);
  }
  return out;
}

bool Replication::Matches(const std::map<std::string, std::string>& stored) const {
  auto cls = stored.find("class");
  if (cls == stored.end()) return false;
  const std::string c = ShortClass(cls->second);
  if (kind == Kind::kSimple) {
    auto it = stored.find("replication_factor");
    return c == "SimpleStrategy" && it != stored.end() && it->second == std::to_string(replication_factor);
  }
  if (c != "NetworkTopologyStrategy") return false;
  std::map<std::string, std::string> want;
  for (const auto& [dc, rf] : dc_factors) {
    if (rf > 0) want[dc] = std::to_string(rf);
  }
  std::map<std::string, std::string> have;
  for (const auto& [k, v] : stored) {
    if (k != "class" && v != "0") have[k] = v;
  }
  return want == have;
}

// --- DDL ---------------------------------------------------------------------------

std::string CreateKeyspaceCql(const std::string& keyspace, const Replication& r) {
  return fmt::format("CREATE KEYSPACE IF NOT EXISTS {} WITH replication = {}", keyspace, r.ToCql());
}

std::vector<std::pair<std::string, std::string>> LaterCatalogColumns() {
  return {{"sample_kind", "text"}, {"preprocess", "text"}, {"source", "map<text, text>"}};
}

std::vector<std::string> CatalogTablesCql(const std::string& ks) {
  return {
      fmt::format("CREATE TABLE IF NOT EXISTS {}.datasets (name text PRIMARY KEY, layout_version int, "
                  "created timestamp, label_kind text, class_names list<text>, checksum text, chunk_size int, "
                  "description text, sample_kind text, preprocess text, source map<text, text>)",
                  ks),
      fmt::format("CREATE TABLE IF NOT EXISTS {}.segments (dataset text, seg int, split text, source_id text, "
                  "source text, fingerprint text, count int, bytes bigint, max_size bigint, size_hist list<bigint>, "
                  "next_pos bigint, state text, created timestamp, updated timestamp, PRIMARY KEY ((dataset), seg))",
                  ks),
  };
}

std::vector<std::string> DatasetTablesCql(const std::string& ks, const std::string& name) {
  return {
      fmt::format("CREATE TABLE IF NOT EXISTS {}.d_{} (seg int, idx int, chunk int, size bigint static, "
                  "image_size bigint static, checksum bigint static, label int static, labels list<int> static, "
                  "data blob, PRIMARY KEY ((seg, idx), chunk)) WITH compression = {{'enabled': 'false'}}",
                  ks, name),
      fmt::format("CREATE TABLE IF NOT EXISTS {}.m_{} (seg int, block int, idx int, path text, target_path text, "
                  "label int, labels list<int>, size bigint, image_size bigint, checksum bigint, "
                  "extra map<text, text>, PRIMARY KEY ((seg, block), idx))",
                  ks, name),
  };
}

std::map<std::string, std::string> ExpectedDataColumns() {
  return {{"seg", "partition_key int"},     {"idx", "partition_key int"},   {"chunk", "clustering int"},
          {"size", "static bigint"},         {"image_size", "static bigint"}, {"checksum", "static bigint"},
          {"label", "static int"},           {"labels", "static list<int>"},  {"data", "regular blob"}};
}

std::map<std::string, std::string> ExpectedMetaColumns() {
  return {{"seg", "partition_key int"},      {"block", "partition_key int"},    {"idx", "clustering int"},
          {"path", "regular text"},          {"target_path", "regular text"},   {"label", "regular int"},
          {"labels", "regular list<int>"},   {"size", "regular bigint"},        {"image_size", "regular bigint"},
          {"checksum", "regular bigint"},    {"extra", "regular map<text, text>"}};
}

Status ValidateGeneratedKeyspace(std::string_view keyspace) {
  CQLS_RETURN_IF_ERROR(ValidateKeyspaceName(keyspace));
  return RefuseReservedWord("keyspace", keyspace);
}

Status CheckSpecSizes(const DatasetSpec& spec) {
  size_t bytes = 0;
  for (const auto& c : spec.class_names) bytes += c.size();
  if (spec.class_names.size() > kMaxClasses || bytes > kMaxClassListBytes) {
    return Status::InvalidArgument(fmt::format(
        "dataset '{}': the class list is too large ({} classes, {} bytes of names; at most {} classes and {} bytes): "
        "nothing was written",
        spec.name, spec.class_names.size(), bytes, kMaxClasses, kMaxClassListBytes));
  }
  if (spec.description.size() > kMaxDescriptionBytes) {
    return Status::InvalidArgument(fmt::format("dataset '{}': the description has {} bytes (at most {})", spec.name,
                                               spec.description.size(), kMaxDescriptionBytes));
  }
  return Status::OK();
}

StatusOr<std::vector<std::string>> OrphanTables(net::Session& s, const std::string& keyspace,
                                                const std::vector<std::string>& known) {
  CQLS_RETURN_IF_ERROR(ValidateGeneratedKeyspace(keyspace));
  const std::set<std::string> names(known.begin(), known.end());
  std::vector<std::string> out;
  net::Session::ReadBudget budget = SchemaReadBudget(fmt::format("the tables read of keyspace '{}'", keyspace));
  Status st = s.ForEachPage(Read("SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?",
                                 {Value::Text(keyspace)}),
                            [&](const cql::Rows& r) {
                              for (int32_t i = 0; i < r.row_count(); ++i) {
                                const std::string t = TextCell(r, i, 0);
                                // k_: an attach's key snapshot whose catalog row was never written;
                                // p_: a packed copy (store/pack.h).
                                const bool ours = t.rfind("d_", 0) == 0 || t.rfind("m_", 0) == 0 ||
                                                  t.rfind("k_", 0) == 0 || t.rfind("p_", 0) == 0;
                                if (t.size() > 2 && ours &&
                                    names.count(t.substr(2)) == 0) {
                                  out.push_back(t);
                                }
                              }
                              return Status::OK();
                            },
                            &budget);
  if (!st.ok()) return st;
  std::sort(out.begin(), out.end());
  return out;
}

Status RunDdl(net::Session& s, const std::string& cql) {
  net::Statement st = net::Statement::Query(cql);
  st.timeout = std::chrono::milliseconds(60000);
  auto r = s.Execute(st);
  if (!r.ok()) return r.status().WithContext(cql.substr(0, cql.find('(')));
  return s.WaitForSchemaAgreement(std::chrono::seconds(60));
}

Status EnsureKeyspace(net::Session& s, const std::string& keyspace, const Replication& r, bool replication_given,
                      std::string* note) {
  CQLS_RETURN_IF_ERROR(ValidateGeneratedKeyspace(keyspace));
  std::map<std::string, std::string> stored;
  CQLS_ASSIGN_OR_RETURN(bool exists, KeyspaceExists(s, keyspace, &stored));
  if (!exists) return RunDdl(s, CreateKeyspaceCql(keyspace, r));
  if (replication_given && !r.Matches(stored) && note != nullptr) {
    std::string have;
    for (const auto& [k, v] : stored) have += fmt::format("{}{}={}", have.empty() ? "" : ", ", k, v);
    *note = fmt::format("keyspace '{}' exists with replication {{{}}}; --replication {} was not applied "
                        "(use ALTER KEYSPACE to change it)",
                        keyspace, have, r.ToString());
  }
  return Status::OK();
}

Status EnsureCatalog(net::Session& s, const std::string& keyspace) {
  CQLS_RETURN_IF_ERROR(ValidateGeneratedKeyspace(keyspace));
  for (const auto& ddl : CatalogTablesCql(keyspace)) CQLS_RETURN_IF_ERROR(RunDdl(s, ddl));
  // A catalog made by an older release lacks the later columns: add them
  // (ALTER TABLE ... ADD is cheap and leaves the rows as they are).
  std::set<std::string> have;
  net::Session::ReadBudget budget =
      SchemaReadBudget(fmt::format("the columns read of table {}.datasets", keyspace));
  CQLS_RETURN_IF_ERROR(s.ForEachPage(
      Read("SELECT column_name FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?",
           {Value::Text(keyspace), Value::Text("datasets")}),
      [&](const cql::Rows& r) {
        for (int32_t i = 0; i < r.row_count(); ++i) have.insert(TextCell(r, i, 0));
        return Status::OK();
      },
      &budget));
  for (const auto& [column, type] : LaterCatalogColumns()) {
    if (have.count(column) == 0) {
      CQLS_RETURN_IF_ERROR(RunDdl(s, fmt::format("ALTER TABLE {}.datasets ADD {} {}", keyspace, column, type)));
    }
  }
  return Status::OK();
}

// --- datasets -------------------------------------------------------------------------

Status CheckCompatible(const DatasetInfo& existing, const DatasetSpec& spec) {
  if (existing.layout_version != kLayoutVersion) {
    return Status::Unsupported(fmt::format("dataset '{}' exists with layout version {}; this cqlstream writes layout {}",
                                           existing.name, existing.layout_version, kLayoutVersion));
  }
  if (existing.label_kind != spec.label_kind) {
    return Status::AlreadyExists(fmt::format(
        "dataset '{}' exists with label kind '{}', but this ingest has label kind '{}'; use another dataset name "
        "(or --label-kind {} / --labels to match)",
        existing.name, LabelKindName(existing.label_kind), LabelKindName(spec.label_kind),
        LabelKindName(existing.label_kind)));
  }
  if (existing.attached()) {
    return Status::AlreadyExists(fmt::format(
        "dataset '{}' is attached to table {} (cqlstream attach): its samples live in that table, so it cannot "
        "take an ingest; ingest into another dataset name",
        existing.name, existing.source.count("table") ? existing.source.at("table") : std::string("?")));
  }
  if (existing.sample_kind != spec.sample_kind) {
    return Status::AlreadyExists(fmt::format(
        "dataset '{}' exists with sample kind '{}', but this ingest has kind '{}'; use another dataset name (or "
        "--kind {})",
        existing.name, SampleKindName(existing.sample_kind), SampleKindName(spec.sample_kind),
        SampleKindName(existing.sample_kind)));
  }
  if (existing.preprocess != spec.preprocess) {
    return Status::AlreadyExists(fmt::format(
        "dataset '{}' exists with ingest preprocessing '{}', but this ingest asks for '{}'; its images must all be "
        "prepared alike: use the same options or another dataset name",
        existing.name, existing.preprocess.empty() ? "none" : existing.preprocess,
        spec.preprocess.empty() ? "none" : spec.preprocess));
  }
  if (spec.chunk_size_given && existing.chunk_size != spec.chunk_size) {
    return Status::AlreadyExists(fmt::format(
        "dataset '{}' exists with chunk size {} bytes, but --chunk-size {} was given; omit --chunk-size to use {}",
        existing.name, existing.chunk_size, spec.chunk_size, existing.chunk_size));
  }
  if (existing.label_kind == LabelKind::kClass || existing.label_kind == LabelKind::kMultiLabel) {
    std::set<std::string> known(existing.class_names.begin(), existing.class_names.end());
    std::vector<std::string> unknown;
    for (const auto& c : spec.class_names) {
      if (!known.count(c)) unknown.push_back(c);
    }
    if (!unknown.empty()) {
      return Status::InvalidArgument(fmt::format(
          "dataset '{}' has no class {}: its {} classes were fixed when it was created (see cqlstream info {}); "
          "ingest into a new dataset to use other classes",
          existing.name, JoinNames(unknown, 20), existing.class_names.size(), existing.name));
    }
  }
  return Status::OK();
}

StatusOr<DatasetInfo> CreateOrOpenDataset(net::Session& s, const std::string& keyspace, const DatasetSpec& spec,
                                          bool* created) {
  CQLS_RETURN_IF_ERROR(ValidateGeneratedKeyspace(keyspace));
  CQLS_RETURN_IF_ERROR(ValidateDatasetName(spec.name));
  CQLS_RETURN_IF_ERROR(CheckSpecSizes(spec));
  *created = false;
  auto existing = LoadDataset(s, keyspace, spec.name);
  if (existing.ok()) {
    CQLS_RETURN_IF_ERROR(CheckCompatible(*existing, spec));
    CQLS_RETURN_IF_ERROR(CheckTable(s, keyspace, existing->data_table(), ExpectedDataColumns()));
    CQLS_RETURN_IF_ERROR(CheckTable(s, keyspace, existing->meta_table(), ExpectedMetaColumns()));
    return std::move(existing).value();
  }
  if (!existing.status().IsNotFound()) return existing.status();

  // Tables first, so that a catalog row always has its tables.
  const auto ddl = DatasetTablesCql(keyspace, spec.name);
  for (const auto& q : ddl) CQLS_RETURN_IF_ERROR(RunDdl(s, q));
  CQLS_RETURN_IF_ERROR(CheckTable(s, keyspace, "d_" + spec.name, ExpectedDataColumns()));
  CQLS_RETURN_IF_ERROR(CheckTable(s, keyspace, "m_" + spec.name, ExpectedMetaColumns()));

  std::vector<Value> names;
  for (const auto& c : spec.class_names) names.push_back(Value::Text(c));
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  net::Statement ins = net::Statement::Query(
      fmt::format("INSERT INTO {}.datasets (name, layout_version, created, label_kind, class_names, checksum, "
                  "chunk_size, description, sample_kind, preprocess) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS",
                  keyspace),
      {Value::Text(spec.name), Value::Int(kLayoutVersion), Value::FromTimestamp(Timestamp{now_ms}),
       Value::Text(std::string(LabelKindName(spec.label_kind))),
       names.empty() ? Value::Unset() : Value::List(std::move(names)), Value::Text("xxh64"),
       Value::Int(spec.chunk_size), spec.description.empty() ? Value::Unset() : Value::Text(spec.description),
       Value::Text(std::string(SampleKindName(spec.sample_kind))),
       spec.preprocess.empty() ? Value::Unset() : Value::Text(spec.preprocess)});
  ins.consistency = cql::Consistency::kLocalQuorum;
  ins.timeout = std::chrono::milliseconds(30000);
  auto r = s.Execute(ins);
  if (!r.ok()) return r.status().WithContext(fmt::format("creating dataset '{}'", spec.name));
  bool applied = false;
  if (const cql::Rows* rows = r->rows(); rows != nullptr && rows->row_count() > 0) {
    auto v = rows->value(0, 0);
    applied = v.ok() && v->kind() == Value::Kind::kBoolean && v->as_bool();
  }
  CQLS_ASSIGN_OR_RETURN(DatasetInfo d, LoadDataset(s, keyspace, spec.name));
  if (applied) {
    *created = true;
    return d;
  }
  // Another process created it first: it must agree with us, class mapping included.
  CQLS_RETURN_IF_ERROR(CheckCompatible(d, spec));
  if ((spec.label_kind == LabelKind::kClass || spec.label_kind == LabelKind::kMultiLabel) &&
      d.class_names != spec.class_names) {
    return Status::AlreadyExists(fmt::format(
        "dataset '{}' was created at the same time by another ingest with another class mapping; re-run this ingest",
        spec.name));
  }
  return d;
}

StatusOr<DropReport> DropDataset(net::Session& s, const std::string& keyspace, const std::string& name) {
  CQLS_RETURN_IF_ERROR(ValidateGeneratedKeyspace(keyspace));
  CQLS_RETURN_IF_ERROR(ValidateDatasetName(name));
  DropReport rep;
  std::map<std::string, std::string> unused;
  CQLS_ASSIGN_OR_RETURN(bool ks_exists, KeyspaceExists(s, keyspace, &unused));
  if (!ks_exists) return Status::NotFound(fmt::format("no dataset '{}': keyspace '{}' does not exist", name, keyspace));

  std::set<std::string> tables;
  net::Session::ReadBudget budget = SchemaReadBudget(fmt::format("the tables read of keyspace '{}'", keyspace));
  CQLS_RETURN_IF_ERROR(s.ForEachPage(
      Read("SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?", {Value::Text(keyspace)}),
      [&](const cql::Rows& r) {
        for (int32_t i = 0; i < r.row_count(); ++i) tables.insert(TextCell(r, i, 0));
        return Status::OK();
      },
      &budget));
  const bool have_catalog = tables.count("datasets") && tables.count("segments");
  if (have_catalog) {
    // The catalog row first: the dataset disappears from ls/info at once.
    net::Statement del = net::Statement::Query(
        fmt::format("DELETE FROM {}.datasets WHERE name = ? IF EXISTS", keyspace), {Value::Text(name)});
    del.consistency = cql::Consistency::kLocalQuorum;
    del.timeout = std::chrono::milliseconds(30000);
    auto r = s.Execute(del);
    if (!r.ok()) return r.status().WithContext(fmt::format("removing dataset '{}' from the catalog", name));
    if (const cql::Rows* rows = r->rows(); rows != nullptr && rows->row_count() > 0) {
      auto v = rows->value(0, 0);
      rep.catalog_row = v.ok() && v->kind() == Value::Kind::kBoolean && v->as_bool();
    }
    // Counted over every page (a dataset may hold more segments than a
    // page), up to kEnough: far past the most segments ClaimSegment makes,
    // and a stop for a server that pages without end. The count is the
    // report's alone: a count cut short (that stop, or a read that failed)
    // is reported as "at least", and the rows are deleted all the same.
    constexpr int kEnough = 8 * static_cast<int>(kMaxSegments);
    Status counted = s.ForEachPage(
        Read(fmt::format("SELECT seg FROM {}.segments WHERE dataset = ?", keyspace), {Value::Text(name)}),
        [&](const cql::Rows& r) {
          rep.segments += r.row_count();
          return rep.segments < kEnough ? Status::OK() : Status::Cancelled("counted enough");
        });
    rep.segments_at_least = !counted.ok();
    if (rep.segments > 0 || rep.segments_at_least) {
      net::Statement ds = net::Statement::Query(fmt::format("DELETE FROM {}.segments WHERE dataset = ?", keyspace),
                                                {Value::Text(name)});
      ds.consistency = cql::Consistency::kLocalQuorum;
      ds.idempotent = true;
      auto d = s.Execute(ds);
      if (!d.ok()) return d.status().WithContext(fmt::format("removing the segments of dataset '{}'", name));
    }
  }
  if (tables.count("packs")) {  // which segments are packed (store/pack.h)
    net::Statement dp = net::Statement::Query(fmt::format("DELETE FROM {}.packs WHERE dataset = ?", keyspace),
                                              {Value::Text(name)});
    dp.consistency = cql::Consistency::kLocalQuorum;
    dp.idempotent = true;
    auto d = s.Execute(dp);
    if (!d.ok()) return d.status().WithContext(fmt::format("removing the packs of dataset '{}'", name));
  }
  // k_: an attached dataset's key snapshot; p_: the packed copy (store/pack.h).
  for (const std::string& t : {"d_" + name, "m_" + name, "k_" + name, "p_" + name}) {
    if (!tables.count(t)) continue;
    CQLS_RETURN_IF_ERROR(RunDdl(s, fmt::format("DROP TABLE IF EXISTS {}.{}", keyspace, t)));
    rep.tables.push_back(t);
  }
  if (!rep.catalog_row && rep.segments == 0 && rep.tables.empty()) {
    return Status::NotFound(fmt::format("no dataset '{}' in keyspace '{}' (see cqlstream ls)", name, keyspace));
  }
  return rep;
}

}  // namespace cqlstream::store
