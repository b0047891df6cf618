// Copyright (c) cqlstream authors.
//
// libFuzzer target for the rows of an attached dataset
// (store/attached_row.h): the key snapshot's answer (a row count and a key
// cell of any bytes, decoded as any attachable key type) and the foreign
// data row (any number of rows; data and label cells null or of any bytes;
// any label kind and label type, class names or not; a byte limit), fed the
// way the loader feeds them: the data cell either announced first
// (OnDataSize, the bytes placed by the caller in a region of exactly that
// size) or handed whole, a blob target announced or handed whole.
//
// Also a single lookup's row (seg, idx and key cells: accepted only when the
// seg and idx cells are 4-byte ints naming the sample) and a grouped
// lookup's answer (rows of seg, idx and key cells for a set of asked
// samples): accepted, it hands keys only to asked samples, at most one per
// row; else Corruption with a message.
//
// Checked: nothing throws or traps (ASan/UBSan); an accepted key is a
// non-null value of the key type; an accepted row has one row, a data size
// and payload within the limit, kept bytes of exactly the sizes it reports,
// a class label in range of the names/classes, multilabels in range; a null
// data cell fails the row at once and a target is accepted only after a
// data size (the loader places it there); every refusal is NotFound or
// Corruption with a message.
//
// Input (FuzzedDataProvider): options, the snapshot answer, then the rows.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "store/attached_row.h"
#include "fuzz_check.h"

namespace {

using cqlstream::fuzz::Check;

// Null one time in 6.
std::optional<std::vector<uint8_t>> Cell(FuzzedDataProvider& in, size_t max) {
  return cqlstream::fuzz::NullableBytes(in, max, 6);
}

using cqlstream::fuzz::View;

void CheckRefusal(const cqlstream::Status& s) {
  Check(!s.message().empty());
  Check(s.IsNotFound() || s.code() == cqlstream::Status::Code::kCorruption);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cqlstream;
  using namespace cqlstream::store;
  FuzzedDataProvider in(data, size);
  static const char* kKeyTypes[] = {"uuid", "timeuuid", "bigint", "int", "text", "varchar", "ascii", "blob", "map"};
  static const char* kLabelTypes[] = {"", "int", "list<int>", "set<int>", "text", "blob", "float"};
  static const std::vector<std::string> kNames = {"dog", "a", "cat", "b"};  // any order
  static const auto kIndex = std::make_shared<const ClassNameIndex>(kNames);

  // The key snapshot's answer.
  const SampleKey sample = MakeKey(in.ConsumeIntegralInRange<int32_t>(0, 3), in.ConsumeIntegralInRange<int32_t>(0, 3));
  auto key_type = AttachedKeyType(kKeyTypes[in.ConsumeIntegralInRange<size_t>(0, 8)]);
  const int32_t key_rows = in.ConsumeIntegralInRange<int32_t>(-1, 3);
  auto key_cell = Cell(in, 40);
  if (key_type.ok()) {
    auto key = SnapshotKeyCell(sample, key_rows, View(key_cell), *key_type, "ks.k_d");
    if (key.ok()) {
      Check(!key->is_null() && key_rows == 1 && key_cell && !key_cell->empty());
    } else {
      CheckRefusal(key.status());
    }
    // The same key in a single lookup's row, whose seg and idx cells are
    // mostly ints near the sample's.
    std::optional<std::vector<uint8_t>> named[2];
    for (int c = 0; c < 2; ++c) {
      if (in.ConsumeBool()) {
        const auto v = static_cast<uint32_t>(in.ConsumeIntegralInRange<int32_t>(0, 3));
        named[c] = std::vector<uint8_t>{static_cast<uint8_t>(v >> 24), static_cast<uint8_t>(v >> 16),
                                        static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v)};
      } else {
        named[c] = Cell(in, 6);
      }
    }
    auto own = SnapshotKeyRow(sample, key_rows, {View(named[0]), View(named[1]), View(key_cell)}, *key_type,
                              "ks.k_d");
    if (own.ok()) {
      const auto int_of = [](const std::optional<std::vector<uint8_t>>& c) {
        return static_cast<int32_t>((uint32_t{(*c)[0]} << 24) | (uint32_t{(*c)[1]} << 16) |
                                    (uint32_t{(*c)[2]} << 8) | (*c)[3]);
      };
      Check(key.ok() && named[0] && named[0]->size() == 4 && named[1] && named[1]->size() == 4);
      Check(MakeKey(int_of(named[0]), int_of(named[1])) == sample);
    } else {
      CheckRefusal(own.status());
    }
  }

  // A grouped lookup's answer (GroupedSnapshotKeys): rows of seg, idx and
  // key cells, mostly well-formed ints so that rows of other samples,
  // repeats and absent samples all come up.
  {
    const int32_t seg = in.ConsumeIntegralInRange<int32_t>(0, 2);
    std::vector<int32_t> asked;
    for (int n = in.ConsumeIntegralInRange<int>(0, 6); n > 0; --n) asked.push_back(in.ConsumeIntegralInRange<int32_t>(0, 7));
    const int nrows = in.ConsumeIntegralInRange<int>(0, 8);
    std::vector<std::optional<std::vector<uint8_t>>> cells;
    cells.reserve(static_cast<size_t>(nrows) * 3);  // (the rows' views point into these)
    std::vector<SnapshotRowCells> rows;
    for (int r = 0; r < nrows; ++r) {
      for (int c = 0; c < 2; ++c) {
        if (in.ConsumeBool()) {
          const auto v = static_cast<uint32_t>(in.ConsumeIntegralInRange<int32_t>(0, c == 0 ? 2 : 7));
          cells.push_back(std::vector<uint8_t>{static_cast<uint8_t>(v >> 24), static_cast<uint8_t>(v >> 16),
                                               static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v)});
        } else {
          cells.push_back(Cell(in, 6));
        }
      }
      cells.push_back(Cell(in, 20));
      const size_t b = cells.size() - 3;
      rows.push_back({View(cells[b]), View(cells[b + 1]), View(cells[b + 2])});
    }
    auto found = GroupedSnapshotKeys(seg, asked, rows, "ks.k_d");
    if (found.ok()) {
      Check(found->size() <= rows.size());
      for (const auto& [idx, key] : *found) Check(std::find(asked.begin(), asked.end(), idx) != asked.end());
    } else {
      Check(found.status().code() == Status::Code::kCorruption && !found.status().message().empty());
    }
  }

  // The foreign data row.
  AttachedRowOptions o;
  o.label_kind = static_cast<LabelKind>(in.ConsumeIntegralInRange<int>(0, 3));
  auto label_type = ParseAttachedLabelType(kLabelTypes[in.ConsumeIntegralInRange<size_t>(0, 6)]);
  if (!label_type.ok()) return 0;
  o.label_type = *label_type;
  if (in.ConsumeBool()) o.class_names = kIndex;
  o.classes = in.ConsumeBool() ? static_cast<int64_t>(kNames.size()) : in.ConsumeIntegralInRange<int64_t>(-1, 8);
  o.max_bytes = in.ConsumeIntegralInRange<int64_t>(0, 4096);
  o.table = "ks.data_train";
  o.keep_data = in.ConsumeBool();
  o.keep_target = in.ConsumeBool();
  AttachedRow row(sample, "key", &o);
  const int32_t rows = in.ConsumeIntegralInRange<int32_t>(-1, 3);
  row.OnRowsBegin(rows);
  std::vector<uint8_t> region;
  for (int32_t r = 0; r < std::max(rows, 1) && in.remaining_bytes() > 0; ++r) {
    auto d = Cell(in, 6000);
    if (d && in.ConsumeBool()) {
      // Announced, then placed by the caller (when within the limit).
      row.OnDataSize(r, static_cast<int64_t>(d->size()));
      if (r == 0 && row.status().ok()) {
        Check(static_cast<int64_t>(d->size()) <= o.max_bytes);
        region.assign(d->begin(), d->end());
      }
    }
    row.OnCell(r, kAttachedColData, View(d));
    if (r == 0 && !d) Check(!row.status().ok());  // a null data cell fails at once
    auto l = Cell(in, 6000);
    if (l && in.ConsumeBool() && o.label_kind == LabelKind::kTarget) {
      row.OnTargetSize(r, static_cast<int64_t>(l->size()));
      // The loader places the target at data_size(): never before the data.
      if (r == 0 && row.status().ok()) Check(row.data_size() >= 0);
    }
    row.OnCell(r, kAttachedColLabel, View(l));
  }
  Status s = row.Finish();
  if (!s.ok()) {
    CheckRefusal(s);
    return 0;
  }
  Check(row.rows() == 1);
  Check(row.data_size() >= 0 && row.data_size() <= o.max_bytes);
  Check(row.payload_size() >= row.data_size() && row.payload_size() <= o.max_bytes);
  if (!row.kept_data().empty()) Check(static_cast<int64_t>(row.kept_data().size()) == row.data_size());
  if (!row.kept_target().empty()) Check(static_cast<int64_t>(row.kept_target().size()) == row.target_size());
  if (o.label_kind == LabelKind::kClass) {
    Check(row.label() >= -1);
    if (o.classes >= 0 && o.label_type == AttachedLabelType::kInt) Check(row.label() < o.classes);
    if (o.label_type == AttachedLabelType::kText && row.label() >= 0) {
      Check(o.class_names && static_cast<size_t>(row.label()) < kNames.size());
      Check(*o.class_names->Find(kNames[static_cast<size_t>(row.label())]) == row.label());
    }
  }
  for (int32_t l : row.labels()) Check(l >= 0 && (o.classes < 0 || l < o.classes));
  if (o.label_kind == LabelKind::kTarget) Check(row.image_size() == row.data_size());
  return 0;
}
