// Copyright (c) cqlstream authors.
//
// `cqlstream pack NAME [--split S] [--pack-size P] [--concurrency N] [--force]`:
// writes the packed copy of a dataset's small samples (store/pack.h), which
// the loader reads one pack per request with --packed / packed=True. Lists
// each segment with what was done with it; exit code 1 when a sample failed
// its check and was left out of its pack (the loader reads it alone, where
// its own check names it), 130 when interrupted.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "cli/cli.h"
#include "store/catalog.h"
#include "store/pack.h"
#include "store/progress.h"
#include "store/stats.h"
#include "util/escape.h"

namespace cqlstream::cli {

void PrintPackReport(const store::PackReport& r) {
  for (const auto& g : r.segments) {
    if (g.info.pack_size > 0) {
      fmt::print("segment {} ({}): {}: {} packs of {}, {} samples read alone\n", g.seg, PrintableText(g.split),
                 g.outcome, store::Thousands(g.info.count / g.info.pack_size), g.info.pack_size,
                 store::Thousands(g.info.count - g.info.packed));
    } else {
      fmt::print("segment {} ({}): {}\n", g.seg, PrintableText(g.split), g.outcome);
    }
  }
  fmt::print("packed {} samples into {} packs in {:.1f} s; {} left out (failed their check)\n",
             store::Thousands(r.samples_packed), store::Thousands(r.packs_written), r.seconds,
             store::Thousands(r.left_out));
}

void RegisterPack(CLI::App& app, Action* action) {
  auto* cmd = app.add_subcommand(
      "pack", "Write a packed copy of a dataset's small samples (many to a partition) for packed reads");
  auto flags = std::make_shared<ConnectionFlags>();
  auto name = std::make_shared<std::string>();
  auto o = std::make_shared<store::PackOptions>();
  cmd->add_option("name", *name, "Dataset")->required();
  cmd->add_option("--split", o->split, "Only this split");
  cmd->add_option("--pack-size", o->pack_size,
                  fmt::format("Samples per pack (default {}; lowered so that a pack holds at most {} KiB)",
                              store::kDefaultPackSize, store::kMaxPackBytes >> 10))
      ->check(CLI::Range(store::kMinPackSize, store::kMaxPackSize));
  cmd->add_option("--concurrency", o->concurrency, "Packs built at a time (default 8)")
      ->check(CLI::Range(1, store::kMaxPackConcurrency));
  cmd->add_flag("--force", o->force, "Pack again segments already packed");
  flags->Add(cmd);
  cmd->callback([action, flags, name, o] {
    *action = [flags, name, o]() -> int {
      o->stop = store::InstallInterruptHandler();  // from before the connect
      auto opened = flags->OpenDataset(*name, o->stop);
      if (!opened.ok()) {
        return ReportErrorOrInterrupt(opened.status(), o->stop, "pack interrupted while opening the dataset");
      }
      auto& s = *opened->session;
      const DatasetInfo* d = &opened->dataset;
      store::ProgressLine line(stderr, ::isatty(STDERR_FILENO) != 0, "pack");
      o->on_progress = [&](int64_t done, int64_t total) { line.Update(done, total, 0, 0, ""); };
      store::PackReport r;
      Status st = store::PackDataset(s, *d, *o, &r);
      line.Finish();
      s.Close();
      PrintPackReport(r);
      if (!st.ok()) {
        return ReportErrorOrInterrupt(st, o->stop,
                                      "pack interrupted: a segment whose packs were not all written is read unpacked "
                                      "(run it again)");
      }
      return r.left_out == 0 ? 0 : 1;
    };
  });
}

}  // namespace cqlstream::cli
