// Copyright (c) cqlstream authors.
#include "store/split_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace cqlstream::store {

const char* SplitActionName(SplitAction a) {
  switch (a) {
    case SplitAction::kNew: return "new";
    case SplitAction::kResume: return "resumed";
    case SplitAction::kAppend: return "appended";
    case SplitAction::kComplete: return "complete";
    case SplitAction::kNothingNew: return "nothing new";
  }
  return "?";
}

SplitDecision DecideSplit(const std::vector<SegRow>& rows, const std::string& split, const std::string& source_id,
                          const std::string& fingerprint) {
  std::vector<const SegRow*> same;
  const SegRow* exact = nullptr;
  for (const auto& g : rows) {
    if (g.source_id != source_id || g.split != split) continue;
    same.push_back(&g);
    if (g.fingerprint == fingerprint) exact = &g;  // the latest
  }
  SplitDecision d;
  if (exact != nullptr && exact->sealed()) {
    d.action = SplitAction::kComplete;
    d.segment = *exact;
    return d;
  }
  for (const SegRow* g : same) {
    if (g != exact) d.exclude.push_back(*g);
  }
  if (exact != nullptr) {
    d.action = SplitAction::kResume;
    d.segment = *exact;
  } else if (!same.empty()) {
    d.action = SplitAction::kAppend;
    d.check_foreign = true;
    for (const SegRow* g : same) {
      if (!g->sealed()) d.supersede.push_back(*g);
    }
  } else {
    d.action = SplitAction::kNew;
    d.check_foreign = true;
  }
  return d;
}

StatusOr<SplitPlan> SettleSplit(const SplitDecision& decision, std::string split, std::string source_id,
                                std::string fingerprint, std::vector<const SourceItem*> items,
                                const std::string& dataset) {
  SplitPlan p;
  p.split = std::move(split);
  p.source_id = std::move(source_id);
  p.fingerprint = std::move(fingerprint);
  p.action = decision.action;
  if (decision.segment) {
    p.seg = decision.segment->seg;
    p.start = decision.segment->c;
  }
  if (decision.action == SplitAction::kComplete) return p;  // nothing listed: nothing to write
  p.items = std::move(items);
  switch (decision.action) {
    case SplitAction::kResume:
      p.writetime = decision.segment->writetime;
      if (p.start.count < 0 || p.start.next_pos > static_cast<int64_t>(p.items.size()) ||
          p.start.count > p.start.next_pos) {
        return Status::Corruption(
            fmt::format("segment {} of dataset '{}' says next_pos {} / count {}, but its listing has {} items", p.seg,
                        dataset, p.start.next_pos, p.start.count, p.items.size()));
      }
      break;
    case SplitAction::kAppend:
      if (p.items.empty()) p.action = SplitAction::kNothingNew;
      p.supersede = decision.supersede;
      break;
    default:
      break;
  }
  return p;
}

size_t SplitPlan::remaining() const {
  return items.size() - std::min(items.size(), static_cast<size_t>(std::max<int64_t>(0, start.next_pos)));
}

int64_t SplitPlan::remaining_bytes() const {
  int64_t b = 0;
  for (size_t p = items.size() - remaining(); p < items.size(); ++p) {
    b += static_cast<int64_t>(items[p]->image.size + (items[p]->target ? items[p]->target->size : 0));
  }
  return b;
}

int64_t ListedSize(const SourceItem& it) {
  return std::max<int64_t>(1, static_cast<int64_t>(it.image.size + (it.target ? it.target->size : 0)));
}

}  // namespace cqlstream::store
