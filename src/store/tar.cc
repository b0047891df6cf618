// Copyright (c) cqlstream authors.
#include "store/tar.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "store/image_check.h"
#include "store/json.h"
#include "store/source.h"

namespace cqlstream::store {
namespace {

constexpr size_t kBlock = 512;
constexpr size_t kReadBuffer = 64 * 1024;
constexpr std::string_view kMissingEnd = "has no end-of-archive marker";

// libarchive's client callbacks over a ReadAtFn. Skips move the position
// without reading and never past the end, so a member that claims more bytes
// than remain makes libarchive report a truncated input.
struct Input {
  const ReadAtFn* read = nullptr;
  uint64_t size = 0;
  uint64_t pos = 0;
  std::vector<uint8_t> buf;
};

la_ssize_t ReadCallback(struct archive* a, void* data, const void** out) {
  auto* in = static_cast<Input*>(data);
  const size_t n = static_cast<size_t>(std::min<uint64_t>(in->size - in->pos, in->buf.size()));
  if (n == 0) return 0;
  if (!(*in->read)(in->pos, n, in->buf.data())) {
    archive_set_error(a, EIO, "cannot read %zu bytes at offset %llu", n, static_cast<unsigned long long>(in->pos));
    return -1;
  }
  in->pos += n;
  *out = in->buf.data();
  return static_cast<la_ssize_t>(n);
}

la_int64_t SkipCallback(struct archive*, void* data, la_int64_t request) {
  auto* in = static_cast<Input*>(data);
  if (request <= 0) return 0;
  const uint64_t n = std::min<uint64_t>(static_cast<uint64_t>(request), in->size - in->pos);
  in->pos += n;
  return static_cast<la_int64_t>(n);
}

struct ArchiveCloser {
  void operator()(struct archive* a) const { archive_read_free(a); }
};
using ArchivePtr = std::unique_ptr<struct archive, ArchiveCloser>;

std::string Trim(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return std::string(s.substr(a, b - a));
}

std::string ArchiveError(struct archive* a) {
  const char* e = archive_error_string(a);
  return e ? e : "unknown libarchive error";
}

// Why a non-directory entry is not indexed, or "" to index it.
std::string SkipReason(struct archive_entry* e) {
  if (archive_entry_hardlink(e) != nullptr) return "hard link";
  switch (archive_entry_filetype(e)) {
    case AE_IFREG: break;
    case AE_IFLNK: return "symbolic link";
    case AE_IFCHR: return "character device";
    case AE_IFBLK: return "block device";
    case AE_IFIFO: return "FIFO";
    case AE_IFSOCK: return "socket";
    default: return "not a regular file";
  }
  if (archive_entry_sparse_count(e) > 0) return "sparse file (not supported: store it as a regular file)";
  if (!archive_entry_size_is_set(e)) return "member without a size";
  const uint64_t size = static_cast<uint64_t>(archive_entry_size(e));
  if (size > kMaxTarMemberBytes) {
    return fmt::format("{} bytes, larger than the {} MiB limit", size, kMaxTarMemberBytes >> 20);
  }
  return "";
}

std::string EntryName(struct archive_entry* e) {
  const char* n = archive_entry_pathname_utf8(e);
  if (n == nullptr) n = archive_entry_pathname(e);
  std::string name = n ? n : "";
  while (name.starts_with("./")) name.erase(0, 2);
  return name;
}

// After libarchive's end of archive: `end` is where the last member's data
// (padded to whole blocks) ends. The rest must be one or more zero blocks.
Status CheckTail(const ReadAtFn& read, uint64_t size, uint64_t end, const std::string& where) {
  if (end >= size) {
    return Status::Corruption(
        fmt::format("{} {} (the file ends right after it: a copy cut at a member boundary?)", where, kMissingEnd));
  }
  if ((size - end) % kBlock != 0) {
    return Status::Corruption(fmt::format("{}: {} bytes after the last member are not whole 512-byte blocks", where,
                                          size - end));
  }
  std::vector<uint8_t> buf(kReadBuffer);
  for (uint64_t off = end; off < size;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(size - off, buf.size()));
    if (!read(off, n, buf.data())) return Status::IOError(fmt::format("{}: cannot read at offset {}", where, off));
    for (size_t i = 0; i < n; ++i) {
      if (buf[i] != 0) {
        return Status::Corruption(fmt::format(
            "{}: non-zero byte at offset {} after the end of the archive (trailing garbage, or a member whose "
            "header is damaged)",
            where, off + i));
      }
    }
    off += n;
  }
  return Status::OK();
}

StatusOr<ArchivePtr> OpenArchive(Input* in, std::string_view name) {
  ArchivePtr a(archive_read_new());
  if (!a) return Status::Internal("archive_read_new failed");
  // Tar only, no decompression filter: offsets must be offsets in the file.
  if (archive_read_support_format_tar(a.get()) != ARCHIVE_OK ||
      archive_read_set_read_callback(a.get(), ReadCallback) != ARCHIVE_OK ||
      archive_read_set_skip_callback(a.get(), SkipCallback) != ARCHIVE_OK ||
      archive_read_set_callback_data(a.get(), in) != ARCHIVE_OK || archive_read_open1(a.get()) != ARCHIVE_OK) {
    return Status::Corruption(fmt::format("tar '{}': not an uncompressed tar archive, or its first header is damaged: {}",
                                          name, ArchiveError(a.get())));
  }
  return a;
}

}  // namespace

bool IsMissingEndOfArchive(const Status& s) {
  return s.code() == Status::Code::kCorruption && s.message().find(kMissingEnd) != std::string::npos;
}

StatusOr<std::vector<TarMember>> ReadTarIndex(const ReadAtFn& read, uint64_t size, std::string_view name,
                                              std::vector<TarSkip>* skipped) {
  Input in{&read, size, 0, std::vector<uint8_t>(kReadBuffer)};
  CQLS_ASSIGN_OR_RETURN(ArchivePtr a, OpenArchive(&in, name));
  std::vector<TarMember> out;
  std::string last = "";  // the last member whose header was read
  uint64_t end = 0;       // where the last member's padded data ends
  auto where = [&] {
    return last.empty() ? fmt::format("tar '{}'", name) : fmt::format("tar '{}' after member '{}'", name, last);
  };
  for (;;) {
    struct archive_entry* e = nullptr;
    const int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {  // WARN: e.g. a name not in the locale's charset
      return Status::Corruption(fmt::format("{}, at offset {}: {}", where(), archive_filter_bytes(a.get(), 0),
                                            ArchiveError(a.get())));
    }
    const uint64_t data = static_cast<uint64_t>(archive_filter_bytes(a.get(), 0));
    const uint64_t msize = archive_entry_size_is_set(e) ? static_cast<uint64_t>(archive_entry_size(e)) : 0;
    last = EntryName(e);
    // Compare with what remains, never by adding to the offset (sizes may be
    // near 2^64). A sparse member's size is its expanded size, not what is stored.
    if (archive_entry_sparse_count(e) == 0 && (data > size || msize > size - data)) {
      return Status::Corruption(fmt::format("tar '{}': member '{}' at offset {} claims {} bytes but only {} remain "
                                            "(truncated archive or bad size field)",
                                            name, last, data, msize, data > size ? 0 : size - data));
    }
    // Skipping the data (without reading it) also checks that it is all there.
    if (archive_read_data_skip(a.get()) != ARCHIVE_OK) {
      return Status::Corruption(fmt::format("tar '{}': member '{}' at offset {} is cut short: {}", name, last, data,
                                            ArchiveError(a.get())));
    }
    end = static_cast<uint64_t>(archive_filter_bytes(a.get(), 0));  // where the member's padded data ends
    if (archive_entry_filetype(e) == AE_IFDIR || last.empty() || last.ends_with("/")) continue;
    std::string why = SkipReason(e);
    if (!why.empty()) {
      if (skipped) skipped->push_back(TarSkip{last, std::move(why)});
      continue;
    }
    out.push_back(TarMember{last, data, msize});
  }
  CQLS_RETURN_IF_ERROR(CheckTail(read, size, end, where()));
  return out;
}

void SplitTarKey(std::string_view member, std::string* key, std::string* ext) {
  const size_t slash = member.rfind('/');
  const size_t base = slash == std::string_view::npos ? 0 : slash + 1;
  const size_t dot = member.find('.', base);
  if (dot == std::string_view::npos) {
    *key = std::string(member);
    ext->clear();
    return;
  }
  *key = std::string(member.substr(0, dot));
  ext->assign(member.substr(dot + 1));
  for (char& c : *ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

namespace {

// One WebDataset sample from its members (all with the same key).
SourceItem TarSample(const ReadAtFn& read, const std::string& file, const std::string& base, const std::string& key,
                     const std::vector<const TarMember*>& members, TarListFlags* flags) {
  auto small = [&](const TarMember& m, size_t max, std::string* s) {
    if (m.size > max) return false;
    s->assign(m.size, '\0');
    return m.size == 0 || read(m.offset, m.size, reinterpret_cast<uint8_t*>(s->data()));
  };
  SourceItem it;
  std::vector<const TarMember*> images, targets;
  for (const TarMember* m : members) {
    std::string k, ext;
    SplitTarKey(m->name, &k, &ext);
    if (IsImageExtension(ext)) {
      images.push_back(m);
    } else if (ext == "mask.png" || ext == "seg.png") {
      targets.push_back(m);
    } else if (ext == "cls") {
      std::string text;
      if (!small(*m, 64, &text)) {
        it.skip = "invalid .cls label (larger than 64 bytes or unreadable)";
        continue;
      }
      text = Trim(text);
      int64_t v = 0;
      auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (text.empty() || ec != std::errc() || p != text.data() + text.size() || v < 0) {
        if (it.skip.empty()) it.skip = fmt::format("invalid .cls label '{}' (not a non-negative integer)", text);
        continue;
      }
      it.label_texts = {std::to_string(v)};
      flags->any_label = true;
    } else if (ext == "json") {
      std::string text;
      auto j = small(*m, 1u << 20, &text) ? ParseJson(text) : StatusOr<Json>(Status::InvalidArgument("too large"));
      if (!j.ok() || !j->is_object()) {
        if (it.skip.empty()) it.skip = "invalid .json member";
        continue;
      }
      for (const auto& [f, v] : j->fields) {
        if (f == "label" && (v.is_string() || v.is_number())) {
          it.label_texts = {Trim(v.text)};
          flags->any_label = true;
        } else if (f == "labels" && v.is_array()) {
          it.label_texts.clear();
          for (const auto& x : v.items) {
            if (x.is_string() || x.is_number()) it.label_texts.push_back(Trim(x.text));
          }
          flags->any_multi = true;
        } else if (v.type != Json::Type::kNull) {
          it.extra[f] = v.ToText();
        }
      }
    } else if (!ext.empty()) {
      std::string text;
      if (small(*m, 4096, &text) && text.find('\0') == std::string::npos) it.extra[ext] = text;
    }
  }
  if (images.empty()) {
    it.path = base + "/" + key;
    it.skip = "no image member (.jpg, .jpeg, .png, .webp)";
  } else {
    it.path = base + "/" + images[0]->name;
    it.image = ByteRef{file, images[0]->offset, images[0]->size, true};
    if (images.size() > 1) {
      it.skip = fmt::format("several image members ({} and {})", images[0]->name, images[1]->name);
    }
  }
  if (!targets.empty()) {
    flags->any_target = true;
    it.target_path = base + "/" + targets[0]->name;
    it.target = ByteRef{file, targets[0]->offset, targets[0]->size, true};
    if (targets.size() > 1 && it.skip.empty()) it.skip = "several target members";
  }
  return it;
}

}  // namespace

Status ListTarArchive(const ReadAtFn& read, uint64_t size, const std::string& file, const std::string& split,
                      int64_t mtime_ns, std::vector<SourceItem>* items, TarListFlags* flags,
                      std::vector<std::string>* notes) {
  const std::string base = std::filesystem::path(file).filename().string();
  std::vector<TarSkip> skipped;
  CQLS_ASSIGN_OR_RETURN(std::vector<TarMember> index, ReadTarIndex(read, size, file, &skipped));
  if (!skipped.empty()) {
    std::string list;
    for (size_t i = 0; i < skipped.size() && i < 5; ++i) {
      list += fmt::format("{}'{}' ({})", i ? ", " : "", skipped[i].member, skipped[i].reason);
    }
    notes->push_back(fmt::format("{}: skipped {} member{} that {} not regular files of at most {} MiB: {}{}", base,
                                 skipped.size(), skipped.size() > 1 ? "s" : "", skipped.size() > 1 ? "are" : "is",
                                 kMaxTarMemberBytes >> 20, list, skipped.size() > 5 ? ", ..." : ""));
  }
  // Group by key, in order of first appearance.
  std::map<std::string, size_t> slot;
  std::vector<std::pair<std::string, std::vector<const TarMember*>>> groups;
  for (const auto& m : index) {
    std::string key, ext;
    SplitTarKey(m.name, &key, &ext);
    auto [it, inserted] = slot.emplace(key, groups.size());
    if (inserted) groups.push_back({key, {}});
    groups[it->second].second.push_back(&m);
  }
  for (const auto& [key, members] : groups) {
    SourceItem it = TarSample(read, file, base, key, members, flags);
    it.split = split;
    it.origin = base;
    it.mtime_ns = mtime_ns;
    items->push_back(std::move(it));
  }
  return Status::OK();
}

Status ListTars(const std::vector<std::string>& tar_files, const std::string& canonical, const ListOptions& o,
                SourceListing* out) {
  if (o.labels == LabelSource::kImageFolder) {
    return Status::InvalidArgument("--labels imagefolder needs a folder, but the source is tar shards");
  }
  out->canonical = canonical;
  const std::string split = o.split.empty() ? "train" : o.split;
  TarListFlags flags;
  std::vector<SourceItem> items;
  for (const auto& file : tar_files) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::IOError(fmt::format("cannot open '{}': {}", file, std::strerror(errno)));
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      return Status::IOError(fmt::format("cannot stat '{}': {}", file, std::strerror(err)));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      return Status::InvalidArgument(fmt::format("tar shard '{}' is not a regular file", file));
    }
    const int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    auto read = [fd](uint64_t off, size_t n, uint8_t* dst) {
      while (n > 0) {
        const ssize_t r = ::pread(fd, dst, n, static_cast<off_t>(off));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        dst += r;
        n -= static_cast<size_t>(r);
        off += static_cast<uint64_t>(r);
      }
      return true;
    };
    Status s = ListTarArchive(read, static_cast<uint64_t>(st.st_size), file, split, mtime_ns, &items, &flags,
                              &out->notes);
    ::close(fd);
    CQLS_RETURN_IF_ERROR(s);
  }
  out->label_kind = flags.any_target  ? LabelKind::kTarget
                    : flags.any_multi ? LabelKind::kMultiLabel
                    : flags.any_label ? LabelKind::kClass
                                      : LabelKind::kNone;
  for (auto& it : items) {
    if (out->label_kind == LabelKind::kTarget) {
      if (!it.label_texts.empty()) {
        std::string joined;
        for (size_t i = 0; i < it.label_texts.size(); ++i) joined += (i ? ";" : "") + it.label_texts[i];
        it.extra["label"] = joined;
        it.label_texts.clear();
      }
      if (!it.target && it.skip.empty()) it.skip = "no target member (.mask.png, .seg.png)";
    }
    out->items.push_back(std::move(it));
  }
  return Status::OK();
}

}  // namespace cqlstream::store
