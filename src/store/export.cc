// Copyright (c) cqlstream authors.
#include "store/export.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "store/catalog.h"
#include "store/scan.h"

namespace cqlstream::store {
namespace fs = std::filesystem;
namespace {

Status WriteWhole(const std::string& path, const uint8_t* data, size_t n) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return Status::IOError(fmt::format("cannot create the folder of '{}': {}", path, ec.message()));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IOError(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      return Status::IOError(fmt::format("write to '{}' failed: {}", path, std::strerror(e)));
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  if (::close(fd) != 0) return Status::IOError(fmt::format("closing '{}' failed: {}", path, std::strerror(errno)));
  return Status::OK();
}

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

struct Job {
  MetaRow meta;
  std::string split;
  std::string image_out;   // relative to DIR
  std::string target_out;  // "" when none
};

}  // namespace

std::string SafeRelativePath(const std::string& p) {
  std::string out;
  size_t i = 0;
  while (i < p.size() && p[i] == '/') ++i;
  while (i <= p.size()) {
    const size_t slash = p.find('/', i);
    std::string comp = p.substr(i, slash == std::string::npos ? std::string::npos : slash - i);
    if (comp == "..") comp = "_";
    if (!comp.empty() && comp != ".") out += (out.empty() ? "" : "/") + comp;
    if (slash == std::string::npos) break;
    i = slash + 1;
  }
  return out.empty() ? "_" : out;
}

std::string ExportPath(const DatasetInfo& d, const std::string& split, const std::string& path,
                       std::optional<int32_t> label) {
  if (d.label_kind == LabelKind::kClass) {
    std::string cls = "_unlabeled";
    if (label && *label >= 0 && static_cast<size_t>(*label) < d.class_names.size()) cls = d.class_names[*label];
    return SafeRelativePath(split) + "/" + SafeRelativePath(cls) + "/" + fs::path(path).filename().string();
  }
  return SafeRelativePath(split) + "/" + SafeRelativePath(path);
}

Status Export(net::Session& s, const DatasetInfo& d, const ExportOptions& o, ExportReport* report) {
  const auto t0 = std::chrono::steady_clock::now();
  *report = ExportReport();
  if (o.dir.empty()) return Status::InvalidArgument("no output folder given");
  std::vector<SegmentInfo> segs;
  std::map<int32_t, std::string> split_of;
  for (const auto& g : d.segments) {
    if (!o.split.empty() && g.split != o.split) continue;
    segs.push_back(g);
    split_of[g.seg] = g.split;
  }
  if (!o.split.empty() && segs.empty()) {
    return Status::NotFound(fmt::format("dataset '{}' has no split '{}'", d.name, o.split));
  }

  // 1. Every committed metadata row, then output names in key order (so that
  //    collisions resolve the same way on every run).
  std::vector<Job> jobs;
  std::mutex mu;
  CQLS_RETURN_IF_ERROR(ScanMeta(s, d, segs, o.concurrency, [&](const BlockRef& b, std::vector<MetaRow>& rows) {
    std::lock_guard<std::mutex> l(mu);
    for (auto& m : rows) jobs.push_back(Job{std::move(m), split_of[b.seg], "", ""});
    return Status::OK();
  }));
  std::sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) { return a.meta.key < b.meta.key; });
  report->total = static_cast<int64_t>(jobs.size());
  std::set<std::string> taken;
  auto claim = [&](std::string rel, SampleKey key) {
    if (!taken.insert(rel).second) {
      rel = WithSuffix(rel, key);
      taken.insert(rel);
      report->renamed++;
    }
    return rel;
  };
  for (auto& j : jobs) {
    j.image_out = claim(ExportPath(d, j.split, j.meta.path, j.meta.label), j.meta.key);
    if (!j.meta.target_path.empty()) {
      j.target_out = claim(SafeRelativePath(j.split) + "/" + SafeRelativePath(j.meta.target_path), j.meta.key);
    }
  }

  // 2. The bytes.
  CQLS_ASSIGN_OR_RETURN(net::PreparedPtr data_q, s.Prepare(DataReadQuery(d)));
  Status st = ParallelFor(
      jobs.size(), o.concurrency,
      [&](size_t i) -> Status {
        const Job& j = jobs[i];
        std::unique_ptr<uint8_t[]> buf;
        int64_t size = -1, image_size = 0, checksum = 0, got = 0;
        bool overflow = false;
        net::Statement q =
            net::Statement::Bound(data_q, {Value::Int(KeySegment(j.meta.key)), Value::Int(KeyIndex(j.meta.key))});
        q.idempotent = true;
        q.consistency = cql::Consistency::kLocalQuorum;
        q.page_size = 8;
        CQLS_RETURN_IF_ERROR(s.ForEachPage(q, [&](const cql::Rows& r) {
          for (int32_t row = 0; row < r.row_count(); ++row) {
            if (size < 0) {
              auto v = r.value(row, kColSize);
              if (!v.ok() || v->kind() != Value::Kind::kBigint || v->as_bigint() < 0 ||
                  static_cast<uint64_t>(v->as_bigint()) > (1ull << 32)) {
                size = 0;
                overflow = true;
                continue;
              }
              size = v->as_bigint();
              auto is = r.value(row, kColImageSize);
              image_size = is.ok() && is->kind() == Value::Kind::kBigint ? is->as_bigint() : size;
              auto cs = r.value(row, kColChecksum);
              checksum = cs.ok() && cs->kind() == Value::Kind::kBigint ? cs->as_bigint() : 0;
              buf.reset(new uint8_t[static_cast<size_t>(std::max<int64_t>(1, size))]);
            }
            auto cell = r.cell(row, kColData);
            if (!cell || overflow) continue;
            if (got + static_cast<int64_t>(cell->size()) > size) {
              overflow = true;
              continue;
            }
            std::memcpy(buf.get() + got, cell->data(), cell->size());
            got += static_cast<int64_t>(cell->size());
          }
          return Status::OK();
        }));
        std::string what;
        if (size < 0) {
          what = "missing data";
        } else if (overflow || got != size) {
          what = "incomplete or oversized data";
        } else if (static_cast<int64_t>(XXH64(buf.get(), static_cast<size_t>(size), 0)) != checksum) {
          what = "checksum mismatch";
        } else if (image_size < 0 || image_size > size) {
          what = "bad image_size";
        }
        if (!what.empty()) {
          std::lock_guard<std::mutex> l(mu);
          report->problems.push_back(fmt::format("{} {}: {}", FormatKey(j.meta.key), j.meta.path, what));
          return Status::OK();
        }
        CQLS_RETURN_IF_ERROR(WriteWhole((fs::path(o.dir) / j.image_out).string(), buf.get(),
                                        static_cast<size_t>(image_size)));
        int files = 1;
        if (!j.target_out.empty()) {
          CQLS_RETURN_IF_ERROR(WriteWhole((fs::path(o.dir) / j.target_out).string(), buf.get() + image_size,
                                          static_cast<size_t>(size - image_size)));
          ++files;
        }
        std::lock_guard<std::mutex> l(mu);
        report->files += files;
        report->samples++;
        report->bytes += size;
        if (o.on_progress && (report->samples % 256 == 0 || report->samples == report->total)) {
          o.on_progress(report->samples, report->total, report->bytes);
        }
        return Status::OK();
      },
      o.stop);
  if (!st.ok()) return st;

  // 3. A manifest for what a folder layout cannot say.
  if (d.label_kind != LabelKind::kClass) {
    std::set<std::string> extra_cols;
    for (const auto& j : jobs) {
      for (const auto& [k, v] : j.meta.extra) {
        if (k != "path" && k != "label" && k != "labels" && k != "target" && k != "split") extra_cols.insert(k);
      }
    }
    std::string csv = "path";
    if (d.label_kind == LabelKind::kMultiLabel) csv += ",labels";
    if (d.label_kind == LabelKind::kTarget) csv += ",target";
    csv += ",split";
    for (const auto& c : extra_cols) csv += "," + CsvField(c);
    csv += "\n";
    for (const auto& j : jobs) {
      csv += CsvField(j.image_out);
      if (d.label_kind == LabelKind::kMultiLabel) {
        std::string l;
        for (size_t i = 0; i < j.meta.labels.size(); ++i) {
          const int32_t x = j.meta.labels[i];
          l += (i ? ";" : "") + (x >= 0 && static_cast<size_t>(x) < d.class_names.size() ? d.class_names[x]
                                                                                           : std::to_string(x));
        }
        csv += "," + CsvField(l);
      }
      if (d.label_kind == LabelKind::kTarget) csv += "," + CsvField(j.target_out);
      csv += "," + CsvField(j.split);
      for (const auto& c : extra_cols) {
        auto it = j.meta.extra.find(c);
        csv += "," + (it == j.meta.extra.end() ? std::string() : CsvField(it->second));
      }
      csv += "\n";
    }
    CQLS_RETURN_IF_ERROR(WriteWhole((fs::path(o.dir) / "manifest.csv").string(),
                                    reinterpret_cast<const uint8_t*>(csv.data()), csv.size()));
  }
  std::sort(report->problems.begin(), report->problems.end());
  report->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return Status::OK();
}

}  // namespace cqlstream::store
