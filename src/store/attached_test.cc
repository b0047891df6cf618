// Copyright (c) cqlstream authors.
#include "store/attached.h"

#include <gtest/gtest.h>

#include "store/attach.h"
#include "store/key_snapshot.h"

namespace cqlstream::store {
namespace {

AttachedTable Reference() {
  AttachedTable a;
  a.key_column = "id";
  a.key_type = "uuid";
  a.data_column = "data";
  a.label_column = "label";
  a.label_type = "int";
  a.tables = {{"train", "imagenet.data_train"}, {"val", "imagenet.data_val"}};
  a.metadata_tables = {{"train", "imagenet.metadata_train"}};
  a.generation = 3;
  return a;
}

DatasetInfo WithSource(std::map<std::string, std::string> source) {
  DatasetInfo d;
  d.name = "inet";
  d.source = std::move(source);
  return d;
}

TEST(AttachedTableTest, RoundTrip) {
  const AttachedTable a = Reference();
  const auto m = a.ToSource();
  EXPECT_EQ(m.at("format"), "attached-1");
  EXPECT_EQ(m.at("table:train"), "imagenet.data_train");
  EXPECT_EQ(m.at("metadata:train"), "imagenet.metadata_train");
  EXPECT_EQ(m.at("generation"), "3");
  auto b = AttachedTable::FromSource(WithSource(m));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->key_column, "id");
  EXPECT_EQ(b->key_type, "uuid");
  EXPECT_EQ(b->data_column, "data");
  EXPECT_EQ(b->label_column, "label");
  EXPECT_EQ(b->label_type, "int");
  EXPECT_EQ(b->tables, a.tables);
  EXPECT_EQ(b->metadata_tables, a.metadata_tables);
  EXPECT_EQ(b->generation, 3);
  EXPECT_EQ(b->ToSource(), m);
}

TEST(AttachedTableTest, Statements) {
  const AttachedTable a = Reference();
  EXPECT_EQ(a.DataReadCql("train"),
            "SELECT \"id\", \"data\", \"label\" FROM \"imagenet\".\"data_train\" WHERE \"id\" = ?");
  AttachedTable n = a;
  n.label_column.clear();
  n.label_type.clear();
  EXPECT_EQ(n.DataReadCql("val"), "SELECT \"id\", \"data\" FROM \"imagenet\".\"data_val\" WHERE \"id\" = ?");
  EXPECT_EQ(a.DataReadManyCql("train"),
            "SELECT \"id\", \"data\", \"label\" FROM \"imagenet\".\"data_train\" WHERE \"id\" IN ?");
  EXPECT_EQ(n.DataReadManyCql("val"), "SELECT \"id\", \"data\" FROM \"imagenet\".\"data_val\" WHERE \"id\" IN ?");
  EXPECT_EQ(a.SourceId("val"), "attach:3:val");
  EXPECT_EQ(a.QuotedTable("test"), "");
  EXPECT_EQ(KeyTableName("inet"), "k_inet");
  EXPECT_EQ(KeyTableCql("ks", "inet"),
            "CREATE TABLE IF NOT EXISTS ks.k_inet (seg int, idx int, key blob, PRIMARY KEY ((seg, idx)))");
  EXPECT_EQ(KeyLookupCql("ks", "inet"), "SELECT seg, idx, key FROM ks.k_inet WHERE seg = ? AND idx = ?");
  EXPECT_EQ(KeyScanCql(a, "train"),
            "SELECT token(\"id\"), \"id\" FROM \"imagenet\".\"data_train\" WHERE token(\"id\") > ? AND "
            "token(\"id\") <= ?");
  AttachedTable t = a;
  t.label_type = "text";
  EXPECT_EQ(KeyScanCql(t, "train"),
            "SELECT token(\"id\"), \"id\", \"label\" FROM \"imagenet\".\"data_train\" WHERE token(\"id\") > ? "
            "AND token(\"id\") <= ?");
}

// Every malformed entry is Corruption naming the dataset and the entry.
TEST(AttachedTableTest, BadSources) {
  const auto good = Reference().ToSource();
  struct Case {
    std::string key, value, expect;  // value "<erase>": the entry is removed
  };
  const std::vector<Case> cases = {
      {"format", "attached-9", "format"},
      {"format", "<erase>", "format"},
      {"generation", "x", "generation"},
      {"generation", "0", "generation"},
      {"generation", "99999999999999999999999", "generation"},
      {"generation", "<erase>", "generation"},
      {"key_column", "id; DROP TABLE x", "key column"},
      {"key_column", "<erase>", "key column"},
      {"key_type", "duration", "key type"},
      {"data_column", "", "data column"},
      {"label_type", "map<int,int>", "label type"},
      {"label_type", "", "together"},
      {"table:train", "nodot", "KEYSPACE.TABLE"},
      {"table:train", "ks.t\"x", "[A-Za-z0-9_]"},
      {"table:", "ks.t", "split name"},
      {"table:a b", "ks.t", "split name"},
      {"metadata:test", "ks.m", "without a table"},
      {"bogus", "1", "unknown entry"},
  };
  for (const auto& c : cases) {
    auto m = good;
    if (c.value == "<erase>") {
      m.erase(c.key);
    } else {
      m[c.key] = c.value;
    }
    auto r = AttachedTable::FromSource(WithSource(m));
    ASSERT_FALSE(r.ok()) << c.key << "=" << c.value;
    EXPECT_EQ(r.status().code(), Status::Code::kCorruption) << c.key;
    EXPECT_NE(r.status().message().find("dataset inet"), std::string::npos) << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << c.key << ": " << r.status().ToString();
  }
  auto no_tables = good;
  no_tables.erase("table:train");
  no_tables.erase("table:val");
  no_tables.erase("metadata:train");
  EXPECT_FALSE(AttachedTable::FromSource(WithSource(no_tables)).ok());
  EXPECT_FALSE(AttachedTable::FromSource(WithSource({})).ok());
}

TEST(AttachedTableTest, Types) {
  for (const char* t : {"uuid", "timeuuid", "bigint", "int", "text", "varchar", "ascii", "blob"})
    EXPECT_TRUE(AttachableKeyType(t)) << t;
  for (const char* t : {"double", "list<int>", "frozen<tuple<int, int>>", "duration", ""})
    EXPECT_FALSE(AttachableKeyType(t)) << t;
  EXPECT_EQ(DefaultLabelKind("int"), LabelKind::kClass);
  EXPECT_EQ(DefaultLabelKind("text"), LabelKind::kClass);
  EXPECT_EQ(DefaultLabelKind("set<int>"), LabelKind::kMultiLabel);
  EXPECT_EQ(DefaultLabelKind("list<int>"), LabelKind::kMultiLabel);
  EXPECT_EQ(DefaultLabelKind("blob"), LabelKind::kTarget);
  EXPECT_EQ(DefaultLabelKind(""), LabelKind::kNone);
  EXPECT_TRUE(CheckLabelKind("int", LabelKind::kClass).ok());
  EXPECT_TRUE(CheckLabelKind("int", LabelKind::kNone).ok());
  EXPECT_TRUE(CheckLabelKind("blob", LabelKind::kTarget).ok());
  EXPECT_FALSE(CheckLabelKind("blob", LabelKind::kClass).ok());
  EXPECT_FALSE(CheckLabelKind("list<int>", LabelKind::kTarget).ok());
  EXPECT_FALSE(CheckLabelKind("", LabelKind::kClass).ok());
  EXPECT_EQ(QuoteIdentifier("a\"b"), "\"a\"\"b\"");
  EXPECT_FALSE(SplitTableName("ks.").ok());
  EXPECT_FALSE(SplitTableName(".t").ok());
  EXPECT_FALSE(SplitTableName("a.b.c").ok());
}

AttachSpec ReferenceSpec() {
  AttachSpec s;
  s.dataset = "inet";
  s.table = "imagenet.data_train";
  s.key_column = "id";
  s.data_column = "data";
  s.label_column = "label";
  return s;
}

TableShape ReferenceShape() {
  return {{"id", {"partition_key", "uuid"}}, {"label", {"regular", "int"}}, {"data", {"regular", "blob"}}};
}

TEST(CheckAttachableTest, ReferenceLayout) {
  auto a = CheckAttachable(ReferenceShape(), ReferenceSpec());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->key_type, "uuid");
  EXPECT_EQ(a->label_type, "int");
  EXPECT_EQ(a->tables.at("train"), "imagenet.data_train");
}

TEST(CheckAttachableTest, Refusals) {
  auto expect = [](const TableShape& shape, const AttachSpec& spec, const std::string& needle) {
    auto a = CheckAttachable(shape, spec);
    ASSERT_FALSE(a.ok()) << needle;
    EXPECT_NE(a.status().message().find(needle), std::string::npos) << a.status().ToString();
  };
  TableShape composite = ReferenceShape();
  composite["part"] = {"partition_key", "int"};
  expect(composite, ReferenceSpec(), "composite partition key");
  TableShape clustered = ReferenceShape();
  clustered["frame"] = {"clustering", "int"};
  expect(clustered, ReferenceSpec(), "clustering column(s) (frame)");
  TableShape double_key = ReferenceShape();
  double_key["id"].type = "double";
  expect(double_key, ReferenceSpec(), "is of type double");
  TableShape text_data = ReferenceShape();
  text_data["data"].type = "text";
  expect(text_data, ReferenceSpec(), "must be a blob");
  TableShape map_label = ReferenceShape();
  map_label["label"].type = "map<int, int>";
  expect(map_label, ReferenceSpec(), "attach takes int, list<int>");
  AttachSpec not_key = ReferenceSpec();
  not_key.key_column = "label";
  expect(ReferenceShape(), not_key, "is not the partition key");
  AttachSpec missing = ReferenceSpec();
  missing.data_column = "pixels";
  expect(ReferenceShape(), missing, "has no column 'pixels'");
  AttachSpec injected = ReferenceSpec();
  injected.data_column = "data\" FROM x --";
  expect(ReferenceShape(), injected, "[A-Za-z0-9_]");
  AttachSpec kind = ReferenceSpec();
  kind.label_kind = LabelKind::kTarget;
  expect(ReferenceShape(), kind, "cannot be read as label kind target");
}

}  // namespace
}  // namespace cqlstream::store
