// Copyright (c) cqlstream authors.
#include "store/source.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <set>

#include "store/image_check.h"

namespace cqlstream::store {
namespace fs = std::filesystem;
namespace {

bool HasGlobChars(std::string_view s) { return s.find_first_of("*?[") != std::string_view::npos; }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && Lower(s.substr(s.size() - suffix.size())) == suffix;
}

std::string RealPath(const std::string& p) {
  std::error_code ec;
  fs::path r = fs::weakly_canonical(fs::absolute(p, ec), ec);
  return ec ? p : r.string();
}

// Reads [offset, offset + n) of an open file completely.
bool PreadAll(int fd, uint8_t* dst, size_t n, uint64_t offset, int* err) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, dst, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      *err = errno;
      return false;
    }
    if (r == 0) {
      *err = 0;  // shorter than expected
      return false;
    }
    dst += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return true;
}

struct OpenFile {
  int fd = -1;
  ~OpenFile() {
    if (fd >= 0) ::close(fd);
  }
};

// Opens a ByteRef and finds its size; "" or the reason it is unreadable.
std::string OpenRef(const ByteRef& ref, OpenFile* f, uint64_t* size) {
  f->fd = ::open(ref.file.c_str(), O_RDONLY | O_CLOEXEC);
  if (f->fd < 0) return fmt::format("unreadable ({})", std::strerror(errno));
  if (ref.archive_member) {
    *size = ref.size;
    return "";
  }
  struct stat st;
  if (::fstat(f->fd, &st) != 0) return fmt::format("unreadable ({})", std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return "unreadable (not a regular file)";
  *size = static_cast<uint64_t>(st.st_size);
  return "";
}

std::string ReadInto(const ByteRef& ref, const OpenFile& f, uint8_t* dst, uint64_t n) {
  int err = 0;
  if (!PreadAll(f.fd, dst, n, ref.archive_member ? ref.offset : 0, &err)) {
    return err == 0 ? std::string("unreadable (file shorter than listed)")
                    : fmt::format("unreadable ({})", std::strerror(err));
  }
  return "";
}

bool CanonicalUint(std::string_view s, int64_t* v) {
  if (s.empty() || s.size() > 6 || (s.size() > 1 && s[0] == '0')) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size() && *v >= 0;
}

Status ApplyLabelKind(const ListOptions& o, SourceListing* l) {
  if (o.labels == LabelSource::kNone) {
    for (auto& it : l->items) it.label_texts.clear();
    if (l->label_kind != LabelKind::kTarget) l->label_kind = LabelKind::kNone;
    l->folder_classes.clear();
    l->all_label_texts.clear();
  }
  if (!o.label_kind) return Status::OK();
  const LabelKind want = *o.label_kind;
  const LabelKind have = l->label_kind;
  if (want == have) return Status::OK();
  if (want == LabelKind::kNone) {
    for (auto& it : l->items) {
      it.label_texts.clear();
      if (have == LabelKind::kTarget) {
        it.target.reset();
        it.target_path.clear();
      }
    }
    l->folder_classes.clear();
    l->all_label_texts.clear();
    l->label_kind = want;
    return Status::OK();
  }
  if (want == LabelKind::kMultiLabel && have == LabelKind::kClass) {
    l->label_kind = want;
    return Status::OK();
  }
  if (want == LabelKind::kClass && have == LabelKind::kMultiLabel) {
    for (auto& it : l->items) {
      if (it.label_texts.size() > 1 && it.skip.empty()) it.skip = "several labels (--label-kind class)";
    }
    l->label_kind = want;
    return Status::OK();
  }
  return Status::InvalidArgument(fmt::format("--label-kind {}: the source carries labels of kind '{}'",
                                             LabelKindName(want), LabelKindName(have)));
}

Status CheckDuplicates(SourceListing* l) {
  // Same relative path twice in one source, whatever the split.
  std::vector<const SourceItem*> by_path;
  by_path.reserve(l->items.size());
  for (const auto& it : l->items) by_path.push_back(&it);
  std::sort(by_path.begin(), by_path.end(), [](const auto* a, const auto* b) { return a->path < b->path; });
  std::vector<std::string> dups;
  for (size_t i = 1; i < by_path.size(); ++i) {
    if (by_path[i]->path == by_path[i - 1]->path) {
      dups.push_back(fmt::format("'{}' ({}, {})", by_path[i]->path, by_path[i - 1]->origin, by_path[i]->origin));
    }
  }
  if (dups.empty()) return Status::OK();
  std::string list;
  for (size_t i = 0; i < dups.size() && i < 20; ++i) list += (i ? "; " : "") + dups[i];
  return Status::InvalidArgument(fmt::format("duplicate path{} in the source: {}{}", dups.size() > 1 ? "s" : "", list,
                                             dups.size() > 20 ? fmt::format(" and {} more", dups.size() - 20) : ""));
}

void Hash(XXH64_state_t* h, std::string_view s) {
  XXH64_update(h, s.data(), s.size());
  XXH64_update(h, "\0", 1);
}

}  // namespace

std::string_view SourceKindName(SourceKind k) {
  switch (k) {
    case SourceKind::kFolder: return "folder";
    case SourceKind::kManifest: return "manifest";
    case SourceKind::kTar: return "tar";
  }
  return "?";
}

StatusOr<LabelSource> ParseLabelSource(std::string_view s) {
  if (s == "imagefolder") return LabelSource::kImageFolder;
  if (s == "manifest") return LabelSource::kManifest;
  if (s == "none") return LabelSource::kNone;
  if (s == "auto" || s.empty()) return LabelSource::kAuto;
  return Status::InvalidArgument(fmt::format("--labels '{}': use imagefolder, manifest or none", s));
}

StatusOr<std::string> ReadSmallFile(const std::string& path, uint64_t max_bytes) {
  OpenFile f;
  uint64_t size = 0;
  ByteRef ref{path, 0, 0, false};
  std::string why = OpenRef(ref, &f, &size);
  if (!why.empty()) return Status::IOError(fmt::format("'{}': {}", path, why));
  if (size > max_bytes) return Status::IOError(fmt::format("'{}' is larger than {} bytes", path, max_bytes));
  std::string out(size, '\0');
  why = ReadInto(ref, f, reinterpret_cast<uint8_t*>(out.data()), size);
  if (!why.empty()) return Status::IOError(fmt::format("'{}': {}", path, why));
  return out;
}

namespace {

// The tar shards a source names, and the canonical names of what named them
// (the dataset's source identity).
struct TarSet {
  std::vector<std::string> tars;
  std::vector<std::string> canon;
};

// A folder of tar shards: every non-hidden regular *.tar in it.
Status AddTarDir(const std::string& dir, TarSet* t) {
  std::error_code ec;
  size_t n = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(".") && EndsWith(name, ".tar") && it->is_regular_file(ec)) {
      t->tars.push_back(it->path().string());
      ++n;
    }
  }
  if (ec) return Status::IOError(fmt::format("cannot list '{}': {}", dir, ec.message()));
  if (n == 0) return Status::InvalidArgument(fmt::format("'{}' holds no .tar files", dir));
  t->canon.push_back("dir:" + RealPath(dir));
  return Status::OK();
}

// A glob of tar shards: the *.tar files it matches (at least one).
Status AddTarGlob(const std::string& pattern, TarSet* t) {
  glob_t g;
  std::memset(&g, 0, sizeof g);
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  size_t n = 0;
  if (rc == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      std::string p = g.gl_pathv[i];
      if (EndsWith(p, ".tar")) {
        t->tars.push_back(p);
        ++n;
      }
    }
  }
  globfree(&g);
  if (n == 0) return Status::InvalidArgument(fmt::format("'{}' matches no .tar file", pattern));
  const fs::path pat(pattern);
  t->canon.push_back("glob:" + RealPath(pat.parent_path().empty() ? "." : pat.parent_path().string()) + "/" +
                     pat.filename().string());
  return Status::OK();
}

// A folder given alone: a folder of tar shards (only .tar files and no
// sub-folders), or an image folder.
Status ListFolderSource(const std::string& src, const ListOptions& o, SourceListing* l, TarSet* t) {
  std::error_code ec;
  bool has_tar = false, has_dir = false;
  for (fs::directory_iterator it(src, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with(".")) continue;
    if (it->is_directory(ec)) has_dir = true;
    else if (EndsWith(name, ".tar")) has_tar = true;
  }
  if (ec) return Status::IOError(fmt::format("cannot list '{}': {}", src, ec.message()));
  if (has_tar && !has_dir) return AddTarDir(src, t);
  l->kind = SourceKind::kFolder;
  l->canonical = "folder:" + RealPath(src);
  l->description = src;
  return ListFolder(src, o, l);
}

// One SOURCE without glob characters: a folder, a manifest or a tar shard.
Status ListSingleSource(const std::string& src, const ListOptions& o, SourceListing* l, TarSet* t) {
  std::error_code ec;
  const auto st = fs::status(src, ec);
  if (ec || !fs::exists(st)) return Status::NotFound(fmt::format("source '{}' does not exist", src));
  if (fs::is_directory(st)) return ListFolderSource(src, o, l, t);
  if (EndsWith(src, ".csv") || EndsWith(src, ".jsonl") || EndsWith(src, ".ndjson")) {
    l->kind = SourceKind::kManifest;
    l->canonical = "manifest:" + RealPath(src);
    l->description = src;
    return ListManifest(src, o, l);
  }
  if (EndsWith(src, ".tar")) {
    t->tars.push_back(src);
    t->canon.push_back("file:" + RealPath(src));
    return Status::OK();
  }
  return Status::InvalidArgument(
      fmt::format("source '{}': not a folder, a manifest (.csv, .jsonl) or a tar shard (.tar)", src));
}

// Several SOURCEs (or a glob): each must name tar shards.
Status AddTarSource(const std::string& src, TarSet* t) {
  if (HasGlobChars(src)) return AddTarGlob(src, t);
  std::error_code ec;
  if (fs::is_directory(src, ec)) return AddTarDir(src, t);
  if (EndsWith(src, ".tar") && fs::exists(src, ec)) {
    t->tars.push_back(src);
    t->canon.push_back("file:" + RealPath(src));
    return Status::OK();
  }
  return Status::InvalidArgument(fmt::format(
      "source '{}': several sources must all be tar shards (.tar files, folders of them, or globs)", src));
}

// Lists the tar shards of `t` (sorted, each once) into `l`.
Status ListTarSet(TarSet t, const ListOptions& o, SourceListing* l) {
  std::sort(t.canon.begin(), t.canon.end());
  std::string c = "tar:";
  for (size_t i = 0; i < t.canon.size(); ++i) c += (i ? "\n" : "") + t.canon[i];
  std::sort(t.tars.begin(), t.tars.end());
  t.tars.erase(std::unique(t.tars.begin(), t.tars.end()), t.tars.end());
  l->kind = SourceKind::kTar;
  l->description = t.tars.size() == 1 ? t.tars[0] : fmt::format("{} tar shards ({} ...)", t.tars.size(), t.tars[0]);
  return ListTars(t.tars, c, o, l);
}

}  // namespace

StatusOr<SourceListing> ListSource(const ListOptions& o) {
  if (o.sources.empty()) return Status::InvalidArgument("no SOURCE given");
  SourceListing l;
  TarSet tars;
  if (o.sources.size() == 1 && !HasGlobChars(o.sources[0])) {
    CQLS_RETURN_IF_ERROR(ListSingleSource(o.sources[0], o, &l, &tars));
  } else {
    for (const auto& src : o.sources) CQLS_RETURN_IF_ERROR(AddTarSource(src, &tars));
  }
  if (!tars.tars.empty()) CQLS_RETURN_IF_ERROR(ListTarSet(std::move(tars), o, &l));
  CQLS_RETURN_IF_ERROR(CheckDuplicates(&l));
  CQLS_RETURN_IF_ERROR(ApplyLabelKind(o, &l));
  std::sort(l.items.begin(), l.items.end(), [](const SourceItem& a, const SourceItem& b) {
    return a.split != b.split ? a.split < b.split : a.path < b.path;
  });
  return l;
}

std::vector<std::string> ListingSplits(const SourceListing& l) {
  std::set<std::string> s;
  for (const auto& it : l.items) s.insert(it.split);
  return {s.begin(), s.end()};
}

std::vector<size_t> SplitPositions(const SourceListing& l, std::string_view split) {
  std::vector<size_t> out;
  for (size_t i = 0; i < l.items.size(); ++i) {
    if (l.items[i].split == split) out.push_back(i);
  }
  return out;
}

std::vector<size_t> ShardPositions(size_t n, int shard_index, int shard_count) {
  std::vector<size_t> out;
  if (shard_count < 1 || shard_index < 0 || shard_index >= shard_count) return out;
  for (size_t p = static_cast<size_t>(shard_index); p < n; p += static_cast<size_t>(shard_count)) out.push_back(p);
  return out;
}

Status ParseShard(std::string_view text, int* index, int* count) {
  const size_t slash = text.find('/');
  auto bad = [&] {
    return Status::InvalidArgument(fmt::format("--shard '{}': use i/N with 0 <= i < N, e.g. 0/4", text));
  };
  if (slash == std::string_view::npos) return bad();
  std::string_view a = text.substr(0, slash), b = text.substr(slash + 1);
  auto r1 = std::from_chars(a.data(), a.data() + a.size(), *index);
  auto r2 = std::from_chars(b.data(), b.data() + b.size(), *count);
  if (a.empty() || b.empty() || r1.ec != std::errc() || r2.ec != std::errc() || r1.ptr != a.data() + a.size() ||
      r2.ptr != b.data() + b.size() || *count < 1 || *index < 0 || *index >= *count || *count > 1000000) {
    return bad();
  }
  return Status::OK();
}

std::string SourceId(std::string_view dataset, std::string_view split, std::string_view canonical, int shard_index,
                     int shard_count) {
  XXH64_state_t* h = XXH64_createState();
  XXH64_reset(h, 0);
  Hash(h, dataset);
  Hash(h, split);
  Hash(h, canonical);
  const std::string shard = fmt::format("{}/{}", shard_index, shard_count);
  XXH64_update(h, shard.data(), shard.size());
  const uint64_t v = XXH64_digest(h);
  XXH64_freeState(h);
  return fmt::format("{:016x}", v);
}

std::string Fingerprint(const std::vector<const SourceItem*>& items) {
  XXH64_state_t* h = XXH64_createState();
  XXH64_reset(h, 0);
  for (const SourceItem* it : items) {
    Hash(h, it->path);
    Hash(h, std::to_string(it->image.size));
    Hash(h, std::to_string(it->mtime_ns));
    Hash(h, it->target_path);
    Hash(h, it->target ? std::to_string(it->target->size) : std::string());
    std::string labels;
    for (size_t i = 0; i < it->label_texts.size(); ++i) labels += (i ? ";" : "") + it->label_texts[i];
    Hash(h, labels);
    std::string extra;
    for (const auto& [k, v] : it->extra) extra += k + "=" + v + ";";
    Hash(h, extra);
    Hash(h, it->skip);
  }
  const uint64_t v = XXH64_digest(h);
  XXH64_freeState(h);
  return fmt::format("{:016x}", v);
}

std::vector<std::string> BuildClassMapping(const std::vector<std::string>& texts) {
  std::set<std::string> distinct(texts.begin(), texts.end());
  if (distinct.empty()) return {};
  int64_t max = -1;
  bool numeric = true;
  for (const auto& t : distinct) {
    int64_t v = 0;
    if (!CanonicalUint(t, &v)) {
      numeric = false;
      break;
    }
    max = std::max(max, v);
  }
  std::vector<std::string> out;
  if (numeric) {
    for (int64_t i = 0; i <= max; ++i) out.push_back(std::to_string(i));
    return out;
  }
  return {distinct.begin(), distinct.end()};
}

std::vector<std::string> UsedLabelTexts(const SourceListing& l) {
  std::set<std::string> s;
  for (const auto& it : l.items) s.insert(it.label_texts.begin(), it.label_texts.end());
  return {s.begin(), s.end()};
}

Status ResolveLabels(LabelKind kind, const std::vector<std::string>& class_names, SourceListing* l) {
  std::map<std::string, int32_t> index;
  for (size_t i = 0; i < class_names.size(); ++i) index.emplace(class_names[i], static_cast<int32_t>(i));
  std::set<std::string> unknown;
  for (auto& it : l->items) {
    it.label = -1;
    it.labels.clear();
    if (kind != LabelKind::kClass && kind != LabelKind::kMultiLabel) continue;
    for (const auto& t : it.label_texts) {
      auto f = index.find(t);
      if (f == index.end()) {
        unknown.insert(t);
      } else if (kind == LabelKind::kClass) {
        it.label = f->second;
      } else {
        it.labels.push_back(f->second);
      }
    }
    if (kind == LabelKind::kClass && it.label_texts.empty() && it.skip.empty()) it.skip = "no label";
  }
  if (unknown.empty()) return Status::OK();
  std::string list;
  size_t n = 0;
  for (const auto& u : unknown) {
    if (n == 20) break;
    list += (n++ ? ", " : "") + fmt::format("'{}'", u);
  }
  return Status::InvalidArgument(fmt::format(
      "unknown class{} {}{}: the dataset's {} classes were fixed when it was created", unknown.size() > 1 ? "es" : "",
      list, unknown.size() > 20 ? fmt::format(" and {} more", unknown.size() - 20) : "", class_names.size()));
}

StatusOr<ReadOptions> MakeReadOptions(SampleKind kind, std::string_view preprocess) {
  ReadOptions o;
  o.kind = kind;
  CQLS_ASSIGN_OR_RETURN(o.preprocess, PreprocessSpec::Parse(preprocess));
  if (kind == SampleKind::kBlob && !o.preprocess.empty()) {
    return Status::InvalidArgument(
        fmt::format("preprocessing ({}) is for images: samples of kind blob are stored as they are",
                    o.preprocess.ToString()));
  }
  return o;
}

std::string PreparePayload(const ReadOptions& o, bool has_target, Payload* p) {
  if (o.kind == SampleKind::kBlob) return "";
  const std::span<const uint8_t> image(p->data.get(), p->image_size);
  const std::span<const uint8_t> target(p->data.get() + p->image_size, p->size - p->image_size);
  ImageInfo info;
  std::string why = CheckImage(image, &info);
  if (!why.empty()) return why;
  if (has_target) {
    why = CheckImage(target, &info);
    if (!why.empty()) return "target: " + why;
  }
  if (o.preprocess.empty()) return "";
  auto img = Apply(o.preprocess, image, o.limits);
  if (!img.ok()) return "preprocess: " + img.status().message();
  why = CheckImage(img->bytes, &info);
  if (!why.empty()) return "preprocess: the result is invalid: " + why;
  std::vector<uint8_t> tgt;
  if (has_target && o.preprocess.resize_target) {
    auto t = ApplyToTarget(o.preprocess, target, img->source_width, img->source_height, o.limits);
    if (!t.ok()) return "target: preprocess: " + t.status().message();
    why = CheckImage(t->bytes, &info);
    if (!why.empty()) return "target: preprocess: the result is invalid: " + why;
    tgt = std::move(t->bytes);
  } else {
    tgt.assign(target.begin(), target.end());
  }
  if (img->bytes.size() + tgt.size() > kMaxPayloadBytes) {
    return fmt::format("preprocess: the result is larger than {} bytes", kMaxPayloadBytes);
  }
  Payload q;
  q.size = img->bytes.size() + tgt.size();
  q.image_size = img->bytes.size();
  q.data.reset(new uint8_t[q.size]);
  std::memcpy(q.data.get(), img->bytes.data(), img->bytes.size());
  if (!tgt.empty()) std::memcpy(q.data.get() + q.image_size, tgt.data(), tgt.size());
  *p = std::move(q);
  return "";
}

std::string ReadItem(const SourceItem& item, Payload* out) { return ReadItem(item, ReadOptions(), out); }

std::string ReadItem(const SourceItem& item, const ReadOptions& o, Payload* out) {
  *out = Payload();
  if (!item.skip.empty()) return item.skip;
  OpenFile fi, ft;
  uint64_t isize = 0, tsize = 0;
  std::string why = OpenRef(item.image, &fi, &isize);
  if (!why.empty()) return why;
  if (isize == 0) return "empty file";
  if (item.target) {
    why = OpenRef(*item.target, &ft, &tsize);
    if (!why.empty()) return "target: " + why;
    if (tsize == 0) return "target: empty file";
  }
  if (isize + tsize > kMaxPayloadBytes) return fmt::format("larger than {} bytes", kMaxPayloadBytes);
  out->size = static_cast<size_t>(isize + tsize);
  out->image_size = static_cast<size_t>(isize);
  out->data.reset(new uint8_t[out->size]);
  why = ReadInto(item.image, fi, out->data.get(), isize);
  if (!why.empty()) return why;
  if (item.target) {
    why = ReadInto(*item.target, ft, out->data.get() + isize, tsize);
    if (!why.empty()) return "target: " + why;
  }
  return PreparePayload(o, item.target.has_value(), out);
}

}  // namespace cqlstream::store
