// Copyright (c) cqlstream authors.
//
// Parsing is nlohmann/json's SAX parser (a maintained, fuzzed library): it
// checks the grammar, escapes, surrogates and UTF-8; the handler below only
// builds our value tree, keeps numbers' source text and bounds the depth.
#include "store/json.h"

#include <fmt/format.h>

#include <charconv>
#include <exception>
#include <nlohmann/json.hpp>

namespace cqlstream::store {
namespace {

// Builds a Json from SAX events. Every callback returns false to stop the
// parse at the first problem (sax_parse then returns false); nothing throws.
class TreeBuilder {
 public:
  using nj = nlohmann::json;

  bool null() { return Put(Json{}); }
  bool boolean(bool v) {
    Json j;
    j.type = Json::Type::kBool;
    j.boolean = v;
    return Put(std::move(j));
  }
  bool number_integer(nj::number_integer_t v) { return Number(std::to_string(v)); }
  bool number_unsigned(nj::number_unsigned_t v) { return Number(std::to_string(v)); }
  bool number_float(nj::number_float_t, const nj::string_t& source) { return Number(source); }
  bool string(nj::string_t& v) {
    Json j;
    j.type = Json::Type::kString;
    j.text = std::move(v);
    return Put(std::move(j));
  }
  bool binary(nj::binary_t&) { return Fail("binary values are not JSON"); }
  bool start_object(std::size_t) { return Open(Json::Type::kObject); }
  bool key(nj::string_t& k) {
    key_ = std::move(k);
    return true;
  }
  bool end_object() { return Close(); }
  bool start_array(std::size_t) { return Open(Json::Type::kArray); }
  bool end_array() { return Close(); }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) {
    std::string what = ex.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..." -> the part after the location.
    if (const size_t colon = what.find(": "); colon != std::string::npos) what.erase(0, colon + 2);
    // nlohmann counts the character that failed; offsets in our messages are 0-based.
    return Fail(what, position > 0 ? position - 1 : 0);
  }

  Json TakeRoot() { return std::move(root_); }
  const std::string& error() const { return error_; }

 private:
  bool Fail(std::string_view what, size_t offset = std::string::npos) {
    if (error_.empty()) {
      error_ = offset == std::string::npos ? fmt::format("invalid JSON: {}", what)
                                           : fmt::format("invalid JSON at offset {}: {}", offset, what);
    }
    return false;
  }
  Json* Slot() {
    if (stack_.empty()) return &root_;
    Json* parent = stack_.back();
    if (parent->type == Json::Type::kArray) return &parent->items.emplace_back();
    return &parent->fields.emplace_back(std::move(key_), Json{}).second;
  }
  bool Put(Json v) {
    *Slot() = std::move(v);
    return true;
  }
  bool Number(std::string text) {
    Json j;
    j.type = Json::Type::kNumber;
    j.text = std::move(text);
    return Put(std::move(j));
  }
  bool Open(Json::Type type) {
    if (stack_.size() >= static_cast<size_t>(kMaxJsonDepth)) {
      return Fail(fmt::format("nested too deeply (more than {} levels)", kMaxJsonDepth));
    }
    Json* j = Slot();
    j->type = type;
    // Pointers into a parent's vector stay valid: a parent gets no new child
    // while one of its children is open.
    stack_.push_back(j);
    return true;
  }
  bool Close() {
    if (!stack_.empty()) stack_.pop_back();
    return true;
  }

  Json root_;
  std::vector<Json*> stack_;
  std::string key_;
  std::string error_;
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

Json::Json() = default;
Json::~Json() = default;
Json::Json(const Json&) = default;
Json::Json(Json&&) noexcept = default;
Json& Json::operator=(const Json&) = default;
Json& Json::operator=(Json&&) noexcept = default;

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
  TreeBuilder builder;
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(text, &builder, nlohmann::json::input_format_t::json, /*strict=*/true);
  } catch (const std::exception& e) {  // the SAX parser reports through parse_error; this is a last guard
    return Status::InvalidArgument(fmt::format("invalid JSON: {}", e.what()));
  }
  if (!ok) {
    return Status::InvalidArgument(builder.error().empty() ? "invalid JSON" : builder.error());
  }
  return builder.TakeRoot();
}

}  // namespace cqlstream::store
