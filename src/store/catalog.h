// Copyright (c) cqlstream authors.
//
// Reading the catalog (datasets + segments tables) of a keyspace. The data
// row's statements (the data read, its column positions, the inserts) live
// with the data row: store/sample_row.h.
//
// Catalog reads are made at LOCAL_QUORUM; when the live replicas cannot give
// it (two of three RF-3 nodes down), they fall back to LOCAL_ONE with a
// warning on stderr, so that reading goes on while one replica lives.
//
// Thread-safety: functions are thread-safe (the Session is).
#ifndef CQLSTREAM_STORE_CATALOG_H_
#define CQLSTREAM_STORE_CATALOG_H_

#include <optional>
#include <string>
#include <vector>

#include "cqlstream/dataset.h"
#include "cqlstream/status.h"
#include "net/session.h"

namespace cqlstream::store {

// Loads one dataset with its segments. NotFound names the dataset and the
// keyspace; a layout version this build cannot read is Unsupported with a
// message saying what to do.
StatusOr<DatasetInfo> LoadDataset(net::Session& s, const std::string& keyspace, const std::string& name);
// All datasets of the keyspace (empty when the keyspace has no catalog yet).
StatusOr<std::vector<DatasetInfo>> ListDatasets(net::Session& s, const std::string& keyspace);

// True when a read failed because the live replicas cannot give the
// consistency asked for (Unavailable, or a read time-out/failure with fewer
// answers than required): such a read may be repeated at LOCAL_ONE.
bool QuorumUnreachable(const Status& st);

// OK when row `row` of a segments read names `dataset` in its `dataset`
// column; a Corruption otherwise (a row of another dataset is an answer
// meant for another request: a server that repeats or misroutes answers).
Status CheckSegmentRowDataset(const cql::Rows& r, int32_t row, const std::string& dataset);
// OK when segment `seg` may follow `*last` (nullopt before the first row) in
// a segments read of `dataset`, and records it: a partition's rows come in
// clustering order, each once, so a segment at or below the one before is a
// Corruption (counted twice, its samples would be read twice).
Status CheckNextSegment(int32_t seg, std::optional<int32_t>* last, const std::string& dataset);

// OK when a segment row's sizes can be true: a count and bytes of at least
// 0, and a largest sample (max_size) of at least 0 and at most
// kMaxPayloadBytes, the most a stored sample may be (store/source.h; an
// attach records 0). A Corruption naming the segment otherwise: a reader
// sizes its buffers and the sample reads it allows by max_size.
Status CheckSegmentSizes(int32_t seg, int64_t count, int64_t bytes, int64_t max_size, const std::string& dataset);

// The most segments a dataset holds: ClaimSegment refuses the next one, and
// a segments read that hands over more ends with Unsupported. With the
// bytes bound below it bounds what a catalog read keeps in memory, whatever
// the server sends (a segment row is 0.2-1 KiB).
inline constexpr int64_t kMaxSegments = int64_t{1} << 17;
inline constexpr int64_t kMaxCatalogReadBytes = int64_t{256} << 20;
// The most datasets `ListDatasets` lists in a keyspace; it reads their
// rows and segments within kListingBudgets datasets' budgets in all
// (524,288 segments, 1 GiB): a keyspace past that is read a dataset at a
// time (LoadDataset).
inline constexpr int64_t kMaxDatasets = int64_t{1} << 16;
inline constexpr int64_t kListingBudgets = 4;
// The budget of a read of `dataset`'s segment rows (net::Session::ForEachPage);
// its packs rows (store/pack.h), one a segment at most, take the same.
net::Session::ReadBudget SegmentsReadBudget(const std::string& keyspace, const std::string& dataset);
// The budget of a read of system_schema: a keyspace's tables, a table's
// columns. `what` names the read ("the tables read of keyspace 'k'").
inline constexpr int64_t kMaxSchemaRows = int64_t{1} << 16;
inline constexpr int64_t kMaxSchemaReadBytes = int64_t{64} << 20;
net::Session::ReadBudget SchemaReadBudget(std::string what);

// True when a statement failed because its table (or keyspace) does not
// exist: the one test for "no such table" in the store layer (the server
// says so with an Invalid error, "unconfigured table ..." or "... does not
// exist").
bool IsMissingTable(const Status& st);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_CATALOG_H_
