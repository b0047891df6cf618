// Copyright (c) cqlstream authors.
#include "store/manifest.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "store/json.h"
#include "store/source.h"

namespace cqlstream::store {
namespace {

std::string Trim(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && (s[a] == ' ' || s[a] == '\t' || s[a] == '\r' || s[a] == '\n')) ++a;
  while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t' || s[b - 1] == '\r' || s[b - 1] == '\n')) --b;
  return std::string(s.substr(a, b - a));
}

enum class Col { kPath, kLabel, kLabels, kTarget, kSplit, kExtra };
Col Classify(const std::string& name) {
  if (name == "path") return Col::kPath;
  if (name == "label") return Col::kLabel;
  if (name == "labels") return Col::kLabels;
  if (name == "target") return Col::kTarget;
  if (name == "split") return Col::kSplit;
  return Col::kExtra;
}

Status SetField(ManifestRow* row, Col c, const std::string& name, std::string value, std::string_view where) {
  switch (c) {
    case Col::kPath: row->path = Trim(value); break;
    case Col::kTarget: row->target = Trim(value); break;
    case Col::kSplit: row->split = Trim(value); break;
    case Col::kLabel: {
      std::string v = Trim(value);
      if (!v.empty()) {
        row->has_label = true;
        row->labels = {std::move(v)};
      }
      break;
    }
    case Col::kLabels: {
      auto l = ParseLabelList(value);
      if (!l.ok()) return l.status().WithContext(where);
      row->has_label = true;
      row->labels = std::move(l).value();
      break;
    }
    case Col::kExtra:
      if (!value.empty()) row->extra[name] = std::move(value);
      break;
  }
  return Status::OK();
}

Status CheckRow(const ManifestRow& row, std::string_view where) {
  if (row.path.empty()) return Status::InvalidArgument(fmt::format("{}: empty path", where));
  return Status::OK();
}

}  // namespace

StatusOr<std::vector<CsvRecord>> ParseCsv(std::string_view text) {
  std::vector<CsvRecord> out;
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  size_t i = 0, line = 1;
  while (i < text.size()) {
    CsvRecord rec;
    rec.line = line;
    bool blank = true;
    for (;;) {  // one field
      std::string field;
      if (i < text.size() && text[i] == '"') {
        blank = false;
        const size_t start_line = line;
        ++i;
        for (;;) {
          if (i >= text.size()) {
            return Status::InvalidArgument(fmt::format("line {}: unterminated quoted field", start_line));
          }
          const char c = text[i++];
          if (c == '"') {
            if (i < text.size() && text[i] == '"') {
              field.push_back('"');
              ++i;
              continue;
            }
            break;
          }
          if (c == '\n') ++line;
          field.push_back(c);
        }
        if (i < text.size() && text[i] != ',' && text[i] != '\n' && text[i] != '\r') {
          return Status::InvalidArgument(fmt::format("line {}: text after a closing quote", line));
        }
      } else {
        while (i < text.size() && text[i] != ',' && text[i] != '\n' && text[i] != '\r') {
          if (text[i] == '"') {
            return Status::InvalidArgument(fmt::format("line {}: quote inside an unquoted field", line));
          }
          field.push_back(text[i++]);
        }
        if (!field.empty()) blank = false;
      }
      rec.fields.push_back(std::move(field));
      if (i < text.size() && text[i] == ',') {
        blank = false;
        ++i;
        continue;
      }
      break;
    }
    if (i < text.size() && text[i] == '\r') ++i;
    if (i < text.size() && text[i] == '\n') {
      ++i;
      ++line;
    }
    if (!blank) out.push_back(std::move(rec));
  }
  return out;
}

StatusOr<std::vector<std::string>> ParseLabelList(std::string_view cell) {
  std::vector<std::string> out;
  const std::string t = Trim(cell);
  if (t.starts_with("[")) {
    auto j = ParseJson(t);
    if (!j.ok()) return Status::InvalidArgument(fmt::format("labels '{}': {}", t, j.status().message()));
    for (const auto& v : j->items) {
      if (!v.is_string() && !v.is_number()) {
        return Status::InvalidArgument(fmt::format("labels '{}': items must be strings or integers", t));
      }
      std::string s = Trim(v.text);
      if (!s.empty()) out.push_back(std::move(s));
    }
    return out;
  }
  size_t start = 0;
  while (start <= t.size()) {
    const size_t semi = t.find(';', start);
    std::string item = Trim(std::string_view(t).substr(start, semi == std::string::npos ? std::string::npos : semi - start));
    if (!item.empty()) out.push_back(std::move(item));
    if (semi == std::string::npos) break;
    start = semi + 1;
  }
  return out;
}

namespace {

// Records which of the known columns the manifest has.
void NoteColumn(ParsedManifest* m, Col c) {
  if (c == Col::kLabel) m->has_label_column = true;
  if (c == Col::kLabels) m->has_labels_column = true;
  if (c == Col::kTarget) m->has_target_column = true;
  if (c == Col::kSplit) m->has_split_column = true;
}

// A CSV manifest: a header row naming the columns (one of them 'path'),
// then one row per sample with as many fields.
Status ParseCsvManifest(std::string_view text, std::string_view name, ParsedManifest* m) {
  auto recs = ParseCsv(text);
  if (!recs.ok()) return recs.status().WithContext(name);
  if (recs->empty()) return Status::InvalidArgument(fmt::format("{}: empty manifest (no header row)", name));
  std::vector<std::string> header;
  std::vector<Col> cols;
  bool has_path = false;
  for (auto& h : (*recs)[0].fields) {
    header.push_back(Trim(h));
    cols.push_back(Classify(header.back()));
    NoteColumn(m, cols.back());
    has_path = has_path || cols.back() == Col::kPath;
  }
  if (!has_path) return Status::InvalidArgument(fmt::format("{}: the header has no 'path' column", name));
  for (size_t r = 1; r < recs->size(); ++r) {
    const CsvRecord& rec = (*recs)[r];
    const std::string where = fmt::format("{} line {}", name, rec.line);
    if (rec.fields.size() != header.size()) {
      return Status::InvalidArgument(
          fmt::format("{}: {} fields, but the header has {}", where, rec.fields.size(), header.size()));
    }
    ManifestRow row;
    row.line = rec.line;
    for (size_t c = 0; c < header.size(); ++c) {
      CQLS_RETURN_IF_ERROR(SetField(&row, cols[c], header[c], rec.fields[c], where));
    }
    CQLS_RETURN_IF_ERROR(CheckRow(row, where));
    m->rows.push_back(std::move(row));
  }
  return Status::OK();
}

// One JSON Lines object as a row: 'labels' may be an array, null fields are
// absent, path/target/split must be strings.
Status JsonRow(const Json& j, const std::string& where, ParsedManifest* m, ManifestRow* row) {
  for (const auto& [k, v] : j.fields) {
    const Col c = Classify(k);
    NoteColumn(m, c);
    if (c == Col::kLabels && v.is_array()) {
      row->has_label = true;
      for (const auto& item : v.items) {
        if (!item.is_string() && !item.is_number()) {
          return Status::InvalidArgument(fmt::format("{}: labels must be strings or integers", where));
        }
        std::string s = Trim(item.text);
        if (!s.empty()) row->labels.push_back(std::move(s));
      }
      continue;
    }
    if (v.type == Json::Type::kNull) continue;
    if ((c == Col::kPath || c == Col::kTarget || c == Col::kSplit) && !v.is_string()) {
      return Status::InvalidArgument(fmt::format("{}: '{}' must be a string", where, k));
    }
    CQLS_RETURN_IF_ERROR(SetField(row, c, k, v.ToText(), where));
  }
  return CheckRow(*row, where);
}

// A JSON Lines manifest: one object per non-blank line.
Status ParseJsonlManifest(std::string_view text, std::string_view name, ParsedManifest* m) {
  size_t line = 0, pos = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    std::string_view l = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line;
    if (line == 1 && l.starts_with("\xEF\xBB\xBF")) l.remove_prefix(3);
    if (Trim(l).empty()) continue;
    const std::string where = fmt::format("{} line {}", name, line);
    auto j = ParseJson(l);
    if (!j.ok()) return j.status().WithContext(where);
    if (!j->is_object()) return Status::InvalidArgument(fmt::format("{}: not a JSON object", where));
    ManifestRow row;
    row.line = line;
    CQLS_RETURN_IF_ERROR(JsonRow(*j, where, m, &row));
    m->rows.push_back(std::move(row));
  }
  return Status::OK();
}

}  // namespace

StatusOr<ParsedManifest> ParseManifest(std::string_view text, bool jsonl, std::string_view name) {
  ParsedManifest m;
  CQLS_RETURN_IF_ERROR(jsonl ? ParseJsonlManifest(text, name, &m) : ParseCsvManifest(text, name, &m));
  if (m.has_label_column && m.has_labels_column) {
    return Status::InvalidArgument(
        fmt::format("{}: has both a 'label' and a 'labels' column; keep one (labels = multilabel)", name));
  }
  return m;
}

namespace {

// The real path of a folder, or an IOError naming it.
StatusOr<std::string> RealFolder(const std::string& dir) {
  char* r = ::realpath(dir.c_str(), nullptr);
  if (r == nullptr) return Status::IOError(fmt::format("cannot resolve folder '{}': {}", dir, std::strerror(errno)));
  std::string out(r);
  std::free(r);
  return out;
}

bool Within(const std::string& path, const std::string& folder) {
  if (folder == "/") return true;
  return path.size() > folder.size() && path.compare(0, folder.size(), folder) == 0 && path[folder.size()] == '/';
}

// A manifest path must name something inside the manifest's folder: not
// absolute, no `..` leading out, and (when it exists) not resolving outside
// through a symlink. Paths that do not exist are left to ReadItem's skip.
Status CheckInside(const std::string& manifest, size_t line, const std::string& rel,
                   const std::filesystem::path& base, const std::string& real_base) {
  auto refuse = [&](std::string_view why) {
    return Status::InvalidArgument(fmt::format(
        "{}: line {}: path '{}' {}; a manifest may only name files inside its own folder (allow others with "
        "--allow-paths-outside)",
        manifest, line, rel, why));
  };
  const std::filesystem::path p(rel);
  if (p.is_absolute()) return refuse("is absolute");
  const std::filesystem::path norm = p.lexically_normal();
  if (!norm.empty() && *norm.begin() == "..") return refuse("leads outside the manifest's folder");
  char* r = ::realpath((base / p).c_str(), nullptr);
  if (r == nullptr) return Status::OK();
  const std::string real(r);
  std::free(r);
  if (!Within(real, real_base)) return refuse(fmt::format("resolves to '{}', outside the manifest's folder", real));
  return Status::OK();
}

// The label kind the manifest's columns give (a note when targets shadow labels).
LabelKind ManifestLabelKind(const ParsedManifest& m, std::vector<std::string>* notes) {
  if (m.has_target_column) {
    if (m.has_label_column || m.has_labels_column) {
      notes->push_back("the manifest has targets: its label column is kept in extra (label kind target)");
    }
    return LabelKind::kTarget;
  }
  if (m.has_labels_column) return LabelKind::kMultiLabel;
  if (m.has_label_column) return LabelKind::kClass;
  return LabelKind::kNone;
}

// Where the manifest's files are, and which of them it may name.
struct ManifestFolder {
  std::string file;  // the manifest
  std::filesystem::path base;
  std::string real_base;
  bool allow_outside = false;

  // Paths stay inside the manifest's folder unless the user allowed otherwise.
  Status Confine(const ManifestRow& row, const std::string& rel) const {
    if (allow_outside) return Status::OK();
    return CheckInside(file, row.line, rel, base, real_base);
  }

  // Points `ref` at the file `rel` names; why it cannot be read, or "".
  std::string Locate(const std::string& rel, ByteRef* ref, int64_t* mtime_ns) const {
    std::filesystem::path p(rel);
    ref->file = p.is_absolute() ? rel : (base / p).string();
    ref->archive_member = false;
    struct stat st;
    if (::stat(ref->file.c_str(), &st) != 0) return fmt::format("unreadable ({})", std::strerror(errno));
    if (!S_ISREG(st.st_mode)) return "unreadable (not a regular file)";
    ref->size = static_cast<uint64_t>(st.st_size);
    if (mtime_ns) *mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    return "";
  }
};

// A target-kind row: its labels go to extra, its target file is located.
Status SetTarget(const ManifestFolder& folder, bool labels_column, ManifestRow& row, SourceItem* it) {
  if (row.has_label) {
    std::string joined;
    for (size_t i = 0; i < row.labels.size(); ++i) joined += (i ? ";" : "") + row.labels[i];
    it->extra[labels_column ? "labels" : "label"] = joined;
  }
  if (row.target.empty()) {
    if (it->skip.empty()) it->skip = "no target";
    return Status::OK();
  }
  CQLS_RETURN_IF_ERROR(folder.Confine(row, row.target));
  it->target_path = std::filesystem::path(row.target).lexically_normal().string();
  ByteRef t;
  std::string why = folder.Locate(row.target, &t, nullptr);
  it->target = t;
  if (!why.empty() && it->skip.empty()) it->skip = "target: " + why;
  return Status::OK();
}

bool IsJsonl(const std::string& file) {
  std::string s = file;
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s.ends_with(".jsonl") || s.ends_with(".ndjson");
}

}  // namespace

Status ListManifest(const std::string& file, const ListOptions& o, SourceListing* out) {
  if (o.labels == LabelSource::kImageFolder) {
    return Status::InvalidArgument(fmt::format("--labels imagefolder needs a folder, but '{}' is a manifest", file));
  }
  CQLS_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(file));
  CQLS_ASSIGN_OR_RETURN(ParsedManifest m, ParseManifest(text, IsJsonl(file), file));
  ManifestFolder folder;
  folder.file = file;
  folder.base = std::filesystem::path(file).parent_path();
  folder.allow_outside = o.allow_paths_outside;
  const std::string default_split = o.split.empty() ? "train" : o.split;
  out->label_kind = ManifestLabelKind(m, &out->notes);
  CQLS_ASSIGN_OR_RETURN(folder.real_base, RealFolder(folder.base.empty() ? "." : folder.base.string()));

  if (o.labels != LabelSource::kNone && out->label_kind != LabelKind::kTarget) {
    std::set<std::string> all;
    for (const auto& row : m.rows) all.insert(row.labels.begin(), row.labels.end());
    out->all_label_texts.assign(all.begin(), all.end());
  }
  for (auto& row : m.rows) {
    SourceItem it;
    it.split = row.split.empty() ? default_split : row.split;
    if (!o.split.empty() && it.split != o.split) continue;
    it.path = std::filesystem::path(row.path).lexically_normal().string();
    it.origin = fmt::format("line {}", row.line);
    it.extra = std::move(row.extra);
    CQLS_RETURN_IF_ERROR(folder.Confine(row, row.path));
    it.skip = folder.Locate(row.path, &it.image, &it.mtime_ns);
    if (out->label_kind == LabelKind::kTarget) {
      CQLS_RETURN_IF_ERROR(SetTarget(folder, m.has_labels_column, row, &it));
    } else {
      it.label_texts = std::move(row.labels);
    }
    out->items.push_back(std::move(it));
  }
  return Status::OK();
}

}  // namespace cqlstream::store
