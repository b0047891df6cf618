// Copyright (c) cqlstream authors.
//
// The run of an ingest, in named phases (Ingest() at the end): list the
// source, read the dataset as it exists, settle labels and the class
// mapping, plan each split (store/split_plan.h), validate under --strict,
// create what is missing, write split after split (store/ingest_segment.h).
#include "store/ingest.h"

#include <fmt/format.h>
#include <malloc.h>

#include <algorithm>
#include <bit>
#include <functional>
#include <map>
#include <mutex>
#include <set>

#include "store/catalog.h"
#include "store/scan.h"
#include "store/ingest_segment.h"
#include "store/segments_table.h"
#include "store/split_plan.h"
#include "util/escape.h"
#include "util/measure.h"
#include "util/mutex.h"

namespace cqlstream::store {
namespace {

using Clock = std::chrono::steady_clock;

// Calls `fn(seg, row)` for every committed metadata row of `segs` (a scan
// of their metadata; `fn` runs under one lock).
Status ForEachCommittedRow(net::Session& s, const DatasetInfo& d, const std::vector<SegRow>& segs, int concurrency,
                           const std::function<void(int32_t seg, MetaRow& row)>& fn) {
  std::vector<SegmentInfo> infos;
  for (const auto& g : segs) {
    SegmentInfo i;
    i.seg = g.seg;
    i.split = g.split;
    i.count = g.c.count;
    infos.push_back(i);
  }
  Mutex mu;
  return ScanMeta(s, d, infos, concurrency, [&](const BlockRef& b, std::vector<MetaRow>& rows) {
    MutexLock l(&mu);
    for (auto& r : rows) fn(b.seg, r);
    return Status::OK();
  });
}

// Paths committed by `segs`.
StatusOr<std::set<std::string>> CommittedPaths(net::Session& s, const DatasetInfo& d, const std::vector<SegRow>& segs,
                                               int concurrency) {
  std::set<std::string> out;
  Status st = ForEachCommittedRow(s, d, segs, concurrency, [&](int32_t, MetaRow& r) { out.insert(std::move(r.path)); });
  if (!st.ok()) return st;
  return out;
}

// Refuses to write `items` into `split` when samples committed there by
// other sources have the same relative path and size: almost always the same
// files ingested again from another location (a copy, another mount point),
// which would silently double those samples in every epoch. Only new and
// appended segments are checked; a resume continues what was allowed.
Status CheckForeignPaths(net::Session& s, const IngestOptions& o, const DatasetInfo& d, const std::string& split,
                         const std::string& source_id, const std::vector<SegRow>& segrows,
                         const std::vector<const SourceItem*>& items, int concurrency) {
  if (o.allow_same_paths || items.empty()) return Status::OK();
  std::vector<SegRow> foreign;
  std::map<int32_t, std::string> origin;
  for (const auto& g : segrows) {
    if (g.split != split || g.source_id == source_id || g.c.count <= 0) continue;
    foreign.push_back(g);
    origin[g.seg] = g.source;
  }
  if (foreign.empty()) return Status::OK();
  std::map<std::string, const SourceItem*> wanted;
  for (const SourceItem* it : items) wanted.emplace(it->path, it);
  std::map<std::string, int32_t> hits;  // path -> a foreign segment holding it (sorted, each path once)
  Status st = ForEachCommittedRow(s, d, foreign, concurrency, [&](int32_t seg, MetaRow& r) {
    auto it = wanted.find(r.path);
    if (it != wanted.end() && static_cast<int64_t>(it->second->image.size) == r.image_size) hits.emplace(r.path, seg);
  });
  if (!st.ok()) return st;
  if (hits.empty()) return Status::OK();
  std::string examples;
  int shown = 0;
  for (auto h = hits.begin(); h != hits.end() && shown < 3; ++h, ++shown) {
    examples += fmt::format("{}{} (segment {})", shown ? ", " : "", h->first, h->second);
  }
  const std::string& from = origin[hits.begin()->second];
  return Status::AlreadyExists(fmt::format(
      "{} of the {} items to write into split '{}' of dataset '{}' have the same relative path and size as samples "
      "that another source already committed there (e.g. {}; ingested from {}): this looks like the same data "
      "from another location, which would be stored twice. Nothing was written. If the two sources really hold "
      "different images, pass --allow-same-paths",
      hits.size(), items.size(), split, o.dataset, examples, from.empty() ? "an unnamed source" : from));
}

// One Ingest call: its inputs, what each phase found, and the report.
class IngestRun {
 public:
  IngestRun(net::Session& s, const IngestOptions& o, IngestReport* report) : s_(s), o_(o), report_(report) {}

  Status ListPhase();
  Status ReadExisting();
  Status ResolveSpec();
  Status PlanSplits();
  Status ValidateStrict();
  Status EnsureSchema();
  Status WriteSplits();

 private:
  void Note(const std::string& n) {
    report_->notes.push_back(n);
    if (o_.on_note) o_.on_note(n);
  }
  StatusOr<SplitPlan> PlanSplit(const std::string& split);
  SplitResult StartResult(const SplitPlan& plan) const;

  net::Session& s_;
  const IngestOptions& o_;
  IngestReport* report_;
  SourceListing listing_;
  std::optional<DatasetInfo> existing_;
  std::vector<SegRow> segrows_;
  DatasetSpec spec_;
  std::vector<std::string> mapping_;
  std::vector<SplitPlan> plans_;
  DatasetInfo dataset_;
  IngestStatements statements_;
  IngestProgressState progress_;
  ReadOptions read_;  // the kind's checks and the preprocessing
};

// 1. The source, completely listed before anything is written.
Status IngestRun::ListPhase() {
  CQLS_ASSIGN_OR_RETURN(read_, MakeReadOptions(o_.kind, o_.preprocess));
  CQLS_ASSIGN_OR_RETURN(listing_, ListSource(o_.source));
  for (const auto& n : listing_.notes) Note(n);
  if (listing_.items.empty()) {
    return Status::InvalidArgument(fmt::format("source '{}' lists no items", listing_.description));
  }
  return Status::OK();
}

// 2. The dataset as it exists (read only).
Status IngestRun::ReadExisting() {
  auto d = LoadDataset(s_, o_.keyspace, o_.dataset);
  if (d.ok()) {
    existing_ = std::move(d).value();
  } else if (!d.status().IsNotFound()) {
    return d.status();
  }
  CQLS_ASSIGN_OR_RETURN(segrows_, ReadSegRows(s_, o_.keyspace, o_.dataset));
  if (!existing_ && !segrows_.empty()) {
    return Status::AlreadyExists(fmt::format(
        "dataset '{}' has no catalog entry but {} segment rows remain (an interrupted drop?); run "
        "'cqlstream drop {}' first",
        o_.dataset, segrows_.size(), o_.dataset));
  }
  return Status::OK();
}

// 3. Labels and the class mapping.
Status IngestRun::ResolveSpec() {
  spec_.name = o_.dataset;
  spec_.label_kind = listing_.label_kind;
  spec_.chunk_size = o_.chunk_size.value_or(kDefaultChunkSize);
  spec_.chunk_size_given = o_.chunk_size.has_value();
  spec_.description = o_.description;
  spec_.sample_kind = o_.kind;
  spec_.preprocess = o_.preprocess;
  if (spec_.label_kind == LabelKind::kClass || spec_.label_kind == LabelKind::kMultiLabel) {
    // The mapping covers the whole source, every split included.
    const std::vector<std::string> listed = UsedLabelTexts(listing_);
    std::set<std::string> all(listed.begin(), listed.end());
    all.insert(listing_.folder_classes.begin(), listing_.folder_classes.end());
    all.insert(listing_.all_label_texts.begin(), listing_.all_label_texts.end());
    const std::vector<std::string> used(all.begin(), all.end());
    if (existing_) {
      spec_.class_names = used;  // checked against the stored mapping
      mapping_ = existing_->class_names;
    } else {
      mapping_ = listing_.kind == SourceKind::kFolder ? used : BuildClassMapping(used);
      spec_.class_names = mapping_;
    }
  }
  if (existing_) CQLS_RETURN_IF_ERROR(CheckCompatible(*existing_, spec_));
  CQLS_RETURN_IF_ERROR(ResolveLabels(spec_.label_kind, mapping_, &listing_));
  // Sizes the server would refuse, before any DDL (no orphan tables).
  CQLS_RETURN_IF_ERROR(CheckSpecSizes(spec_));
  for (const auto& it : listing_.items) {
    if (it.labels.size() > kMaxLabelsPerSample) {
      return Status::InvalidArgument(fmt::format("'{}' has {} labels (at most {} per sample): nothing was written",
                                                 it.path, it.labels.size(), kMaxLabelsPerSample));
    }
  }
  report_->label_kind = spec_.label_kind;
  report_->class_names = mapping_;
  return Status::OK();
}

// One split: its shard's listing, the decision, the paths the source's other
// segments committed left out, and the check against other sources.
StatusOr<SplitPlan> IngestRun::PlanSplit(const std::string& split) {
  const int scan_concurrency = std::max(4, std::min(o_.concurrency, 32));
  const auto positions = SplitPositions(listing_, split);
  std::vector<const SourceItem*> shard;
  for (size_t p : ShardPositions(positions.size(), o_.shard_index, o_.shard_count)) {
    shard.push_back(&listing_.items[positions[p]]);
  }
  std::string source_id = SourceId(o_.dataset, split, listing_.canonical, o_.shard_index, o_.shard_count);
  std::string fingerprint = Fingerprint(shard);
  const SplitDecision decision = DecideSplit(segrows_, split, source_id, fingerprint);
  std::vector<const SourceItem*> items;
  if (decision.action != SplitAction::kComplete) {
    std::set<std::string> present;
    if (!decision.exclude.empty()) {
      CQLS_ASSIGN_OR_RETURN(present, CommittedPaths(s_, *existing_, decision.exclude, scan_concurrency));
    }
    for (const SourceItem* it : shard) {
      if (!present.count(it->path)) items.push_back(it);
    }
  }
  CQLS_ASSIGN_OR_RETURN(SplitPlan plan, SettleSplit(decision, split, std::move(source_id), std::move(fingerprint),
                                                    std::move(items), o_.dataset));
  if (decision.check_foreign && existing_) {
    CQLS_RETURN_IF_ERROR(CheckForeignPaths(s_, o_, *existing_, split, plan.source_id, segrows_, plan.items,
                                           scan_concurrency));
  }
  return plan;
}

// 4. One plan per split.
Status IngestRun::PlanSplits() {
  for (const auto& split : ListingSplits(listing_)) {
    CQLS_ASSIGN_OR_RETURN(SplitPlan plan, PlanSplit(split));
    plans_.push_back(std::move(plan));
  }
  for (const auto& p : plans_) {
    if (!p.writes()) continue;
    progress_.p.items_total += static_cast<int64_t>(p.remaining());
    progress_.p.bytes_total += p.remaining_bytes();
  }
  return Status::OK();
}

// 5. --strict: validate everything that remains before writing anything.
Status IngestRun::ValidateStrict() {
  if (!o_.strict) return Status::OK();
  std::vector<std::pair<size_t, size_t>> todo;  // (plan, position)
  for (size_t i = 0; i < plans_.size(); ++i) {
    if (!plans_[i].writes()) continue;
    for (size_t p = plans_[i].items.size() - plans_[i].remaining(); p < plans_[i].items.size(); ++p) {
      todo.emplace_back(i, p);
    }
  }
  std::vector<std::string> reasons(todo.size());
  CQLS_RETURN_IF_ERROR(ParallelFor(
      todo.size(), o_.readers,
      [&](size_t k) {
        Payload pl;
        reasons[k] = ReadItem(*plans_[todo[k].first].items[todo[k].second], read_, &pl);
        return Status::OK();
      },
      o_.stop));
  for (size_t k = 0; k < todo.size(); ++k) {
    if (reasons[k].empty()) continue;
    const SplitPlan& p = plans_[todo[k].first];
    report_->skips.push_back(IngestSkip{p.split, p.items[todo[k].second]->path, reasons[k]});
  }
  if (report_->skips.empty()) return Status::OK();
  return Status::Corruption(fmt::format("--strict: {} item{} would be skipped; nothing was written",
                                        report_->skips.size(), report_->skips.size() > 1 ? "s" : ""));
}

// 6. Schema: keyspace, catalog, dataset (only when something is written),
// and the writers' statements.
Status IngestRun::EnsureSchema() {
  const bool any_writes = std::any_of(plans_.begin(), plans_.end(), [](const auto& p) { return p.writes(); });
  if (any_writes || !existing_) {
    std::string ks_note;
    CQLS_RETURN_IF_ERROR(EnsureKeyspace(s_, o_.keyspace, o_.replication, o_.replication_given, &ks_note));
    if (!ks_note.empty()) Note(ks_note);
    CQLS_RETURN_IF_ERROR(EnsureCatalog(s_, o_.keyspace));
    bool created = false;
    CQLS_ASSIGN_OR_RETURN(dataset_, CreateOrOpenDataset(s_, o_.keyspace, spec_, &created));
    report_->created_dataset = created;
    if (created) {
      Note(fmt::format("created dataset '{}' (label kind {}, {} classes, chunk size {})", o_.dataset,
                       LabelKindName(spec_.label_kind), mapping_.size(), dataset_.chunk_size));
    }
  } else {
    dataset_ = *existing_;
  }
  report_->chunk_size = dataset_.chunk_size;
  if (!any_writes) return Status::OK();
  CQLS_ASSIGN_OR_RETURN(statements_, PrepareIngestStatements(s_, dataset_));
  return Status::OK();
}

SplitResult IngestRun::StartResult(const SplitPlan& plan) const {
  SplitResult r;
  r.split = plan.split;
  r.action = SplitActionName(plan.action);
  r.listed = static_cast<int64_t>(plan.items.size());
  r.start_count = r.count = plan.start.count;
  r.seg = plan.seg;
  r.sealed = plan.action == SplitAction::kComplete;
  return r;
}

// 7. Write, split after split. A split after a failed or interrupted one is
// "not started".
Status IngestRun::WriteSplits() {
  const std::string source_desc =
      o_.shard_count > 1 ? fmt::format("{} (shard {}/{})", listing_.description, o_.shard_index, o_.shard_count)
                         : listing_.description;
  Status result;
  for (auto& plan : plans_) {
    SplitResult r = StartResult(plan);
    bool write = plan.writes();
    if (write && !result.ok()) {
      write = false;
      r.action = "not started";
    } else if (write && o_.stop != nullptr && o_.stop->load()) {
      result = Status::Cancelled("interrupted before split '" + plan.split + "'");
      write = false;
      r.action = "not started";
    }
    if (!write) {
      report_->splits.push_back(r);
      continue;
    }
    for (const auto& g : plan.supersede) {
      CQLS_RETURN_IF_ERROR(SupersedeSegment(s_, o_.keyspace, o_.dataset, g, o_.consistency));
    }
    if (plan.action != SplitAction::kResume) {
      CQLS_ASSIGN_OR_RETURN(ClaimedSegment claimed,
                            ClaimSegment(s_, o_.keyspace, o_.dataset,
                                         NewSegment{plan.split, plan.source_id, source_desc, plan.fingerprint}));
      plan.seg = claimed.seg;
      plan.start = Committed();
      plan.writetime = claimed.writetime;
    }
    r.seg = plan.seg;
    Status st = WriteSegment(s_, o_, read_, dataset_, statements_, plan, report_, &progress_, &r);
    report_->written += r.written;
    report_->bytes += r.bytes;
    report_->splits.push_back(r);
    if (!st.ok()) result = st;
  }
  return result;
}

Status CheckIngestOptions(const IngestOptions& o) {
  CQLS_RETURN_IF_ERROR(ValidateGeneratedKeyspace(o.keyspace));
  CQLS_RETURN_IF_ERROR(ValidateDatasetName(o.dataset));
  if (o.concurrency < 1 || o.concurrency > 4096) {
    return Status::InvalidArgument(fmt::format("--concurrency {} must be in 1..4096", o.concurrency));
  }
  if (o.memory_bytes < (1 << 20)) return Status::InvalidArgument("--memory-mb must be at least 1");
  if (o.readers < 1 || o.readers > 256) return Status::InvalidArgument("reader threads must be in 1..256");
  if (o.meta_batch < 1 || o.meta_batch > 1024) return Status::InvalidArgument("meta_batch must be in 1..1024");
  if (o.write_attempts < 1) return Status::InvalidArgument("write_attempts must be at least 1");
  if (o.chunk_size && (*o.chunk_size < 1024 || *o.chunk_size > (16 << 20))) {
    return Status::InvalidArgument(
        fmt::format("--chunk-size {} must be between 1024 and 16777216 bytes", *o.chunk_size));
  }
  if (o.shard_count < 1 || o.shard_index < 0 || o.shard_index >= o.shard_count) {
    return Status::InvalidArgument("--shard i/N needs 0 <= i < N");
  }
  return Status::OK();
}

}  // namespace

int SizeBucket(int64_t size) {
  if (size <= 0) return 0;
  return 63 - std::countl_zero(static_cast<uint64_t>(size));
}

std::string IngestReport::FormatSkips(size_t per_reason) const {
  std::map<std::string, std::vector<const IngestSkip*>> by;
  for (const auto& s : skips) by[s.reason].push_back(&s);
  std::vector<std::pair<std::string, std::vector<const IngestSkip*>>> sorted(by.begin(), by.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  std::string out;
  for (const auto& [reason, list] : sorted) {
    out += fmt::format("  {} ({}):\n", PrintableText(reason), list.size());
    for (size_t i = 0; i < list.size() && i < per_reason; ++i) {
      out += fmt::format("    {}: {}\n", PrintableText(list[i]->split), PrintableText(list[i]->path));
    }
    if (list.size() > per_reason) out += fmt::format("    ... and {} more\n", list.size() - per_reason);
  }
  out += fmt::format("  total skipped: {}\n", skips.size());
  return out;
}

namespace {

// Every sample passes through three heap buffers of its size (its payload,
// its request frame, the connection's copy of the frame), mostly 10 kB to
// 1 MB. With glibc's defaults the larger ones are mmap'd and unmapped, and
// freed memory at the top of a heap is given back, so the next ones fault
// their pages in again, zeroed by the kernel: an ingest of 4,000 JPEGs took
// 44,000 minor page faults (14,000 with these settings), and page faults
// were 11% of the client's CPU samples (perf; docs/benchmarks-ingest.md, "Ingest:
// client CPU"). Keeping them in the heap bounds nothing new: what is in
// flight is bounded by the byte budget, and the heap keeps at most its peak.
void KeepLargeBuffersInHeap() {
#ifdef __GLIBC__
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
  });
#endif
}

}  // namespace

Status Ingest(net::Session& s, const IngestOptions& o, IngestReport* report) {
  const auto t0 = Clock::now();
  KeepLargeBuffersInHeap();
  *report = IngestReport();
  report->dataset = o.dataset;
  CQLS_RETURN_IF_ERROR(CheckIngestOptions(o));
  IngestRun run(s, o, report);
  CQLS_RETURN_IF_ERROR(run.ListPhase());
  CQLS_RETURN_IF_ERROR(run.ReadExisting());
  CQLS_RETURN_IF_ERROR(run.ResolveSpec());
  CQLS_RETURN_IF_ERROR(run.PlanSplits());
  Status st = run.ValidateStrict();
  if (!st.ok()) {
    report->seconds = SecondsSince(t0);
    return st;
  }
  CQLS_RETURN_IF_ERROR(run.EnsureSchema());
  st = run.WriteSplits();
  report->seconds = SecondsSince(t0);
  return st;
}

}  // namespace cqlstream::store
