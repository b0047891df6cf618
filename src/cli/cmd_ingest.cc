// Copyright (c) cqlstream authors.
//
// `cqlstream ingest --dataset NAME SOURCE...`: writes an image folder, a
// manifest (CSV/JSONL) or WebDataset tar shards into a dataset (see
// docs/ingest.md and store/ingest.h). Re-running the same command resumes an
// interrupted ingest and never duplicates samples.
//
// Exit codes: 0 done (items may have been skipped: they are listed); 1 error
// (including --strict with skips); 2 bad arguments; 130 interrupted (the
// committed part stays; run the command again to finish).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string_view>

#include "cli/cli.h"
#include "store/catalog.h"
#include "store/ingest.h"
#include "store/pack.h"
#include "store/preprocess.h"
#include "store/progress.h"
#include "store/stats.h"
#include "util/escape.h"

namespace cqlstream::cli {
namespace {

struct IngestFlags {
  std::string dataset;
  std::vector<std::string> sources;
  std::string split;
  std::string labels;
  std::string label_kind;
  std::string kind = "image";
  std::string shard;
  bool strict = false;
  bool allow_same_paths = false;
  bool allow_paths_outside = false;
  int64_t chunk_size = 0;
  std::string replication = "simple:1";
  int concurrency = 64;
  int memory_mb = 512;
  int readers = 4;
  std::string description;
  int64_t crash_after = -1;
  int64_t commit_every = 0;
  // Ingest-time preprocessing (store/preprocess.h); 0 / "" / false: not set.
  int resize_shorter = 0;
  int center_crop = 0;
  std::string reencode;
  bool resize_target = false;
  // --pack: the packed copy of the ingested splits' small samples afterwards.
  bool pack = false;
  int pack_size = store::kDefaultPackSize;
};

// `--pack`: after a successful ingest, what `cqlstream pack NAME --split S
// --pack-size P` does for each split the run ingested (a split that holds
// no small samples is listed as not packed, which is no error). Returns
// the exit code: 0, 1 when a sample failed its check and was left out (as
// `cqlstream pack`), 130 when interrupted, or the error's.
int PackIngested(net::Session& s, const store::IngestReport& report, const std::string& keyspace, int pack_size,
                 const std::atomic<bool>* stop) {
  auto d = store::LoadDataset(s, keyspace, report.dataset);
  if (!d.ok()) return ReportError(d.status().WithContext("--pack"));
  std::vector<std::string> splits;
  for (const auto& r : report.splits) {
    if (std::find(splits.begin(), splits.end(), r.split) == splits.end()) splits.push_back(r.split);
  }
  int code = 0;
  for (const auto& split : splits) {
    store::PackOptions o;
    o.split = split;
    o.pack_size = pack_size;
    o.stop = stop;
    store::PackReport r;
    Status st = store::PackDataset(s, *d, o, &r);
    PrintPackReport(r);
    if (st.code() == Status::Code::kCancelled) {  // Ctrl-C: as during the ingest
      fmt::print(stderr, "cqlstream: {}\n", PrintableText(st.message()));
      return 130;
    }
    if (!st.ok()) return ReportError(st.WithContext(fmt::format("--pack of split '{}'", PrintableText(split))));
    if (r.left_out > 0) code = 1;
  }
  return code;
}

// The per-split lines and the totals. After an error nothing reads like
// success: each split says what its segment row holds (what a reader sees)
// and how much of what was written is not committed.
void PrintSummary(const store::IngestReport& report, const std::string& dataset, bool ok) {
  for (const auto& r : report.splits) {
    std::string what;
    if (r.action == "complete") {
      what = fmt::format("already complete ({} samples)", store::Thousands(r.count));
    } else if (r.action == "nothing new") {
      what = "nothing new in the source";
    } else if (r.action == "not started") {
      what = "not started (run the same command again)";
    } else if (!ok) {
      what = fmt::format("stopped: {} samples written ({}), {} skipped; {} of them committed, segment holds {} (open)",
                         store::Thousands(r.written), store::HumanBytes(static_cast<double>(r.bytes)),
                         store::Thousands(r.skipped), store::Thousands(std::max<int64_t>(0, r.count - r.start_count)),
                         store::Thousands(r.count));
    } else {
      what = fmt::format("{} samples written ({}), {} skipped; segment holds {}{}", store::Thousands(r.written),
                         store::HumanBytes(static_cast<double>(r.bytes)), store::Thousands(r.skipped),
                         store::Thousands(r.count), r.sealed ? " (sealed)" : " (open)");
    }
    fmt::print("split {:<10} segment {:<4} {:<9} {}\n", PrintableText(r.split), r.seg, r.action, what);
  }
  if (!report.skips.empty()) {
    fmt::print(stderr, "cqlstream: skipped items by reason:\n{}", report.FormatSkips(20));
  }
  const double secs = std::max(report.seconds, 1e-9);
  if (ok) {
    fmt::print("ingested {} samples ({}) into '{}' in {:.1f} s: {} items/s, {:.1f} MB/s; {} skipped\n",
               store::Thousands(report.written), store::HumanBytes(static_cast<double>(report.bytes)), dataset,
               report.seconds, store::Thousands(static_cast<int64_t>(static_cast<double>(report.written) / secs + 0.5)),
               static_cast<double>(report.bytes) / 1e6 / secs, store::Thousands(static_cast<int64_t>(report.skips.size())));
  } else {
    int64_t committed = 0;
    for (const auto& r : report.splits) committed += std::max<int64_t>(0, r.count - r.start_count);
    fmt::print("ingest of '{}' did not finish after {:.1f} s: {} samples written, {} committed by this run\n", dataset,
               report.seconds, store::Thousands(report.written), store::Thousands(committed));
  }
  std::fflush(stdout);
}

int RunIngest(const ConnectionFlags& flags, const IngestFlags& f, bool replication_given) {
  constexpr std::string_view kInterruptedConnecting = "ingest interrupted while connecting";
  store::IngestOptions o;
  // From here a first Ctrl-C (or SIGTERM) is heard: a secure bundle's
  // metadata fetch, the connect and the ingest each end at it.
  o.stop = store::InstallInterruptHandler();
  auto conn = flags.Resolve(o.stop);
  if (!conn.ok()) return ReportErrorOrInterrupt(conn.status(), o.stop, kInterruptedConnecting);
  o.keyspace = conn->keyspace;
  o.dataset = f.dataset;
  o.source.sources = f.sources;
  o.source.split = f.split;
  auto ls = store::ParseLabelSource(f.labels);
  if (!ls.ok()) return ReportError(ls.status());
  o.source.labels = *ls;
  if (!f.label_kind.empty()) {
    auto k = ParseLabelKind(f.label_kind);
    if (!k.ok()) return ReportError(k.status().WithContext("--label-kind"));
    o.source.label_kind = *k;
  }
  {
    auto k = ParseSampleKind(f.kind);
    if (!k.ok()) return ReportError(k.status().WithContext("--kind"));
    o.kind = *k;
  }
  if (!f.shard.empty()) {
    Status st = store::ParseShard(f.shard, &o.shard_index, &o.shard_count);
    if (!st.ok()) return ReportError(st);
  }
  o.strict = f.strict;
  o.allow_same_paths = f.allow_same_paths;
  o.source.allow_paths_outside = f.allow_paths_outside;
  if (f.chunk_size != 0) {
    if (f.chunk_size < 0 || f.chunk_size > INT32_MAX) {
      return ReportError(Status::InvalidArgument("--chunk-size is out of range"));
    }
    o.chunk_size = static_cast<int32_t>(f.chunk_size);
  }
  auto rep = store::Replication::Parse(f.replication);
  if (!rep.ok()) return ReportError(rep.status());
  o.replication = *rep;
  o.replication_given = replication_given;
  o.concurrency = f.concurrency;
  o.memory_bytes = static_cast<int64_t>(f.memory_mb) << 20;
  o.readers = f.readers;
  o.description = f.description;
  o.crash_after = f.crash_after;
  o.commit_every = f.commit_every;
  auto pre = store::PreprocessSpec::FromOptions(f.resize_shorter, f.center_crop, f.reencode, f.resize_target);
  if (!pre.ok()) return ReportError(pre.status().WithContext("preprocessing"));
  o.preprocess = pre->ToString();

  const bool tty = ::isatty(STDERR_FILENO) != 0;
  store::ProgressLine line(stderr, tty, "ingest");
  o.on_note = [&](const std::string& n) {
    line.Finish();
    fmt::print(stderr, "cqlstream: note: {}\n", PrintableText(n));
  };
  o.on_progress = [&](const store::IngestProgress& p) {
    const std::string extra =
        fmt::format("[{}]{}", PrintableText(p.split), p.skipped ? fmt::format("  skipped {}", store::Thousands(p.skipped)) : "");
    line.Update(p.items_done, p.items_total, p.bytes_done, p.bytes_total, extra);
  };

  auto session = ConnectionFlags::ConnectTo(*conn, {}, o.stop);
  if (!session.ok()) return ReportErrorOrInterrupt(session.status(), o.stop, kInterruptedConnecting);
  store::IngestReport report;
  Status st = store::Ingest(**session, o, &report);
  line.Finish();

  PrintSummary(report, o.dataset, st.ok());
  if (!st.ok()) {
    (*session)->Close();
    if (st.code() == Status::Code::kCancelled) {
      fmt::print(stderr, "cqlstream: {}\n", PrintableText(st.message()));
      return 130;
    }
    return ReportError(st);
  }
  const int code = f.pack ? PackIngested(**session, report, o.keyspace, f.pack_size, o.stop) : 0;
  (*session)->Close();
  return code;
}

}  // namespace

void RegisterIngest(CLI::App& app, Action* action) {
  auto* cmd = app.add_subcommand("ingest", "Write an image folder, a manifest or tar shards into a dataset");
  auto flags = std::make_shared<ConnectionFlags>();
  auto f = std::make_shared<IngestFlags>();
  cmd->add_option("--dataset", f->dataset, "Dataset name ([a-z][a-z0-9_]{0,23})")->required();
  cmd->add_option("source", f->sources,
                  "An image folder (split/class/file or class/file), a manifest (.csv, .jsonl), or tar shards "
                  "(.tar files, a folder of them, or a glob)")
      ->required();
  cmd->add_option("--split", f->split,
                  "Split to ingest (sources with splits) or the split name (others; default train)");
  cmd->add_option("--labels", f->labels, "Where labels come from: imagefolder, manifest or none (default: the source's)");
  cmd->add_option("--label-kind", f->label_kind,
                  "none, class, multilabel or target (default: what the source carries)");
  cmd->add_option("--kind", f->kind,
                  "image (validated, decodable by the loader) or blob (any bytes: .npy arrays, TIFF, audio, token "
                  "shards; stored without image validation); default image");
  cmd->add_option("--shard", f->shard, "Ingest only shard i of N of the sorted listing (round-robin), e.g. 0/4");
  cmd->add_flag("--strict", f->strict, "Fail (writing nothing) if any item would be skipped");
  cmd->add_flag("--allow-same-paths", f->allow_same_paths,
                "Write items whose relative path and size match samples another source already put in the split "
                "(refused by default: usually the same files from another location)");
  cmd->add_flag("--allow-paths-outside", f->allow_paths_outside,
                "Manifests: accept absolute paths and paths leading outside the manifest's folder (refused by "
                "default: a third-party manifest could otherwise upload any file you can read)");
  cmd->add_option("--chunk-size", f->chunk_size, "Bytes per data chunk for a new dataset (default 1048576)");
  auto* rep = cmd->add_option("--replication", f->replication,
                              "Replication of a new keyspace: simple:RF or nts:DC=RF,... (default simple:1)");
  cmd->add_option("--concurrency", f->concurrency, "Samples written at once (default 64)")->check(CLI::Range(1, 4096));
  cmd->add_option("--memory-mb", f->memory_mb, "Payload bytes read ahead and in flight, in MiB (default 512)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--readers", f->readers, "Reader threads (default 4)")->check(CLI::Range(1, 256));
  cmd->add_option("--description", f->description, "Description of a new dataset");
  cmd->add_option("--resize-shorter", f->resize_shorter,
                  "Preprocess images: resize so the shorter side is N pixels (antialiased bilinear)")
      ->check(CLI::Range(1, store::kMaxPreprocessSide));
  cmd->add_option("--center-crop", f->center_crop, "Preprocess images: keep the centre N x N (after the resize)")
      ->check(CLI::Range(1, store::kMaxPreprocessSide));
  cmd->add_option("--reencode", f->reencode, "Preprocess images: store them as jpeg:Q (1..100), png or keep (default)");
  cmd->add_flag("--resize-target", f->resize_target,
                "Give targets (masks) the same resize and crop, nearest-neighbour, stored as PNG");
  auto* pack = cmd->add_flag(
      "--pack", f->pack, "Then write the packed copy of the ingested splits' small samples, as `cqlstream pack` does");
  cmd->add_option("--pack-size", f->pack_size,
                  fmt::format("Samples per pack with --pack (default {})", store::kDefaultPackSize))
      ->check(CLI::Range(store::kMinPackSize, store::kMaxPackSize))
      ->needs(pack);
  // For tests of crash recovery: hidden.
  cmd->add_option("--crash-after", f->crash_after)->group("");
  cmd->add_option("--commit-every", f->commit_every)->group("");
  flags->Add(cmd);
  cmd->callback([action, flags, f, rep] {
    const bool replication_given = rep->count() > 0;
    *action = [flags, f, replication_given]() -> int { return RunIngest(*flags, *f, replication_given); };
  });
}

}  // namespace cqlstream::cli
