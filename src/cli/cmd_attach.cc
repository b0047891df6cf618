// Copyright (c) cqlstream authors.
//
// `cqlstream attach --dataset NAME --table KS.TABLE --key-column C
// --data-column C [--label-column C --label-kind K] [--split S]
// [--metadata-table KS.T] [--refresh] [--scan-concurrency N]`: registers a
// dataset whose samples live in a table cqlstream did not write
// (store/attach.h). Prints the key snapshot's size and rate.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <string_view>

#include "cli/cli.h"
#include "store/attach.h"
#include "store/progress.h"
#include "util/escape.h"

namespace cqlstream::cli {
namespace {

struct AttachFlags {
  std::string dataset, table, metadata_table, key_column, data_column, label_column, label_kind, kind = "image";
  std::string split = "train";
  std::string replication = "simple:1";
  std::string description;
  bool refresh = false;
  int scan_concurrency = 8;
  int64_t segment_capacity = int64_t{1} << 30;
};

StatusOr<store::AttachSpec> MakeSpec(const AttachFlags& f, bool replication_given) {
  store::AttachSpec spec;
  spec.dataset = f.dataset;
  spec.split = f.split;
  spec.table = f.table;
  spec.metadata_table = f.metadata_table;
  spec.key_column = f.key_column;
  spec.data_column = f.data_column;
  spec.label_column = f.label_column;
  if (!f.label_kind.empty()) {
    auto k = ParseLabelKind(f.label_kind);
    if (!k.ok()) return k.status().WithContext("--label-kind");
    if (*k != LabelKind::kNone && f.label_column.empty())
      return Status::InvalidArgument(fmt::format("--label-kind {} needs --label-column", f.label_kind));
    spec.label_kind = *k;
  }
  auto kind = ParseSampleKind(f.kind);
  if (!kind.ok()) return kind.status().WithContext("--kind");
  spec.sample_kind = *kind;
  auto rep = store::Replication::Parse(f.replication);
  if (!rep.ok()) return rep.status().WithContext("--replication");
  spec.replication = *rep;
  spec.replication_given = replication_given;
  spec.refresh = f.refresh;
  spec.description = f.description;
  spec.scan.concurrency = f.scan_concurrency;
  spec.scan.segment_capacity = f.segment_capacity;
  return spec;
}

void PrintReport(const store::AttachReport& r, const store::AttachSpec& spec) {
  const auto& snap = r.snapshot;
  std::string segs;
  for (const auto& g : snap.segments) segs += fmt::format("{}{}", segs.empty() ? "" : ",", g.seg);
  fmt::print("{} split {} of '{}' to {}: {} keys in segment{} {} (generation {})\n",
             r.created ? "attached" : (spec.refresh ? "refreshed" : "added"), PrintableText(spec.split), spec.dataset,
             spec.table, store::Thousands(snap.keys), snap.segments.size() == 1 ? "" : "s",
             segs.empty() ? "-" : segs, r.table.generation);
  if (!r.removed_segments.empty()) {
    fmt::print("removed {} old segment row{} (their k_ rows stay for readers opened before this refresh)\n",
               r.removed_segments.size(), r.removed_segments.size() == 1 ? "" : "s");
  }
  if (r.deleted_key_rows > 0) {
    fmt::print("deleted {} k_ rows of the generation before the replaced one\n", store::Thousands(r.deleted_key_rows));
  }
  if (!r.retire_note.empty()) {
    fmt::print(stderr, "cqlstream: note: older k_ rows were not all deleted (never read; a later refresh or drop "
                       "removes them): {}\n", PrintableText(r.retire_note));
  }
  if (!snap.label_texts.empty()) fmt::print("{} distinct label texts (class names)\n", snap.label_texts.size());
  const double secs = std::max(snap.seconds, 1e-9);
  fmt::print("key scan: {} keys in {:.2f} s: {} keys/s\n", store::Thousands(snap.keys), snap.seconds,
             store::Thousands(static_cast<int64_t>(static_cast<double>(snap.keys) / secs + 0.5)));
  if (snap.keys == 0) fmt::print(stderr, "cqlstream: note: {} has no rows; the split is empty\n", spec.table);
  std::fflush(stdout);
}

int RunAttach(const ConnectionFlags& flags, const AttachFlags& f, bool replication_given) {
  constexpr std::string_view kInterrupted = "attach interrupted; nothing was registered (run it again)";
  constexpr std::string_view kInterruptedConnecting =
      "attach interrupted while connecting; nothing was registered (run it again)";
  auto spec = MakeSpec(f, replication_given);
  if (!spec.ok()) return ReportError(spec.status());
  spec->scan.stop = store::InstallInterruptHandler();
  auto conn = flags.Resolve(spec->scan.stop);
  if (!conn.ok()) return ReportErrorOrInterrupt(conn.status(), spec->scan.stop, kInterruptedConnecting);
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  store::ProgressLine line(stderr, tty, "attach " + spec->split);
  spec->scan.on_progress = [&](int64_t keys) { line.Update(keys, 0, 0, 0, "keys"); };
  auto session = ConnectionFlags::ConnectTo(*conn, {}, spec->scan.stop);
  if (!session.ok()) return ReportErrorOrInterrupt(session.status(), spec->scan.stop, kInterruptedConnecting);
  auto r = store::Attach(**session, conn->keyspace, *spec);
  line.Finish();
  (*session)->Close();
  if (!r.ok()) return ReportErrorOrInterrupt(r.status(), spec->scan.stop, kInterrupted);
  if (!r->keyspace_note.empty()) fmt::print(stderr, "cqlstream: note: {}\n", r->keyspace_note);
  PrintReport(*r, *spec);
  return 0;
}

}  // namespace

void RegisterAttach(CLI::App& app, Action* action) {
  auto* cmd = app.add_subcommand(
      "attach", "Register a dataset whose samples live in an existing table (one row per sample: key, blob, label)");
  auto flags = std::make_shared<ConnectionFlags>();
  auto f = std::make_shared<AttachFlags>();
  cmd->add_option("--dataset", f->dataset, "Dataset name ([a-z][a-z0-9_]{0,23})")->required();
  cmd->add_option("--table", f->table, "The table holding the samples of this split: KEYSPACE.TABLE")->required();
  cmd->add_option("--key-column", f->key_column, "The table's partition key (uuid, timeuuid, bigint, int, text, blob)")
      ->required();
  cmd->add_option("--data-column", f->data_column, "The blob column holding a sample's bytes")->required();
  cmd->add_option("--label-column", f->label_column, "The label column (int, list<int>, set<int>, blob or text)");
  cmd->add_option("--label-kind", f->label_kind,
                  "class, multilabel, target or none (default: int/text class, list/set multilabel, blob target)");
  cmd->add_option("--split", f->split, "The split this table holds (default train)");
  cmd->add_option("--metadata-table", f->metadata_table, "A metadata table keyed like --table (KEYSPACE.TABLE)");
  cmd->add_option("--kind", f->kind, "image (decodable images, the default) or blob (any bytes)");
  cmd->add_flag("--refresh", f->refresh,
                "Take a new snapshot of the keys of an attached split (of its own table; another table needs "
                "another dataset name)");
  cmd->add_option("--scan-concurrency", f->scan_concurrency, "Token ranges scanned at once (default 8)")
      ->check(CLI::Range(1, 256));
  auto* rep = cmd->add_option("--replication", f->replication,
                              "Replication of a new keyspace: simple:RF or nts:DC=RF,... (default simple:1)");
  cmd->add_option("--description", f->description, "Description of a new dataset");
  // For tests of snapshots spanning segments: hidden.
  cmd->add_option("--segment-capacity", f->segment_capacity)->group("")->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  flags->Add(cmd);
  cmd->callback([action, flags, f, rep] {
    const bool replication_given = rep->count() > 0;
    *action = [flags, f, replication_given]() -> int { return RunAttach(*flags, *f, replication_given); };
  });
}

}  // namespace cqlstream::cli
