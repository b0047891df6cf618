// Copyright (c) cqlstream authors.
//
// `cqlstream drop NAME [--yes]`: removes a dataset: its catalog row, its
// segments and its tables. Without --yes it asks on a terminal (type the
// name) and refuses elsewhere.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "cli/cli.h"
#include "store/schema.h"

namespace cqlstream::cli {

void RegisterDrop(CLI::App& app, Action* action) {
  auto* cmd = app.add_subcommand("drop", "Remove a dataset (its tables, segments and catalog entry)");
  auto flags = std::make_shared<ConnectionFlags>();
  auto name = std::make_shared<std::string>();
  auto yes = std::make_shared<bool>(false);
  cmd->add_option("name", *name, "Dataset to remove")->required();
  cmd->add_flag("--yes,-y", *yes, "Do not ask for confirmation");
  flags->Add(cmd);
  cmd->callback([action, flags, name, yes] {
    *action = [flags, name, yes]() -> int {
      Status valid = ValidateDatasetName(*name);
      if (!valid.ok()) return ReportError(valid);
      if (!*yes) {
        if (!::isatty(STDIN_FILENO)) {
          return ReportError(Status::InvalidArgument(
              fmt::format("refusing to drop '{}' without --yes (stdin is not a terminal)", *name)));
        }
        std::fprintf(stderr, "This removes dataset '%s' and all its samples. Type its name to confirm: ", name->c_str());
        std::string answer;
        std::getline(std::cin, answer);
        if (answer != *name) {
          std::fprintf(stderr, "cqlstream: not confirmed; nothing was removed\n");
          return 1;
        }
      }
      net::SessionOptions so;
      so.watch_events = false;
      auto session = flags->Connect(so);
      if (!session.ok()) return ReportError(session.status());
      auto r = store::DropDataset(**session, (*session)->options().keyspace, *name);
      (*session)->Close();
      if (!r.ok()) return ReportError(r.status());
      std::string tables;
      for (const auto& t : r->tables) tables += (tables.empty() ? "" : ", ") + t;
      fmt::print("dropped dataset '{}': catalog entry {}, {}{} segment{}, tables: {}\n", *name,
                 r->catalog_row ? "removed" : "absent", r->segments_at_least ? "at least " : "", r->segments,
                 r->segments == 1 ? "" : "s", tables.empty() ? "none" : tables);
      return 0;
    };
  });
}

}  // namespace cqlstream::cli
