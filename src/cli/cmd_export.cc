// Copyright (c) cqlstream authors.
//
// `cqlstream export NAME DIR [--split S]`: writes the dataset back as files,
// byte-identical to the ingested ones (store/export.h describes the layout).
// Exit code 1 when a sample was not exported, 130 when interrupted.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "cli/cli.h"
#include "store/catalog.h"
#include "store/export.h"
#include "store/progress.h"
#include "store/stats.h"
#include "util/escape.h"

namespace cqlstream::cli {

void RegisterExport(CLI::App& app, Action* action) {
  auto* cmd = app.add_subcommand("export", "Write a dataset back to an image folder (byte-identical files)");
  auto flags = std::make_shared<ConnectionFlags>();
  auto name = std::make_shared<std::string>();
  auto o = std::make_shared<store::ExportOptions>();
  cmd->add_option("name", *name, "Dataset")->required();
  cmd->add_option("dir", o->dir, "Output folder (created; must be empty unless --force)")->required();
  cmd->add_flag("--force", o->force,
                "Write into a non-empty folder (existing files are kept; a taken name gets a .<seg>_<idx> suffix)");
  cmd->add_option("--split", o->split, "Only this split");
  cmd->add_option("--concurrency", o->concurrency, "Samples read at once (default 16)")->check(CLI::Range(1, 1024));
  flags->Add(cmd);
  cmd->callback([action, flags, name, o] {
    *action = [flags, name, o]() -> int {
      o->stop = store::InstallInterruptHandler();  // from before the connect
      auto opened = flags->OpenDataset(*name, o->stop);
      if (!opened.ok()) {
        return ReportErrorOrInterrupt(opened.status(), o->stop, "export interrupted while opening the dataset");
      }
      auto& s = *opened->session;
      const DatasetInfo* d = &opened->dataset;
      store::ProgressLine line(stderr, ::isatty(STDERR_FILENO) != 0, "export");
      o->on_progress = [&](int64_t done, int64_t total, int64_t bytes) { line.Update(done, total, bytes, 0, ""); };
      store::ExportReport r;
      Status st = store::Export(s, *d, *o, &r);
      line.Finish();
      s.Close();
      for (const auto& p : r.problems) fmt::print(stderr, "cqlstream: not exported: {}\n", PrintableText(p));
      if (r.problems_omitted > 0) {
        fmt::print(stderr, "cqlstream: not exported: {} more (not listed)\n", store::Thousands(r.problems_omitted));
      }
      fmt::print("exported {} of {} samples ({} files, {}) to {} in {:.1f} s{}\n", store::Thousands(r.samples),
                 store::Thousands(r.total), store::Thousands(r.files), store::HumanBytes(static_cast<double>(r.bytes)),
                 PrintableText(o->dir), r.seconds,
                 r.renamed ? fmt::format("; {} renamed to avoid name collisions", r.renamed) : std::string());
      if (!st.ok()) {
        return ReportErrorOrInterrupt(st, o->stop,
                                      "export interrupted: every file it wrote is a whole sample "
                                      "(listed in manifest.csv where there is one)");
      }
      return r.problems.empty() ? 0 : 1;
    };
  });
}

}  // namespace cqlstream::cli
