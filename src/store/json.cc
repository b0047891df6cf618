// Copyright (c) cqlstream authors.
#include "store/json.h"

#include <fmt/format.h>

#include <charconv>

namespace cqlstream::store {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Status Document(Json* out) {
    Skip();
    CQLS_RETURN_IF_ERROR(Value(out, 0));
    Skip();
    if (pos_ != s_.size()) return Err("trailing characters after the value");
    return Status::OK();
  }

 private:
  Status Err(std::string_view what) const {
    return Status::InvalidArgument(fmt::format("invalid JSON at offset {}: {}", pos_, what));
  }
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void Skip() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool Literal(std::string_view lit) {
    if (s_.substr(pos_, lit.size()) != lit) return false;
    pos_ += lit.size();
    return true;
  }

  Status Value(Json* out, int depth) {
    if (depth > kMaxJsonDepth) return Err("nested too deeply");
    switch (Peek()) {
      case '{': return Object(out, depth);
      case '[': return Array(out, depth);
      case '"': out->type = Json::Type::kString; return String(&out->text);
      case 't':
        if (!Literal("true")) return Err("expected 'true'");
        out->type = Json::Type::kBool;
        out->boolean = true;
        return Status::OK();
      case 'f':
        if (!Literal("false")) return Err("expected 'false'");
        out->type = Json::Type::kBool;
        return Status::OK();
      case 'n':
        if (!Literal("null")) return Err("expected 'null'");
        out->type = Json::Type::kNull;
        return Status::OK();
      default: return Number(out);
    }
  }

  Status Object(Json* out, int depth) {
    out->type = Json::Type::kObject;
    ++pos_;
    Skip();
    if (Peek() == '}') {
      ++pos_;
      return Status::OK();
    }
    for (;;) {
      Skip();
      if (Peek() != '"') return Err("expected a field name");
      std::string key;
      CQLS_RETURN_IF_ERROR(String(&key));
      Skip();
      if (Peek() != ':') return Err("expected ':'");
      ++pos_;
      Skip();
      Json v;
      CQLS_RETURN_IF_ERROR(Value(&v, depth + 1));
      out->fields.emplace_back(std::move(key), std::move(v));
      Skip();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == '}') {
        ++pos_;
        return Status::OK();
      }
      return Err("expected ',' or '}'");
    }
  }

  Status Array(Json* out, int depth) {
    out->type = Json::Type::kArray;
    ++pos_;
    Skip();
    if (Peek() == ']') {
      ++pos_;
      return Status::OK();
    }
    for (;;) {
      Skip();
      Json v;
      CQLS_RETURN_IF_ERROR(Value(&v, depth + 1));
      out->items.push_back(std::move(v));
      Skip();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == ']') {
        ++pos_;
        return Status::OK();
      }
      return Err("expected ',' or ']'");
    }
  }

  Status Number(Json* out) {
    const size_t start = pos_;
    if (Peek() == '-') ++pos_;
    auto digits = [&] {
      size_t n = 0;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_, ++n;
      return n;
    };
    if (Peek() == '0') {
      ++pos_;
    } else if (digits() == 0) {
      pos_ = start;
      return Err("expected a value");
    }
    if (Peek() == '.') {
      ++pos_;
      if (digits() == 0) return Err("expected digits after '.'");
    }
    if (Peek() == 'e' || Peek() == 'E') {
      ++pos_;
      if (Peek() == '+' || Peek() == '-') ++pos_;
      if (digits() == 0) return Err("expected digits in the exponent");
    }
    out->type = Json::Type::kNumber;
    out->text = std::string(s_.substr(start, pos_ - start));
    return Status::OK();
  }

  static void Utf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  Status Hex4(uint32_t* v) {
    if (pos_ + 4 > s_.size()) return Err("truncated \\u escape");
    *v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      *v <<= 4;
      if (c >= '0' && c <= '9') *v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') *v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') *v |= static_cast<uint32_t>(c - 'A' + 10);
      else return Err("bad hex digit in \\u escape");
    }
    return Status::OK();
  }

  Status String(std::string* out) {
    ++pos_;  // the opening quote
    for (;;) {
      if (pos_ >= s_.size()) return Err("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return Status::OK();
      if (static_cast<unsigned char>(c) < 0x20) return Err("control character in a string");
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) return Err("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          uint32_t cp = 0;
          CQLS_RETURN_IF_ERROR(Hex4(&cp));
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo = 0;
            if (!Literal("\\u")) return Err("lone high surrogate");
            CQLS_RETURN_IF_ERROR(Hex4(&lo));
            if (lo < 0xDC00 || lo > 0xDFFF) return Err("bad low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return Err("lone low surrogate");
          }
          Utf8(cp, out);
          break;
        }
        default: return Err("unknown escape");
      }
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
};

void Escape(std::string_view s, std::string* out) {
  out->push_back('"');
  for (char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          *out += fmt::format("\\u{:04x}", static_cast<int>(c));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

void DumpTo(const Json& j, std::string* out) {
  switch (j.type) {
    case Json::Type::kNull: *out += "null"; return;
    case Json::Type::kBool: *out += j.boolean ? "true" : "false"; return;
    case Json::Type::kNumber: *out += j.text; return;
    case Json::Type::kString: Escape(j.text, out); return;
    case Json::Type::kArray:
      out->push_back('[');
      for (size_t i = 0; i < j.items.size(); ++i) {
        if (i) out->push_back(',');
        DumpTo(j.items[i], out);
      }
      out->push_back(']');
      return;
    case Json::Type::kObject:
      out->push_back('{');
      for (size_t i = 0; i < j.fields.size(); ++i) {
        if (i) out->push_back(',');
        Escape(j.fields[i].first, out);
        out->push_back(':');
        DumpTo(j.fields[i].second, out);
      }
      out->push_back('}');
      return;
  }
}

}  // namespace

const Json* Json::Find(std::string_view key) const {
  for (const auto& [k, v] : fields) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::optional<int64_t> Json::AsInt() const {
  if (type != Type::kNumber) return std::nullopt;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v;
}

std::string Json::Dump() const {
  std::string out;
  DumpTo(*this, &out);
  return out;
}

std::string Json::ToText() const {
  switch (type) {
    case Type::kString:
    case Type::kNumber: return text;
    case Type::kBool: return boolean ? "true" : "false";
    case Type::kNull: return "null";
    default: return Dump();
  }
}

StatusOr<Json> ParseJson(std::string_view text) {
  Json j;
  CQLS_RETURN_IF_ERROR(Parser(text).Document(&j));
  return j;
}

}  // namespace cqlstream::store
