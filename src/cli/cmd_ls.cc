// Copyright (c) cqlstream authors.
//
// `cqlstream ls`: the datasets of the keyspace with their label kind and, per
// split, the committed sample count and payload bytes (sums over the
// split's segments).
#include <fmt/format.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "store/catalog.h"
#include "store/schema.h"
#include "store/progress.h"
#include "store/stats.h"
#include "util/escape.h"

namespace cqlstream::cli {
namespace {

// Tables of a dataset without a catalog row (an ingest refused after its
// DDL, an interrupted drop): invisible in the list, so said on stderr.
void PrintOrphans(const std::vector<std::string>& tables) {
  if (tables.empty()) return;
  std::set<std::string> names;
  std::string joined;
  for (const auto& t : tables) {
    joined += (joined.empty() ? "" : ", ") + PrintableText(t);
    names.insert(t.substr(2));
  }
  std::string drops;
  for (const auto& n : names) drops += (drops.empty() ? "" : "; ") + fmt::format("cqlstream drop {} --yes", PrintableText(n));
  fmt::print(stderr, "cqlstream: note: tables without a dataset entry (orphans): {}; remove with: {}\n", joined, drops);
}

}  // namespace

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
      if (!list.ok()) {
        s.Close();
        return ReportError(list.status());
      }
      std::vector<std::string> known;
      for (const auto& d : *list) known.push_back(d.name);
      auto orphans = store::OrphanTables(s, s.options().keyspace, known);
      s.Close();
      if (!orphans.ok()) return ReportError(orphans.status().WithContext("listing tables without a dataset"));
      PrintOrphans(*orphans);
      if (list->empty()) {
        fmt::print("no datasets in keyspace '{}'\n", PrintableText(s.options().keyspace));
        return 0;
      }
      fmt::print("{:<24} {:<10} {:>7}  {}\n", "dataset", "labels", "classes", "splits");
      for (const auto& d : *list) {
        if (d.layout_version != kLayoutVersion) {
          fmt::print("{:<24} (layout version {}: not readable by this cqlstream)\n", PrintableText(d.name),
                     d.layout_version);
          continue;
        }
        std::string splits;
        int open = 0;
        for (const auto& g : d.segments) open += g.state != "sealed";
        for (const auto& sp : d.splits()) {
          splits += fmt::format("{}{} {} ({})", splits.empty() ? "" : ", ", PrintableText(sp),
                                store::Thousands(d.Count(sp)),
                                store::HumanBytes(static_cast<double>(d.Bytes(sp))));
        }
        if (splits.empty()) splits = "(empty)";
        if (open > 0) splits += fmt::format("  [{} open segment{}]", open, open > 1 ? "s" : "");
        if (d.attached()) splits += "  [attached]";
        fmt::print("{:<24} {:<10} {:>7}  {}\n", PrintableText(d.name), LabelKindName(d.label_kind), d.class_names.size(), splits);
      }
      return 0;
    };
  });
}

}  // namespace cqlstream::cli
