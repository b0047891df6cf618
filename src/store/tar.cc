// Copyright (c) cqlstream authors.
#include "store/tar.h"

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
#include <set>

#include "store/image_check.h"
#include "store/json.h"
#include "store/source.h"

namespace cqlstream::store {
namespace {

constexpr size_t kBlock = 512;

std::string CString(const uint8_t* p, size_t n) {
  size_t len = 0;
  while (len < n && p[len] != 0) ++len;
  return std::string(reinterpret_cast<const char*>(p), len);
}

// An octal field (spaces/NULs around it) or a base-256 number.
bool ParseNumber(const uint8_t* p, size_t n, uint64_t* out) {
  if (p[0] & 0x80) {
    uint64_t v = p[0] & 0x7F;
    for (size_t i = 1; i < n; ++i) {
      if (v >> 56) return false;
      v = (v << 8) | p[i];
    }
    *out = v;
    return true;
  }
  size_t i = 0;
  while (i < n && (p[i] == ' ' || p[i] == 0)) ++i;
  uint64_t v = 0;
  bool any = false;
  for (; i < n && p[i] >= '0' && p[i] <= '7'; ++i) {
    if (v >> 60) return false;
    v = v * 8 + static_cast<uint64_t>(p[i] - '0');
    any = true;
  }
  for (; i < n; ++i) {
    if (p[i] != ' ' && p[i] != 0) return false;
  }
  *out = any ? v : 0;
  return true;
}

bool AllZero(const uint8_t* p) {
  for (size_t i = 0; i < kBlock; ++i) {
    if (p[i]) return false;
  }
  return true;
}

// The "path" record of a pax extended header, or "".
std::string PaxPath(std::string_view data) {
  size_t pos = 0;
  std::string path;
  while (pos < data.size()) {
    const size_t sp = data.find(' ', pos);
    if (sp == std::string_view::npos) break;
    size_t len = 0;
    auto [p, ec] = std::from_chars(data.data() + pos, data.data() + sp, len);
    if (ec != std::errc() || len == 0 || pos + len > data.size()) break;
    std::string_view rec = data.substr(sp + 1, pos + len - sp - 1);
    if (rec.ends_with("\n")) rec.remove_suffix(1);
    if (rec.starts_with("path=")) path = std::string(rec.substr(5));
    pos += len;
  }
  return path;
}

std::string Trim(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return std::string(s.substr(a, b - a));
}

}  // namespace

StatusOr<std::vector<TarMember>> ReadTarIndex(const ReadAtFn& read, uint64_t size, std::string_view name) {
  std::vector<TarMember> out;
  uint8_t h[kBlock];
  uint64_t off = 0;
  std::string long_name;  // from a GNU 'L' member or a pax header, for the next member
  auto corrupt = [&](std::string_view what) {
    return Status::Corruption(fmt::format("tar '{}' at offset {}: {}", name, off, what));
  };
  while (off + kBlock <= size) {
    if (!read(off, kBlock, h)) return corrupt("cannot read the header");
    if (AllZero(h)) break;  // end of archive
    uint64_t stored = 0;
    if (!ParseNumber(h + 148, 8, &stored)) return corrupt("bad header checksum field");
    uint64_t sum = 0;
    int64_t ssum = 0;
    for (size_t i = 0; i < kBlock; ++i) {
      const uint8_t c = (i >= 148 && i < 156) ? ' ' : h[i];
      sum += c;
      ssum += static_cast<int8_t>(c);
    }
    if (stored != sum && static_cast<int64_t>(stored) != ssum) return corrupt("header checksum mismatch (not a tar file?)");
    uint64_t msize = 0;
    if (!ParseNumber(h + 124, 12, &msize)) return corrupt("bad size field");
    const char type = static_cast<char>(h[156]);
    const uint64_t data = off + kBlock;
    if (data + msize > size) return corrupt(fmt::format("member of {} bytes runs past the end (truncated archive)", msize));
    std::string mname = CString(h, 100);
    if (std::memcmp(h + 257, "ustar", 5) == 0) {
      const std::string prefix = CString(h + 345, 155);
      if (!prefix.empty()) mname = prefix + "/" + mname;
    }
    auto read_data = [&](std::string* s) -> Status {
      if (msize > (1u << 20)) return corrupt("extended header larger than 1 MiB");
      s->assign(msize, '\0');
      if (msize > 0 && !read(data, msize, reinterpret_cast<uint8_t*>(s->data()))) return corrupt("cannot read");
      return Status::OK();
    };
    if (type == 'L') {
      CQLS_RETURN_IF_ERROR(read_data(&long_name));
      long_name = std::string(long_name.c_str());  // up to the first NUL
    } else if (type == 'x') {
      std::string pax;
      CQLS_RETURN_IF_ERROR(read_data(&pax));
      long_name = PaxPath(pax);
    } else if (type == '0' || type == '\0' || type == '7') {
      if (!long_name.empty()) mname = std::move(long_name);
      long_name.clear();
      while (mname.starts_with("./")) mname.erase(0, 2);
      if (!mname.empty() && !mname.ends_with("/")) out.push_back(TarMember{mname, data, msize});
    } else {
      long_name.clear();  // 'g' global headers, directories, links, devices: left out
    }
    off = data + (msize + kBlock - 1) / kBlock * kBlock;
  }
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

Status ListTars(const std::vector<std::string>& tar_files, const std::string& canonical, const ListOptions& o,
                SourceListing* out) {
  if (o.labels == LabelSource::kImageFolder) {
    return Status::InvalidArgument("--labels imagefolder needs a folder, but the source is tar shards");
  }
  out->canonical = canonical;
  const std::string split = o.split.empty() ? "train" : o.split;
  bool any_target = false, any_multi = false, any_label = false;
  std::vector<SourceItem> items;
  for (const auto& file : tar_files) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::IOError(fmt::format("cannot open '{}': {}", file, std::strerror(errno)));
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      return Status::IOError(fmt::format("cannot stat '{}': {}", file, std::strerror(errno)));
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
    const std::string base = std::filesystem::path(file).filename().string();
    auto index = ReadTarIndex(read, static_cast<uint64_t>(st.st_size), file);
    if (!index.ok()) {
      ::close(fd);
      return index.status();
    }
    // Group by key, in order of first appearance.
    std::map<std::string, size_t> slot;
    std::vector<std::pair<std::string, std::vector<const TarMember*>>> groups;
    for (const auto& m : *index) {
      std::string key, ext;
      SplitTarKey(m.name, &key, &ext);
      auto [it, inserted] = slot.emplace(key, groups.size());
      if (inserted) groups.push_back({key, {}});
      groups[it->second].second.push_back(&m);
    }
    auto small = [&](const TarMember& m, size_t max, std::string* s) {
      if (m.size > max) return false;
      s->assign(m.size, '\0');
      return m.size == 0 || read(m.offset, m.size, reinterpret_cast<uint8_t*>(s->data()));
    };
    for (const auto& [key, members] : groups) {
      SourceItem it;
      it.split = split;
      it.origin = base;
      it.mtime_ns = mtime_ns;
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
          any_label = true;
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
              any_label = true;
            } else if (f == "labels" && v.is_array()) {
              it.label_texts.clear();
              for (const auto& x : v.items) {
                if (x.is_string() || x.is_number()) it.label_texts.push_back(Trim(x.text));
              }
              any_multi = true;
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
        any_target = true;
        it.target_path = base + "/" + targets[0]->name;
        it.target = ByteRef{file, targets[0]->offset, targets[0]->size, true};
        if (targets.size() > 1 && it.skip.empty()) it.skip = "several target members";
      }
      items.push_back(std::move(it));
    }
    ::close(fd);
  }
  out->label_kind = any_target  ? LabelKind::kTarget
                    : any_multi ? LabelKind::kMultiLabel
                    : any_label ? LabelKind::kClass
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
