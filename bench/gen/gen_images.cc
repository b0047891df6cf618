// Copyright (c) cqlstream authors.
//
// cqlstream-gen-images: a deterministic synthetic ImageNet-like dataset of
// real JPEGs (see dataset.h for the layout, image_synth.h for the images).
//
//   cqlstream-gen-images --out DIR [--count 20000] [--classes 100] [--seed 1]
//       [--val-fraction 0.05] [--tar [--shard-size 1000]] [--manifest]
//       [--threads N] [--mean-kb 110] [--sigma 0.7] [--quality 90]
//
// Prints count, total bytes, mean, p50, p90, p99, min, max of the file sizes.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <thread>
#include <vector>

#include "gen/dataset.h"
#include "util/main_guard.h"

namespace {

double Percentile(const std::vector<uint64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  const size_t k = std::min(sorted.size() - 1, static_cast<size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5));
  return static_cast<double>(sorted[k]);
}

}  // namespace

static int Main(int argc, char** argv) {
  CLI::App app{"cqlstream-gen-images: deterministic synthetic ImageNet-like JPEG dataset"};
  cqlstream::gen::DatasetOptions o;
  o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  double mean_kb = o.synth.mean_bytes / 1e3;
  uint64_t seed = 1;
  app.add_option("--out", o.out, "output directory")->required();
  app.add_option("--count", o.count, "number of images")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--classes", o.classes, "number of classes")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--seed", seed, "dataset seed")->capture_default_str();
  app.add_option("--val-fraction", o.val_fraction, "fraction of images in the val split")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_flag("--tar", o.tar, "write WebDataset-style tar shards instead of an image folder");
  app.add_option("--shard-size", o.shard_size, "samples per tar shard")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--manifest", o.manifest, "also write DIR/manifest.csv (path,label,split)");
  app.add_option("--threads", o.threads, "worker threads")->capture_default_str()->check(CLI::Range(1, 256));
  app.add_option("--mean-kb", mean_kb, "mean file size in kB (1000 bytes)")->capture_default_str();
  app.add_option("--sigma", o.synth.sigma, "log-normal shape of the file size")->capture_default_str();
  app.add_option("--quality", o.synth.quality, "JPEG quality")->capture_default_str()->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  o.synth.seed = seed;
  o.synth.mean_bytes = mean_kb * 1e3;

  auto stats_or = cqlstream::gen::WriteDataset(o);
  if (!stats_or.ok()) {
    fmt::print(stderr, "cqlstream-gen-images: {}\n", stats_or.status().ToString());
    return 1;
  }
  const auto& st = *stats_or;
  std::vector<uint64_t> sorted = st.sizes;
  std::sort(sorted.begin(), sorted.end());
  uint64_t total = 0;
  for (uint64_t s : sorted) total += s;
  const auto over = std::count_if(sorted.begin(), sorted.end(), [](uint64_t s) { return s > 1000000; });
  fmt::print("images {} (train {}, val {}; {} classes; seed {}; {})\n", st.images, st.train, st.val,
             o.classes, seed, o.tar ? fmt::format("{} tar shards", st.shards) : std::string("image folder"));
  fmt::print("bytes  total {} ({:.2f} GB)  mean {:.0f}  p50 {:.0f}  p90 {:.0f}  p99 {:.0f}  min {}  max {}  "
             "over 1 MB: {}\n",
             total, static_cast<double>(total) / 1e9, static_cast<double>(total) / static_cast<double>(st.images),
             Percentile(sorted, 0.5), Percentile(sorted, 0.9), Percentile(sorted, 0.99), sorted.front(),
             sorted.back(), over);
  fmt::print("time   {:.1f} s on {} threads ({:.0f} images/s, {:.0f} MB/s)\n", st.seconds, o.threads,
             static_cast<double>(st.images) / st.seconds, static_cast<double>(total) / 1e6 / st.seconds);
  return 0;
}

int main(int argc, char** argv) {
  return cqlstream::GuardedMain("cqlstream-gen-images", [&] { return Main(argc, argv); });
}
