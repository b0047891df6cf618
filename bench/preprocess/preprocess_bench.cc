// Copyright (c) cqlstream authors.
//
// cqlstream-preprocess-bench: what ingest-time preprocessing
// (store::Apply: resize-shorter, center-crop, re-encode; docs/ingest.md)
// costs per image, without reading files or writing to a node.
//
// The inputs are --count deterministic ImageNet-like JPEGs from the dataset
// generator (bench/gen, the images `cqlstream-gen-images` writes: mean
// --mean-kb kB, log-normal sizes), made once in memory. For every --spec
// (canonical preprocessing text, as `cqlstream info` shows it) it runs
// --runs passes of Apply over all of them on one thread and prints, per
// pass and as medians of the passes: milliseconds per image of wall time
// and of this thread's CPU time (CLOCK_THREAD_CPUTIME_ID: unlike wall time
// it hardly moves with the machine's load), images/s of one core, the mean
// output size, the images Apply refused (too small for a crop: ingest
// skips them; their attempt stays in the time per image) and the load
// average (1/5/15 min) before each pass.
//
// Ownership: everything is local to Main. Thread-safety: one thread.
#include <time.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gen/image_synth.h"
#include "store/preprocess.h"
#include "util/main_guard.h"
#include "util/measure.h"

namespace cqlstream::bench {
namespace {

struct Pass {
  double wall_ms_per_image = 0;
  double cpu_ms_per_image = 0;
  double mean_out_bytes = 0;  // of the images Apply kept
  int skipped = 0;            // images Apply refused (e.g. smaller than the crop), as ingest skips them
  std::string load_before;
};

std::string LoadAverage() {
  double l[3] = {0, 0, 0};
  if (getloadavg(l, 3) != 3) return "?";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f/%.1f/%.1f", l[0], l[1], l[2]);
  return buf;
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

StatusOr<std::vector<std::vector<uint8_t>>> MakeImages(int count, double mean_kb) {
  gen::SynthOptions o;
  o.mean_bytes = mean_kb * 1000;
  auto synth = gen::ImageSynth::Create(o);
  if (!synth.ok()) return synth.status();
  std::vector<std::vector<uint8_t>> images;
  for (int i = 0; i < count; ++i) {
    auto jpeg = synth.value().Encode(synth.value().Plan(static_cast<uint64_t>(i), i % 100));
    if (!jpeg.ok()) return jpeg.status();
    images.push_back(std::move(jpeg.value()));
  }
  return images;
}

// One pass of Apply over every image. An image Apply refuses (too small for
// the crop) is counted as skipped, as ingest skips it; its (cheap) attempt
// stays in the per-image time. Every image refused fails the pass.
StatusOr<Pass> RunPass(const store::PreprocessSpec& spec, const std::vector<std::vector<uint8_t>>& images) {
  Pass p;
  p.load_before = LoadAverage();
  double out_bytes = 0;
  double cpu0 = ThreadCpuSeconds();
  auto t0 = std::chrono::steady_clock::now();
  for (const auto& image : images) {
    auto r = store::Apply(spec, image);
    if (!r.ok()) {
      if (++p.skipped == static_cast<int>(images.size())) return r.status();
      continue;
    }
    out_bytes += static_cast<double>(r.value().bytes.size());
  }
  double wall = SecondsSince(t0);
  double cpu = ThreadCpuSeconds() - cpu0;
  double n = static_cast<double>(images.size());
  p.wall_ms_per_image = wall * 1e3 / n;
  p.cpu_ms_per_image = cpu * 1e3 / n;
  p.mean_out_bytes = out_bytes / (n - p.skipped);
  return p;
}

int Main(int argc, char** argv) {
  CLI::App app{"cqlstream-preprocess-bench: per-image cost of ingest-time preprocessing (store::Apply)"};
  int count = 200, runs = 3;
  double mean_kb = 110;
  std::vector<std::string> specs = {"resize-shorter=64,center-crop=56,reencode=jpeg:90",
                                    "resize-shorter=256,center-crop=224,reencode=jpeg:90",
                                    "resize-shorter=256", "center-crop=224,reencode=jpeg:90",
                                    "resize-shorter=256,center-crop=224,reencode=png", "reencode=png"};
  app.add_option("--count", count, "images (generated JPEGs)")->check(CLI::Range(1, 100000));
  app.add_option("--runs", runs, "passes per spec (medians over them)")->check(CLI::Range(1, 1000));
  app.add_option("--mean-kb", mean_kb, "mean JPEG size in kB")->check(CLI::Range(1.0, 10000.0));
  app.add_option("--spec", specs, "preprocessing, canonical text (repeatable)");
  CLI11_PARSE(app, argc, argv);

  auto t_start = std::chrono::steady_clock::now();
  auto images = MakeImages(count, mean_kb);
  if (!images.ok()) {
    std::fprintf(stderr, "making the images: %s\n", images.status().ToString().c_str());
    return 1;
  }
  double in_bytes = 0;
  for (const auto& i : images.value()) in_bytes += static_cast<double>(i.size());
  std::printf("%d generated JPEGs, mean %.1f kB; one thread; load average before each pass\n", count,
              in_bytes / count / 1e3);
  std::vector<std::string> table;
  for (const auto& text : specs) {
    auto spec = store::PreprocessSpec::Parse(text);
    if (!spec.ok() || !spec.value().Validate().ok()) {
      std::fprintf(stderr, "--spec %s: %s\n", text.c_str(),
                   (spec.ok() ? spec.value().Validate() : spec.status()).ToString().c_str());
      return 2;
    }
    std::vector<double> wall, cpu, out;
    int skipped = 0;
    std::string loads;
    for (int r = 0; r < runs; ++r) {
      auto p = RunPass(spec.value(), images.value());
      if (!p.ok()) {
        std::fprintf(stderr, "%s: %s\n", text.c_str(), p.status().ToString().c_str());
        return 1;
      }
      std::printf("%s pass %d: %.3f ms/image wall, %.3f ms/image CPU, out %.1f kB, %d skipped (load %s)\n",
                  text.c_str(), r + 1, p.value().wall_ms_per_image, p.value().cpu_ms_per_image,
                  p.value().mean_out_bytes / 1e3, p.value().skipped, p.value().load_before.c_str());
      std::fflush(stdout);
      wall.push_back(p.value().wall_ms_per_image);
      cpu.push_back(p.value().cpu_ms_per_image);
      out.push_back(p.value().mean_out_bytes);
      loads += (r ? ", " : "") + p.value().load_before;
      skipped = p.value().skipped;
    }
    char row[512];
    std::snprintf(row, sizeof row, "| `%s` | %d | %.2f | %.2f | %.0f | %.1f | %d | %s |", text.c_str(), runs,
                  Median(cpu), Median(wall), 1e3 / Median(cpu), Median(out) / 1e3, skipped, loads.c_str());
    table.push_back(row);
  }
  std::printf("\n| preprocessing | passes | CPU ms/image | wall ms/image | images/s per core (CPU) "
              "| output kB | skipped | load average before each pass |\n|---|---:|---:|---:|---:|---:|---:|---|\n");
  for (const auto& row : table) std::printf("%s\n", row.c_str());
  std::printf("\nwall time of this command: %.0f s\n", SecondsSince(t_start));
  return 0;
}

}  // namespace
}  // namespace cqlstream::bench

int main(int argc, char** argv) {
  return cqlstream::GuardedMain("cqlstream-preprocess-bench", [&] { return cqlstream::bench::Main(argc, argv); });
}
