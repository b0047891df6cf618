// Copyright (c) cqlstream authors.
//
// Reading the catalog (datasets + segments tables) of a keyspace, and the
// CQL text of the statements the loader and the tools share.
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

// The data read of one sample (docs/schema.md): columns
//   0 size bigint, 1 image_size bigint, 2 checksum bigint, 3 label int,
//   4 labels list<int>, 5 data blob; one row per chunk, in chunk order.
std::string DataReadQuery(const DatasetInfo& d);
inline constexpr int kColSize = 0, kColImageSize = 1, kColChecksum = 2, kColLabel = 3, kColLabels = 4,
                     kColData = 5;

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_CATALOG_H_
