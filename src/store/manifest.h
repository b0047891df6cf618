// Copyright (c) cqlstream authors.
//
// Manifest sources (CSV with a header row, or JSONL: one JSON object per
// line). Recognised columns / fields:
//
//   path    the image, relative to the manifest's folder (or absolute)   required
//   label   one label: a class name or an integer                        class
//   labels  several labels: "a;b;c" or a JSON array ["a", "b"] / [1, 2]  multilabel
//   target  a blob target (e.g. a segmentation mask), like path          target
//   split   the split of the row (empty: --split, default "train")
//   *       anything else goes to the sample's extra map (empty values
//           are left out; JSON values that are not strings are stored as
//           compact JSON, numbers as their text)
//
// CSV follows RFC 4180: fields separated by ',', optionally quoted with '"'
// ('""' inside quotes is a quote; quoted fields may span lines); CRLF or LF;
// a UTF-8 byte-order mark is ignored; blank lines are skipped.
//
// Thread-safety: pure functions.
#ifndef CQLSTREAM_STORE_MANIFEST_H_
#define CQLSTREAM_STORE_MANIFEST_H_

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cqlstream/status.h"

namespace cqlstream::store {

struct CsvRecord {
  size_t line = 0;  // 1-based line where the record starts
  std::vector<std::string> fields;
};
// Errors: an unterminated quote, a quote inside an unquoted field, or text
// after a closing quote (InvalidArgument naming the line).
StatusOr<std::vector<CsvRecord>> ParseCsv(std::string_view text);

struct ManifestRow {
  size_t line = 0;
  std::string path;
  std::string target;
  std::string split;
  bool has_label = false;                 // the label/labels cell is not empty
  std::vector<std::string> labels;        // one for `label`, any number for `labels`
  std::map<std::string, std::string> extra;
};

struct ParsedManifest {
  bool has_label_column = false;
  bool has_labels_column = false;
  bool has_target_column = false;
  bool has_split_column = false;
  std::vector<ManifestRow> rows;  // in file order
};

// `name` is used in messages. JSONL when `jsonl`, else CSV. Errors name the
// line: a missing path column or an empty path, a malformed line, both a
// label and a labels column, a labels cell that is not a list.
StatusOr<ParsedManifest> ParseManifest(std::string_view text, bool jsonl, std::string_view name);

// Splits a `labels` cell: a JSON array of strings/integers, or ';'-separated
// text (items trimmed, empty items dropped).
StatusOr<std::vector<std::string>> ParseLabelList(std::string_view cell);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_MANIFEST_H_
