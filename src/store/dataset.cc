// Copyright (c) cqlstream authors.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <cstring>
#include <fstream>
#include <set>

#include "cqlstream/dataset.h"

namespace cqlstream {

std::string_view LabelKindName(LabelKind k) {
  switch (k) {
    case LabelKind::kNone: return "none";
    case LabelKind::kClass: return "class";
    case LabelKind::kMultiLabel: return "multilabel";
    case LabelKind::kTarget: return "target";
  }
  return "none";
}

StatusOr<LabelKind> ParseLabelKind(std::string_view s) {
  if (s == "none") return LabelKind::kNone;
  if (s == "class") return LabelKind::kClass;
  if (s == "multilabel") return LabelKind::kMultiLabel;
  if (s == "target") return LabelKind::kTarget;
  return Status::InvalidArgument(fmt::format("unknown label kind '{}' (none, class, multilabel, target)", s));
}

std::string FormatKey(SampleKey k) { return fmt::format("{}:{}", KeySegment(k), KeyIndex(k)); }

std::vector<std::string> DatasetInfo::splits() const {
  std::set<std::string> s;
  for (const auto& g : segments) s.insert(g.split);
  return {s.begin(), s.end()};
}

std::vector<SegmentInfo> DatasetInfo::SplitSegments(std::string_view split) const {
  std::vector<SegmentInfo> out;
  for (const auto& g : segments) {
    if (g.split == split && g.count > 0) out.push_back(g);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.seg < b.seg; });
  return out;
}

int64_t DatasetInfo::Count(std::string_view split) const {
  int64_t n = 0;
  for (const auto& g : segments) n += g.split == split ? g.count : 0;
  return n;
}

int64_t DatasetInfo::Bytes(std::string_view split) const {
  int64_t n = 0;
  for (const auto& g : segments) n += g.split == split ? g.bytes : 0;
  return n;
}

int64_t DatasetInfo::MaxSize(std::string_view split) const {
  int64_t n = 0;
  for (const auto& g : segments) n = g.split == split ? std::max(n, g.max_size) : n;
  return n;
}

namespace {

Status ValidateName(std::string_view what, std::string_view name, size_t max_len) {
  bool ok = !name.empty() && name.size() <= max_len && name[0] >= 'a' && name[0] <= 'z';
  for (char c : name) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  if (ok) return Status::OK();
  return Status::InvalidArgument(fmt::format(
      "invalid {} name '{}': use a lowercase letter followed by up to {} lowercase letters, digits or '_'", what,
      name, max_len - 1));
}

}  // namespace

Status ValidateKeyspaceName(std::string_view name) { return ValidateName("keyspace", name, 32); }
Status ValidateDatasetName(std::string_view name) { return ValidateName("dataset", name, 24); }

// --- Selection files (docs/schema.md) ------------------------------------------

namespace {

constexpr char kMagic[8] = {'C', 'Q', 'L', 'S', 'S', 'E', 'L', '1'};

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

std::string JsonEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<int>(c));
        } else {
          out += c;
        }
    }
  }
  return out;
}

// Minimal reader for the flat JSON object we write (string and integer values).
class FlatJson {
 public:
  explicit FlatJson(std::string_view s) : s_(s) {}
  Status Parse(std::map<std::string, std::string>* out) {
    Skip();
    if (!Eat('{')) return Err("expected '{'");
    Skip();
    if (Eat('}')) return Status::OK();
    for (;;) {
      std::string k, v;
      CQLS_RETURN_IF_ERROR(String(&k));
      Skip();
      if (!Eat(':')) return Err("expected ':'");
      Skip();
      if (Peek() == '"') {
        CQLS_RETURN_IF_ERROR(String(&v));
      } else {
        while (pos_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '-')) {
          v += s_[pos_++];
        }
        if (v.empty()) return Err("expected a string or an integer");
      }
      (*out)[k] = v;
      Skip();
      if (Eat('}')) return Status::OK();
      if (!Eat(',')) return Err("expected ',' or '}'");
      Skip();
    }
  }

 private:
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool Eat(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  void Skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  Status Err(std::string_view what) const {
    return Status::Corruption(fmt::format("selection header: {} at offset {}", what, pos_));
  }
  Status String(std::string* out) {
    if (!Eat('"')) return Err("expected '\"'");
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (c == '\\' && pos_ < s_.size()) {
        char e = s_[pos_++];
        switch (e) {
          case 'n': out->push_back('\n'); break;
          case 't': out->push_back('\t'); break;
          case 'u': {
            if (pos_ + 4 > s_.size()) return Err("bad \\u escape");
            out->push_back(static_cast<char>(std::stoi(std::string(s_.substr(pos_, 4)), nullptr, 16)));
            pos_ += 4;
            break;
          }
          default: out->push_back(e);
        }
      } else {
        out->push_back(c);
      }
    }
    if (!Eat('"')) return Err("unterminated string");
    return Status::OK();
  }
  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

Status Selection::Save(const std::string& path) const {
  for (size_t i = 1; i < keys.size(); ++i) {
    if (keys[i] <= keys[i - 1]) return Status::InvalidArgument("selection keys must be sorted and unique");
  }
  // Group by segment.
  std::vector<std::pair<int32_t, std::vector<int32_t>>> segs;
  for (SampleKey k : keys) {
    if (segs.empty() || segs.back().first != KeySegment(k)) segs.push_back({KeySegment(k), {}});
    segs.back().second.push_back(KeyIndex(k));
  }
  std::string header = fmt::format(
      "{{\"dataset\": \"{}\", \"split\": \"{}\", \"layout_version\": {}, \"count\": {}, \"segments\": {}, "
      "\"created\": \"{}\", \"query\": \"{}\"}}",
      JsonEscape(dataset), JsonEscape(split), layout_version, keys.size(), segs.size(), JsonEscape(created),
      JsonEscape(query));
  std::string out(kMagic, sizeof kMagic);
  PutU32(&out, static_cast<uint32_t>(header.size()));
  out += header;
  for (const auto& [seg, idxs] : segs) {
    PutU32(&out, static_cast<uint32_t>(seg));
    PutU32(&out, static_cast<uint32_t>(idxs.size()));
    int64_t prev = 0;
    for (int32_t i : idxs) {
      PutVarint(&out, static_cast<uint64_t>(i - prev));
      prev = i;
    }
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return Status::IOError(fmt::format("cannot write selection file '{}'", tmp));
    f.write(out.data(), static_cast<std::streamsize>(out.size()));
    if (!f) return Status::IOError(fmt::format("write to '{}' failed", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::IOError(fmt::format("cannot rename '{}' to '{}'", tmp, path));
  }
  return Status::OK();
}

StatusOr<Selection> Selection::Load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::IOError(fmt::format("cannot read selection file '{}'", path));
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto bad = [&](std::string_view what) {
    return Status::Corruption(fmt::format("selection file '{}': {}", path, what));
  };
  if (data.size() < 12 || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0) {
    return bad("not a cqlstream selection file (bad magic)");
  }
  size_t pos = 8;
  auto u32 = [&](uint32_t* v) {
    if (pos + 4 > data.size()) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i) *v |= static_cast<uint32_t>(static_cast<uint8_t>(data[pos + static_cast<size_t>(i)])) << (8 * i);
    pos += 4;
    return true;
  };
  uint32_t hlen = 0;
  if (!u32(&hlen) || pos + hlen > data.size()) return bad("truncated header");
  std::map<std::string, std::string> h;
  Status hs = FlatJson(std::string_view(data).substr(pos, hlen)).Parse(&h);
  if (!hs.ok()) return hs.WithContext(path);
  pos += hlen;
  Selection sel;
  sel.dataset = h["dataset"];
  sel.split = h["split"];
  sel.created = h["created"];
  sel.query = h["query"];
  try {
    sel.layout_version = std::stoi(h["layout_version"]);
  } catch (...) {
    return bad("missing layout_version");
  }
  if (sel.layout_version != kLayoutVersion) {
    return Status::Unsupported(fmt::format("selection file '{}' has layout version {}; this cqlstream reads {}", path,
                                           sel.layout_version, kLayoutVersion));
  }
  uint64_t count = 0, nsegs = 0;
  try {
    count = std::stoull(h["count"]);
    nsegs = std::stoull(h["segments"]);
  } catch (...) {
    return bad("missing count or segments");
  }
  if (count > (data.size() - pos)) return bad("count larger than the file can hold");
  sel.keys.reserve(count);
  for (uint64_t s = 0; s < nsegs; ++s) {
    uint32_t seg = 0, n = 0;
    if (!u32(&seg) || !u32(&n)) return bad("truncated segment header");
    int64_t idx = 0;
    for (uint32_t i = 0; i < n; ++i) {
      uint64_t delta = 0;
      int shift = 0;
      for (;;) {
        if (pos >= data.size() || shift > 35) return bad("truncated or invalid varint");
        const uint8_t b = static_cast<uint8_t>(data[pos++]);
        delta |= static_cast<uint64_t>(b & 0x7f) << shift;
        if (!(b & 0x80)) break;
        shift += 7;
      }
      if (i > 0 && delta == 0) return bad("duplicate index");
      idx += static_cast<int64_t>(delta);
      if (idx > INT32_MAX) return bad("index out of range");
      const SampleKey k = MakeKey(static_cast<int32_t>(seg), static_cast<int32_t>(idx));
      if (!sel.keys.empty() && k <= sel.keys.back()) return bad("keys not ascending");
      sel.keys.push_back(k);
    }
  }
  if (sel.keys.size() != count) return bad(fmt::format("header says {} keys, body holds {}", count, sel.keys.size()));
  if (pos != data.size()) return bad("trailing bytes after the last segment");
  return sel;
}

}  // namespace cqlstream
