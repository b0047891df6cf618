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

// True when a statement failed because its table (or keyspace) does not
// exist: the one test for "no such table" in the store layer (the server
// says so with an Invalid error, "unconfigured table ..." or "... does not
// exist").
bool IsMissingTable(const Status& st);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_CATALOG_H_
