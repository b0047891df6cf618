// Copyright (c) cqlstream authors.
//
// Image-folder sources (see source.h): ROOT/split/class/file or
// ROOT/class/file, told apart by the depth of the files. With --labels none
// a folder that is not in one of these layouts is taken whole (every file
// at any depth) as one split.
#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "store/source.h"

namespace cqlstream::store {
namespace {

struct FileEntry {
  std::string rel;  // relative to the root, '/'-separated
  int depth = 0;    // number of components
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};

// What a walk found besides files: the directories at depth 1 and 2, and
// the directories it did not enter because it had already listed them.
struct WalkState {
  std::set<std::string> dirs;
  std::set<std::pair<dev_t, ino_t>> visited;  // directories entered
  std::vector<std::string> repeated;          // relative paths not entered again
};

// Lists the non-hidden regular files (symlinks followed) under root, up to
// max_depth components. A directory is entered once: a symlink loop or a
// second link to a directory already listed is not followed (and recorded).
Status Walk(const std::string& root, const std::string& rel, int depth, int max_depth, std::vector<FileEntry>* files,
            WalkState* w) {
  const std::string dir = rel.empty() ? root : root + "/" + rel;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return Status::IOError(fmt::format("cannot list '{}': {}", dir, std::strerror(errno)));
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;  // hidden, '.' and '..'
    names.emplace_back(e->d_name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    const std::string r = rel.empty() ? n : rel + "/" + n;
    struct stat st;
    if (::stat((root + "/" + r).c_str(), &st) != 0) {
      // A dangling link or a file that vanished: list it so that it is reported.
      files->push_back(FileEntry{r, depth + 1, 0, 0});
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      if (!w->visited.insert({st.st_dev, st.st_ino}).second) {
        w->repeated.push_back(r);
        continue;
      }
      if (depth + 1 <= 2) w->dirs.insert(r);
      if (depth + 1 < max_depth) CQLS_RETURN_IF_ERROR(Walk(root, r, depth + 1, max_depth, files, w));
    } else if (S_ISREG(st.st_mode)) {
      files->push_back(FileEntry{r, depth + 1, static_cast<uint64_t>(st.st_size),
                                 static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
    }
  }
  return Status::OK();
}

// Starts a walk at root (entered first, so a link back to it is a repeat).
Status WalkRoot(const std::string& root, int max_depth, std::vector<FileEntry>* files, WalkState* w,
                std::vector<std::string>* notes) {
  struct stat st;
  if (::stat(root.c_str(), &st) != 0) return Status::IOError(fmt::format("cannot stat '{}': {}", root, std::strerror(errno)));
  w->visited.insert({st.st_dev, st.st_ino});
  CQLS_RETURN_IF_ERROR(Walk(root, "", 0, max_depth, files, w));
  if (!w->repeated.empty()) {
    std::string list;
    for (size_t i = 0; i < w->repeated.size() && i < 5; ++i) list += fmt::format("{}'{}'", i ? ", " : "", w->repeated[i]);
    notes->push_back(fmt::format(
        "skipped {} folder{} already listed through another path (a symlink loop or a second link): {}{}",
        w->repeated.size(), w->repeated.size() > 1 ? "s" : "", list, w->repeated.size() > 5 ? ", ..." : ""));
  }
  return Status::OK();
}

std::string FirstComponent(const std::string& rel) { return rel.substr(0, rel.find('/')); }
std::string SecondComponent(const std::string& rel) {
  const size_t a = rel.find('/');
  const size_t b = rel.find('/', a + 1);
  return rel.substr(a + 1, b - a - 1);
}

enum class Layout { kSplitClass, kClass, kFlat };

// The folder's layout from the depths its files lie at: ROOT/split/class/file,
// ROOT/class/file, or (--labels none) any.
StatusOr<Layout> DetectLayout(const std::string& root, const std::vector<FileEntry>& files, bool labels_none) {
  size_t at[5] = {0, 0, 0, 0, 0};
  for (const auto& f : files) ++at[std::min(f.depth, 4)];
  if (at[3] > 0 && at[2] == 0 && (!labels_none || (at[1] == 0 && at[4] == 0))) return Layout::kSplitClass;
  if (at[2] > 0 && at[3] == 0 && (!labels_none || (at[1] == 0 && at[4] == 0))) return Layout::kClass;
  if (labels_none) return Layout::kFlat;
  if (at[2] > 0 && at[3] > 0) {
    std::string e2, e3;
    for (const auto& f : files) {
      if (f.depth == 2 && e2.empty()) e2 = f.rel;
      if (f.depth == 3 && e3.empty()) e3 = f.rel;
    }
    return Status::InvalidArgument(fmt::format(
        "folder '{}' mixes the layouts class/file ({} files, e.g. '{}') and split/class/file ({} files, e.g. '{}')",
        root, at[2], e2, at[3], e3));
  }
  return Status::InvalidArgument(fmt::format(
      "folder '{}' holds no files in class folders (expected ROOT/class/file or ROOT/split/class/file; "
      "use --labels none for unlabeled images)",
      root));
}

// The class names: the class folders of the layout (also empty ones).
std::set<std::string> FolderClasses(const std::set<std::string>& dirs, Layout layout, bool labels_none) {
  std::set<std::string> classes;
  if (layout == Layout::kFlat || labels_none) return classes;
  for (const auto& d : dirs) {
    const bool is_class = layout == Layout::kClass ? d.find('/') == std::string::npos : d.find('/') != std::string::npos;
    if (is_class) classes.insert(layout == Layout::kClass ? d : SecondComponent(d));
  }
  return classes;
}

// The names of the splits a split/class/file folder has.
std::string SplitsOf(const std::vector<FileEntry>& files) {
  std::set<std::string> splits;
  for (const auto& f : files) {
    if (f.depth == 3) splits.insert(FirstComponent(f.rel));
  }
  std::string have;
  for (const auto& s : splits) have += (have.empty() ? "" : ", ") + s;
  return have;
}

// Adds one item per file at the layout's depth (of the chosen split) to
// `out`; files at other depths are counted in a note.
Status AddFolderItems(const std::string& root, const std::vector<FileEntry>& files, Layout layout,
                      const ListOptions& o, SourceListing* out) {
  const bool labels_none = o.labels == LabelSource::kNone;
  const int depth = layout == Layout::kSplitClass ? 3 : 2;
  const std::string default_split = o.split.empty() ? "train" : o.split;
  size_t ignored = 0;
  std::string ignored_example;
  for (const auto& f : files) {
    if (layout != Layout::kFlat && f.depth != depth) {
      if (ignored++ == 0) ignored_example = f.rel;
      continue;
    }
    SourceItem it;
    it.path = f.rel;
    it.origin = "file";
    it.image = ByteRef{root + "/" + f.rel, 0, f.size, false};
    it.mtime_ns = f.mtime_ns;
    if (layout == Layout::kSplitClass) {
      it.split = FirstComponent(f.rel);
      if (!o.split.empty() && it.split != o.split) continue;
      if (!labels_none) it.label_texts.push_back(SecondComponent(f.rel));
    } else {
      it.split = default_split;
      if (layout == Layout::kClass && !labels_none) it.label_texts.push_back(FirstComponent(f.rel));
    }
    out->items.push_back(std::move(it));
  }
  if (layout == Layout::kSplitClass && !o.split.empty() && out->items.empty()) {
    return Status::InvalidArgument(
        fmt::format("--split {}: folder '{}' has no such split (it has: {})", o.split, root, SplitsOf(files)));
  }
  if (ignored > 0) {
    out->notes.push_back(fmt::format("ignored {} file{} outside the {} layout (e.g. '{}')", ignored,
                                     ignored > 1 ? "s" : "",
                                     layout == Layout::kSplitClass ? "split/class/file" : "class/file",
                                     ignored_example));
  }
  return Status::OK();
}

}  // namespace

Status ListFolder(const std::string& root, const ListOptions& o, SourceListing* out) {
  const bool labels_none = o.labels == LabelSource::kNone;
  if (o.labels == LabelSource::kManifest) {
    return Status::InvalidArgument(fmt::format("--labels manifest needs a manifest source, but '{}' is a folder", root));
  }
  std::vector<FileEntry> files;
  WalkState walk;
  CQLS_RETURN_IF_ERROR(WalkRoot(root, labels_none ? 32 : 3, &files, &walk, &out->notes));
  CQLS_ASSIGN_OR_RETURN(const Layout layout, DetectLayout(root, files, labels_none));
  const std::set<std::string> classes = FolderClasses(walk.dirs, layout, labels_none);
  CQLS_RETURN_IF_ERROR(AddFolderItems(root, files, layout, o, out));
  out->folder_classes.assign(classes.begin(), classes.end());
  out->label_kind = labels_none || layout == Layout::kFlat ? LabelKind::kNone : LabelKind::kClass;
  return Status::OK();
}

}  // namespace cqlstream::store
