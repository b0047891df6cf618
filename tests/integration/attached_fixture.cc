// Copyright (c) cqlstream authors.
#include "attached_fixture.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "store/attach.h"
#include "store/attached.h"
#include "store/catalog.h"
#include "test_env.h"

namespace cqlstream::testing {

const std::vector<std::string> kTexts = {"cat", "dog", "eel", "fox"};

Uuid RowId(int table, int i) {
  Uuid u;
  uint64_t x = (static_cast<uint64_t>(table) << 32) ^ static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
  for (size_t b = 0; b < 16; ++b) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    u.bytes[b] = static_cast<uint8_t>(x >> 56);
  }
  u.bytes[6] = static_cast<uint8_t>((u.bytes[6] & 0x0f) | 0x40);
  u.bytes[8] = static_cast<uint8_t>((u.bytes[8] & 0x3f) | 0x80);
  return u;
}

std::vector<uint8_t> RowData(const ForeignTable& t, int i) {
  const int size = t.big_every > 0 && i % t.big_every == 0 ? 300000 : 100 + (i * 53) % t.max_small;
  return PayloadFor(MakeKey(7, i), size);
}

Value RowKey(const ForeignTable& t, int i) {
  if (t.key_type == "int") return Value::Int(1000 + 7 * i);
  if (t.key_type == "bigint") return Value::Bigint((int64_t{1} << 40) + 11 * i);
  if (t.key_type == "text") return Value::Text(fmt::format("img/{:05}.jpg", i));
  if (t.key_type == "blob") {
    const std::string s = fmt::format("key-{}", i);
    return Value::Blob(std::vector<uint8_t>(s.begin(), s.end()));
  }
  return Value::FromUuid(RowId(t.id, i));
}

std::string RowKeyBytes(const ForeignTable& t, int i) {
  const DataType type = DataType::Simple(t.key_type == "int"      ? TypeId::kInt
                                         : t.key_type == "bigint" ? TypeId::kBigint
                                         : t.key_type == "text"   ? TypeId::kVarchar
                                         : t.key_type == "blob"   ? TypeId::kBlob
                                                                  : TypeId::kUuid);
  cql::Bytes b;
  EXPECT_TRUE(EncodeCell(RowKey(t, i), type, &b).ok());
  return std::string(b.begin(), b.end());
}

std::vector<uint8_t> RowMask(int i) { return std::vector<uint8_t>(static_cast<size_t>(10 + i % 7), static_cast<uint8_t>(i)); }

void WriteForeignTable(net::Session& s, const ForeignTable& t) {
  MustRun(s, fmt::format("CREATE TABLE IF NOT EXISTS {} (id {} PRIMARY KEY, label {}, data blob) "
                                  "WITH compression = {{'enabled': false}}",
                                  t.table, t.key_type, t.label_type));
  auto ins = s.Prepare(fmt::format("INSERT INTO {} (id, label, data) VALUES (?, ?, ?)", t.table));
  ASSERT_TRUE(ins.ok()) << ins.status().ToString();
  for (int i = 0; i < t.rows; ++i) {
    Value label = t.label_type == "int"    ? Value::Int(i % 10)
                  : t.label_type == "text" ? Value::Text(kTexts[static_cast<size_t>(i) % kTexts.size()])
                                           : Value::Blob(RowMask(i));
    auto r = s.Execute(net::Statement::Bound(*ins, {RowKey(t, i), label, Value::Blob(RowData(t, i))}));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
}

SyntheticDataset Attach(net::Session& s, const std::string& ks, const std::string& name, const ForeignTable& t,
                        LabelKind kind) {
  SyntheticDataset d;
  store::AttachSpec spec;
  spec.dataset = name;
  spec.split = "train";
  spec.table = t.table;
  spec.key_column = "id";
  spec.data_column = "data";
  spec.label_column = "label";
  spec.label_kind = kind;
  auto report = store::Attach(s, ks, spec);
  EXPECT_TRUE(report.ok()) << report.status().ToString();
  auto info = store::LoadDataset(s, ks, name);
  EXPECT_TRUE(info.ok()) << info.status().ToString();
  if (!report.ok() || !info.ok()) return d;
  d.info = *info;
  std::set<int32_t> segs;
  for (const auto& g : d.info.SplitSegments("train")) segs.insert(g.seg);
  std::map<std::string, int> row_of;  // serialized key -> row number
  for (int i = 0; i < t.rows; ++i) {
    const std::string kb = RowKeyBytes(t, i);
    row_of[kb] = i;
  }
  auto snap = s.Execute(net::Statement::Query(fmt::format("SELECT seg, idx, key FROM {}.{}", ks, store::KeyTableName(name))));
  EXPECT_TRUE(snap.ok() && snap->rows());
  if (!snap.ok() || !snap->rows()) return d;
  const cql::Rows& rows = *snap->rows();
  for (int32_t r = 0; r < rows.row_count(); ++r) {
    const int32_t seg = *rows.Get<int32_t>(r, 0), idx = *rows.Get<int32_t>(r, 1);
    if (!segs.count(seg)) continue;
    auto cell = rows.cell(r, 2);
    const std::string kb(cell->begin(), cell->end());
    const int i = row_of.at(kb);
    const SampleKey k = MakeKey(seg, idx);
    d.payload[k] = RowData(t, i);
    d.label[k] = -1;
    if (kind == LabelKind::kClass && t.label_type == "int") d.label[k] = i % 10;
    if (kind == LabelKind::kClass && t.label_type == "text") {
      const auto& names = d.info.class_names;
      const std::string& text = kTexts[static_cast<size_t>(i) % kTexts.size()];
      d.label[k] = static_cast<int32_t>(std::find(names.begin(), names.end(), text) - names.begin());
    }
    if (kind == LabelKind::kTarget) {
      const auto m = RowMask(i);
      d.payload[k].insert(d.payload[k].end(), m.begin(), m.end());
    }
    d.path[k] = kb;
  }
  EXPECT_EQ(d.payload.size(), static_cast<size_t>(t.rows));
  return d;
}

}  // namespace cqlstream::testing
