// Copyright (c) cqlstream authors.
//
// `cqlstream info NAME`: layout, label kind, chunk size, splits with counts,
// bytes and segments, the size distribution of each split (from the
// segments' size histograms) and the classes with per-class counts (a
// parallel token-range scan of the metadata table; --no-class-counts skips
// it).
#include <fmt/format.h>

#include <ctime>

#include "cli/cli.h"
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
    *action = [flags, name, no_counts, ranges]() -> int {
      net::SessionOptions so;
      so.watch_events = false;
      auto session = flags->Connect(so);
      if (!session.ok()) return ReportError(session.status());
      auto& s = **session;
      auto d = store::LoadDataset(s, s.options().keyspace, *name);
      if (!d.ok()) {
        s.Close();
        return ReportError(d.status());
      }
      fmt::print("dataset      {}.{}\n", PrintableText(d->keyspace), PrintableText(d->name));
      fmt::print("layout       version {}\n", d->layout_version);
      fmt::print("created      {}\n", Time(d->created_ms));
      if (!d->description.empty()) fmt::print("description  {}\n", PrintableText(d->description));
      fmt::print("label kind   {}\n", LabelKindName(d->label_kind));
      fmt::print("sample kind  {}\n", SampleKindName(d->sample_kind));
      fmt::print("chunk size   {} bytes\n", d->chunk_size);
      fmt::print("checksum     {}\n", PrintableText(d->checksum));
      fmt::print("tables       {}, {}\n", PrintableText(d->data_table()), PrintableText(d->meta_table()));
      fmt::print("\nsplits\n");
      fmt::print("  {:<12} {:>12} {:>12} {:>9}   {}\n", "split", "samples", "bytes", "segments", "sizes");
      for (const auto& sp : d->splits()) {
        std::vector<std::vector<int64_t>> hists;
        int segs = 0, open = 0;
        for (const auto& g : d->segments) {
          if (g.split != sp) continue;
          hists.push_back(g.size_hist);
          ++segs;
          open += g.state != "sealed";
        }
        const auto sum = store::SummarizeSizes(store::MergeHistograms(hists), d->MaxSize(sp));
        const std::string sizes =
            sum.count == 0 ? std::string("-")
                           : fmt::format("min >= {}, median ~ {}, p99 ~ {}, max {}",
                                         store::HumanBytes(static_cast<double>(sum.min_at_least)),
                                         store::HumanBytes(static_cast<double>(sum.median)),
                                         store::HumanBytes(static_cast<double>(sum.p99)),
                                         store::HumanBytes(static_cast<double>(sum.max)));
        fmt::print("  {:<12} {:>12} {:>12} {:>9}   {}\n", PrintableText(sp), store::Thousands(d->Count(sp)),
                   store::HumanBytes(static_cast<double>(d->Bytes(sp))),
                   open ? fmt::format("{} ({} open)", segs, open) : std::to_string(segs), sizes);
      }
      fmt::print("\nsegments\n");
      for (const auto& g : d->segments) {
        fmt::print("  {:>4}  {:<10} {:>10} {:>10}  {:<6}  {}\n", g.seg, PrintableText(g.split), store::Thousands(g.count),
                   store::HumanBytes(static_cast<double>(g.bytes)), PrintableText(g.state), PrintableText(g.source));
      }
      if (d->class_names.empty()) {
        s.Close();
        return 0;
      }
      std::map<std::string, std::vector<int64_t>> counts;
      if (!*no_counts) {
        auto c = store::ClassCounts(s, *d, *ranges, 8);
        if (!c.ok()) {
          s.Close();
          return ReportError(c.status());
        }
        counts = std::move(c).value();
      }
      s.Close();
      const auto splits = d->splits();
      fmt::print("\nclasses ({})\n", d->class_names.size());
      std::string head = fmt::format("  {:>5}  {:<24}", "label", "class");
      if (!*no_counts) {
        for (const auto& sp : splits) head += fmt::format(" {:>10}", PrintableText(sp));
      }
      fmt::print("{}\n", head);
      for (size_t i = 0; i < d->class_names.size(); ++i) {
        std::string row = fmt::format("  {:>5}  {:<24}", i, PrintableText(d->class_names[i]));
        if (!*no_counts) {
          for (const auto& sp : splits) {
            const auto& v = counts[sp];
            row += fmt::format(" {:>10}", store::Thousands(i < v.size() ? v[i] : 0));
          }
        }
        fmt::print("{}\n", row);
      }
      return 0;
    };
  });
}

}  // namespace cqlstream::cli
