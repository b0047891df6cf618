// Copyright (c) cqlstream authors.
//
// `cqlstream select NAME --split S [--label L ...] [--extra k=v ...]
// [--fraction F --seed X] [--invert] -o FILE`: freezes a subset of a split
// into a selection file (docs/schema.md) that the loader takes instead of a
// split; --invert writes the rest of the split instead.
#include <fmt/format.h>

#include "cli/cli.h"
#include "store/catalog.h"
#include "store/progress.h"
#include "store/select.h"

namespace cqlstream::cli {

void RegisterSelect(CLI::App& app, Action* action) {
  auto* cmd = app.add_subcommand("select", "Write a selection file: a subset of one split by label, extra, fraction");
  auto flags = std::make_shared<ConnectionFlags>();
  auto name = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto o = std::make_shared<store::SelectOptions>();
  auto extra = std::make_shared<std::vector<std::string>>();
  auto fraction = std::make_shared<double>(-1);
  cmd->add_option("name", *name, "Dataset")->required();
  cmd->add_option("--split", o->split, "Split to select from")->required();
  cmd->add_option("--label", o->labels, "Keep samples with this class (name or index); repeatable");
  cmd->add_option("--extra", *extra, "Keep samples whose extra field k equals v (k=v); repeatable");
  cmd->add_option("--fraction", *fraction, "Keep this fraction of the matching samples (deterministic)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--seed", o->seed, "Seed of --fraction (default 0)");
  cmd->add_flag("--invert", o->invert, "Write the complement (within the split) of what the filters select");
  cmd->add_option("--concurrency", o->concurrency, "Metadata blocks read at once (default 16)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("-o,--output", *out, "Selection file to write")->required();
  flags->Add(cmd);
  cmd->callback([action, flags, name, out, o, extra, fraction] {
    *action = [flags, name, out, o, extra, fraction]() -> int {
      for (const auto& e : *extra) {
        auto kv = store::ParseExtraFilter(e);
        if (!kv.ok()) return ReportError(kv.status());
        o->extra.push_back(*kv);
      }
      if (*fraction >= 0) o->fraction = *fraction;
      auto opened = flags->OpenDataset(*name);
      if (!opened.ok()) return ReportError(opened.status());
      auto& s = *opened->session;
      const DatasetInfo* d = &opened->dataset;
      auto sel = store::Select(s, *d, *o);
      s.Close();
      if (!sel.ok()) return ReportError(sel.status());
      Status saved = sel->Save(*out);
      if (!saved.ok()) return ReportError(saved);
      fmt::print("selected {} of {} samples of {}/{} ({}) -> {}\n", store::Thousands(static_cast<int64_t>(sel->keys.size())),
                 store::Thousands(d->Count(o->split)), *name, o->split, sel->query, *out);
      return 0;
    };
  });
}

}  // namespace cqlstream::cli
