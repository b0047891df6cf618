// Copyright (c) cqlstream authors.
//
// Reading the catalog (datasets + segments tables) of a keyspace, and the
// CQL text of the statements the loader and the tools share.
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

// The data read of one sample (docs/schema.md): columns
//   0 seg int, 1 idx int, 2 size bigint, 3 image_size bigint,
//   4 checksum bigint, 5 label int, 6 labels list<int>, 7 data blob;
// one row per chunk, in chunk order. The key columns come first so that a
// reader can check that an answer belongs to the sample it asked for before
// any data byte is placed.
std::string DataReadQuery(const DatasetInfo& d);
inline constexpr int kColSeg = 0, kColIdx = 1, kColSize = 2, kColImageSize = 3, kColChecksum = 4, kColLabel = 5,
                     kColLabels = 6, kColData = 7;

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_CATALOG_H_
