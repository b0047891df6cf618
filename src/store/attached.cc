// Copyright (c) cqlstream authors.
#include "store/attached.h"

#include <fmt/format.h>

#include <charconv>
#include <set>
#include <utility>

namespace cqlstream::store {
namespace {

constexpr std::string_view kTablePrefix = "table:";
constexpr std::string_view kMetaPrefix = "metadata:";

const std::set<std::string, std::less<>>& KnownKeys() {
  static const auto* keys = new std::set<std::string, std::less<>>{
      "format", "key_column", "key_type", "data_column", "label_column", "label_type", "generation"};
  return *keys;
}

Status Bad(const std::string& what, const std::string& msg) {
  return Status::Corruption(what + ": attached source " + msg);
}

bool ValidSplitName(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
          c == '.'))
      return false;
  }
  return true;
}

// Reads "table:<split>" / "metadata:<split>" entries into `out`.
Status ReadSplitEntry(const std::string& key, const std::string& value, std::string_view prefix,
                      std::map<std::string, std::string>* out, const std::string& what) {
  std::string split = key.substr(prefix.size());
  if (!ValidSplitName(split)) return Bad(what, "entry '" + key + "': the split name is not [A-Za-z0-9_.-]{1,64}");
  auto parts = SplitTableName(value);
  if (!parts.ok()) return Bad(what, "entry '" + key + "': " + parts.status().message());
  (*out)[split] = value;
  return Status::OK();
}

}  // namespace

bool ValidAttachedIdentifier(std::string_view s) {
  if (s.empty() || s.size() > kMaxAttachedIdentifier) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

std::string QuoteIdentifier(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

StatusOr<std::pair<std::string, std::string>> SplitTableName(std::string_view qualified) {
  size_t dot = qualified.find('.');
  if (dot == std::string_view::npos)
    return Status::InvalidArgument("table '" + std::string(qualified) + "' is not KEYSPACE.TABLE");
  std::string ks(qualified.substr(0, dot)), t(qualified.substr(dot + 1));
  if (!ValidAttachedIdentifier(ks) || !ValidAttachedIdentifier(t))
    return Status::InvalidArgument("table '" + std::string(qualified) +
                                   "': keyspace and table names must be [A-Za-z0-9_]{1,48}");
  return std::make_pair(std::move(ks), std::move(t));
}

bool AttachableKeyType(std::string_view t) {
  return t == "uuid" || t == "timeuuid" || t == "bigint" || t == "int" || t == "text" || t == "varchar" ||
         t == "ascii" || t == "blob";
}

bool AttachableLabelType(std::string_view t) {
  return t == "int" || t == "list<int>" || t == "set<int>" || t == "blob" || t == "text";
}

LabelKind DefaultLabelKind(std::string_view t) {
  if (t == "int" || t == "text") return LabelKind::kClass;
  if (t == "list<int>" || t == "set<int>") return LabelKind::kMultiLabel;
  if (t == "blob") return LabelKind::kTarget;
  return LabelKind::kNone;
}

Status CheckLabelKind(std::string_view label_type, LabelKind kind) {
  if (kind == LabelKind::kNone) return Status::OK();
  if (label_type.empty())
    return Status::InvalidArgument("label kind " + std::string(LabelKindName(kind)) + " needs a --label-column");
  if (DefaultLabelKind(label_type) == kind) return Status::OK();
  // An int label may also be read as a one-label multilabel sample.
  if (label_type == "int" && kind == LabelKind::kMultiLabel) return Status::OK();
  return Status::InvalidArgument("a label column of type " + std::string(label_type) +
                                 " cannot be read as label kind " +
                                 std::string(LabelKindName(kind)) +
                                 " (int/text: class; list<int>/set<int>: multilabel; blob: target; any: none)");
}

std::string KeyTableName(const std::string& dataset) { return "k_" + dataset; }

std::string KeyTableCql(const std::string& keyspace, const std::string& dataset) {
  return "CREATE TABLE IF NOT EXISTS " + keyspace + "." + KeyTableName(dataset) +
         " (seg int, idx int, key blob, PRIMARY KEY ((seg, idx)))";
}

std::string KeyLookupCql(const std::string& keyspace, const std::string& dataset) {
  return "SELECT seg, idx, key FROM " + keyspace + "." + KeyTableName(dataset) + " WHERE seg = ? AND idx = ?";
}

std::string KeyLookupManyCql(const std::string& keyspace, const std::string& dataset) {
  return "SELECT seg, idx, key FROM " + keyspace + "." + KeyTableName(dataset) + " WHERE seg = ? AND idx IN ?";
}

Status AttachedTable::Validate() const {
  if (!ValidAttachedIdentifier(key_column))
    return Status::InvalidArgument("key column '" + key_column + "' is not [A-Za-z0-9_]{1,48}");
  if (!AttachableKeyType(key_type))
    return Status::InvalidArgument("key type '" + key_type +
                                   "' is not one of uuid, timeuuid, bigint, int, text, ascii, blob");
  if (!ValidAttachedIdentifier(data_column))
    return Status::InvalidArgument("data column '" + data_column + "' is not [A-Za-z0-9_]{1,48}");
  if (label_column.empty() != label_type.empty())
    return Status::InvalidArgument("label column and label type must be given together");
  if (!label_column.empty()) {
    if (!ValidAttachedIdentifier(label_column))
      return Status::InvalidArgument("label column '" + label_column + "' is not [A-Za-z0-9_]{1,48}");
    if (!AttachableLabelType(label_type))
      return Status::InvalidArgument("label type '" + label_type +
                                     "' is not one of int, list<int>, set<int>, blob, text");
  }
  if (tables.empty()) return Status::InvalidArgument("no table");
  if (tables.size() > kMaxAttachedSplits) return Status::InvalidArgument("more than 64 splits");
  for (const auto& [split, t] : tables) {
    if (!ValidSplitName(split)) return Status::InvalidArgument("split '" + split + "' is not [A-Za-z0-9_.-]{1,64}");
    if (auto p = SplitTableName(t); !p.ok()) return p.status();
  }
  for (const auto& [split, t] : metadata_tables) {
    if (!tables.contains(split))
      return Status::InvalidArgument("metadata table of split '" + split + "' without a table");
    if (auto p = SplitTableName(t); !p.ok()) return p.status();
  }
  if (generation < 1) return Status::InvalidArgument("generation " + std::to_string(generation) + " is not >= 1");
  return Status::OK();
}

StatusOr<AttachedTable> AttachedTable::Parse(const std::map<std::string, std::string>& source,
                                             const std::string& what) {
  AttachedTable a;
  auto get = [&](const char* k) -> std::string {
    auto it = source.find(k);
    return it == source.end() ? std::string() : it->second;
  };
  if (get("format") != kAttachedFormat)
    return Bad(what,
               "entry 'format' is '" + get("format") + "', this build reads '" + std::string(kAttachedFormat) + "'");
  for (const auto& [k, v] : source) {
    if (k.starts_with(kTablePrefix)) {
      if (auto st = ReadSplitEntry(k, v, kTablePrefix, &a.tables, what); !st.ok()) return st;
    } else if (k.starts_with(kMetaPrefix)) {
      if (auto st = ReadSplitEntry(k, v, kMetaPrefix, &a.metadata_tables, what); !st.ok()) return st;
    } else if (!KnownKeys().contains(k)) {
      return Bad(what, "has an unknown entry '" + k.substr(0, 64) + "'");
    }
  }
  a.key_column = get("key_column");
  a.key_type = get("key_type");
  a.data_column = get("data_column");
  a.label_column = get("label_column");
  a.label_type = get("label_type");
  std::string gen = get("generation");
  auto [p, ec] = std::from_chars(gen.data(), gen.data() + gen.size(), a.generation);
  if (gen.empty() || ec != std::errc() || p != gen.data() + gen.size())
    return Bad(what, "entry 'generation' is '" + gen.substr(0, 32) + "', not a number");
  if (Status st = a.Validate(); !st.ok()) return Bad(what, st.message());
  return a;
}

StatusOr<AttachedTable> AttachedTable::FromSource(const DatasetInfo& d) {
  return Parse(d.source, "dataset " + d.name);
}

std::map<std::string, std::string> AttachedTable::ToSource() const {
  std::map<std::string, std::string> m{{"format", std::string(kAttachedFormat)},
                                       {"key_column", key_column},
                                       {"key_type", key_type},
                                       {"data_column", data_column},
                                       {"label_column", label_column},
                                       {"label_type", label_type},
                                       {"generation", std::to_string(generation)}};
  for (const auto& [split, t] : tables) m[std::string(kTablePrefix) + split] = t;
  for (const auto& [split, t] : metadata_tables) m[std::string(kMetaPrefix) + split] = t;
  return m;
}

std::string AttachedTable::QuotedTable(const std::string& split) const {
  auto it = tables.find(split);
  if (it == tables.end()) return "";
  auto p = SplitTableName(it->second);
  if (!p.ok()) return "";
  return QuoteIdentifier(p->first) + "." + QuoteIdentifier(p->second);
}

std::string AttachedTable::DataReadCql(const std::string& split) const {
  std::string cols = QuoteIdentifier(key_column) + ", " + QuoteIdentifier(data_column);
  if (!label_column.empty()) cols += ", " + QuoteIdentifier(label_column);
  return "SELECT " + cols + " FROM " + QuotedTable(split) + " WHERE " + QuoteIdentifier(key_column) + " = ?";
}

std::string AttachedTable::DataReadManyCql(const std::string& split) const {
  std::string cols = QuoteIdentifier(key_column) + ", " + QuoteIdentifier(data_column);
  if (!label_column.empty()) cols += ", " + QuoteIdentifier(label_column);
  return "SELECT " + cols + " FROM " + QuotedTable(split) + " WHERE " + QuoteIdentifier(key_column) + " IN ?";
}

std::string AttachedTable::SourceId(const std::string& split) const {
  return "attach:" + std::to_string(generation) + ":" + split;
}

StatusOr<std::string> AttachedSegmentTable(const DatasetInfo& d, const AttachedTable& a, const SegmentInfo& g) {
  auto catalog = a.tables.find(g.split);
  if (catalog == a.tables.end()) {
    return Status::Corruption(fmt::format("attached dataset '{}': segment {} is of split '{}', which has no table",
                                          d.name, g.seg, g.split));
  }
  if (g.source.empty()) return catalog->second;
  if (!SplitTableName(g.source).ok()) {
    return Status::Corruption(fmt::format("attached dataset '{}': segment {} was snapshot from '{}', which is not a "
                                          "ks.table name (the catalog's table of split '{}' is {})",
                                          d.name, g.seg, g.source.substr(0, 200), g.split, catalog->second));
  }
  return g.source;
}

}  // namespace cqlstream::store
