// Copyright (c) cqlstream authors.
//
// Attached datasets (`cqlstream attach`, docs/schema.md "attached
// datasets"): the samples live in a table cqlstream did not write, e.g. the
// reference system's data_<split>(id uuid PRIMARY KEY, label int, data blob).
// The catalog row's `source` map (DatasetInfo::source) describes that table;
// AttachedTable is its parsed form.
//
//   source := "format"         -> "attached-1"
//             "key_column"     -> identifier      "key_type"   -> key type
//             "data_column"    -> identifier
//             "label_column"   -> identifier | "" "label_type" -> label type | ""
//             "generation"     -> decimal int64 >= 1
//             "table:<split>"  -> "ks.table"       (one or more)
//             "metadata:<split>" -> "ks.table"     (optional, a split with a table)
//   identifier := [A-Za-z0-9_]{1,48}  (always double-quoted in generated CQL)
//   key type   := uuid | timeuuid | bigint | int | text | varchar | ascii | blob
//   label type := int | list<int> | set<int> | blob | text
//
// The key snapshot (store/key_snapshot.h) lists every key of a split in
// <keyspace>.k_<dataset> (seg int, idx int, key blob, PRIMARY KEY ((seg,
// idx))), so that an attached sample is a SampleKey (seg, idx) like a native
// one: `key` holds the key column's value as the protocol serializes it.
// Reading one sample: KeyLookupCql() bound with (seg, idx), then
// DataReadCql(split) bound with that key (typed as key_type).
//
// Nothing in the source map is trusted: FromSource refuses a missing or
// malformed entry with Corruption naming it (identifiers are checked so that
// they can go into CQL text).
//
// Thread-safety: value type. Ownership: plain values.
#ifndef CQLSTREAM_STORE_ATTACHED_H_
#define CQLSTREAM_STORE_ATTACHED_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "cqlstream/dataset.h"
#include "cqlstream/status.h"

namespace cqlstream::store {

inline constexpr std::string_view kAttachedFormat = "attached-1";
inline constexpr size_t kMaxAttachedIdentifier = 48;
inline constexpr size_t kMaxAttachedSplits = 64;

struct AttachedTable {  // the parsed DatasetInfo::source
  std::string key_column, key_type;      // key_type: uuid|timeuuid|bigint|int|text|varchar|ascii|blob
  std::string data_column;               // blob
  std::string label_column, label_type;  // label_type: "" | int | list<int> | set<int> | blob | text
  std::map<std::string, std::string> tables;           // split -> "ks.table" (all share the columns)
  std::map<std::string, std::string> metadata_tables;  // split -> "ks.table" (optional)
  int64_t generation = 0;                              // snapshot generation (bumped by --refresh)

  // Corruption naming the bad entry (the dataset's name in the message).
  static StatusOr<AttachedTable> FromSource(const DatasetInfo& d);
  // The same on a bare map; `what` names it in errors ("dataset x").
  static StatusOr<AttachedTable> Parse(const std::map<std::string, std::string>& source, const std::string& what);
  std::map<std::string, std::string> ToSource() const;
  // Checks the fields as FromSource would (InvalidArgument naming the field).
  Status Validate() const;

  // The data read of one sample:
  // SELECT "<key>", "<data>"[, "<label>"] FROM "ks"."table" WHERE "<key>" = ?
  // (the label only when label_column is set). The row names its key, so
  // that a reader can tell an answer meant for another request (a server
  // that answers a stream id twice, or late) from the row it asked for.
  // REQUIRES: tables has `split`.
  std::string DataReadCql(const std::string& split) const;
  // The data read of several samples of one split (the loader's coalesced
  // foreign read; at most one row per key, since the key is the whole
  // primary key), each row naming its key first:
  // SELECT "<key>", "<data>"[, "<label>"] FROM "ks"."table" WHERE "<key>" IN ?
  std::string DataReadManyCql(const std::string& split) const;
  // The table of `split` quoted for CQL text ("ks"."table"); "" when absent.
  std::string QuotedTable(const std::string& split) const;
  // The segments' source_id of a split's snapshot: "attach:<generation>:<split>".
  std::string SourceId(const std::string& split) const;
};

// The foreign table segment `g`'s keys are read from: the table its snapshot
// was taken from (the segment row's `source`), which is the catalog's table
// of its split unless a refresh to another table is half done; a segment
// without a recorded source reads the catalog's table. Corruption naming the
// segment when its split has no table or its source is not a ks.table name.
StatusOr<std::string> AttachedSegmentTable(const DatasetInfo& d, const AttachedTable& a, const SegmentInfo& g);

// The key snapshot table of a dataset: "k_<dataset>".
std::string KeyTableName(const std::string& dataset);
// CREATE TABLE IF NOT EXISTS ks.k_<d> (seg int, idx int, key blob, PRIMARY KEY ((seg, idx))).
std::string KeyTableCql(const std::string& keyspace, const std::string& dataset);
// SELECT seg, idx, key FROM ks.k_<d> WHERE seg = ? AND idx = ?  (the row
// names its sample: store::SnapshotKey checks it)
std::string KeyLookupCql(const std::string& keyspace, const std::string& dataset);
// SELECT seg, idx, key FROM ks.k_<d> WHERE seg = ? AND idx IN ?  (the
// loader's grouped lookup of several samples of one segment: one row per
// sample found, each naming its (seg, idx))
std::string KeyLookupManyCql(const std::string& keyspace, const std::string& dataset);

// Whether a CQL type (as system_schema.columns spells it) may be an attached
// key / label column, and the label kind a label type gives by default
// (int, text -> class; list<int>, set<int> -> multilabel; blob -> target).
bool AttachableKeyType(std::string_view cql_type);
bool AttachableLabelType(std::string_view cql_type);
LabelKind DefaultLabelKind(std::string_view label_type);
// Whether `kind` can be read from a label column of `label_type`
// (InvalidArgument saying which kinds can).
Status CheckLabelKind(std::string_view label_type, LabelKind kind);

// An identifier as attach accepts it ([A-Za-z0-9_]{1,48}), and its quoted form.
bool ValidAttachedIdentifier(std::string_view s);
std::string QuoteIdentifier(std::string_view s);
// "ks.table" -> ("ks", "table"); InvalidArgument unless both parts are identifiers.
StatusOr<std::pair<std::string, std::string>> SplitTableName(std::string_view qualified);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_ATTACHED_H_
