// Copyright (c) cqlstream authors.
#include "store/attached_extra.h"

#include <fmt/format.h>

#include <algorithm>

#include "store/attached.h"

namespace cqlstream::store {
namespace {

bool IsTextType(TypeId id) { return id == TypeId::kVarchar || id == TypeId::kAscii; }

std::string Hex(std::span<const uint8_t> b) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out = "0x";
  out.reserve(2 + 2 * b.size());
  for (uint8_t c : b) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 0xf]);
  }
  return out;
}

}  // namespace

MetadataColumns PickMetadataColumns(const std::vector<std::string>& names, const std::string& key_column) {
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  MetadataColumns out;
  for (const auto& n : sorted) {
    if (n == key_column) continue;
    if (!ValidAttachedIdentifier(n) || out.columns.size() >= kMaxExtraColumns) {
      out.skipped.push_back(n);
    } else {
      out.columns.push_back(n);
    }
  }
  return out;
}

std::string MetadataReadCql(const std::string& quoted_table, const std::string& key_column,
                            const std::vector<std::string>& cols) {
  std::string list = QuoteIdentifier(key_column);
  for (const auto& c : cols) list += ", " + QuoteIdentifier(c);
  return fmt::format("SELECT {} FROM {} WHERE {} = ?", list, quoted_table, QuoteIdentifier(key_column));
}

std::string CutExtraText(std::string s, size_t limit, size_t original) {
  if (s.size() <= limit && original <= s.size()) return s;
  size_t n = std::min(limit, s.size());
  // Back to the first byte of a UTF-8 sequence (continuation bytes are 10xxxxxx).
  while (n > 0 && n < s.size() && (static_cast<uint8_t>(s[n]) & 0xc0) == 0x80) --n;
  s.resize(n);
  return s + fmt::format("...[cut: {} bytes]", std::max(original, n));
}

std::optional<std::string> RenderExtraCell(const DataType& type, std::optional<std::span<const uint8_t>> cell) {
  if (!cell) return std::nullopt;
  const size_t n = cell->size();
  if (IsTextType(type.id)) {
    // A few bytes past the limit, so that the cut finds the character boundary.
    const size_t take = std::min(n, kMaxExtraValueBytes + 4);
    return CutExtraText(std::string(reinterpret_cast<const char*>(cell->data()), take), kMaxExtraValueBytes, n);
  }
  if (type.id == TypeId::kBlob) {
    const size_t take = std::min(n, (kMaxExtraValueBytes - 2) / 2);
    std::string hex = Hex(cell->first(take));
    if (take == n) return hex;
    return hex + fmt::format("...[cut: {} bytes]", n);
  }
  if (n > kMaxExtraCellBytes) return fmt::format("[{} bytes, not shown]...[cut: {} bytes]", n, n);
  auto v = DecodeCell(type, *cell);
  if (!v.ok()) return CutExtraText("[not decodable: " + v.status().ToString() + "]", kMaxExtraValueBytes, 0);
  if (v->is_null()) return std::nullopt;
  std::string text = v->ToString();
  const size_t len = text.size();
  return CutExtraText(std::move(text), kMaxExtraValueBytes, len);
}

std::map<std::string, std::string> ExtraFromRows(const cql::Rows& rows) {
  std::map<std::string, std::string> out;
  if (rows.row_count() < 1) return out;
  const auto& cols = rows.metadata().columns;
  if (static_cast<int32_t>(cols.size()) != rows.column_count()) {
    out["_error"] = "the metadata read's answer has no column types";
    return out;
  }
  for (int32_t c = 1; c < rows.column_count(); ++c) {  // column 0 is the key
    auto text = RenderExtraCell(cols[static_cast<size_t>(c)].type, rows.cell(0, c));
    if (text) out[CutExtraText(cols[static_cast<size_t>(c)].name, kMaxAttachedIdentifier, 0)] = std::move(*text);
  }
  if (rows.row_count() > 1) out["_rows"] = "more than one";
  return out;
}

}  // namespace cqlstream::store
