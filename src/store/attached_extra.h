// Copyright (c) cqlstream authors.
//
// The `extra` of an attached dataset's metadata rows (Dataset.metadata(),
// docs/schema.md "attached datasets"): the columns of the split's metadata
// table (`cqlstream attach --metadata-table KS.T`) other than the key
// column, read by the key and rendered as text.
//
//   SELECT "<key>", "<c1>", ..., "<cn>" FROM "ks"."meta" WHERE "<key>" = ?
//
// (the key first, so that the answer names the row it is: the reader refuses
// a row of another key, and the read checks its result columns).
// Nothing in that table is trusted:
//   * columns: every column but the key whose name is an attach identifier
//     ([A-Za-z0-9_]{1,48}, so it can go into CQL text), in name order, at most
//     kMaxExtraColumns; the others are left out and named in
//     MetadataColumns::skipped;
//   * cells: decoded with the type the server's result metadata gives
//     (DecodeCell); a cell that does not decode becomes "[not decodable:
//     <why>]", never an error of the scan; a null cell gives no entry (an
//     answer whose columns are not those the read was prepared with never
//     gets here: net/result_columns.h refuses it);
//   * sizes: text and blob values are cut to kMaxExtraValueBytes (a text on a
//     UTF-8 character boundary, a blob's first bytes in hex), any other value
//     over kMaxExtraCellBytes of wire bytes is not decoded at all, and every
//     cut value ends in "...[cut: N bytes]" (N: the cell's wire bytes), so a
//     row's extra is at most kMaxExtraColumns x (kMaxExtraValueBytes + 32).
//   * rows: none gives an empty extra (metadata tables may cover part of the
//     data table); more than one (a metadata table with clustering columns)
//     renders the first and sets extra["_rows"] to "more than one".
//
// Thread-safety: free functions on values.
#ifndef CQLSTREAM_STORE_ATTACHED_EXTRA_H_
#define CQLSTREAM_STORE_ATTACHED_EXTRA_H_

#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cql/response.h"
#include "cqlstream/value.h"

namespace cqlstream::store {

inline constexpr size_t kMaxExtraColumns = 64;
inline constexpr size_t kMaxExtraValueBytes = 256;
inline constexpr size_t kMaxExtraCellBytes = 64 * 1024;

struct MetadataColumns {
  std::vector<std::string> columns;  // read, in this order
  std::vector<std::string> skipped;  // not valid identifiers, or past kMaxExtraColumns
};

// The columns of a metadata table (names from system_schema.columns) to read
// as extra: all but `key_column`.
MetadataColumns PickMetadataColumns(const std::vector<std::string>& names, const std::string& key_column);

// The read of one key's metadata row: the key first (so that the answer
// names the row it is), then `cols`. REQUIRES: !cols.empty(), identifiers
// valid.
std::string MetadataReadCql(const std::string& quoted_table, const std::string& key_column,
                            const std::vector<std::string>& cols);

// One cell as text (nullopt: a null cell), bounded as the header says.
std::optional<std::string> RenderExtraCell(const DataType& type, std::optional<std::span<const uint8_t>> cell);

// `s` cut to at most `limit` bytes on a UTF-8 character boundary, with the
// "...[cut: N bytes]" note (N = `original`) when it was cut or when
// original > s.size().
std::string CutExtraText(std::string s, size_t limit, size_t original);

// The extra of a metadata read's answer: row 0's cells after the key (column
// 0, which the caller checked) by the result's column names (the result
// metadata's types), as the header says.
std::map<std::string, std::string> ExtraFromRows(const cql::Rows& rows);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_ATTACHED_EXTRA_H_
