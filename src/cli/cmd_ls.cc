// Copyright (c) cqlstream authors.
//
// `cqlstream ls`: the datasets of the keyspace with their label kind and, per
// split, the committed sample count and payload bytes (sums over the
// split's segments).
#include <fmt/format.h>

#include <cstdio>

#include "cli/cli.h"
#include "store/catalog.h"
#include "store/progress.h"
#include "store/stats.h"

namespace cqlstream::cli {

void RegisterLs(CLI::App& app, Action* action) {
  auto* cmd = app.add_subcommand("ls", "List the datasets with per-split sample counts and bytes");
  auto flags = std::make_shared<ConnectionFlags>();
  flags->Add(cmd);
  cmd->callback([action, flags] {
    *action = [flags]() -> int {
      net::SessionOptions so;
      so.watch_events = false;
      auto session = flags->Connect(so);
      if (!session.ok()) return ReportError(session.status());
      auto& s = **session;
      auto list = store::ListDatasets(s, s.options().keyspace);
      s.Close();
      if (!list.ok()) return ReportError(list.status());
      if (list->empty()) {
        fmt::print("no datasets in keyspace '{}'\n", s.options().keyspace);
        return 0;
      }
      fmt::print("{:<24} {:<10} {:>7}  {}\n", "dataset", "labels", "classes", "splits");
      for (const auto& d : *list) {
        if (d.layout_version != kLayoutVersion) {
          fmt::print("{:<24} (layout version {}: not readable by this cqlstream)\n", d.name, d.layout_version);
          continue;
        }
        std::string splits;
        int open = 0;
        for (const auto& g : d.segments) open += g.state != "sealed";
        for (const auto& sp : d.splits()) {
          splits += fmt::format("{}{} {} ({})", splits.empty() ? "" : ", ", sp, store::Thousands(d.Count(sp)),
                                store::HumanBytes(static_cast<double>(d.Bytes(sp))));
        }
        if (splits.empty()) splits = "(empty)";
        if (open > 0) splits += fmt::format("  [{} open segment{}]", open, open > 1 ? "s" : "");
        fmt::print("{:<24} {:<10} {:>7}  {}\n", d.name, LabelKindName(d.label_kind), d.class_names.size(), splits);
      }
      return 0;
    };
  });
}

}  // namespace cqlstream::cli
