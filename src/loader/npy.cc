// Copyright (c) cqlstream authors.
#include "loader/npy.h"

#include <fmt/format.h>

#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>

namespace cqlstream::loader {
namespace {

// data() is native little-endian: big-endian hosts would need the opposite swap.
static_assert(std::endian::native == std::endian::little, "npy.cc assumes a little-endian host");

constexpr std::string_view kMagic("\x93NUMPY", 6);

Status Bad(std::string_view what) { return Status::InvalidArgument(fmt::format(".npy: {}", what)); }

struct DtypeInfo {
  std::string_view code;  // descr without the byte-order character
  NpyDtype dtype;
  std::string_view name;
  size_t size;
};

constexpr std::array<DtypeInfo, 14> kDtypes = {{
    {"b1", NpyDtype::kBool, "bool", 1},
    {"i1", NpyDtype::kInt8, "int8", 1},
    {"i2", NpyDtype::kInt16, "int16", 2},
    {"i4", NpyDtype::kInt32, "int32", 4},
    {"i8", NpyDtype::kInt64, "int64", 8},
    {"u1", NpyDtype::kUInt8, "uint8", 1},
    {"u2", NpyDtype::kUInt16, "uint16", 2},
    {"u4", NpyDtype::kUInt32, "uint32", 4},
    {"u8", NpyDtype::kUInt64, "uint64", 8},
    {"f2", NpyDtype::kFloat16, "float16", 2},
    {"f4", NpyDtype::kFloat32, "float32", 4},
    {"f8", NpyDtype::kFloat64, "float64", 8},
    {"c8", NpyDtype::kComplex64, "complex64", 8},
    {"c16", NpyDtype::kComplex128, "complex128", 16},
}};

const DtypeInfo& Info(NpyDtype d) { return kDtypes[static_cast<size_t>(d)]; }

// What the header's dict literal says, before it is checked against the data.
struct Header {
  NpyDtype dtype = NpyDtype::kUInt8;
  bool big_endian = false;
  bool fortran_order = false;
  std::vector<uint64_t> shape;
};

// A cursor over the header text (ASCII checked before parsing).
class HeaderParser {
 public:
  HeaderParser(std::string_view text, bool allow_long_suffix) : s_(text), allow_long_(allow_long_suffix) {}

  StatusOr<Header> Parse() {
    Header h;
    bool seen[3] = {false, false, false};
    SkipSpace();
    if (!Eat('{')) return Bad("header is not a dict literal (no '{')");
    for (;;) {
      SkipSpace();
      if (Eat('}')) break;
      auto key = String("key");
      if (!key.ok()) return key.status();
      SkipSpace();
      if (!Eat(':')) return Bad(fmt::format("header: no ':' after key '{}'", *key));
      SkipSpace();
      int index = *key == "descr" ? 0 : *key == "fortran_order" ? 1 : *key == "shape" ? 2 : -1;
      if (index < 0) return Bad(fmt::format("header has an unknown key '{}' (only 'descr', 'fortran_order', 'shape')", *key));
      if (seen[index]) return Bad(fmt::format("header repeats key '{}'", *key));
      seen[index] = true;
      Status s = index == 0 ? Descr(h) : index == 1 ? Fortran(h) : Shape(h);
      if (!s.ok()) return s;
      SkipSpace();
      if (Eat(',')) continue;
      SkipSpace();
      if (Eat('}')) break;
      return Bad(fmt::format("header: expected ',' or '}}' after the value of '{}' at offset {}", *key, pos_));
    }
    SkipSpace();
    if (pos_ != s_.size()) return Bad(fmt::format("header has text after the dict at offset {}", pos_));
    for (int i = 0; i < 3; ++i) {
      static constexpr std::string_view kNames[3] = {"descr", "fortran_order", "shape"};
      if (!seen[i]) return Bad(fmt::format("header has no '{}'", kNames[i]));
    }
    return h;
  }

 private:
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool Eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool EatWord(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }

  // A quoted string without escapes.
  StatusOr<std::string_view> String(std::string_view what) {
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) {
      return Bad(fmt::format("header: expected a quoted {} at offset {}", what, pos_));
    }
    const char quote = s_[pos_++];
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      if (s_[pos_] == '\n') break;  // quoted strings end on their line
      if (s_[pos_] == '\\') return Bad(fmt::format("header: unsupported character in a {} string", what));
      ++pos_;
    }
    if (pos_ >= s_.size() || s_[pos_] != quote) return Bad(fmt::format("header: unterminated {} string", what));
    return s_.substr(start, pos_++ - start);
  }

  Status Descr(Header& h) {
    if (pos_ < s_.size() && s_[pos_] == '[') {
      return Bad("structured dtypes (a list 'descr') are not supported; store a plain numeric array");
    }
    auto d = String("descr");
    if (!d.ok()) return d.status();
    const std::string_view descr = *d;
    if (descr.empty() || (descr[0] != '<' && descr[0] != '>' && descr[0] != '|')) {
      return Bad(fmt::format("descr '{}' has no byte order ('<', '>' or '|')", descr));
    }
    const std::string_view code = descr.substr(1);
    for (const DtypeInfo& info : kDtypes) {
      if (info.code != code) continue;
      if (descr[0] == '|' && info.size > 1) {
        return Bad(fmt::format("descr '{}': '|' (no byte order) for a {}-byte type", descr, info.size));
      }
      h.dtype = info.dtype;
      h.big_endian = descr[0] == '>' && info.size > 1;
      return Status::OK();
    }
    if (code == "O") return Bad("object arrays (descr 'O') are not supported: they hold pickled Python objects");
    return Bad(fmt::format(
        "descr '{}' is not supported (bool, int8..int64, uint8..uint64, float16/32/64, complex64/128 are)", descr));
  }

  Status Fortran(Header& h) {
    if (EatWord("True")) {
      h.fortran_order = true;
    } else if (EatWord("False")) {
      h.fortran_order = false;
    } else {
      return Bad("header: 'fortran_order' is not True or False");
    }
    return Status::OK();
  }

  // A non-negative decimal integer below 2^63.
  StatusOr<uint64_t> Dim() {
    const size_t start = pos_;
    uint64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const uint64_t digit = static_cast<uint64_t>(s_[pos_] - '0');
      if (v > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - digit) / 10) {
        return Bad("header: a 'shape' dimension is 2^63 or more");
      }
      v = v * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) {
      if (pos_ < s_.size() && s_[pos_] == '-') return Bad("header: a 'shape' dimension is negative");
      return Bad(fmt::format("header: expected a 'shape' dimension at offset {}", pos_));
    }
    if (allow_long_) Eat('L');
    return v;
  }

  // A tuple of integers: (), (n,), (n, m), (n, m,) ...
  Status Shape(Header& h) {
    if (!Eat('(')) return Bad("header: 'shape' is not a tuple");
    bool trailing_comma = false;
    for (;;) {
      SkipSpace();
      if (Eat(')')) break;
      if (h.shape.size() == kNpyMaxDims) return Bad(fmt::format("'shape' has more than {} dimensions", kNpyMaxDims));
      auto v = Dim();
      if (!v.ok()) return v.status();
      h.shape.push_back(*v);
      SkipSpace();
      trailing_comma = Eat(',');
      if (trailing_comma) continue;
      if (!Eat(')')) return Bad(fmt::format("header: expected ',' or ')' in 'shape' at offset {}", pos_));
      break;
    }
    // "(3)" is the integer 3 in Python, not a tuple.
    if (h.shape.size() == 1 && !trailing_comma) {
      return Bad("header: 'shape' (n) is not a tuple (a 1-d shape is written (n,))");
    }
    return Status::OK();
  }

  std::string_view s_;
  size_t pos_ = 0;
  bool allow_long_;
};

// Bytes the data must have: product of the dims times the item size; the
// product of the non-zero dims times the item size must fit in int64 (numpy's
// own limit), so a hostile shape cannot overflow what is allocated later.
StatusOr<uint64_t> DataBytes(const Header& h) {
  const uint64_t max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t nonzero = Info(h.dtype).size;
  bool any_zero = false;
  for (uint64_t d : h.shape) {
    if (d == 0) {
      any_zero = true;
      continue;
    }
    uint64_t next = 0;
    if (__builtin_mul_overflow(nonzero, d, &next) || next > max) {
      return Bad("'shape' times the item size does not fit in 64 bits");
    }
    nonzero = next;
  }
  return any_zero ? 0 : nonzero;
}

void SwapInto(std::span<const uint8_t> in, size_t unit, std::vector<uint8_t>& out) {
  out.resize(in.size());
  for (size_t i = 0; i + unit <= in.size(); i += unit) {
    for (size_t j = 0; j < unit; ++j) out[i + j] = in[i + unit - 1 - j];
  }
}

}  // namespace

std::string_view NpyDtypeName(NpyDtype d) { return Info(d).name; }
size_t NpyItemSize(NpyDtype d) { return Info(d).size; }

uint64_t NpyArray::num_items() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;  // bounded by ParseNpy (fits in int64)
  return n;
}

StatusOr<NpyArray> ParseNpy(std::span<const uint8_t> bytes) {
  if (bytes.size() < kMagic.size() || std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) != 0) {
    return Bad("not a .npy file (no \\x93NUMPY magic)");
  }
  if (bytes.size() < 8) return Bad(fmt::format("file of {} bytes ends inside the version", bytes.size()));
  const uint8_t major = bytes[6];
  const uint8_t minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0) {
    return Bad(fmt::format("format version {}.{} is not supported (1.0, 2.0, 3.0 are)", major, minor));
  }
  const size_t len_size = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + len_size) return Bad(fmt::format("file of {} bytes ends inside the header length", bytes.size()));
  uint64_t header_len = 0;
  for (size_t i = 0; i < len_size; ++i) header_len |= static_cast<uint64_t>(bytes[8 + i]) << (8 * i);
  if (header_len > kNpyMaxHeaderBytes) {
    return Bad(fmt::format("header of {} bytes is larger than the {} allowed", header_len, kNpyMaxHeaderBytes));
  }
  const size_t header_start = 8 + len_size;
  if (bytes.size() - header_start < header_len) {
    return Bad(fmt::format("header of {} bytes, but only {} bytes follow the header length", header_len,
                           bytes.size() - header_start));
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + header_start), header_len);
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80 || (c < 0x20 && c != '\n' && c != '\t' && c != '\r')) {
      return Bad(fmt::format("header has a byte 0x{:02x} at offset {} (only printable ASCII)", c, i));
    }
  }
  auto header = HeaderParser(text, major == 1).Parse();
  if (!header.ok()) return header.status();
  auto want = DataBytes(*header);
  if (!want.ok()) return want.status();
  const std::span<const uint8_t> data = bytes.subspan(header_start + header_len);
  if (data.size() != *want) {
    return Bad(fmt::format("{} data: expected {} bytes for the shape, got {}", Info(header->dtype).name, *want,
                           data.size()));
  }
  NpyArray a;
  a.dtype = header->dtype;
  a.shape = std::move(header->shape);
  a.fortran_order = header->fortran_order;
  a.version_major = major;
  a.view_ = data;
  if (header->big_endian) {
    const bool complex = a.dtype == NpyDtype::kComplex64 || a.dtype == NpyDtype::kComplex128;
    const size_t unit = complex ? Info(a.dtype).size / 2 : Info(a.dtype).size;
    SwapInto(data, unit, a.owned_);
    a.byte_swapped = true;
  }
  return a;
}

}  // namespace cqlstream::loader
