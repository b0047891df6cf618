// Copyright (c) cqlstream authors.
//
// Selection files (docs/schema.md): Selection::Save, Load and Parse.
//
// Two bodies share one header: "CQLSSEL1" files hold sorted unique keys
// grouped by segment (delta-coded indices); "CQLSSEL2" files hold the keys in
// the selection's own order, repeats allowed, as runs of consecutive keys of
// one segment (zigzag delta-coded indices). Save writes CQLSSEL1 whenever the
// keys are sorted and unique, so such files still load in older releases.
#include "cqlstream/dataset.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "store/json.h"

namespace cqlstream {

// --- Selection files (docs/schema.md) ------------------------------------------

namespace {

constexpr char kMagicSorted[8] = {'C', 'Q', 'L', 'S', 'S', 'E', 'L', '1'};
constexpr char kMagicOrdered[8] = {'C', 'Q', 'L', 'S', 'S', 'E', 'L', '2'};

uint64_t ZigZag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
int64_t UnZigZag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

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

// Writes all of `data` to fd.
bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t w = ::write(fd, data.data(), data.size());
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data.remove_prefix(static_cast<size_t>(w));
  }
  return true;
}

// The whole of a regular file of at most max_bytes (IOError / InvalidArgument
// naming it otherwise: a directory, a device, a file too large).
StatusOr<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError(fmt::format("cannot read selection file '{}': {}", path, std::strerror(errno)));
  struct stat st;
  std::string data;
  Status s = Status::OK();
  if (::fstat(fd, &st) != 0) {
    s = Status::IOError(fmt::format("cannot stat selection file '{}': {}", path, std::strerror(errno)));
  } else if (!S_ISREG(st.st_mode)) {
    s = Status::InvalidArgument(fmt::format("selection file '{}' is {}, not a regular file", path,
                                            S_ISDIR(st.st_mode) ? "a directory" : "a special file"));
  } else if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    s = Status::InvalidArgument(
        fmt::format("selection file '{}' has {} bytes, more than the {} MiB limit", path, st.st_size, max_bytes >> 20));
  } else {
    data.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < data.size()) {
      const ssize_t r = ::read(fd, data.data() + got, data.size() - got);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        s = Status::IOError(fmt::format("cannot read selection file '{}': {}", path, std::strerror(errno)));
        break;
      }
      if (r == 0) break;  // shrank while reading: what was read is checked below
      got += static_cast<size_t>(r);
    }
    data.resize(got);
  }
  ::close(fd);
  if (!s.ok()) return s;
  return data;
}

}  // namespace

bool Selection::SortedUnique() const {
  for (size_t i = 1; i < keys.size(); ++i) {
    if (keys[i] <= keys[i - 1]) return false;
  }
  return true;
}

std::string Selection::Encode() const {
  // Runs of consecutive keys of one segment: for sorted unique keys, exactly
  // the per-segment groups of a CQLSSEL1 body.
  const bool sorted = SortedUnique();
  std::vector<std::pair<int32_t, std::vector<int32_t>>> runs;
  for (SampleKey k : keys) {
    if (runs.empty() || runs.back().first != KeySegment(k)) runs.push_back({KeySegment(k), {}});
    runs.back().second.push_back(KeyIndex(k));
  }
  std::string header = fmt::format(
      "{{\"dataset\": \"{}\", \"split\": \"{}\", \"layout_version\": {}, \"count\": {}, \"segments\": {}, "
      "\"created\": \"{}\", \"query\": \"{}\"{}}}",
      JsonEscape(dataset), JsonEscape(split), layout_version, keys.size(), runs.size(), JsonEscape(created),
      JsonEscape(query), sorted ? "" : ", \"ordered\": true");
  std::string out(sorted ? kMagicSorted : kMagicOrdered, 8);
  PutU32(&out, static_cast<uint32_t>(header.size()));
  out += header;
  for (const auto& [seg, idxs] : runs) {
    PutU32(&out, static_cast<uint32_t>(seg));
    PutU32(&out, static_cast<uint32_t>(idxs.size()));
    int64_t prev = 0;
    for (int32_t i : idxs) {
      PutVarint(&out, sorted ? static_cast<uint64_t>(i - prev) : ZigZag(i - prev));
      prev = i;
    }
  }
  return out;
}

Status Selection::Save(const std::string& path) const {
  for (SampleKey k : keys) {
    if (KeySegment(k) < 0 || KeyIndex(k) < 0) {
      return Status::InvalidArgument(fmt::format("selection key {} has a negative segment or index", FormatKey(k)));
    }
  }
  const std::string out = Encode();
  // A private temporary file beside the target (mkstemp: no predictable
  // name to pre-create or link), then an atomic rename over the target.
  const std::filesystem::path target(path);
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::string tmp = (dir / ("." + target.filename().string() + ".XXXXXX")).string();
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) {
    return Status::IOError(fmt::format("cannot create a temporary file in '{}' for selection file '{}': {}",
                                       dir.string(), path, std::strerror(errno)));
  }
  const bool written = ::fchmod(fd, 0644) == 0 && WriteAll(fd, out) && ::fsync(fd) == 0;
  const int err = errno;
  if (::close(fd) != 0 || !written) {
    ::unlink(tmp.c_str());
    return Status::IOError(fmt::format("write to '{}' failed: {}", tmp, std::strerror(written ? errno : err)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int rerr = errno;
    ::unlink(tmp.c_str());
    return Status::IOError(fmt::format("cannot rename '{}' to '{}': {}", tmp, path, std::strerror(rerr)));
  }
  return Status::OK();
}

StatusOr<Selection> Selection::Load(const std::string& path) {
  CQLS_ASSIGN_OR_RETURN(std::string data, ReadRegularFile(path, kMaxSelectionFileBytes));
  return Parse(data, path);
}

namespace {

// Reads the body at data[*pos...] into sel->keys: `nruns` runs of
// seg:u32le n:u32le varint{n}. Sorted bodies (CQLSSEL1) hold ascending
// unsigned deltas and strictly ascending keys; ordered ones (CQLSSEL2)
// zigzag deltas and any indices in [0, INT32_MAX]. Returns the problem, or
// an empty string.
std::string ParseBody(std::string_view data, size_t* pos, uint64_t nruns, bool sorted, std::vector<SampleKey>* keys) {
  auto u32 = [&](uint32_t* v) {
    if (data.size() - *pos < 4) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i) *v |= static_cast<uint32_t>(static_cast<uint8_t>(data[*pos + static_cast<size_t>(i)])) << (8 * i);
    *pos += 4;
    return true;
  };
  for (uint64_t r = 0; r < nruns; ++r) {
    uint32_t seg = 0, n = 0;
    if (!u32(&seg) || !u32(&n)) return "truncated segment header";
    if (seg > static_cast<uint32_t>(INT32_MAX)) return "segment out of range";
    if (n > data.size() - *pos) return "segment key count larger than the file can hold";
    int64_t idx = 0;
    for (uint32_t i = 0; i < n; ++i) {
      uint64_t raw = 0;
      int shift = 0;
      for (;;) {
        if (*pos >= data.size() || shift > 35) return "truncated or invalid varint";
        const uint8_t b = static_cast<uint8_t>(data[(*pos)++]);
        raw |= static_cast<uint64_t>(b & 0x7f) << shift;
        if (!(b & 0x80)) break;
        shift += 7;
      }
      if (sorted && i > 0 && raw == 0) return "duplicate index";
      idx += sorted ? static_cast<int64_t>(raw) : UnZigZag(raw);
      if (idx > INT32_MAX || idx < 0) return "index out of range";
      const SampleKey k = MakeKey(static_cast<int32_t>(seg), static_cast<int32_t>(idx));
      if (sorted && !keys->empty() && k <= keys->back()) return "keys not ascending";
      keys->push_back(k);
    }
  }
  return "";
}

}  // namespace

StatusOr<Selection> Selection::Parse(std::string_view data, const std::string& path) {
  auto bad = [&](std::string_view what) {
    return Status::Corruption(fmt::format("selection file '{}': {}", path, what));
  };
  if (data.size() < 12) return bad("not a cqlstream selection file (bad magic)");
  const bool sorted = std::memcmp(data.data(), kMagicSorted, 8) == 0;
  if (!sorted && std::memcmp(data.data(), kMagicOrdered, 8) != 0) {
    return bad("not a cqlstream selection file (bad magic)");
  }
  size_t pos = 8;
  uint32_t hlen = 0;
  for (int i = 0; i < 4; ++i) hlen |= static_cast<uint32_t>(static_cast<uint8_t>(data[pos + static_cast<size_t>(i)])) << (8 * i);
  pos += 4;
  if (hlen > data.size() - pos) return bad("truncated header");
  auto header = store::ParseJson(data.substr(pos, hlen));
  if (!header.ok()) return bad(fmt::format("header: {}", header.status().message()));
  if (!header->is_object()) return bad("header: not a JSON object");
  pos += hlen;
  Selection sel;
  auto text = [&](std::string_view key, std::string* out) -> Status {
    const store::Json* v = header->Find(key);
    if (v == nullptr) return Status::OK();  // optional, for humans
    if (!v->is_string()) return bad(fmt::format("header field '{}' is not a string", key));
    *out = v->text;
    return Status::OK();
  };
  auto integer = [&](std::string_view key, int64_t* out) -> Status {
    const store::Json* v = header->Find(key);
    const std::optional<int64_t> i = v ? v->AsInt() : std::nullopt;
    if (!i || *i < 0) return bad(fmt::format("header field '{}' is missing or not a non-negative integer", key));
    *out = *i;
    return Status::OK();
  };
  CQLS_RETURN_IF_ERROR(text("dataset", &sel.dataset));
  CQLS_RETURN_IF_ERROR(text("split", &sel.split));
  CQLS_RETURN_IF_ERROR(text("created", &sel.created));
  CQLS_RETURN_IF_ERROR(text("query", &sel.query));
  int64_t version = 0, count_field = 0, nsegs_field = 0;
  CQLS_RETURN_IF_ERROR(integer("layout_version", &version));
  if (version > INT32_MAX) return bad("layout_version out of range");
  sel.layout_version = static_cast<int>(version);
  CQLS_RETURN_IF_ERROR(integer("count", &count_field));
  CQLS_RETURN_IF_ERROR(integer("segments", &nsegs_field));
  const uint64_t count = static_cast<uint64_t>(count_field), nsegs = static_cast<uint64_t>(nsegs_field);
  if (sel.layout_version != kLayoutVersion) {
    return Status::Unsupported(fmt::format("selection file '{}' has layout version {}; this cqlstream reads {}", path,
                                           sel.layout_version, kLayoutVersion));
  }
  // The magic decides how the body reads; the header must agree with it.
  const store::Json* ordered = header->Find("ordered");
  const bool says_ordered = ordered != nullptr && ordered->type == store::Json::Type::kBool && ordered->boolean;
  if (ordered != nullptr && ordered->type != store::Json::Type::kBool) return bad("header field 'ordered' is not a boolean");
  if (says_ordered == sorted) {
    return bad(sorted ? "header says 'ordered' but the magic is CQLSSEL1 (sorted keys)"
                      : "a CQLSSEL2 (ordered) file's header lacks \"ordered\": true");
  }
  if (count > data.size() - pos) return bad("count larger than the file can hold");
  if (nsegs > (data.size() - pos) / 8) return bad("segments larger than the file can hold");
  sel.keys.reserve(count);
  if (std::string problem = ParseBody(data, &pos, nsegs, sorted, &sel.keys); !problem.empty()) return bad(problem);
  if (sel.keys.size() != count) return bad(fmt::format("header says {} keys, body holds {}", count, sel.keys.size()));
  if (pos != data.size()) return bad("trailing bytes after the last segment");
  return sel;
}

}  // namespace cqlstream
