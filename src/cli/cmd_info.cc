// Copyright (c) cqlstream authors.
//
// `cqlstream info NAME`: layout, label kind, chunk size, splits with counts,
// bytes and segments, the size distribution of each split (from the
// segments' size histograms) and the classes with per-class counts (a
// parallel token-range scan of the metadata table; --no-class-counts skips
// it). An attached dataset shows its table per split, its key, data and
// label columns and its snapshot generation.
#include <fmt/format.h>

#include <ctime>

#include "cli/cli.h"
#include "store/attached.h"
#include "store/catalog.h"
#include "store/progress.h"
#include "store/stats.h"
#include "util/escape.h"

namespace cqlstream::cli {
namespace {

std::string Time(int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

void PrintHeader(const DatasetInfo& d) {
  fmt::print("dataset      {}.{}\n", PrintableText(d.keyspace), PrintableText(d.name));
  fmt::print("layout       version {}\n", d.layout_version);
  fmt::print("created      {}\n", Time(d.created_ms));
  if (!d.description.empty()) fmt::print("description  {}\n", PrintableText(d.description));
  fmt::print("label kind   {}\n", LabelKindName(d.label_kind));
  fmt::print("sample kind  {}\n", SampleKindName(d.sample_kind));
  fmt::print("preprocess   {}\n", d.preprocess.empty() ? std::string("none") : PrintableText(d.preprocess));
  if (!d.attached()) {
    fmt::print("chunk size   {} bytes\n", d.chunk_size);
    fmt::print("checksum     {}\n", PrintableText(d.checksum));
    fmt::print("tables       {}, {}\n", PrintableText(d.data_table()), PrintableText(d.meta_table()));
    return;
  }
  auto a = store::AttachedTable::FromSource(d);
  if (!a.ok()) {
    fmt::print("attached     (unreadable source: {})\n", PrintableText(a.status().message()));
    return;
  }
  fmt::print("attached     generation {}, key snapshot {}\n", a->generation, store::KeyTableName(d.name));
  fmt::print("key column   {} ({})\n", PrintableText(a->key_column), PrintableText(a->key_type));
  fmt::print("data column  {}\n", PrintableText(a->data_column));
  fmt::print("label column {}\n", a->label_column.empty() ? std::string("-")
                                                          : fmt::format("{} ({})", PrintableText(a->label_column),
                                                                        PrintableText(a->label_type)));
  for (const auto& [split, table] : a->tables) {
    auto m = a->metadata_tables.find(split);
    fmt::print("table        {:<10} {}{}\n", PrintableText(split), PrintableText(table),
               m == a->metadata_tables.end() ? "" : fmt::format(" (metadata {})", PrintableText(m->second)));
  }
  fmt::print("checksums and chunking: native-only (attached rows are read as they are)\n");
}

// A byte count as info shows it: "-" for an attached dataset, whose sizes
// are not known (Cassandra 5.0 has no blob length function for the attach
// scan to run on the server; docs/schema.md "Metadata rows and paths").
std::string Bytes(const DatasetInfo& d, double bytes) {
  return d.attached() ? std::string("-") : store::HumanBytes(bytes);
}

void PrintSplits(const DatasetInfo& d) {
  fmt::print("\nsplits\n");
  fmt::print("  {:<12} {:>12} {:>12} {:>9}   {}\n", "split", "samples", "bytes", "segments", "sizes");
  for (const auto& sp : d.splits()) {
    std::vector<std::vector<int64_t>> hists;
    int segs = 0, open = 0;
    for (const auto& g : d.segments) {
      if (g.split != sp) continue;
      hists.push_back(g.size_hist);
      ++segs;
      open += g.state != "sealed";
    }
    const auto sum = store::SummarizeSizes(store::MergeHistograms(hists), d.MaxSize(sp));
    const std::string sizes =
        sum.count == 0 ? std::string(d.attached() ? "- (not recorded for attached tables)" : "-")
                       : fmt::format("min >= {}, median ~ {}, p99 ~ {}, max {}",
                                     store::HumanBytes(static_cast<double>(sum.min_at_least)),
                                     store::HumanBytes(static_cast<double>(sum.median)),
                                     store::HumanBytes(static_cast<double>(sum.p99)),
                                     store::HumanBytes(static_cast<double>(sum.max)));
    fmt::print("  {:<12} {:>12} {:>12} {:>9}   {}\n", PrintableText(sp), store::Thousands(d.Count(sp)),
               Bytes(d, static_cast<double>(d.Bytes(sp))),
               open ? fmt::format("{} ({} open)", segs, open) : std::to_string(segs), sizes);
  }
  fmt::print("\nsegments\n");
  for (const auto& g : d.segments) {
    fmt::print("  {:>4}  {:<10} {:>10} {:>10}  {:<6}  {}\n", g.seg, PrintableText(g.split), store::Thousands(g.count),
               Bytes(d, static_cast<double>(g.bytes)), PrintableText(g.state), PrintableText(g.source));
  }
}

// `counts` empty: no per-split columns.
void PrintClasses(const DatasetInfo& d, const std::map<std::string, std::vector<int64_t>>* counts) {
  const auto splits = d.splits();
  fmt::print("\nclasses ({})\n", d.class_names.size());
  std::string head = fmt::format("  {:>5}  {:<24}", "label", "class");
  if (counts != nullptr) {
    for (const auto& sp : splits) head += fmt::format(" {:>10}", PrintableText(sp));
  }
  fmt::print("{}\n", head);
  for (size_t i = 0; i < d.class_names.size(); ++i) {
    std::string row = fmt::format("  {:>5}  {:<24}", i, PrintableText(d.class_names[i]));
    if (counts != nullptr) {
      for (const auto& sp : splits) {
        auto it = counts->find(sp);
        const int64_t n = it != counts->end() && i < it->second.size() ? it->second[i] : 0;
        row += fmt::format(" {:>10}", store::Thousands(n));
      }
    }
    fmt::print("{}\n", row);
  }
}

int RunInfo(const ConnectionFlags& flags, const std::string& name, bool no_counts, int ranges) {
  net::SessionOptions so;
  so.watch_events = false;
  auto session = flags.Connect(so);
  if (!session.ok()) return ReportError(session.status());
  auto& s = **session;
  auto d = store::LoadDataset(s, s.options().keyspace, name);
  if (!d.ok()) {
    s.Close();
    return ReportError(d.status());
  }
  PrintHeader(*d);
  PrintSplits(*d);
  if (d->class_names.empty()) {
    s.Close();
    return 0;
  }
  // Per-class counts come from the metadata table of a native dataset; an
  // attached dataset has none (its labels live in the foreign table).
  const bool counted = !no_counts && !d->attached();
  std::map<std::string, std::vector<int64_t>> counts;
  if (counted) {
    auto c = store::ClassCounts(s, *d, ranges, 8);
    if (!c.ok()) {
      s.Close();
      return ReportError(c.status());
    }
    counts = std::move(c).value();
  }
  s.Close();
  PrintClasses(*d, counted ? &counts : nullptr);
  return 0;
}

}  // namespace

void RegisterInfo(CLI::App& app, Action* action) {
  auto* cmd = app.add_subcommand("info", "Show a dataset: splits, sizes, classes and per-class counts");
  auto flags = std::make_shared<ConnectionFlags>();
  auto name = std::make_shared<std::string>();
  auto no_counts = std::make_shared<bool>(false);
  auto ranges = std::make_shared<int>(64);
  cmd->add_option("name", *name, "Dataset")->required();
  cmd->add_flag("--no-class-counts", *no_counts, "Skip the metadata scan for per-class counts");
  cmd->add_option("--scan-ranges", *ranges, "Token ranges of the class-count scan (default 64)")
      ->check(CLI::Range(1, 100000));
  flags->Add(cmd);
  cmd->callback([action, flags, name, no_counts, ranges] {
    *action = [flags, name, no_counts, ranges]() -> int { return RunInfo(*flags, *name, *no_counts, *ranges); };
  });
}

}  // namespace cqlstream::cli
