// Copyright (c) cqlstream authors.
//
// A synthetic dataset written straight with CQL, following docs/schema.md
// (layout version 1), so that loader tests do not depend on the ingest code
// and double as a check of the storage contract. Sample bytes are a
// deterministic function of the key.
//
// Thread-safety: call from the test thread.
#ifndef CQLSTREAM_TESTS_INTEGRATION_DATASET_FIXTURE_H_
#define CQLSTREAM_TESTS_INTEGRATION_DATASET_FIXTURE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cqlstream/dataset.h"
#include "cqlstream/loader.h"
#include "net/session.h"

namespace cqlstream::testing {

struct SyntheticSpec {
  std::string name;
  std::string split = "train";
  int samples = 500;
  int segments = 2;
  int32_t chunk_size = 1 << 20;
  int classes = 10;
  // Payload size of sample i (in creation order).
  std::function<int64_t(int)> size = [](int i) { return 100 + (i * 37) % 400; };
  // Of every write (a cluster test writes at ALL so that any replica can
  // answer a read at once).
  cql::Consistency consistency = cql::Consistency::kLocalOne;
};

struct SyntheticDataset {
  DatasetInfo info;
  std::map<SampleKey, std::vector<uint8_t>> payload;
  std::map<SampleKey, int32_t> label;
  std::map<SampleKey, std::string> path;
};

std::vector<uint8_t> PayloadFor(SampleKey key, int64_t size);

// Creates (or replaces) the dataset in `keyspace` (which must exist).
SyntheticDataset MakeSyntheticDataset(net::Session& s, const std::string& keyspace, const SyntheticSpec& spec);

// What a loader delivered in one epoch (or part of one).
struct Delivered {
  std::vector<SampleKey> keys;  // in delivery order
  std::vector<size_t> batch_sizes;
  uint64_t digest = 0;  // over keys and bytes, in order
  std::string error;    // the error that ended the epoch, if one did
};

// Reads one epoch (until Next() returns nullptr), or at most `max_batches`
// batches of it, and checks every sample's bytes and label against the
// fixture (test failures, not an error).
Delivered ReadEpoch(Loader& l, const SyntheticDataset& d, int max_batches = -1);

// Runs ranks 0 .. world-1 of `o` at once, one epoch each (ReadEpoch), and
// checks that no key reaches two ranks and that no rank ended in an error;
// returns the union of what they delivered.
std::set<SampleKey> ReadAllRanks(const LoaderOptions& o, int world, const SyntheticDataset& d);

// Opens a loader of `o`, restores `state` and reads the rest of the epoch
// (ReadEpoch); checks that no key of `before` (what was delivered before
// the checkpoint) or of the rest arrives twice and that the rest ended
// without an error. Returns every key delivered, and the metrics of the
// resumed loader in `*metrics` (if given).
std::set<SampleKey> ResumeEpoch(const LoaderOptions& o, const std::string& state,
                                const std::vector<SampleKey>& before, const SyntheticDataset& d,
                                LoaderMetrics* metrics = nullptr);

// Loader options for `dataset`'s `split` on the test node and keyspace; the
// tests set the rest.
LoaderOptions TestLoaderOptions(const std::string& dataset, const std::string& split = "train");

}  // namespace cqlstream::testing

#endif  // CQLSTREAM_TESTS_INTEGRATION_DATASET_FIXTURE_H_
