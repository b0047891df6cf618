// Copyright (c) cqlstream authors.
//
// Test-only: foreign tables as a third-party tool writes them, attached as
// `cqlstream attach` does, for the integration tests of attached datasets.
// A foreign table is in the reference system's layout
//   <table>(id uuid PRIMARY KEY, label <int|text|blob>, data blob)
// (or keyed by an int, bigint, text or blob id)
// written row by row (one INSERT each). Attach() registers it with
// store::Attach (key snapshot, sealed segments, the catalog's source map)
// and reads the snapshot back, so that the returned SyntheticDataset says
// what a loader must deliver per SampleKey (payload, label; `path` holds the
// row's serialized key: a uuid's 16 bytes).
//
// Thread-safety: plain functions; each takes the session it writes with.
#ifndef CQLSTREAM_TESTS_INTEGRATION_ATTACHED_FIXTURE_H_
#define CQLSTREAM_TESTS_INTEGRATION_ATTACHED_FIXTURE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cqlstream/dataset.h"
#include "cqlstream/value.h"
#include "dataset_fixture.h"
#include "net/session.h"

namespace cqlstream::testing {

// The text labels of a table whose label column is a text.
extern const std::vector<std::string> kTexts;

struct ForeignTable {
  std::string table;       // "ks.data_x"
  std::string label_type;  // int | text | blob
  int rows = 0;
  int id = 0;           // RowId's table number
  int max_small = 3000;  // row i: 100 + (i * 53) % max_small bytes,
  int big_every = 40;    // except every big_every-th row (0: none): 300 kB
  std::string key_type = "uuid";  // uuid | int | bigint | text | blob
};

// A deterministic version-4 uuid for row i of a table.
Uuid RowId(int table, int i);
// Row i's data, of the size the table says (300 kB: several frames' worth).
std::vector<uint8_t> RowData(const ForeignTable& t, int i);
// Row i's key (RowId for a uuid table), and its serialized bytes.
Value RowKey(const ForeignTable& t, int i);
std::string RowKeyBytes(const ForeignTable& t, int i);
// Row i's target (the label of a blob-labelled table).
std::vector<uint8_t> RowMask(int i);

// Creates and fills a foreign table (label of the given type).
void WriteForeignTable(net::Session& s, const ForeignTable& t);
// Attaches `t` as dataset `name` (split train) and returns what a loader
// must deliver.
SyntheticDataset Attach(net::Session& s, const std::string& ks, const std::string& name, const ForeignTable& t,
                        LabelKind kind);

}  // namespace cqlstream::testing

#endif  // CQLSTREAM_TESTS_INTEGRATION_ATTACHED_FIXTURE_H_
