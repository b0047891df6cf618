// Copyright (c) cqlstream authors.
//
// `cqlstream verify NAME [--split S] [--concurrency N]`: reads every committed
// sample and checks sizes, checksums and metadata (store/verify.h). Lists the
// problems by key and path; exit code 1 when there is any, 130 when
// interrupted (Ctrl-C ends a sample's read within 50 ms, a page awaited given up).
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>

#include "cli/cli.h"
#include "store/catalog.h"
#include "store/progress.h"
#include "store/stats.h"
#include "store/verify.h"
#include "util/escape.h"

namespace cqlstream::cli {

void RegisterVerify(CLI::App& app, Action* action) {
  auto* cmd = app.add_subcommand("verify", "Read every committed sample and check sizes, checksums and metadata");
  auto flags = std::make_shared<ConnectionFlags>();
  auto name = std::make_shared<std::string>();
  auto o = std::make_shared<store::VerifyOptions>();
  auto max_list = std::make_shared<int>(100);
  cmd->add_option("name", *name, "Dataset")->required();
  cmd->add_option("--split", o->split, "Only this split");
  cmd->add_option("--concurrency", o->concurrency, "Reads in flight (default 16)")->check(CLI::Range(1, 1024));
  cmd->add_option("--max-list", *max_list, "Problems to list (default 100)")->check(CLI::Range(0, 1000000));
  flags->Add(cmd);
  cmd->callback([action, flags, name, o, max_list] {
    *action = [flags, name, o, max_list]() -> int {
      o->stop = store::InstallInterruptHandler();  // from before the connect
      auto opened = flags->OpenDataset(*name, o->stop);
      if (!opened.ok()) {
        return ReportErrorOrInterrupt(opened.status(), o->stop, "verify interrupted while opening the dataset");
      }
      auto& s = *opened->session;
      const DatasetInfo* d = &opened->dataset;
      store::ProgressLine line(stderr, ::isatty(STDERR_FILENO) != 0, "verify");
      o->on_progress = [&](int64_t done, int64_t total, int64_t bytes, int64_t bad) {
        line.Update(done, total, bytes, 0, bad ? fmt::format("problems {}", bad) : "");
      };
      store::VerifyReport r;
      Status st = store::Verify(s, *d, *o, &r);
      line.Finish();
      s.Close();
      for (size_t i = 0; i < r.problems.size() && static_cast<int>(i) < *max_list; ++i) {
        const auto& p = r.problems[i];
        fmt::print("{} {} {}: {}\n", FormatKey(p.key), PrintableText(p.split),
                   p.path.empty() ? "(no metadata)" : PrintableText(p.path), PrintableText(p.what));
      }
      if (static_cast<int>(r.problems.size()) > *max_list) {
        fmt::print("... and {} more problems\n", r.problems.size() - static_cast<size_t>(*max_list));
      }
      const double secs = std::max(r.seconds, 1e-9);
      fmt::print("verified {} of {} samples ({}) in {:.1f} s ({:.0f} items/s, {:.1f} MB/s): {} problem{}\n",
                 store::Thousands(r.checked), store::Thousands(r.total), store::HumanBytes(static_cast<double>(r.bytes)),
                 r.seconds, static_cast<double>(r.checked) / secs, static_cast<double>(r.bytes) / 1e6 / secs,
                 store::Thousands(static_cast<int64_t>(r.problems.size())), r.problems.size() == 1 ? "" : "s");
      if (!st.ok()) return ReportErrorOrInterrupt(st, o->stop, "verify interrupted: the samples above were checked");
      return r.problems.empty() ? 0 : 1;
    };
  });
}

}  // namespace cqlstream::cli
