// Copyright (c) cqlstream authors.
//
// cqlstream: load image datasets into Cassandra/ScyllaDB and stream them out.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/cli.h"
#include "util/main_guard.h"

namespace {

int Main(int argc, char** argv) {
  CLI::App app{"cqlstream: image datasets in Cassandra / ScyllaDB, streamed to training at full speed"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "cqlstream 0.1.0");
  cqlstream::cli::Action action;
  cqlstream::cli::RegisterPing(app, &action);
  cqlstream::cli::RegisterIngest(app, &action);
  cqlstream::cli::RegisterAttach(app, &action);
  cqlstream::cli::RegisterLs(app, &action);
  cqlstream::cli::RegisterInfo(app, &action);
  cqlstream::cli::RegisterSelect(app, &action);
  cqlstream::cli::RegisterSplit(app, &action);
  cqlstream::cli::RegisterVerify(app, &action);
  cqlstream::cli::RegisterPack(app, &action);
  cqlstream::cli::RegisterExport(app, &action);
  cqlstream::cli::RegisterDrop(app, &action);
  cqlstream::cli::RegisterBench(app, &action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every bad argument exits 2, as the
    // commands' own argument checks do (ReportError), not with CLI11's
    // per-kind codes (105-114).
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (!action) return 0;
  return action();
}

}  // namespace

int main(int argc, char** argv) {
  return cqlstream::GuardedMain("cqlstream", [&] { return Main(argc, argv); });
}
