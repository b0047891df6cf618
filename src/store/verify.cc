// Copyright (c) cqlstream authors.
#include "store/verify.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "store/attached_scan.h"
#include "store/sample_row.h"
#include "util/measure.h"
#include "util/mutex.h"

namespace cqlstream::store {
namespace {

// What the decoder saw, as CheckSample takes it (nulls as nullopt).
SampleData DataOf(const SampleRowDecoder& dec) {
  const SampleStatics& st = dec.statics();
  SampleData sd;
  sd.rows = dec.rows();
  if (st.present) sd.size = st.size;
  if (st.image_size >= 0) sd.image_size = st.image_size;
  if (st.checksum_present) sd.checksum = st.checksum;
  if (st.label != -1) sd.label = st.label;
  sd.labels = st.labels;
  sd.data_bytes = dec.data_bytes();
  sd.xxh64 = dec.xxh64();
  return sd;
}

// Reads and checks one sample: "" or what is wrong. Where the rows
// themselves hold a problem (another sample's key, statics the catalog
// refuses, a chunk out of place), the read stopped at it and the counts
// cover only the pages read: the decoder's message is what is wrong.
// Otherwise what CheckSample sees comes first, then what the decoder's
// last check refused (chunks that do not add up to the size).
StatusOr<std::string> VerifyOne(net::Session& s, const net::PreparedPtr& data_q, SampleKey key,
                                const SampleHints& hints, const MetaRow* meta, int64_t* bytes,
                                const std::atomic<bool>* stop) {
  SampleRowDecoder dec(key, hints, /*keep_bytes=*/false);
  // Chunks of up to chunk_size bytes each; an interrupt ends the read, also while a page is awaited.
  const Status rs = ReadSampleRows(s, data_q, key, /*page_size=*/8, &dec, stop);
  if (rs.code() == Status::Code::kCancelled) return rs;  // interrupted: not the sample's problem
  if (!rs.ok()) return rs.WithContext(fmt::format("reading sample {}", FormatKey(key)));
  const bool refused = dec.failed();
  const Status decoded = dec.Finish();
  const SampleData sd = DataOf(dec);
  *bytes = sd.data_bytes;
  if (refused && sd.rows > 0) return decoded.message();
  std::string what = CheckSample(sd, meta);
  if (what.empty() && sd.rows > 0 && !decoded.ok()) what = decoded.message();
  return what;
}

std::string Labels(const std::vector<int32_t>& l) {
  std::string out = "[";
  for (size_t i = 0; i < l.size(); ++i) out += (i ? "," : "") + std::to_string(l[i]);
  return out + "]";
}

// Verify of an attached dataset: every committed sample's snapshot row and
// foreign row are read and checked as the loader checks them (one row, a
// non-null data blob, a label of the column's type); there are no checksums
// or metadata rows to compare with.
Status VerifyAttached(net::Session& s, const DatasetInfo& d, const std::vector<SegmentInfo>& segs,
                      const VerifyOptions& o, VerifyReport* report) {
  CQLS_ASSIGN_OR_RETURN(auto reader, AttachedSamples::Open(s, d, /*with_extra=*/false, o.stop));
  std::vector<std::pair<SampleKey, const SegmentInfo*>> work;  // one entry per block of 1024
  for (const auto& g : segs) {
    for (int64_t i = 0; i < g.count; i += int64_t{1} << kBlockShift) {
      work.emplace_back(MakeKey(g.seg, static_cast<int32_t>(i)), &g);
    }
  }
  Mutex mu;  // guards report and the progress call
  return ParallelFor(
      work.size(), 1,
      [&](size_t w) -> Status {
        const SampleKey first = work[w].first;
        const SegmentInfo& g = *work[w].second;
        const int64_t n = std::min<int64_t>(int64_t{1} << kBlockShift, g.count - KeyIndex(first));
        const AttachedRowOptions opts = reader->Options(g.split, /*keep=*/false);
        return ParallelFor(
            static_cast<size_t>(n), o.concurrency,
            [&](size_t k) -> Status {
              const SampleKey key = first + k;
              AttachedRow row(key, "", &opts);
              std::string path;
              Status problem;
              CQLS_RETURN_IF_ERROR(reader->ReadData(g.split, key, &row, &path, &problem));
              MutexLock l(&mu);
              report->checked++;
              report->bytes += std::max<int64_t>(0, row.payload_size());
              if (!problem.ok()) report->problems.push_back(VerifyProblem{key, g.split, path, problem.message()});
              if (o.on_progress && (report->checked % 256 == 0 || report->checked == report->total)) {
                o.on_progress(report->checked, report->total, report->bytes,
                              static_cast<int64_t>(report->problems.size()));
              }
              return Status::OK();
            },
            o.stop);
      },
      o.stop);
}

}  // namespace

std::string CheckSample(const SampleData& d, const MetaRow* meta) {
  std::vector<std::string> bad;
  if (d.rows == 0) {
    bad.push_back("missing data");
  } else if (!d.size) {
    bad.push_back("incomplete data (no size)");
  } else {
    if (d.data_bytes != *d.size) {
      bad.push_back(fmt::format("size mismatch: chunks hold {} bytes, size says {}", d.data_bytes, *d.size));
    } else if (!d.checksum || static_cast<int64_t>(d.xxh64) != *d.checksum) {
      bad.push_back(fmt::format("checksum mismatch: xxh64 {:016x}, stored {:016x}", d.xxh64,
                                static_cast<uint64_t>(d.checksum.value_or(0))));
    }
  }
  if (meta == nullptr) {
    bad.push_back("missing metadata row");
  } else if (d.rows > 0 && d.size) {
    std::vector<std::string> diff;
    if (meta->size != *d.size) diff.push_back(fmt::format("size {} vs {}", meta->size, *d.size));
    if (d.image_size && meta->image_size != *d.image_size) {
      diff.push_back(fmt::format("image_size {} vs {}", meta->image_size, *d.image_size));
    }
    if (d.checksum && meta->checksum != *d.checksum) diff.push_back("checksum");
    if (meta->label != d.label) {
      diff.push_back(fmt::format("label {} vs {}", meta->label ? std::to_string(*meta->label) : "null",
                                 d.label ? std::to_string(*d.label) : "null"));
    }
    if (meta->labels != d.labels) diff.push_back(fmt::format("labels {} vs {}", Labels(meta->labels), Labels(d.labels)));
    if (!diff.empty()) {
      std::string j;
      for (size_t i = 0; i < diff.size(); ++i) j += (i ? ", " : "") + diff[i];
      bad.push_back("metadata disagrees: " + j);
    }
  }
  std::string out;
  for (size_t i = 0; i < bad.size(); ++i) out += (i ? "; " : "") + bad[i];
  return out;
}

Status Verify(net::Session& s, const DatasetInfo& d, const VerifyOptions& o, VerifyReport* report) {
  const auto t0 = std::chrono::steady_clock::now();
  *report = VerifyReport();
  std::vector<SegmentInfo> segs;
  std::map<int32_t, std::string> split_of;
  for (const auto& g : d.segments) {
    if (!o.split.empty() && g.split != o.split) continue;
    segs.push_back(g);
    split_of[g.seg] = g.split;
    report->total += g.count;
  }
  if (!o.split.empty() && segs.empty()) {
    return Status::NotFound(fmt::format("dataset '{}' has no split '{}'", d.name, o.split));
  }
  if (d.attached()) {
    Status st = VerifyAttached(s, d, segs, o, report);
    std::sort(report->problems.begin(), report->problems.end(),
              [](const auto& a, const auto& b) { return a.key < b.key; });
    report->seconds = SecondsSince(t0);
    return st;
  }
  const auto blocks = CommittedBlocks(segs);
  if (blocks.empty()) return Status::OK();
  CQLS_ASSIGN_OR_RETURN(net::PreparedPtr meta_q, s.Prepare(MetaBlockQuery(d)));
  CQLS_ASSIGN_OR_RETURN(net::PreparedPtr data_q, s.Prepare(DataReadQuery(d)));

  std::map<int32_t, SampleHints> hints;
  for (const auto& g : segs) hints[g.seg] = HintsFor(d, g.max_size);

  Mutex mu;  // guards report and the progress call
  const int outer = std::max(1, std::min<int>(o.concurrency, static_cast<int>(blocks.size())));
  const int inner = std::max(1, o.concurrency / outer);
  Status st = ParallelFor(
      blocks.size(), outer,
      [&](size_t bi) -> Status {
        const BlockRef& b = blocks[bi];
        CQLS_ASSIGN_OR_RETURN(auto metas, ReadMetaBlock(s, meta_q, b));
        std::map<int32_t, const MetaRow*> by_idx;
        for (const auto& m : metas) by_idx[KeyIndex(m.key)] = &m;
        const int32_t first = b.first_idx();
        return ParallelFor(
            static_cast<size_t>(b.end_idx() - first), inner,
            [&](size_t k) -> Status {
              const int32_t idx = first + static_cast<int32_t>(k);
              auto it = by_idx.find(idx);
              const MetaRow* m = it == by_idx.end() ? nullptr : it->second;
              int64_t bytes = 0;
              CQLS_ASSIGN_OR_RETURN(std::string what,
                                    VerifyOne(s, data_q, MakeKey(b.seg, idx), hints.at(b.seg), m, &bytes, o.stop));
              MutexLock l(&mu);
              report->checked++;
              report->bytes += bytes;
              if (!what.empty()) {
                report->problems.push_back(
                    VerifyProblem{MakeKey(b.seg, idx), split_of[b.seg], m ? m->path : std::string(), what});
              }
              if (o.on_progress && (report->checked % 256 == 0 || report->checked == report->total)) {
                o.on_progress(report->checked, report->total, report->bytes,
                              static_cast<int64_t>(report->problems.size()));
              }
              return Status::OK();
            },
            o.stop);
      },
      o.stop);
  std::sort(report->problems.begin(), report->problems.end(),
            [](const auto& a, const auto& b) { return a.key < b.key; });
  report->seconds = SecondsSince(t0);
  return st;
}

}  // namespace cqlstream::store
