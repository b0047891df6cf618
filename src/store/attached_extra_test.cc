// Copyright (c) cqlstream authors.
#include "store/attached_extra.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cql/test_util.h"

namespace cqlstream::store {
namespace {

std::optional<std::span<const uint8_t>> Cell(const std::string& s) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

TEST(AttachedExtraTest, PicksEveryColumnButTheKeyInNameOrder) {
  auto c = PickMetadataColumns({"or_split", "id", "label", "bad name", "or_label"}, "id");
  EXPECT_EQ(c.columns, (std::vector<std::string>{"label", "or_label", "or_split"}));
  EXPECT_EQ(c.skipped, std::vector<std::string>{"bad name"});
  std::vector<std::string> many;
  for (int i = 0; i < 100; ++i) many.push_back("c" + std::to_string(1000 + i));
  auto m = PickMetadataColumns(many, "k");
  EXPECT_EQ(m.columns.size(), kMaxExtraColumns);
  EXPECT_EQ(m.skipped.size(), 100 - kMaxExtraColumns);
  EXPECT_EQ(MetadataReadCql("\"ks\".\"m\"", "id", c.columns),
            "SELECT \"id\", \"label\", \"or_label\", \"or_split\" FROM \"ks\".\"m\" WHERE \"id\" = ?");
}

TEST(AttachedExtraTest, CutsOnACharacterBoundaryAndSaysSo) {
  EXPECT_EQ(CutExtraText("short", 10, 5), "short");
  EXPECT_EQ(CutExtraText("abcdef", 3, 6), "abc...[cut: 6 bytes]");
  // "é" is two bytes: a cut after 4 bytes of "aaaé" + more falls inside it.
  EXPECT_EQ(CutExtraText("aaa\xc3\xa9zz", 4, 7), "aaa...[cut: 7 bytes]");
  // A prefix handed in of a longer value says the value's size.
  EXPECT_EQ(CutExtraText("abc", 10, 900), "abc...[cut: 900 bytes]");
}

TEST(AttachedExtraTest, RendersCellsByTypeBounded) {
  EXPECT_FALSE(RenderExtraCell(DataType::Simple(TypeId::kVarchar), std::nullopt));
  EXPECT_EQ(*RenderExtraCell(DataType::Simple(TypeId::kVarchar), Cell("cat")), "cat");
  EXPECT_EQ(*RenderExtraCell(DataType::Simple(TypeId::kBlob), Cell("\x01\xff")), "0x01ff");
  EXPECT_EQ(*RenderExtraCell(DataType::Simple(TypeId::kInt), Cell(std::string("\0\0\1\0", 4))), "256");
  const std::string big(5000, 'y');
  const std::string t = *RenderExtraCell(DataType::Simple(TypeId::kVarchar), Cell(big));
  EXPECT_EQ(t, std::string(kMaxExtraValueBytes, 'y') + "...[cut: 5000 bytes]");
  const std::string b = *RenderExtraCell(DataType::Simple(TypeId::kBlob), Cell(big));
  EXPECT_LE(b.size(), kMaxExtraValueBytes + 32);
  EXPECT_NE(b.find("...[cut: 5000 bytes]"), std::string::npos);
  // Three bytes are no int: said, not an error of the scan.
  const std::string bad = *RenderExtraCell(DataType::Simple(TypeId::kInt), Cell("abc"));
  EXPECT_EQ(bad.rfind("[not decodable: ", 0), 0u) << bad;
  // A collection over the cell limit is not decoded at all.
  const std::string huge(kMaxExtraCellBytes + 1, '\0');
  EXPECT_EQ(*RenderExtraCell(DataType::List(DataType::Simple(TypeId::kInt)), Cell(huge)),
            fmt::format("[{} bytes, not shown]...[cut: {} bytes]", huge.size(), huge.size()));
}

TEST(AttachedExtraTest, ExtraIsTheCellsAfterTheKey) {
  cql::testing::RowsSpec spec;
  spec.table = "meta";
  spec.columns = {{"id", DataType::Simple(TypeId::kInt)},
                  {"caption", DataType::Simple(TypeId::kVarchar)},
                  {"score", DataType::Simple(TypeId::kInt)}};
  spec.rows = {{Value::Int(7), Value::Text("a cat"), std::nullopt}};
  const auto extra = ExtraFromRows(cql::testing::MakeRows(spec));
  EXPECT_EQ(extra, (std::map<std::string, std::string>{{"caption", "a cat"}}))
      << "the key (column 0) is not an extra, a null cell gives no entry";
  spec.rows.push_back({Value::Int(7), Value::Text("a dog"), Value::Int(3)});
  const auto two = ExtraFromRows(cql::testing::MakeRows(spec));
  EXPECT_EQ(two.at("caption"), "a cat");
  EXPECT_EQ(two.at("_rows"), "more than one");
  EXPECT_FALSE(two.contains("id"));
}

}  // namespace
}  // namespace cqlstream::store
