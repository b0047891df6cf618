// Copyright (c) cqlstream authors.
//
// `cqlstream attach`: registering a dataset whose samples live in a table
// cqlstream did not write (store/attached.h, docs/schema.md "attached
// datasets"), one split at a time.
//
// Steps, in an order that leaves nothing half-visible:
//  1. the table's shape from system_schema.columns (CheckAttachable): one
//     partition key column of an attachable type, no clustering column, a
//     blob data column, a label column of an attachable type;
//  2. the keyspace, the catalog and k_<dataset>;
//  3. the key snapshot (store/key_snapshot.h) into newly claimed segments,
//     which stay 'open' with count 0 (they hold nothing readable);
//  4. the commit: on a first attach the segments are sealed with their counts
//     and then the catalog row (with the `source` map) is inserted IF NOT
//     EXISTS: a crash before it leaves no dataset, and a re-run deletes the
//     unfinished segment rows and starts over. When the dataset exists
//     (another split, or --refresh), the catalog row's source map and class
//     names are updated first (IF EXISTS; not applied is an error), then
//     ONE single-partition batch of the segments table seals the new
//     segments and deletes the split's old ones (and unfinished attach
//     segments of the split), so a Loader sees either the old snapshot or
//     the new one, never both.
//
// Refresh: a new generation of the split's snapshot, of the same table
// (another table is refused: attach it under another name, or drop first),
// in new segments; the old generation's segment rows are deleted (a
// checkpoint or selection of them is then refused: its segments no longer
// exist). Its k_ rows are kept (a Loader opened before the refresh reads
// them to the end of its epoch) and those of the generation before it are
// deleted after the commit (store/attached_retired.h): at most two
// generations' k_ rows per split.
//
// Concurrent attaches of one existing dataset (two --refresh, or a refresh
// and the attach of another split): the catalog update is a lightweight
// transaction on the generation the attach read when it started (UPDATE ...
// IF source['generation'] = <read>), made before any segment row changes, so
// the first to commit wins and every other one fails with AlreadyExists
// ("another attach or refresh ... committed while this one ran"), removes
// its claimed segment rows and changes nothing else: exactly one new
// generation per commit. The loser's k_ rows stay under its never-committed
// segment numbers (never read). Two concurrent FIRST attaches of one name are
// decided by the catalog insert's IF NOT EXISTS (the loser's snapshot is not
// registered) but may delete each other's claimed segments (ClearLeftovers):
// the winner's dataset can then miss samples; do not race first attaches.
//
// Thread-safety: free functions; thread-safe as the Session is.
#ifndef CQLSTREAM_STORE_ATTACH_H_
#define CQLSTREAM_STORE_ATTACH_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cqlstream/dataset.h"
#include "cqlstream/status.h"
#include "net/session.h"
#include "store/attached.h"
#include "store/key_snapshot.h"
#include "store/schema.h"

namespace cqlstream::store {

struct AttachSpec {
  std::string dataset;
  std::string split = "train";
  std::string table;           // "ks.table"
  std::string metadata_table;  // "ks.table" or ""
  std::string key_column, data_column, label_column;
  std::optional<LabelKind> label_kind;  // nullopt: from the label column's type
  SampleKind sample_kind = SampleKind::kImage;
  bool refresh = false;
  std::string description;
  Replication replication;  // for a keyspace attach creates
  bool replication_given = false;
  KeySnapshotOptions scan;
};

// A column as system_schema.columns lists it.
struct TableColumn {
  std::string kind;  // partition_key | clustering | regular | static
  std::string type;  // e.g. "uuid", "list<int>"
};
using TableShape = std::map<std::string, TableColumn>;

// The columns of ks.table; NotFound naming the table when it has none.
StatusOr<TableShape> ReadTableShape(net::Session& s, const std::string& qualified_table);

// Checks that `shape` (the table `spec.table`) can be attached as `spec`
// asks and returns the table description (generation 0, this split only).
// Each refusal says what is wrong and why.
StatusOr<AttachedTable> CheckAttachable(const TableShape& shape, const AttachSpec& spec);

// Whether an existing attached dataset `d` (parsed as `old`) can take an
// attach of `fresh` (same columns and label kind; a split attached already
// needs --refresh and the same table; --refresh needs the split).
Status CheckAttachCompatible(const DatasetInfo& d, const AttachedTable& old, const AttachedTable& fresh,
                             LabelKind kind, const AttachSpec& spec);

struct AttachReport {
  AttachedTable table;   // as committed
  KeySnapshot snapshot;  // of spec.split
  bool created = false;  // the catalog row was created
  std::vector<int32_t> removed_segments;  // old generation / unfinished segment rows deleted
  std::string keyspace_note;              // EnsureKeyspace's note
  // --refresh: the k_ rows of the generation before the replaced one,
  // deleted after the commit (store/attached_retired.h); retire_note says
  // why some were not (the attach itself succeeded).
  int64_t deleted_key_rows = 0;
  std::string retire_note;
};

StatusOr<AttachReport> Attach(net::Session& s, const std::string& keyspace, const AttachSpec& spec);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_ATTACH_H_
