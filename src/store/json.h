// Copyright (c) cqlstream authors.
//
// The JSON values ingest sources carry: JSONL manifest lines, WebDataset
// `key.json` members and selection-file headers. Parsing is nlohmann/json's
// (RFC 8259, strict: escapes, surrogate pairs, UTF-8 are checked by the
// library); this file only turns its SAX events into a small value tree.
// Numbers keep their source text, so integers of any size survive unchanged
// (a number outside the double range is an error). Nesting is limited to
// kMaxJsonDepth; every error is an InvalidArgument naming the offset, no
// exception leaves ParseJson.
//
// Thread-safety: value types. Ownership: a Json owns its children.
#ifndef CQLSTREAM_STORE_JSON_H_
#define CQLSTREAM_STORE_JSON_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cqlstream/status.h"

namespace cqlstream::store {

inline constexpr int kMaxJsonDepth = 64;

struct Json {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  std::string text;                                  // kString: the value; kNumber: its source text
  std::vector<Json> items;                           // kArray
  std::vector<std::pair<std::string, Json>> fields;  // kObject, in source order

  // Defined in json.cc, where Json is complete: clang with libstdc++ cannot
  // instantiate the members of vector<pair<string, Json>> inside the class.
  Json();
  ~Json();
  Json(const Json&);
  Json(Json&&) noexcept;
  Json& operator=(const Json&);
  Json& operator=(Json&&) noexcept;

  bool is_string() const { return type == Type::kString; }
  bool is_number() const { return type == Type::kNumber; }
  bool is_array() const { return type == Type::kArray; }
  bool is_object() const { return type == Type::kObject; }
  // The first field called `key` of an object, or nullptr.
  const Json* Find(std::string_view key) const;
  // An integral number as int64 (no fraction or exponent, in range).
  std::optional<int64_t> AsInt() const;
  // Compact serialization (strings escaped); what `extra` stores for
  // non-string values.
  std::string Dump() const;
  // A string's value, a number's text, true/false/null, else Dump().
  std::string ToText() const;
};

// Parses exactly one JSON value (surrounding whitespace allowed).
StatusOr<Json> ParseJson(std::string_view text);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_JSON_H_
