// Copyright (c) cqlstream authors.
#include "hostile/honest_world.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <span>
#include <utility>

#include "net/routing/murmur3.h"

namespace cqlstream::hostile {
namespace {

DataType T(TypeId id) { return DataType::Simple(id); }
const DataType kText = T(TypeId::kVarchar), kInt = T(TypeId::kInt), kBigint = T(TypeId::kBigint),
               kBlob = T(TypeId::kBlob), kUuid = T(TypeId::kUuid), kTs = T(TypeId::kTimestamp),
               kInet = T(TypeId::kInet);

int32_t SampleSize(int32_t idx) { return 100 + (idx * 397) % 2900; }
int32_t TinySize(int32_t idx) { return 40 + (idx * 397) % (kTinyMaxSize - 40 + 1); }

std::vector<uint8_t> Payload(int32_t idx, int32_t size) {
  std::vector<uint8_t> p(static_cast<size_t>(size));
  for (size_t j = 0; j < p.size(); ++j) p[j] = static_cast<uint8_t>(idx * 31 + static_cast<int32_t>(j) * 7 + 1);
  return p;
}

int64_t Checksum(const std::vector<uint8_t>& p) { return static_cast<int64_t>(XXH64(p.data(), p.size(), 0)); }

// The native datasets, by name.
bool IsNative(const std::string& name) { return name == kDataset || name == kTinyDataset; }

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.erase(s.begin());
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

// An identifier bare or double-quoted ("ks"."t" is unquoted part by part by
// the caller); quotes inside a name are not used by cqlstream.
std::string Unquote(std::string s) {
  s = Trim(std::move(s));
  std::string out;
  for (char c : s) {
    if (c != '"') out.push_back(c);
  }
  return out;
}

Table Local() {
  Table t{"system", "local",
          {{"key", kText}, {"cluster_name", kText}, {"data_center", kText}, {"rack", kText},
           {"release_version", kText}, {"host_id", kUuid}, {"tokens", DataType::Set(kText)},
           {"schema_version", kUuid}},
          {}};
  t.rows.push_back({Value::Text("local"), Value::Text("hostile"), Value::Text("dc1"), Value::Text("rack1"),
                    Value::Text("5.0.2"), UuidOf(kLocalHostIdByte), Value::List({Value::Text("0")}), UuidOf(0x22)});
  return t;
}

Table Peers(bool v2) {
  std::vector<Column> c = {{"peer", kInet},           {"data_center", kText}, {"rack", kText},
                           {"release_version", kText}, {"host_id", kUuid},     {"tokens", DataType::Set(kText)},
                           {"schema_version", kUuid}};
  if (v2) {
    c.push_back({"native_address", kInet});
    c.push_back({"native_port", kInt});
  } else {
    c.push_back({"rpc_address", kInet});
  }
  return Table{"system", v2 ? "peers_v2" : "peers", c, {}};
}

Table Keyspaces() {
  Table t{"system_schema", "keyspaces", {{"keyspace_name", kText}, {"replication", DataType::Map(kText, kText)}}, {}};
  for (const char* ks : {"system", kKeyspace}) {
    ValueMap m;
    m.emplace_back(Value::Text("class"), Value::Text("org.apache.cassandra.locator.SimpleStrategy"));
    m.emplace_back(Value::Text("replication_factor"), Value::Text("1"));
    t.rows.push_back({Value::Text(ks), Value::Map(std::move(m))});
  }
  return t;
}

// system_schema.tables of the keyspace: the catalog's and each dataset's
// (ls lists the tables that no dataset owns).
Table Tables() {
  Table t{"system_schema", "tables", {{"keyspace_name", kText}, {"table_name", kText}}, {}};
  for (const std::string& name :
       {std::string("datasets"), std::string("segments"), std::string("d_") + kDataset, std::string("m_") + kDataset,
        std::string("d_") + kTinyDataset, std::string("m_") + kTinyDataset, std::string("k_") + kAttachedDataset,
        std::string(kForeignTable)}) {
    t.rows.push_back({Value::Text(kKeyspace), Value::Text(name)});
  }
  return t;
}

Table Datasets() {
  Table t{kKeyspace, "datasets",
          {{"name", kText}, {"layout_version", kInt}, {"created", kTs}, {"label_kind", kText},
           {"class_names", DataType::List(kText)}, {"checksum", kText}, {"chunk_size", kInt},
           {"description", kText}, {"source", DataType::Map(kText, kText)}},
          {}};
  for (const char* name : {kDataset, kTinyDataset}) {
    const bool tiny = std::string(name) == kTinyDataset;
    ValueList classes;
    for (int32_t c = 0; c < kTinyClasses; ++c) {
      classes.push_back(Value::Text(std::string(1, static_cast<char>('a' + c))));
    }
    t.rows.push_back({Value::Text(name), Value::Int(1), Value::FromTimestamp(Timestamp{1700000000000}),
                      Value::Text(tiny ? "class" : "none"), tiny ? Value::List(std::move(classes)) : Value::Null(),
                      Value::Text("xxh64"), Value::Int(kChunkSize),
                      Value::Text("an honest native dataset a hostile server lies about"), Value::Null()});
  }
  ValueMap source;
  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
           {"format", "attached-1"},
           {"key_column", "id"},
           {"key_type", "int"},
           {"data_column", "img"},
           {"label_column", ""},
           {"label_type", ""},
           {"generation", "1"},
           {std::string("table:") + kSplit, std::string(kKeyspace) + "." + kForeignTable}}) {
    source.emplace_back(Value::Text(k), Value::Text(v));
  }
  t.rows.push_back({Value::Text(kAttachedDataset), Value::Int(1), Value::FromTimestamp(Timestamp{1700000000000}),
                    Value::Text("none"), Value::Null(), Value::Text("none"), Value::Int(kChunkSize),
                    Value::Text("the honest attached dataset"), Value::Map(std::move(source))});
  return t;
}

Table Segments() {
  Table t{kKeyspace, "segments",
          {{"dataset", kText}, {"seg", kInt}, {"split", kText}, {"source_id", kText}, {"source", kText},
           {"fingerprint", kText}, {"count", kInt}, {"bytes", kBigint}, {"max_size", kBigint},
           {"size_hist", DataType::List(kBigint)}, {"next_pos", kBigint}, {"state", kText}},
          {}};
  for (const char* name : {kDataset, kTinyDataset}) {
    const int32_t count = SamplesOf(name);
    int64_t bytes = 0, max_size = 0;
    std::vector<int64_t> hist(64, 0);
    for (int32_t i = 0; i < count; ++i) {
      const auto s = static_cast<int64_t>(PayloadOf(name, i).size());
      bytes += s;
      max_size = std::max(max_size, s);
      hist[static_cast<size_t>(63 - __builtin_clzll(static_cast<uint64_t>(s)))]++;
    }
    while (!hist.empty() && hist.back() == 0) hist.pop_back();
    ValueList h;
    for (int64_t c : hist) h.push_back(Value::Bigint(c));
    t.rows.push_back({Value::Text(name), Value::Int(0), Value::Text(kSplit), Value::Text("00000000000000aa"),
                      Value::Text("generated"), Value::Text("00000000000000bb"), Value::Int(count),
                      Value::Bigint(bytes), Value::Bigint(max_size), Value::List(std::move(h)),
                      Value::Bigint(count), Value::Text("sealed")});
  }
  // An attach writes no sizes: its rows are read as they are.
  t.rows.push_back({Value::Text(kAttachedDataset), Value::Int(0), Value::Text(kSplit), Value::Text("attach:1:train"),
                    Value::Text(std::string(kKeyspace) + "." + kForeignTable), Value::Null(),
                    Value::Int(kAttachedSamples), Value::Bigint(0), Value::Bigint(0), Value::Null(),
                    Value::Bigint(kAttachedSamples),
                    Value::Text("sealed")});
  return t;
}

Table KeySnapshot() {
  Table t{kKeyspace, std::string("k_") + kAttachedDataset, {{"seg", kInt}, {"idx", kInt}, {"key", kBlob}}, {}};
  for (int32_t i = 0; i < kAttachedSamples; ++i) {
    std::vector<uint8_t> key(4);
    cql::StoreU32(key.data(), static_cast<uint32_t>(ForeignKeyOf(i)));
    t.rows.push_back({Value::Int(0), Value::Int(i), Value::Blob(std::move(key))});
  }
  return t;
}

Table Foreign() {
  Table t{kKeyspace, kForeignTable, {{"id", kInt}, {"img", kBlob}}, {}};
  for (int32_t i = 0; i < kAttachedSamples; ++i) {
    t.rows.push_back({Value::Int(ForeignKeyOf(i)), Value::Blob(SamplePayload(i))});
  }
  return t;
}

Table Data(const std::string& name) {
  Table t{kKeyspace, "d_" + name,
          {{"seg", kInt}, {"idx", kInt}, {"chunk", kInt}, {"size", kBigint}, {"image_size", kBigint},
           {"checksum", kBigint}, {"label", kInt}, {"labels", DataType::List(kInt)}, {"data", kBlob}},
          {}};
  for (int32_t i = 0; i < SamplesOf(name); ++i) {
    const std::vector<uint8_t> p = PayloadOf(name, i);
    const int64_t sum = Checksum(p);
    const Value label = name == kTinyDataset ? Value::Int(TinyLabel(i)) : Value::Null();
    for (size_t off = 0, chunk = 0; off < p.size(); off += kChunkSize, ++chunk) {
      const size_t n = std::min<size_t>(kChunkSize, p.size() - off);
      t.rows.push_back({Value::Int(0), Value::Int(i), Value::Int(static_cast<int32_t>(chunk)),
                        Value::Bigint(static_cast<int64_t>(p.size())), Value::Bigint(static_cast<int64_t>(p.size())),
                        Value::Bigint(sum), label, Value::Null(),
                        Value::Blob(std::vector<uint8_t>(p.begin() + static_cast<std::ptrdiff_t>(off),
                                                         p.begin() + static_cast<std::ptrdiff_t>(off + n)))});
    }
  }
  return t;
}

Table Meta(const std::string& name) {
  Table t{kKeyspace, "m_" + name,
          {{"seg", kInt}, {"block", kInt}, {"idx", kInt}, {"path", kText}, {"target_path", kText},
           {"label", kInt}, {"labels", DataType::List(kInt)}, {"size", kBigint}, {"image_size", kBigint},
           {"checksum", kBigint}, {"extra", DataType::Map(kText, kText)}},
          {}};
  for (int32_t i = 0; i < SamplesOf(name); ++i) {
    const std::vector<uint8_t> p = PayloadOf(name, i);
    const auto s = static_cast<int64_t>(p.size());
    t.rows.push_back({Value::Int(0), Value::Int(i >> 10), Value::Int(i), Value::Text(SamplePath(i)),
                      Value::Null(), name == kTinyDataset ? Value::Int(TinyLabel(i)) : Value::Null(), Value::Null(),
                      Value::Bigint(s), Value::Bigint(s), Value::Bigint(Checksum(p)), Value::Null()});
  }
  return t;
}

std::vector<std::string> PartitionKey(const std::string& table) {
  if (table.rfind("d_", 0) == 0 && IsNative(table.substr(2))) return {"seg", "idx"};
  if (table.rfind("m_", 0) == 0 && IsNative(table.substr(2))) return {"seg", "block"};
  if (table == "datasets") return {"name"};
  if (table == "segments") return {"dataset"};
  if (table == std::string("k_") + kAttachedDataset) return {"seg", "idx"};
  if (table == kForeignTable) return {"id"};
  return {};
}

int ColumnIndex(const Table& t, const std::string& name) {
  for (size_t i = 0; i < t.columns.size(); ++i) {
    if (t.columns[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

// The Murmur3 token of a row's partition key (its cells in `pk_cols`, each
// encoded as the server stores it), as a node computes token(pk...).
StatusOr<int64_t> RowToken(const Table& t, const std::vector<Value>& row, const std::vector<int>& pk_cols) {
  std::vector<cql::Bytes> cells(pk_cols.size());
  std::vector<std::span<const uint8_t>> parts;
  for (size_t k = 0; k < pk_cols.size(); ++k) {
    const auto c = static_cast<size_t>(pk_cols[k]);
    CQLS_RETURN_IF_ERROR(EncodeCell(row[c], t.columns[c].type, &cells[k]));
    parts.emplace_back(cells[k]);
  }
  return routing::PartitionKeyToken(parts);
}

Answer Invalid(std::string m) {
  Answer a;
  a.error_code = 0x2200;
  a.error = std::move(m);
  return a;
}

}  // namespace

Value UuidOf(uint8_t b) {
  Uuid u;
  u.bytes.fill(b);
  u.bytes[6] = 0x40;  // version 4
  return Value::FromUuid(u);
}

std::string SamplePath(int32_t idx) { return fmt::format("img/{:04}.bin", idx); }

std::vector<uint8_t> SamplePayload(int32_t idx) { return Payload(idx, SampleSize(idx)); }

int64_t SampleChecksum(int32_t idx) { return Checksum(SamplePayload(idx)); }

std::vector<uint8_t> TinyPayload(int32_t idx) { return Payload(idx, TinySize(idx)); }

int32_t TinyLabel(int32_t idx) { return idx % kTinyClasses; }

std::vector<uint8_t> PayloadOf(const std::string& dataset, int32_t idx) {
  return dataset == kTinyDataset ? TinyPayload(idx) : SamplePayload(idx);
}

int32_t SamplesOf(const std::string& dataset) {
  if (dataset == kDataset) return kSamples;
  if (dataset == kTinyDataset) return kTinySamples;
  if (dataset == kAttachedDataset) return kAttachedSamples;
  return 0;
}

int32_t ForeignKeyOf(int32_t idx) { return 5000 + 3 * idx; }

int32_t IdxOfForeignKey(int32_t key) {
  if (key < 5000 || (key - 5000) % 3 != 0 || (key - 5000) / 3 >= kAttachedSamples) return -1;
  return (key - 5000) / 3;
}

bool Select::HasIn() const { return std::find(in.begin(), in.end(), true) != in.end(); }

std::optional<Select> ParseSelect(const std::string& query) {
  const std::string q = Trim(query);
  if (q.rfind("SELECT ", 0) != 0) return std::nullopt;
  const size_t from = q.find(" FROM ");
  if (from == std::string::npos) return std::nullopt;
  Select s;
  std::string cols = q.substr(7, from - 7);
  for (size_t start = 0; start <= cols.size();) {
    size_t comma = cols.find(',', start);
    if (comma == std::string::npos) comma = cols.size();
    s.columns.push_back(Unquote(cols.substr(start, comma - start)));
    start = comma + 1;
  }
  std::string rest = q.substr(from + 6);
  // A trailing `PER PARTITION LIMIT n` (the coalesced data read's).
  if (const size_t ppl = rest.find(" PER PARTITION LIMIT "); ppl != std::string::npos) {
    const std::string n = Trim(rest.substr(ppl + 21));
    if (n.empty() || n.size() > 6 || n.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    s.per_partition_limit = std::stoi(n);
    if (s.per_partition_limit < 1) return std::nullopt;
    rest.resize(ppl);
  }
  const size_t where = rest.find(" WHERE ");
  std::string name = Unquote(rest.substr(0, where));
  const size_t dot = name.find('.');
  if (dot == std::string::npos) return std::nullopt;
  s.keyspace = Unquote(name.substr(0, dot));
  s.table = Unquote(name.substr(dot + 1));
  if (where == std::string::npos) return s;
  // Clauses `c = ?` and `c IN ?`; one without a marker (key='local') is not
  // a filter here; any other clause with a marker is not served.
  const std::string w = rest.substr(where + 7);
  for (size_t start = 0; start <= w.size();) {
    size_t and_at = w.find(" AND ", start);
    if (and_at == std::string::npos) and_at = w.size();
    const std::string clause = Trim(w.substr(start, and_at - start));
    start = and_at + 5;
    if (clause.find('?') == std::string::npos) continue;
    if (clause.rfind("token(", 0) == 0) {
      // `token(a, b) > ?` or `token(a, b) <= ?`: the same columns in both.
      const size_t close = clause.find(')');
      if (close == std::string::npos) return std::nullopt;
      std::vector<std::string> of;
      const std::string inner = clause.substr(6, close - 6);
      for (size_t b = 0; b <= inner.size();) {
        size_t comma = inner.find(',', b);
        if (comma == std::string::npos) comma = inner.size();
        of.push_back(Unquote(inner.substr(b, comma - b)));
        b = comma + 1;
      }
      const std::string op = Trim(clause.substr(close + 1));
      if ((op != "> ?" && op != "<= ?") || (!s.token_of.empty() && s.token_of != of)) return std::nullopt;
      s.token_of = std::move(of);
      s.where.push_back(op == "> ?" ? kTokenAbove : kTokenAtMost);
      s.in.push_back(false);
      continue;
    }
    for (const auto& [op, in] : {std::pair<std::string, bool>{" = ?", false}, {" IN ?", true}}) {
      if (clause.size() > op.size() && clause.compare(clause.size() - op.size(), op.size(), op) == 0) {
        s.where.push_back(Unquote(clause.substr(0, clause.size() - op.size())));
        s.in.push_back(in);
        break;
      }
    }
    if (s.where.size() != s.in.size() || s.where.empty() || s.where.back().find(' ') != std::string::npos) {
      return std::nullopt;
    }
  }
  return s;
}

std::optional<Table> HonestWorld::FullTable(const std::string& keyspace, const std::string& table) const {
  if (keyspace == "system" && table == "local") return Local();
  if (keyspace == "system" && table == "peers_v2") return Peers(true);
  if (keyspace == "system" && table == "peers") return Peers(false);
  if (keyspace == "system_schema" && table == "keyspaces") return Keyspaces();
  if (keyspace == "system_schema" && table == "tables") return Tables();
  if (keyspace != kKeyspace) return std::nullopt;
  if (table == "datasets") return Datasets();
  if (table == "segments") return Segments();
  if (table.rfind("d_", 0) == 0 && IsNative(table.substr(2))) return Data(table.substr(2));
  if (table.rfind("m_", 0) == 0 && IsNative(table.substr(2))) return Meta(table.substr(2));
  if (table == std::string("k_") + kAttachedDataset) return KeySnapshot();
  if (table == kForeignTable) return Foreign();
  return std::nullopt;
}

Answer HonestWorld::Run(const Select& s, const std::vector<std::optional<cql::Bytes>>& values) const {
  auto full = FullTable(s.keyspace, s.table);
  if (!full) return Invalid(fmt::format("unconfigured table {}", s.table));
  if (values.size() != s.where.size()) {
    return Invalid(fmt::format("there were {} markers(?) in CQL but {} bound variables", s.where.size(), values.size()));
  }
  std::vector<int> where_cols, proj;
  std::optional<int64_t> above, at_most;  // a token range's bounds
  for (size_t k = 0; k < s.where.size(); ++k) {
    const std::string& w = s.where[k];
    if (w == kTokenAbove || w == kTokenAtMost) {
      where_cols.push_back(-1);
      if (!values[k]) continue;  // PREPARE runs the statement unbound: no bound
      if (values[k]->size() != 8) return Invalid("Expected 8 bytes for a token bound");
      (w == kTokenAbove ? above : at_most) = static_cast<int64_t>(cql::LoadU64(values[k]->data()));
      continue;
    }
    const int c = ColumnIndex(*full, w);
    if (c < 0) return Invalid(fmt::format("Undefined column name {}", w));
    where_cols.push_back(c);
  }
  if (!s.token_of.empty() && s.token_of != PartitionKey(s.table)) {
    return Invalid(fmt::format("The token function arguments must be the partition key of {}", s.table));
  }
  if (s.columns.size() == 1 && s.columns[0] == "*") {
    // Every column, in the table's order, as Cassandra answers `SELECT *`.
    for (size_t i = 0; i < full->columns.size(); ++i) proj.push_back(static_cast<int>(i));
  } else {
    for (const auto& c : s.columns) {
      const int i = ColumnIndex(*full, c);
      if (i < 0) return Invalid(fmt::format("Undefined column name {} in table {}.{}", c, s.keyspace, s.table));
      proj.push_back(i);
    }
  }
  // An IN marker's value: [int n] then n [bytes] (a list, spec 6).
  std::vector<std::vector<cql::Bytes>> in_values(s.where.size());
  for (size_t k = 0; k < s.where.size() && k < s.in.size(); ++k) {
    if (!s.in[k] || !values[k]) continue;
    const cql::Bytes& v = *values[k];
    if (v.size() < 4) return Invalid(fmt::format("Invalid list value for IN on {}", s.where[k]));
    const auto n = static_cast<int32_t>(cql::LoadU32(v.data()));
    size_t off = 4;
    for (int32_t e = 0; e < n; ++e) {
      if (off + 4 > v.size()) return Invalid(fmt::format("Invalid list value for IN on {}", s.where[k]));
      const auto len = static_cast<int32_t>(cql::LoadU32(v.data() + off));
      off += 4;
      if (len < 0 || static_cast<size_t>(len) > v.size() - off) {
        return Invalid(fmt::format("Invalid list value for IN on {}", s.where[k]));
      }
      in_values[k].emplace_back(v.begin() + static_cast<std::ptrdiff_t>(off),
                                v.begin() + static_cast<std::ptrdiff_t>(off) + len);
      off += static_cast<size_t>(len);
    }
  }
  Answer a;
  a.table.keyspace = full->keyspace;
  a.table.name = full->name;
  for (int i : proj) a.table.columns.push_back(full->columns[static_cast<size_t>(i)]);
  std::vector<int> pk_cols;
  for (const auto& k : PartitionKey(s.table)) pk_cols.push_back(ColumnIndex(*full, k));
  if (std::find(pk_cols.begin(), pk_cols.end(), -1) != pk_cols.end()) pk_cols.clear();
  std::vector<Value> partition;
  int32_t in_partition = 0;
  std::vector<std::pair<int64_t, std::vector<Value>>> by_token;  // a token range's rows, with their tokens
  for (const auto& row : full->rows) {
    bool match = true;
    for (size_t k = 0; k < where_cols.size() && match; ++k) {
      if (where_cols[k] < 0) continue;  // a token bound: below
      const auto ci = static_cast<size_t>(where_cols[k]);
      cql::Bytes cell;
      if (row[ci].kind() == Value::Kind::kNull || !values[k] ||
          !EncodeCell(row[ci], full->columns[ci].type, &cell).ok()) {
        match = false;
      } else if (k < s.in.size() && s.in[k]) {
        match = std::find(in_values[k].begin(), in_values[k].end(), cell) != in_values[k].end();
      } else {
        match = cell == *values[k];
      }
    }
    if (!match) continue;
    if (s.per_partition_limit > 0) {
      // Rows of one partition are adjacent (the table's order): count them.
      std::vector<Value> key;
      for (int c : pk_cols) key.push_back(row[static_cast<size_t>(c)]);
      if (key == partition) {
        if (++in_partition > s.per_partition_limit) continue;
      } else {
        partition = std::move(key);
        in_partition = 1;
      }
    }
    std::vector<Value> out;
    for (int i : proj) out.push_back(row[static_cast<size_t>(i)]);
    if (!s.token_of.empty()) {
      auto t = RowToken(*full, row, pk_cols);
      if (!t.ok()) return Invalid(t.status().ToString());
      if ((above && *t <= *above) || (at_most && *t > *at_most)) continue;
      by_token.emplace_back(*t, std::move(out));
      continue;
    }
    a.table.rows.push_back(std::move(out));
  }
  // A node answers a token range in token order; a partition's rows keep
  // their clustering order (the table's).
  std::stable_sort(by_token.begin(), by_token.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  for (auto& [t, r] : by_token) a.table.rows.push_back(std::move(r));
  return a;
}

Answer HonestWorld::BindColumns(const Select& s, std::vector<uint16_t>* pk_indexes) const {
  auto full = FullTable(s.keyspace, s.table);
  if (!full) return Invalid(fmt::format("unconfigured table {}", s.table));
  Answer a;
  a.table.keyspace = full->keyspace;
  a.table.name = full->name;
  for (size_t k = 0; k < s.where.size(); ++k) {
    if (s.where[k] == kTokenAbove || s.where[k] == kTokenAtMost) {
      a.table.columns.push_back(Column{"partition key token", kBigint});  // as Cassandra names the marker
      continue;
    }
    const int c = ColumnIndex(*full, s.where[k]);
    if (c < 0) return Invalid(fmt::format("Undefined column name {}", s.where[k]));
    Column col = full->columns[static_cast<size_t>(c)];
    if (k < s.in.size() && s.in[k]) {
      // As Cassandra names and types an IN marker.
      col = Column{"in(" + col.name + ")", DataType::List(col.type)};
    }
    a.table.columns.push_back(std::move(col));
  }
  pk_indexes->clear();
  for (const auto& k : PartitionKey(s.table)) {
    auto it = std::find(s.where.begin(), s.where.end(), k);
    if (it == s.where.end() || s.HasIn()) {
      pk_indexes->clear();
      break;
    }
    pk_indexes->push_back(static_cast<uint16_t>(it - s.where.begin()));
  }
  return a;
}

}  // namespace cqlstream::hostile
