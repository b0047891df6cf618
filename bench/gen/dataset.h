// Copyright (c) cqlstream authors.
//
// Writes a synthetic ImageNet-like dataset (see image_synth.h) to disk as an
// image folder or as WebDataset-style tar shards, plus an optional manifest.
//
// Image i has class i % classes and lands in split "val" with probability
// val_fraction (decided by the seed), otherwise "train".
//   folder:   OUT/<split>/<class>/<class>_<i:08>.jpg
//   tar:      OUT/<split>-<k:06>.tar with members <class>_<i:08>.jpg and
//             <class>_<i:08>.cls (the label as decimal text), ustar,
//             shard_size samples per shard, samples in index order
//   manifest: OUT/manifest.csv, "path,label,split", one row per image in
//             index order; path relative to OUT (tar: "<shard>.tar/<member>")
// Class directories are named n%08d after the label (ImageNet-like synsets).
// The same options give byte-identical files whatever the thread count.
//
// Thread-safety: WriteDataset may run concurrently for different outputs.
#ifndef CQLSTREAM_BENCH_GEN_DATASET_H_
#define CQLSTREAM_BENCH_GEN_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cqlstream/status.h"
#include "gen/image_synth.h"

namespace cqlstream::gen {

struct DatasetOptions {
  std::string out;
  uint64_t count = 20000;
  int classes = 100;
  double val_fraction = 0.05;
  bool tar = false;
  size_t shard_size = 1000;
  bool manifest = false;
  int threads = 1;
  SynthOptions synth;  // synth.seed is the dataset seed
};

struct DatasetStats {
  uint64_t images = 0;
  uint64_t train = 0;
  uint64_t val = 0;
  uint64_t shards = 0;              // tar mode
  std::vector<uint64_t> sizes;      // JPEG bytes of image i
  std::vector<std::string> paths;   // as in the manifest
  double seconds = 0;
};

StatusOr<DatasetStats> WriteDataset(const DatasetOptions& options);

}  // namespace cqlstream::gen

#endif  // CQLSTREAM_BENCH_GEN_DATASET_H_
