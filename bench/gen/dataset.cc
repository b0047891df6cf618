// Copyright (c) cqlstream authors.
#include "gen/dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "gen/tar_writer.h"
#include "util/measure.h"

namespace cqlstream::gen {
namespace {

namespace fs = std::filesystem;

struct Sample {
  uint64_t index;
  int label;
  bool val;
};

std::string ClassName(int label) { return fmt::format("n{:08d}", label); }
std::string Key(const Sample& s) { return fmt::format("{}_{:08d}", ClassName(s.label), s.index); }
const char* SplitName(bool val) { return val ? "val" : "train"; }

Status WriteFile(const fs::path& path, const void* data, size_t n) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::IOError(fmt::format("{}: {}", path.string(), std::strerror(errno)));
  const bool ok = std::fwrite(data, 1, n, f) == n;
  if (std::fclose(f) != 0 || !ok) {
    return Status::IOError(fmt::format("{}: {}", path.string(), std::strerror(errno)));
  }
  return Status::OK();
}

// Runs work(task) for task in [0, n) on `threads` threads; stops handing out
// tasks after the first error and returns it.
template <typename Fn>
Status ParallelFor(size_t n, int threads, Fn work) {
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status first;
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(1, threads); ++t) {
    pool.emplace_back([&] {
      for (size_t i = next++; i < n && !failed.load(); i = next++) {
        Status s = work(i);
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          if (first.ok()) first = s;
          failed = true;
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  return first;
}

// The samples in order and the indexes of each split (0 train, 1 val).
struct SamplePlan {
  std::vector<Sample> samples;
  std::vector<size_t> by_split[2];
};

SamplePlan PlanSamples(const DatasetOptions& o) {
  SamplePlan p;
  p.samples.resize(o.count);
  for (uint64_t i = 0; i < o.count; ++i) {
    SplitMix64 r(MixSeed(o.synth.seed, i, 0x5b1170));
    p.samples[i] = Sample{i, static_cast<int>(i % static_cast<uint64_t>(o.classes)), r.Uniform() < o.val_fraction};
    p.by_split[p.samples[i].val ? 1 : 0].push_back(i);
  }
  return p;
}

// One JPEG file per sample under split/class/.
Status WriteFolder(const DatasetOptions& o, const ImageSynth& synth, const SamplePlan& plan, const fs::path& out,
                   DatasetStats* stats) {
  std::error_code ec;
  for (int split = 0; split < 2; ++split) {
    if (plan.by_split[split].empty()) continue;
    for (int c = 0; c < o.classes; ++c) {
      fs::create_directories(out / SplitName(split == 1) / ClassName(c), ec);
      if (ec) return Status::IOError(fmt::format("mkdir under {}: {}", o.out, ec.message()));
    }
  }
  constexpr size_t kBatch = 16;
  return ParallelFor((o.count + kBatch - 1) / kBatch, o.threads, [&](size_t task) -> Status {
    for (size_t i = task * kBatch; i < std::min<size_t>(o.count, (task + 1) * kBatch); ++i) {
      const Sample& s = plan.samples[i];
      CQLS_ASSIGN_OR_RETURN(std::vector<uint8_t> jpeg, synth.Encode(synth.Plan(s.index, s.label)));
      std::string rel = fmt::format("{}/{}/{}.jpg", SplitName(s.val), ClassName(s.label), Key(s));
      CQLS_RETURN_IF_ERROR(WriteFile(out / rel, jpeg.data(), jpeg.size()));
      stats->sizes[i] = jpeg.size();
      stats->paths[i] = std::move(rel);
    }
    return Status::OK();
  });
}

// WebDataset shards of o.shard_size samples per split: key.jpg and key.cls.
Status WriteTars(const DatasetOptions& o, const ImageSynth& synth, const SamplePlan& plan, const fs::path& out,
                 DatasetStats* stats) {
  struct Shard {
    int split;
    size_t number;
    size_t begin, end;  // into plan.by_split[split]
  };
  std::vector<Shard> shards;
  for (int split = 0; split < 2; ++split) {
    for (size_t b = 0, k = 0; b < plan.by_split[split].size(); b += o.shard_size, ++k) {
      shards.push_back(Shard{split, k, b, std::min(plan.by_split[split].size(), b + o.shard_size)});
    }
  }
  stats->shards = shards.size();
  return ParallelFor(shards.size(), o.threads, [&](size_t task) -> Status {
    const Shard& sh = shards[task];
    const std::string name = fmt::format("{}-{:06d}.tar", SplitName(sh.split == 1), sh.number);
    CQLS_ASSIGN_OR_RETURN(auto writer, TarWriter::Create((out / name).string()));
    for (size_t j = sh.begin; j < sh.end; ++j) {
      const Sample& s = plan.samples[plan.by_split[sh.split][j]];
      CQLS_ASSIGN_OR_RETURN(std::vector<uint8_t> jpeg, synth.Encode(synth.Plan(s.index, s.label)));
      const std::string key = Key(s);
      CQLS_RETURN_IF_ERROR(writer->Add(key + ".jpg", jpeg));
      const std::string cls = std::to_string(s.label);
      CQLS_RETURN_IF_ERROR(writer->Add(
          key + ".cls", std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(cls.data()), cls.size())));
      stats->sizes[s.index] = jpeg.size();
      stats->paths[s.index] = fmt::format("{}/{}.jpg", name, key);
    }
    return writer->Finish();
  });
}

}  // namespace

StatusOr<DatasetStats> WriteDataset(const DatasetOptions& o) {
  if (o.out.empty()) return Status::InvalidArgument("no output directory");
  if (o.count == 0 || o.classes < 1 || o.shard_size == 0 || !(o.val_fraction >= 0 && o.val_fraction <= 1)) {
    return Status::InvalidArgument("bad count, classes, shard size or val fraction");
  }
  const auto t0 = std::chrono::steady_clock::now();
  CQLS_ASSIGN_OR_RETURN(const ImageSynth synth, ImageSynth::Create(o.synth));
  const SamplePlan plan = PlanSamples(o);

  DatasetStats stats;
  stats.images = o.count;
  stats.train = plan.by_split[0].size();
  stats.val = plan.by_split[1].size();
  stats.sizes.assign(o.count, 0);
  stats.paths.assign(o.count, "");
  const fs::path out(o.out);
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return Status::IOError(fmt::format("{}: {}", o.out, ec.message()));
  CQLS_RETURN_IF_ERROR(o.tar ? WriteTars(o, synth, plan, out, &stats) : WriteFolder(o, synth, plan, out, &stats));

  if (o.manifest) {
    std::string csv = "path,label,split\n";
    for (const Sample& s : plan.samples) {
      csv += fmt::format("{},{},{}\n", stats.paths[s.index], s.label, SplitName(s.val));
    }
    CQLS_RETURN_IF_ERROR(WriteFile(out / "manifest.csv", csv.data(), csv.size()));
  }
  stats.seconds = SecondsSince(t0);
  return stats;
}

}  // namespace cqlstream::gen
