// Copyright (c) cqlstream authors.
//
// `cqlstream split NAME --from SPLIT (--into a=F,b=G,... | --folds K --fold I)
// [--stratify] [--balance] [--seed N] [--label L ...] [--extra k=v ...]
// [--out-dir D] [--output part=FILE ...]`: writes one selection file per
// part (docs/schema.md), disjoint, deterministic from the seed (store/split.h
// says how parts, folds and balancing are chosen). Folds write "train" (all
// folds but I) and "val" (fold I). A part's file is D/<part>.sel unless
// --output names it.
#include <fmt/format.h>

#include <filesystem>
#include <map>

#include "cli/cli.h"
#include "store/catalog.h"
#include "store/progress.h"
#include "store/select.h"
#include "store/split.h"

namespace cqlstream::cli {
namespace {

struct SplitArgs {
  std::string name, into, out_dir = ".";
  std::vector<std::string> outputs, extra;
  store::SelectOptions filter;
  int folds = 0, fold = -1;
  bool stratify = false, balance = false;
  uint64_t seed = 0;
};

// The part names and their keys, from the scanned samples.
StatusOr<std::vector<std::pair<std::string, std::vector<SampleKey>>>> MakeParts(
    const SplitArgs& a, std::vector<store::LabeledKey> keys) {
  if (a.balance) keys = store::BalanceClasses(keys, a.seed);
  std::vector<std::pair<std::string, std::vector<SampleKey>>> out;
  if (a.folds > 0) {
    CQLS_ASSIGN_OR_RETURN(auto f, store::FoldKeys(keys, a.folds, a.fold, a.stratify, a.seed));
    out.emplace_back("train", std::move(f.train));
    out.emplace_back("val", std::move(f.val));
    return out;
  }
  CQLS_ASSIGN_OR_RETURN(auto parts, store::ParseSplitParts(a.into));
  auto lists = store::PartitionKeys(keys, parts, a.stratify, a.seed);
  for (size_t i = 0; i < parts.size(); ++i) out.emplace_back(parts[i].name, std::move(lists[i]));
  return out;
}

// --output part=FILE values by part; every named part must exist.
StatusOr<std::map<std::string, std::string>> OutputPaths(const SplitArgs& a,
                                                         const std::vector<std::string>& part_names) {
  std::map<std::string, std::string> paths;
  for (const auto& p : part_names) paths[p] = (std::filesystem::path(a.out_dir) / (p + ".sel")).string();
  for (const auto& o : a.outputs) {
    const size_t eq = o.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == o.size()) {
      return Status::InvalidArgument(fmt::format("--output '{}': use part=FILE", o));
    }
    const std::string part = o.substr(0, eq);
    if (!paths.count(part)) return Status::InvalidArgument(fmt::format("--output '{}': there is no part '{}'", o, part));
    paths[part] = o.substr(eq + 1);
  }
  return paths;
}

int RunSplit(const ConnectionFlags& flags, SplitArgs a) {
  if ((a.folds > 0) == !a.into.empty()) return ReportError(Status::InvalidArgument("give either --into or --folds"));
  if (a.folds > 0 && a.fold < 0) return ReportError(Status::InvalidArgument("--folds needs --fold I (0-based)"));
  if (a.folds == 0 && a.fold >= 0) return ReportError(Status::InvalidArgument("--fold needs --folds K"));
  if (!a.into.empty()) {
    if (auto p = store::ParseSplitParts(a.into); !p.ok()) return ReportError(p.status());
  }
  for (const auto& e : a.extra) {
    auto kv = store::ParseExtraFilter(e);
    if (!kv.ok()) return ReportError(kv.status());
    a.filter.extra.push_back(*kv);
  }
  net::SessionOptions so;
  so.watch_events = false;
  auto session = flags.Connect(so);
  if (!session.ok()) return ReportError(session.status());
  auto& s = **session;
  auto d = store::LoadDataset(s, s.options().keyspace, a.name);
  if (!d.ok()) return ReportError(d.status());
  if ((a.stratify || a.balance) && d->label_kind != LabelKind::kClass && d->label_kind != LabelKind::kMultiLabel) {
    return ReportError(Status::InvalidArgument(fmt::format("--stratify/--balance: dataset '{}' has label kind '{}' (no classes)",
                                                           d->name, LabelKindName(d->label_kind))));
  }
  auto keys = store::ScanMatching(s, *d, a.filter);
  s.Close();
  if (!keys.ok()) return ReportError(keys.status());
  const size_t scanned = keys->size();
  auto parts = MakeParts(a, std::move(*keys));
  if (!parts.ok()) return ReportError(parts.status());
  std::vector<std::string> names;
  for (const auto& p : *parts) names.push_back(p.first);
  auto paths = OutputPaths(a, names);
  if (!paths.ok()) return ReportError(paths.status());
  std::string how = a.folds > 0 ? fmt::format("folds={} fold={}", a.folds, a.fold) : "into=" + a.into;
  if (a.stratify) how += " stratify";
  if (a.balance) how += " balance";
  for (const auto& l : a.filter.labels) how += " label=" + l;
  for (const auto& [k, v] : a.filter.extra) how += " extra=" + k + "=" + v;
  for (auto& [part, keys_of_part] : *parts) {
    Selection sel = store::NewSelection(*d, a.filter.split);
    sel.query = fmt::format("split from={} {} seed={} part={}", a.filter.split, how, a.seed, part);
    sel.keys = std::move(keys_of_part);
    const std::string& path = paths->at(part);
    if (Status st = sel.Save(path); !st.ok()) return ReportError(st);
    fmt::print("{}: {} of {} samples of {}/{} -> {}\n", part, store::Thousands(static_cast<int64_t>(sel.keys.size())),
               store::Thousands(static_cast<int64_t>(scanned)), a.name, a.filter.split, path);
  }
  return 0;
}

}  // namespace

void RegisterSplit(CLI::App& app, Action* action) {
  auto* cmd = app.add_subcommand("split", "Write disjoint selection files: parts by fraction, or cross-validation folds");
  auto flags = std::make_shared<ConnectionFlags>();
  auto a = std::make_shared<SplitArgs>();
  cmd->add_option("name", a->name, "Dataset")->required();
  cmd->add_option("--from", a->filter.split, "Split to divide")->required();
  cmd->add_option("--into", a->into, "Parts and fractions, e.g. train=0.8,val=0.2 (sum <= 1)");
  cmd->add_option("--folds", a->folds, "Cross-validation: number of folds K")->check(CLI::Range(2, 1000000));
  cmd->add_option("--fold", a->fold, "Cross-validation: the fold I (0..K-1) written as 'val'; 'train' is the rest")
      ->check(CLI::Range(0, 999999));
  cmd->add_flag("--stratify", a->stratify, "Split every class in the same proportions");
  cmd->add_flag("--balance", a->balance, "Down-sample every class to the smallest one first");
  cmd->add_option("--seed", a->seed, "Seed (default 0): the same seed gives the same parts");
  cmd->add_option("--label", a->filter.labels, "Only samples with this class (name or index); repeatable");
  cmd->add_option("--extra", a->extra, "Only samples whose extra field k equals v (k=v); repeatable");
  cmd->add_option("--out-dir", a->out_dir, "Folder of the files <part>.sel (default .)");
  cmd->add_option("-o,--output", a->outputs, "part=FILE: where one part goes; repeatable");
  cmd->add_option("--concurrency", a->filter.concurrency, "Metadata blocks read at once (default 16)")
      ->check(CLI::Range(1, 1024));
  flags->Add(cmd);
  cmd->callback([action, flags, a] { *action = [flags, a]() -> int { return RunSplit(*flags, *a); }; });
}

}  // namespace cqlstream::cli
