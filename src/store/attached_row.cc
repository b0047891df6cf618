// Copyright (c) cqlstream authors.
#include "store/attached_row.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "store/schema.h"

namespace cqlstream::store {
namespace {

std::optional<int32_t> IntOf(const std::optional<std::span<const uint8_t>>& c) {
  if (!c || c->size() != 4) return std::nullopt;
  const auto& b = *c;
  return static_cast<int32_t>((uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3]);
}

}  // namespace

StatusOr<AttachedLabelType> ParseAttachedLabelType(std::string_view t) {
  if (t.empty()) return AttachedLabelType::kNone;
  if (t == "int") return AttachedLabelType::kInt;
  if (t == "list<int>" || t == "set<int>") return AttachedLabelType::kIntList;
  if (t == "text" || t == "varchar" || t == "ascii") return AttachedLabelType::kText;
  if (t == "blob") return AttachedLabelType::kBlob;
  return Status::Corruption(fmt::format("attached label type '{}' is not int, list<int>, set<int>, text or blob", t));
}

StatusOr<DataType> AttachedKeyType(std::string_view t) {
  if (t == "uuid") return DataType::Simple(TypeId::kUuid);
  if (t == "timeuuid") return DataType::Simple(TypeId::kTimeuuid);
  if (t == "bigint") return DataType::Simple(TypeId::kBigint);
  if (t == "int") return DataType::Simple(TypeId::kInt);
  if (t == "text" || t == "varchar") return DataType::Simple(TypeId::kVarchar);
  if (t == "ascii") return DataType::Simple(TypeId::kAscii);
  if (t == "blob") return DataType::Simple(TypeId::kBlob);
  return Status::Corruption(
      fmt::format("attached key type '{}' is not uuid, timeuuid, bigint, int, text, varchar, ascii or blob", t));
}

bool ForeignKeyMatches(std::optional<std::span<const uint8_t>> cell, std::span<const uint8_t> bound) {
  return cell && std::equal(cell->begin(), cell->end(), bound.begin(), bound.end());
}

StatusOr<Value> SnapshotKey(SampleKey sample, const cql::Rows* rows, const DataType& key_type,
                            const std::string& snapshot_table) {
  if (rows == nullptr) {
    return Status::Corruption(fmt::format("sample {}: the key lookup in the key snapshot {} answered no rows result",
                                          FormatKey(sample), snapshot_table));
  }
  if (rows->column_count() != kSnapshotColKey + 1) {
    // Not the seg, idx and key asked for: an answer meant for another request.
    return Status::Corruption(fmt::format("sample {}: the key lookup in the key snapshot {} answered {} columns, "
                                          "not seg, idx and key",
                                          FormatKey(sample), snapshot_table, rows->column_count()));
  }
  SnapshotRowCells first;
  if (rows->row_count() > 0) {
    first = {rows->cell(0, kSnapshotColSeg), rows->cell(0, kSnapshotColIdx), rows->cell(0, kSnapshotColKey)};
  }
  return SnapshotKeyRow(sample, rows->row_count(), first, key_type, snapshot_table);
}

StatusOr<Value> SnapshotKeyRow(SampleKey sample, int32_t row_count, const SnapshotRowCells& row,
                               const DataType& key_type, const std::string& snapshot_table) {
  if (row_count > 0) {
    // The row names its sample, so that an answer the server meant for
    // another request (a stream id answered twice, or late) is never taken
    // for this sample's key.
    const std::optional<int32_t> seg = IntOf(row.seg), idx = IntOf(row.idx);
    if (!seg || !idx || MakeKey(*seg, *idx) != sample) {
      return Status::Corruption(fmt::format("sample {}: the key lookup in the key snapshot {} answered {}",
                                            FormatKey(sample), snapshot_table,
                                            seg && idx ? "the row of sample " + FormatKey(MakeKey(*seg, *idx))
                                                       : std::string("a row without an int seg and idx")));
    }
  }
  return SnapshotKeyCell(sample, row_count, row_count > 0 ? row.key : std::nullopt, key_type, snapshot_table);
}

StatusOr<Value> SnapshotKeyCell(SampleKey sample, int32_t row_count, std::optional<std::span<const uint8_t>> cell,
                                const DataType& key_type, const std::string& snapshot_table) {
  auto bad = [&](std::string what) {
    return Status::Corruption(fmt::format("sample {}: {} in the key snapshot {}", FormatKey(sample), what, snapshot_table));
  };
  if (row_count == 0) {
    return Status::NotFound(fmt::format("sample {} has no row in the key snapshot {}", FormatKey(sample), snapshot_table));
  }
  if (row_count < 0) return bad("a row without columns");
  if (row_count != 1) return bad(fmt::format("{} rows instead of one", row_count));
  if (!cell) return bad("a null key");
  if (cell->empty() || cell->size() > kMaxAttachedKeyBytes) {
    return bad(fmt::format("a key of {} bytes (1 to {} allowed)", cell->size(), kMaxAttachedKeyBytes));
  }
  auto v = DecodeCell(key_type, *cell);
  if (!v.ok() || v->is_null()) {
    return bad(fmt::format("a key of {} bytes that is not a {}", cell->size(), key_type.ToString()));
  }
  return std::move(*v);
}

StatusOr<std::map<int32_t, std::optional<std::span<const uint8_t>>>> GroupedSnapshotKeys(
    int32_t seg, std::span<const int32_t> asked, std::span<const SnapshotRowCells> rows,
    const std::string& snapshot_table) {
  std::vector<int32_t> want(asked.begin(), asked.end());
  std::sort(want.begin(), want.end());
  std::map<int32_t, std::optional<std::span<const uint8_t>>> found;
  for (size_t i = 0; i < rows.size(); ++i) {
    auto bad = [&](const std::string& what) {
      return Status::Corruption(fmt::format("the key lookup of {} samples of segment {} in the key snapshot {} "
                                            "answered row {} {}",
                                            asked.size(), seg, snapshot_table, i, what));
    };
    const std::optional<int32_t> s = IntOf(rows[i].seg), x = IntOf(rows[i].idx);
    if (!s || !x) return bad("without an int seg and idx");
    if (*s != seg || !std::binary_search(want.begin(), want.end(), *x)) {
      return bad(fmt::format("of sample {}, which was not asked for", FormatKey(MakeKey(*s, *x))));
    }
    if (!found.emplace(*x, rows[i].key).second) {
      return bad(fmt::format("of sample {} a second time", FormatKey(MakeKey(*s, *x))));
    }
  }
  return found;
}

ClassNameIndex::ClassNameIndex(const std::vector<std::string>& names) : size_(names.size()) {
  index_.reserve(names.size());
  for (size_t i = 0; i < names.size(); ++i) index_.emplace(names[i], static_cast<int32_t>(i));
}

std::optional<int32_t> ClassNameIndex::Find(std::string_view name) const {
  auto it = index_.find(name);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

void AttachedRow::Fail(std::string what) {
  if (status_.ok()) {
    status_ = Status::Corruption(
        fmt::format("sample {} (key {}): {} in {}", FormatKey(sample_), key_, what, o_->table));
  }
}

void AttachedRow::OnDataSize(int32_t row, int64_t size) {
  if (row != 0) return;  // a second row: Finish refuses it
  data_size_ = size;
  if (size < 0 || size > o_->max_bytes) {
    Fail(fmt::format("its data cell is {} bytes, more than the loader's limit of {}", size, o_->max_bytes));
  }
}

void AttachedRow::OnTargetSize(int32_t row, int64_t size) {
  if (row != 0) return;
  target_size_ = size;
  if (data_size_ < 0) return Fail("its target cell came without a data cell");
  const int64_t data = data_size_;
  if (size < 0 || size > o_->max_bytes - data) {
    Fail(fmt::format("its data ({} bytes) and target ({} bytes) are more than the loader's limit of {}", data, size,
                     o_->max_bytes));
  }
}

void AttachedRow::OnCell(int32_t row, int32_t col, std::optional<std::span<const uint8_t>> data) {
  if (row != 0) return;
  if (col == kAttachedColData) {
    // A null data cell fails at once: a reader must not place a target (or
    // anything else) after a data cell whose size was never announced.
    if (!data) return Fail("its data cell is null");
    const bool announced = data_size_ >= 0;
    if (!announced) OnDataSize(row, static_cast<int64_t>(data->size()));
    if (!announced && o_->keep_data && status_.ok()) kept_data_.assign(data->begin(), data->end());
    return;
  }
  if (col == kAttachedColLabel) OnLabel(data);
}

void AttachedRow::OnLabel(std::optional<std::span<const uint8_t>> data) {
  switch (o_->label_kind) {
    case LabelKind::kNone:
      return;
    case LabelKind::kTarget: {
      if (o_->label_type != AttachedLabelType::kBlob) return Fail("its label column is not a blob (target)");
      if (!data) return;  // no target: the payload is the data alone
      const bool announced = target_size_ >= 0;
      if (!announced) OnTargetSize(0, static_cast<int64_t>(data->size()));
      if (!announced && o_->keep_target && status_.ok()) kept_target_.assign(data->begin(), data->end());
      return;
    }
    case LabelKind::kClass:
      return OnClassLabel(data);
    case LabelKind::kMultiLabel:
      return OnMultiLabel(data);
  }
}

std::string AttachedRow::ClassRange() const {
  return o_->classes >= 0 ? fmt::format(" (0 to {})", o_->classes - 1) : "";
}

// An int cell: nullopt after Fail() for a malformed one; -1 for null/empty.
std::optional<int32_t> AttachedRow::IntLabel(std::optional<std::span<const uint8_t>> data) {
  if (!data || data->empty()) return -1;  // null, or the protocol's legacy empty value
  if (data->size() != 4) {
    Fail(fmt::format("its label cell is {} bytes, not an int", data->size()));
    return std::nullopt;
  }
  return DecodeIntCell(*data);
}

// An int, or a text naming one of the class names.
void AttachedRow::OnClassLabel(std::optional<std::span<const uint8_t>> data) {
  if (o_->label_type == AttachedLabelType::kInt) {
    auto l = IntLabel(data);
    if (!l) return;
    if (*l < -1 || (o_->classes >= 0 && *l >= o_->classes)) {
      return Fail(fmt::format("its label {} is not a class of the dataset{}", *l, ClassRange()));
    }
    label_ = *l;
    return;
  }
  if (o_->label_type != AttachedLabelType::kText) return Fail("its label column is neither an int nor a text");
  if (!data) return;  // null: no label (-1)
  const std::string_view text(reinterpret_cast<const char*>(data->data()), data->size());
  const std::optional<int32_t> index = o_->class_names ? o_->class_names->Find(text) : std::nullopt;
  if (!index) {
    const std::string shown = text.size() > 64 ? std::string(text.substr(0, 64)) + "..." : std::string(text);
    return Fail(fmt::format("its label '{}' is not one of the dataset's {} class names", shown,
                            o_->class_names ? o_->class_names->size() : 0));
  }
  label_ = *index;
}

// A list<int>/set<int>, or an int read as a sample of one label.
void AttachedRow::OnMultiLabel(std::optional<std::span<const uint8_t>> data) {
  labels_.clear();
  auto add = [&](int32_t l) {
    if (l < 0 || (o_->classes >= 0 && l >= o_->classes)) {
      Fail(fmt::format("its labels hold {}, not a class of the dataset{}", l, ClassRange()));
      return false;
    }
    labels_.push_back(l);
    return true;
  };
  if (o_->label_type == AttachedLabelType::kInt) {
    auto l = IntLabel(data);
    if (l && *l != -1) add(*l);
    return;
  }
  if (o_->label_type != AttachedLabelType::kIntList) return Fail("its label column is not a list<int> or set<int>");
  if (!data) return;
  auto v = DecodeCell(DataType::List(DataType::Simple(TypeId::kInt)), *data);
  if (!v.ok() || (!v->is_null() && v->kind() != Value::Kind::kList)) {
    return Fail("its label column is not a list<int> or set<int>");
  }
  if (v->is_null()) return;
  if (v->as_list().size() > kMaxLabelsPerSample) {
    return Fail(fmt::format("it has {} labels, more than {}", v->as_list().size(), kMaxLabelsPerSample));
  }
  for (const auto& x : v->as_list()) {
    if (!add(x.kind() == Value::Kind::kInt ? x.as_int() : -1)) return;
  }
}

Status AttachedRow::Finish() const {
  if (rows_ <= 0) {
    return Status::NotFound(fmt::format("sample {} (key {}) has no row in {}", FormatKey(sample_), key_, o_->table));
  }
  auto bad = [&](std::string what) {
    return Status::Corruption(fmt::format("sample {} (key {}): {} in {}", FormatKey(sample_), key_, what, o_->table));
  };
  if (rows_ > 1) return bad(fmt::format("{} rows instead of one", rows_));
  if (!status_.ok()) return status_;
  if (data_size_ < 0) return bad("its data cell is null");
  return Status::OK();
}

}  // namespace cqlstream::store
