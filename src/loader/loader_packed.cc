// Copyright (c) cqlstream authors.
//
// The loader engine's packed reads (LoaderOptions::packed; loader_impl.h,
// loader/packed_order.h, store/pack.h): which of the split's segments are
// packed, checked against the catalog before any is used. The reads
// themselves are coalesced reads of one pack each (loader_coalesced.cc).
#include <fmt/format.h>

#include "loader/loader_impl.h"
#include "store/pack.h"
#include "util/mix.h"

namespace cqlstream {

Status Loader::Impl::LoadPacks() {
  order_fingerprint = source.Fingerprint();
  if (!o.packed) return Status::OK();
  if (!o.selection_path.empty()) {
    return Status::InvalidArgument(
        "packed reads read a whole split in the packed order; a selection is read sample by sample (leave packed off)");
  }
  if (ds.attached()) {
    return Status::InvalidArgument(
        fmt::format("dataset '{}' is attached: it has no packs (only native datasets are packed)", ds.name));
  }
  CQLS_ASSIGN_OR_RETURN(std::vector<store::PackInfo> rows, store::ReadPacks(*session, ds.keyspace, ds.name));
  std::map<int32_t, store::PackInfo> by_seg;
  for (const auto& p : rows) by_seg[p.seg] = p;
  const std::vector<SegmentInfo> segs = ds.SplitSegments(split);
  // The layout's pack size: that of the split's first packed segment; a
  // segment packed with another is read sample by sample.
  int32_t pack_size = 0;
  for (const auto& g : segs) {
    auto it = by_seg.find(g.seg);
    if (it == by_seg.end()) continue;
    CQLS_RETURN_IF_ERROR(store::ValidatePack(it->second, &g, ds));
    if (pack_size == 0) pack_size = it->second.pack_size;
  }
  if (pack_size == 0) {
    return Status::NotFound(fmt::format("split '{}' of dataset '{}' has no packs: run `cqlstream pack {}` first",
                                        split, ds.name, ds.name));
  }
  std::vector<loader::PackedLayout::Segment> layout;
  for (const auto& g : segs) {
    loader::PackedLayout::Segment s;
    s.seg = g.seg;
    s.count = g.count;
    auto it = by_seg.find(g.seg);
    if (it != by_seg.end() && it->second.pack_size == pack_size) {
      s.packs.emplace(g.count, pack_size, it->second.seed, g.seg);
    }
    layout.push_back(std::move(s));
  }
  packed_layout = std::make_shared<loader::PackedLayout>(std::move(layout), pack_size);
  if (packed_layout->size() != source.size()) {
    return Status::Internal(fmt::format("the packed layout holds {} samples, the split {}", packed_layout->size(),
                                        source.size()));
  }
  order_fingerprint = SplitMix64(source.Fingerprint() ^ packed_layout->Fingerprint());
  return Status::OK();
}

}  // namespace cqlstream
