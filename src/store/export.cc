// Copyright (c) cqlstream authors.
#include "store/export.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <span>

#include "store/attached_scan.h"
#include "store/preprocess.h"
#include "store/sample_row.h"
#include "store/scan.h"
#include "util/measure.h"
#include "util/mutex.h"
#include "util/output_dir.h"

namespace cqlstream::store {
namespace fs = std::filesystem;
namespace {

// Distinct extra-column names a manifest may get; more is a corrupt dataset.
constexpr size_t kMaxExportColumns = 4096;
// Largest sample export buffers (the ingest limit is 2^32 bytes).
constexpr int64_t kMaxSampleBytes = int64_t{1} << 32;

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string WithSuffix(const std::string& rel, SampleKey key) {
  const fs::path p(rel);
  const std::string stem = p.stem().string();
  const std::string ext = p.extension().string();
  const std::string name = fmt::format("{}.{}_{}{}", stem, KeySegment(key), KeyIndex(key), ext);
  return p.has_parent_path() ? (p.parent_path() / name).string() : name;
}

// The reason in a decoder's message, without its "sample seg:idx: " (the
// problem line names the sample already).
std::string Reason(const Status& st, SampleKey key) {
  const std::string prefix = fmt::format("sample {}: ", FormatKey(key));
  const std::string& m = st.message();
  return m.compare(0, prefix.size(), prefix) == 0 ? m.substr(prefix.size()) : m;
}

// Reads one sample from d_<name> through the data row's decoder (which
// holds its bytes): "" when they are whole and match the checksum, else what
// is wrong.
StatusOr<std::string> FetchSample(net::Session& s, const net::PreparedPtr& q, SampleKey key, SampleRowDecoder* dec,
                                  const std::atomic<bool>* stop) {
  const Status read = ReadSampleRows(s, q, key, /*page_size=*/8, dec, stop);  // an interrupt ends it (page or wait)
  if (read.code() == Status::Code::kCancelled) return read;  // interrupted: not the sample's problem
  if (!read.ok()) return read.WithContext(fmt::format("reading sample {}", FormatKey(key)));
  if (dec->rows() == 0) return std::string("missing data");
  Status decoded = dec->Finish();
  if (!decoded.ok()) return Reason(decoded, key);
  if (!dec->statics().checksum_present || static_cast<int64_t>(dec->xxh64()) != dec->statics().checksum) {
    return std::string("checksum mismatch");
  }
  return std::string();
}

// The extra-column names of every committed metadata row (sorted).
StatusOr<std::set<std::string>> ExtraColumns(net::Session& s, const DatasetInfo& d,
                                             const std::vector<SegmentInfo>& segs, int concurrency) {
  Mutex mu;
  std::set<std::string> cols;
  CQLS_RETURN_IF_ERROR(ScanMeta(s, d, segs, concurrency, [&](const BlockRef&, std::vector<MetaRow>& rows) -> Status {
    MutexLock l(&mu);
    for (const auto& m : rows) {
      for (const auto& [k, v] : m.extra) {
        if (k != "path" && k != "label" && k != "labels" && k != "target" && k != "split") cols.insert(k);
      }
    }
    if (cols.size() > kMaxExportColumns) {
      return Status::Corruption(fmt::format("dataset '{}' has more than {} distinct extra columns", d.name,
                                            kMaxExportColumns));
    }
    return Status::OK();
  }));
  return cols;
}

// The state of one Export call shared by its steps.
class Exporter {
 public:
  Exporter(net::Session& s, const DatasetInfo& d, const ExportOptions& o, ExportReport* r) : s_(s), d_(d), o_(o), r_(r) {}

  Status Run(const std::vector<SegmentInfo>& segs);

 private:
  struct Job {
    MetaRow meta;
    std::string image_out, target_out;  // relative to DIR; target_out "" when none
    bool written = false;
    int renamed = 0;  // of its names, those that took the key's suffix
  };

  // Creates `wanted` empty, else its name with the key's suffix (counted
  // in *renamed); AlreadyExists when both are taken.
  Status ClaimName(const std::string& wanted, SampleKey key, std::string* got, int* renamed);
  Status WriteJob(Job& j);
  // Removes the files claimed for `j` (those it has: a claim may have
  // failed) and forgets their names, so that none is removed twice.
  Status RemoveFiles(Job& j) const;
  // Attached datasets (store/attached_scan.h): the block's keys and labels
  // from the key snapshot and the foreign table, and a sample's bytes from
  // its data read.
  StatusOr<std::vector<MetaRow>> AttachedBlock(const BlockRef& b, const std::string& split);
  Status WriteAttachedJob(Job& j);
  Status Block(const BlockRef& b, const std::string& split);
  void Problem(const Job& j, const std::string& what) EXCLUDES(mu_);
  void Problem(SampleKey key, const std::string& path, const std::string& what) EXCLUDES(mu_);
  std::string ManifestRow(const Job& j, const std::string& split) const;

  net::Session& s_;
  const DatasetInfo& d_;
  const ExportOptions& o_;
  ExportReport* r_;  // counters written by the calling thread; problems under mu_
  std::unique_ptr<OutputDir> out_;
  net::PreparedPtr meta_q_, data_q_;
  std::map<int32_t, int64_t> seg_max_size_;  // seg -> segments.max_size
  std::map<int32_t, std::string> split_of_;   // seg -> split
  std::unique_ptr<AttachedSamples> attached_;  // set for an attached dataset
  bool manifest_ = false;
  std::set<std::string> extra_cols_;
  Mutex mu_;
  std::vector<std::string> problems_ GUARDED_BY(mu_);
  int64_t problems_omitted_ GUARDED_BY(mu_) = 0;
};

Status Exporter::ClaimName(const std::string& wanted, SampleKey key, std::string* got, int* renamed) {
  CQLS_ASSIGN_OR_RETURN(bool created, out_->CreateExclusive(wanted));
  if (created) {
    *got = wanted;
    return Status::OK();
  }
  const std::string alt = WithSuffix(wanted, key);
  CQLS_ASSIGN_OR_RETURN(created, out_->CreateExclusive(alt));
  if (!created) {
    return Status::AlreadyExists(fmt::format("'{}' and '{}' already exist in '{}'", wanted, alt, o_.dir));
  }
  ++*renamed;
  *got = alt;
  return Status::OK();
}

Status Exporter::RemoveFiles(Job& j) const {
  if (!j.image_out.empty()) CQLS_RETURN_IF_ERROR(out_->Remove(j.image_out));
  j.image_out.clear();
  if (!j.target_out.empty()) CQLS_RETURN_IF_ERROR(out_->Remove(j.target_out));
  j.target_out.clear();
  return Status::OK();
}

void Exporter::Problem(const Job& j, const std::string& what) { Problem(j.meta.key, j.meta.path, what); }

void Exporter::Problem(SampleKey key, const std::string& path, const std::string& what) {
  MutexLock l(&mu_);
  if (problems_.size() < kMaxProblemsKept) {
    problems_.push_back(fmt::format("{} {}: {}", FormatKey(key), path, what));
  } else {
    problems_omitted_++;
  }
}

// Reads one sample and writes its files (already created empty). A sample
// that cannot be read is a problem: its empty files are removed.
Status Exporter::WriteJob(Job& j) {
  if (attached_) return WriteAttachedJob(j);
  auto max_size = seg_max_size_.find(KeySegment(j.meta.key));
  const int64_t known = max_size == seg_max_size_.end() ? -1 : max_size->second;
  SampleRowDecoder dec(j.meta.key, HintsFor(d_, known < 0 ? kMaxSampleBytes : std::min(known, kMaxSampleBytes)),
                       /*keep_bytes=*/true);
  CQLS_ASSIGN_OR_RETURN(std::string what, FetchSample(s_, data_q_, j.meta.key, &dec, o_.stop));
  if (what.empty()) {
    const std::span<const uint8_t> b = dec.bytes();
    const int64_t size = static_cast<int64_t>(b.size());
    const int64_t image = dec.statics().image_size < 0 ? size : dec.statics().image_size;
    CQLS_RETURN_IF_ERROR(out_->Append(j.image_out, b.data(), static_cast<size_t>(image)));
    if (!j.target_out.empty()) {
      CQLS_RETURN_IF_ERROR(out_->Append(j.target_out, b.data() + image, static_cast<size_t>(size - image)));
    }
    j.written = true;
    j.meta.size = size;
    return Status::OK();
  }
  Problem(j, what);
  return RemoveFiles(j);
}

StatusOr<std::vector<MetaRow>> Exporter::AttachedBlock(const BlockRef& b, const std::string& split) {
  const int32_t first = b.first_idx();
  std::vector<MetaRow> rows(static_cast<size_t>(b.end_idx() - first));
  std::vector<char> ok(rows.size(), 0);
  CQLS_RETURN_IF_ERROR(ParallelFor(
      rows.size(), o_.concurrency,
      [&](size_t i) -> Status {
        Status problem;
        CQLS_ASSIGN_OR_RETURN(rows[i], attached_->ReadMeta(split, MakeKey(b.seg, first + static_cast<int32_t>(i)),
                                                          &problem));
        ok[i] = problem.ok();
        if (!problem.ok()) Problem(rows[i].key, rows[i].path, problem.message());
        return Status::OK();
      },
      o_.stop));
  std::vector<MetaRow> good;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (ok[i]) good.push_back(std::move(rows[i]));
  }
  return good;
}

// As WriteJob, for an attached sample: the data blob is the image file, a
// blob target its target file.
Status Exporter::WriteAttachedJob(Job& j) {
  const std::string& split = split_of_.at(KeySegment(j.meta.key));
  const AttachedRowOptions opts = attached_->Options(split, /*keep=*/true);
  AttachedRow row(j.meta.key, j.meta.path, &opts);
  std::string path;
  Status problem;
  CQLS_RETURN_IF_ERROR(attached_->ReadData(split, j.meta.key, &row, &path, &problem));
  if (problem.ok()) {
    const auto data = row.kept_data();
    CQLS_RETURN_IF_ERROR(out_->Append(j.image_out, data.data(), data.size()));
    if (!j.target_out.empty()) {
      const auto target = row.kept_target();
      CQLS_RETURN_IF_ERROR(out_->Append(j.target_out, target.data(), target.size()));
    }
    j.written = true;
    j.meta.size = row.payload_size();
    return Status::OK();
  }
  Problem(j, problem.message());
  return RemoveFiles(j);
}

std::string Exporter::ManifestRow(const Job& j, const std::string& split) const {
  std::string csv = CsvField(j.image_out);
  if (d_.label_kind == LabelKind::kMultiLabel) {
    std::string l;
    for (size_t i = 0; i < j.meta.labels.size(); ++i) {
      const int32_t x = j.meta.labels[i];
      l += (i ? ";" : "") +
           (x >= 0 && static_cast<size_t>(x) < d_.class_names.size() ? d_.class_names[x] : std::to_string(x));
    }
    csv += "," + CsvField(l);
  }
  if (d_.label_kind == LabelKind::kTarget) csv += "," + CsvField(j.target_out);
  csv += "," + CsvField(split);
  for (const auto& c : extra_cols_) {
    auto it = j.meta.extra.find(c);
    csv += "," + (it == j.meta.extra.end() ? std::string() : CsvField(it->second));
  }
  return csv + "\n";
}

// One metadata block: names claimed in key order, bytes fetched and written
// in parallel, manifest rows appended in key order. Whatever ends the block
// (an error, an interrupt), the samples written are counted and listed in
// the manifest, and the files claimed for the others (created empty, or
// written in part) are removed: an export that stops leaves no file that is
// not a whole sample named in its manifest.
Status Exporter::Block(const BlockRef& b, const std::string& split) {
  std::vector<MetaRow> rows;
  if (attached_) {
    CQLS_ASSIGN_OR_RETURN(rows, AttachedBlock(b, split));
  } else {
    CQLS_ASSIGN_OR_RETURN(rows, ReadMetaBlock(s_, meta_q_, b));
  }
  std::vector<Job> jobs;
  jobs.reserve(rows.size());
  Status st;
  for (auto& m : rows) {
    Job& j = jobs.emplace_back(Job{std::move(m), "", "", false, 0});
    st = ClaimName(ExportPath(d_, split, j.meta.path, j.meta.label), j.meta.key, &j.image_out, &j.renamed);
    if (st.ok() && !j.meta.target_path.empty()) {
      st = ClaimName(SafeRelativePath(split) + "/" + SafeRelativePath(j.meta.target_path), j.meta.key, &j.target_out,
                     &j.renamed);
    }
    if (!st.ok()) break;
  }
  if (st.ok()) st = ParallelFor(jobs.size(), o_.concurrency, [&](size_t i) { return WriteJob(jobs[i]); }, o_.stop);
  std::string csv;
  for (auto& j : jobs) {
    if (!j.written) {
      const Status removed = RemoveFiles(j);
      if (st.ok()) st = removed;
      continue;
    }
    r_->samples++;
    r_->renamed += j.renamed;  // only files that stay
    r_->files += j.target_out.empty() ? 1 : 2;
    r_->bytes += j.meta.size;
    if (manifest_) csv += ManifestRow(j, split);
  }
  if (manifest_ && !csv.empty()) {
    const Status listed = out_->Append("manifest.csv", reinterpret_cast<const uint8_t*>(csv.data()), csv.size());
    if (st.ok()) st = listed;
  }
  if (o_.on_progress) o_.on_progress(r_->samples, r_->total, r_->bytes);
  return st;
}

Status Exporter::Run(const std::vector<SegmentInfo>& segs) {
  CQLS_ASSIGN_OR_RETURN(out_, OutputDir::Open(o_.dir, o_.force));
  for (const auto& g : segs) {
    split_of_[g.seg] = g.split;
    seg_max_size_[g.seg] = g.max_size;
  }
  if (d_.attached()) {
    CQLS_ASSIGN_OR_RETURN(attached_, AttachedSamples::Open(s_, d_, /*with_extra=*/false, o_.stop));
  }
  const std::vector<BlockRef> blocks = CommittedBlocks(segs);
  for (const auto& b : blocks) r_->total += b.end_idx() - b.first_idx();
  // A manifest for what a folder layout cannot say.
  manifest_ = d_.label_kind != LabelKind::kClass;
  if (manifest_) {
    if (!attached_) {
      CQLS_ASSIGN_OR_RETURN(extra_cols_, ExtraColumns(s_, d_, segs, o_.concurrency));
    }
    CQLS_ASSIGN_OR_RETURN(bool created, out_->CreateExclusive("manifest.csv"));
    if (!created) return Status::AlreadyExists(fmt::format("'{}' already holds a manifest.csv", o_.dir));
    std::string csv = "path";
    if (d_.label_kind == LabelKind::kMultiLabel) csv += ",labels";
    if (d_.label_kind == LabelKind::kTarget) csv += ",target";
    csv += ",split";
    for (const auto& c : extra_cols_) csv += "," + CsvField(c);
    csv += "\n";
    CQLS_RETURN_IF_ERROR(out_->Append("manifest.csv", reinterpret_cast<const uint8_t*>(csv.data()), csv.size()));
  }
  if (!attached_) {
    CQLS_ASSIGN_OR_RETURN(meta_q_, s_.Prepare(MetaBlockQuery(d_)));
    CQLS_ASSIGN_OR_RETURN(data_q_, s_.Prepare(DataReadQuery(d_)));
  }
  Status st;
  for (const auto& b : blocks) {
    if (o_.stop != nullptr && o_.stop->load()) {
      st = Status::Cancelled("interrupted");
      break;
    }
    st = Block(b, split_of_[b.seg]);
    if (!st.ok()) break;
  }
  MutexLock l(&mu_);
  r_->problems = std::move(problems_);
  r_->problems_omitted = problems_omitted_;
  std::sort(r_->problems.begin(), r_->problems.end());
  return st;
}

// A file or folder name is at most 255 bytes on common file systems; a
// component longer than kMaxExportNameBytes (an attached sample's text key,
// the hex of a blob key, a long class name) is cut to a prefix, on a UTF-8
// character boundary, followed by '~' and the xxh64 of the whole component
// in hex, keeping a short extension (".jpg", ".target"), so that distinct
// long names stay distinct and the export does not end in ENAMETOOLONG.
constexpr size_t kMaxExportNameBytes = 200;

std::string FitName(const std::string& name) {
  if (name.size() <= kMaxExportNameBytes) return name;
  const std::string hash = fmt::format("~{:016x}", XXH64(name.data(), name.size(), 0));
  std::string ext;
  const size_t dot = name.rfind('.');
  if (dot != std::string::npos && dot > 0 && name.size() - dot <= 16) ext = name.substr(dot);
  size_t keep = kMaxExportNameBytes - hash.size() - ext.size();
  while (keep > 0 && (static_cast<unsigned char>(name[keep]) & 0xC0) == 0x80) --keep;
  return name.substr(0, keep) + hash + ext;
}

}  // namespace

std::string SafeRelativePath(const std::string& p) {
  std::string out;
  size_t i = 0;
  while (i < p.size() && p[i] == '/') ++i;
  while (i <= p.size()) {
    const size_t slash = p.find('/', i);
    std::string comp = p.substr(i, slash == std::string::npos ? std::string::npos : slash - i);
    std::replace(comp.begin(), comp.end(), '\0', '_');
    if (comp == "..") comp = "_";
    if (!comp.empty() && comp != ".") out += (out.empty() ? "" : "/") + FitName(comp);
    if (slash == std::string::npos) break;
    i = slash + 1;
  }
  return out.empty() ? "_" : out;
}

namespace {

// `rel` with the extension of the format the ingest re-encoded the images
// to (--reencode jpeg:Q -> ".jpg", png -> ".png"), so that an exported file's
// name says what its bytes are; unchanged when the images kept their format,
// when the extension already names it, or for blobs. A collision with another
// sample's name is resolved by the caller as any other (a suffix).
std::string WithStoredExtension(const DatasetInfo& d, std::string rel) {
  if (d.sample_kind != SampleKind::kImage || d.preprocess.empty()) return rel;
  auto spec = PreprocessSpec::Parse(d.preprocess);
  if (!spec.ok() || spec->reencode == Reencode::kKeep) return rel;
  const bool jpeg = spec->reencode == Reencode::kJpeg;
  const size_t slash = rel.rfind('/');
  const size_t dot = rel.rfind('.');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash + 1);
  std::string ext = has_ext ? rel.substr(dot) : std::string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (jpeg ? (ext == ".jpg" || ext == ".jpeg") : ext == ".png") return rel;
  return (has_ext ? rel.substr(0, dot) : rel) + (jpeg ? ".jpg" : ".png");
}

}  // namespace

std::string ExportPath(const DatasetInfo& d, const std::string& split, const std::string& path,
                       std::optional<int32_t> label) {
  if (d.label_kind == LabelKind::kClass) {
    std::string cls = "_unlabeled";
    if (label && *label >= 0 && static_cast<size_t>(*label) < d.class_names.size()) cls = d.class_names[*label];
    // An attached dataset with int labels has no class names: the number.
    if (label && *label >= 0 && d.attached() && d.class_names.empty()) cls = std::to_string(*label);
    // The base name; a path ending in '/', '.' or '..' has none that is a
    // file name, SafeRelativePath maps those to '_'.
    const size_t slash = path.rfind('/');
    const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    return WithStoredExtension(d, SafeRelativePath(split) + "/" + SafeRelativePath(cls) + "/" + SafeRelativePath(base));
  }
  return WithStoredExtension(d, SafeRelativePath(split) + "/" + SafeRelativePath(path));
}

Status Export(net::Session& s, const DatasetInfo& d, const ExportOptions& o, ExportReport* report) {
  const auto t0 = std::chrono::steady_clock::now();
  *report = ExportReport();
  if (o.dir.empty()) return Status::InvalidArgument("no output folder given");
  std::vector<SegmentInfo> segs;
  for (const auto& g : d.segments) {
    if (!o.split.empty() && g.split != o.split) continue;
    segs.push_back(g);
  }
  if (!o.split.empty() && segs.empty()) {
    return Status::NotFound(fmt::format("dataset '{}' has no split '{}'", d.name, o.split));
  }
  Exporter e(s, d, o, report);
  Status st = e.Run(segs);
  report->seconds = SecondsSince(t0);
  return st;
}

}  // namespace cqlstream::store
