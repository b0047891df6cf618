// Copyright (c) cqlstream authors.
//
// The rows of an attached dataset without a server: the key snapshot's
// answer (one row, a key of the key column's type) and the foreign data row
// (one row, a data blob within the limit, the label by label type).
#include "store/attached_row.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "cql/frame_decoder_harness.h"
#include "cql/response.h"
#include "cql/wire.h"

namespace cqlstream::store {
namespace {

std::vector<uint8_t> Int(int32_t v) {
  std::vector<uint8_t> b(4);
  const uint32_t u = static_cast<uint32_t>(v);
  for (int i = 0; i < 4; ++i) b[static_cast<size_t>(i)] = static_cast<uint8_t>(u >> (24 - 8 * i));
  return b;
}
std::vector<uint8_t> Bytes(std::string_view s) { return {s.begin(), s.end()}; }
std::optional<std::span<const uint8_t>> View(const std::vector<uint8_t>& v) { return std::span<const uint8_t>(v); }

const SampleKey kKey = MakeKey(2, 41);

AttachedRowOptions Options(LabelKind kind, AttachedLabelType type) {
  AttachedRowOptions o;
  o.label_kind = kind;
  o.label_type = type;
  o.max_bytes = 1000;
  o.table = "ks.data_train";
  o.keep_data = true;
  o.keep_target = true;
  return o;
}

TEST(AttachedRowTest, ParsesLabelAndKeyTypes) {
  EXPECT_EQ(*ParseAttachedLabelType(""), AttachedLabelType::kNone);
  EXPECT_EQ(*ParseAttachedLabelType("set<int>"), AttachedLabelType::kIntList);
  EXPECT_EQ(*ParseAttachedLabelType("varchar"), AttachedLabelType::kText);
  EXPECT_EQ(ParseAttachedLabelType("map<int, int>").status().code(), Status::Code::kCorruption);
  EXPECT_EQ(AttachedKeyType("timeuuid")->id, TypeId::kTimeuuid);
  EXPECT_EQ(AttachedKeyType("text")->id, TypeId::kVarchar);
  EXPECT_FALSE(AttachedKeyType("frozen<tuple<int>>").ok());
}

TEST(AttachedRowTest, ReadsAnIntLabelledRow) {
  auto o = Options(LabelKind::kClass, AttachedLabelType::kInt);
  o.classes = 10;
  AttachedRow r(kKey, "k", &o);
  r.OnRowsBegin(1);
  const auto data = Bytes("jpegbytes"), label = Int(7);
  r.OnCell(0, kAttachedColData, View(data));
  r.OnCell(0, kAttachedColLabel, View(label));
  ASSERT_TRUE(r.Finish().ok()) << r.Finish().ToString();
  EXPECT_EQ(r.data_size(), 9);
  EXPECT_EQ(r.payload_size(), 9);
  EXPECT_EQ(r.label(), 7);
  EXPECT_EQ(r.image_size(), -1);
  EXPECT_EQ(std::string(r.kept_data().begin(), r.kept_data().end()), "jpegbytes");
}

TEST(AttachedRowTest, AnnouncedDataIsNotCopiedAgain) {
  auto o = Options(LabelKind::kNone, AttachedLabelType::kNone);
  AttachedRow r(kKey, "k", &o);
  r.OnRowsBegin(1);
  r.OnDataSize(0, 5);
  const auto placed = Bytes("abcde");
  r.OnCell(0, kAttachedColData, View(placed));
  ASSERT_TRUE(r.Finish().ok());
  EXPECT_EQ(r.data_size(), 5);
  EXPECT_TRUE(r.kept_data().empty());
}

TEST(AttachedRowTest, RefusesLabelsOutsideTheClasses) {
  auto o = Options(LabelKind::kClass, AttachedLabelType::kInt);
  o.classes = 10;
  for (int32_t bad : {10, -2, 1 << 30}) {
    AttachedRow r(kKey, "k", &o);
    r.OnRowsBegin(1);
    const auto data = Bytes("x"), label = Int(bad);
    r.OnCell(0, kAttachedColData, View(data));
    r.OnCell(0, kAttachedColLabel, View(label));
    Status s = r.Finish();
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << bad;
    EXPECT_NE(s.message().find("ks.data_train"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("2:41"), std::string::npos) << s.message();
  }
  // A null label (and the protocol's empty value) is no label.
  AttachedRow r(kKey, "k", &o);
  r.OnRowsBegin(1);
  const auto data = Bytes("x"), empty = Bytes("");
  r.OnCell(0, kAttachedColData, View(data));
  r.OnCell(0, kAttachedColLabel, View(empty));
  ASSERT_TRUE(r.Finish().ok());
  EXPECT_EQ(r.label(), -1);
  // Three bytes are no int.
  AttachedRow r3(kKey, "k", &o);
  r3.OnRowsBegin(1);
  const auto three = Bytes("abc");
  r3.OnCell(0, kAttachedColData, View(data));
  r3.OnCell(0, kAttachedColLabel, View(three));
  EXPECT_EQ(r3.Finish().code(), Status::Code::kCorruption);
}

TEST(AttachedRowTest, MapsTextLabelsToClassIndexes) {
  const std::vector<std::string> names = {"cat", "dog", "zebra"};
  auto o = Options(LabelKind::kClass, AttachedLabelType::kText);
  o.class_names = std::make_shared<const ClassNameIndex>(names);
  o.classes = 3;
  AttachedRow r(kKey, "k", &o);
  r.OnRowsBegin(1);
  const auto data = Bytes("x"), dog = Bytes("dog");
  r.OnCell(0, kAttachedColData, View(data));
  r.OnCell(0, kAttachedColLabel, View(dog));
  ASSERT_TRUE(r.Finish().ok());
  EXPECT_EQ(r.label(), 1);
  AttachedRow u(kKey, "k", &o);
  u.OnRowsBegin(1);
  const auto eel = Bytes("eel");
  u.OnCell(0, kAttachedColData, View(data));
  u.OnCell(0, kAttachedColLabel, View(eel));
  Status s = u.Finish();
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_NE(s.message().find("'eel'"), std::string::npos) << s.message();
}

// Attach keeps the old names' indices and appends new ones, so the names are
// in no order: every name maps to its own index.
TEST(AttachedRowTest, MapsTextLabelsOfUnsortedClassNames) {
  const std::vector<std::string> names = {"zebra", "dog", "ant", "cat", "bee", "dog"};
  auto o = Options(LabelKind::kClass, AttachedLabelType::kText);
  o.class_names = std::make_shared<const ClassNameIndex>(names);
  o.classes = static_cast<int64_t>(names.size());
  EXPECT_EQ(o.class_names->size(), names.size());
  const auto data = Bytes("x");
  for (int32_t i : {0, 1, 2, 3, 4}) {
    AttachedRow r(kKey, "k", &o);
    r.OnRowsBegin(1);
    const auto text = Bytes(names[static_cast<size_t>(i)]);
    r.OnCell(0, kAttachedColData, View(data));
    r.OnCell(0, kAttachedColLabel, View(text));
    ASSERT_TRUE(r.Finish().ok()) << names[static_cast<size_t>(i)] << ": " << r.Finish().ToString();
    EXPECT_EQ(r.label(), i) << names[static_cast<size_t>(i)];
  }
  EXPECT_EQ(o.class_names->Find("dog"), 1);  // a name listed twice keeps its first index
  for (std::string_view miss : {"", "ca", "cats", "aardvark", "zz"}) {
    EXPECT_FALSE(o.class_names->Find(miss).has_value()) << miss;
    AttachedRow r(kKey, "k", &o);
    r.OnRowsBegin(1);
    const auto text = Bytes(miss);
    r.OnCell(0, kAttachedColData, View(data));
    r.OnCell(0, kAttachedColLabel, View(text));
    EXPECT_EQ(r.Finish().code(), Status::Code::kCorruption) << miss;
  }
  // No class names at all: every text is unknown.
  o.class_names = nullptr;
  AttachedRow none(kKey, "k", &o);
  none.OnRowsBegin(1);
  const auto cat = Bytes("cat");
  none.OnCell(0, kAttachedColData, View(data));
  none.OnCell(0, kAttachedColLabel, View(cat));
  EXPECT_EQ(none.Finish().code(), Status::Code::kCorruption);
}

TEST(AttachedRowTest, ReadsMultilabelLists) {
  auto o = Options(LabelKind::kMultiLabel, AttachedLabelType::kIntList);
  o.classes = 5;
  // list<int> [1, 4]: count, then (length, value) per element.
  std::vector<uint8_t> list = Int(2);
  for (int32_t v : {1, 4}) {
    auto l = Int(4), x = Int(v);
    list.insert(list.end(), l.begin(), l.end());
    list.insert(list.end(), x.begin(), x.end());
  }
  AttachedRow r(kKey, "k", &o);
  r.OnRowsBegin(1);
  const auto data = Bytes("x");
  r.OnCell(0, kAttachedColData, View(data));
  r.OnCell(0, kAttachedColLabel, View(list));
  ASSERT_TRUE(r.Finish().ok()) << r.Finish().ToString();
  EXPECT_EQ(r.labels(), (std::vector<int32_t>{1, 4}));
  // A count that claims more elements than the cell holds.
  auto lying = Int(1 << 30);
  AttachedRow b(kKey, "k", &o);
  b.OnRowsBegin(1);
  b.OnCell(0, kAttachedColData, View(data));
  b.OnCell(0, kAttachedColLabel, View(lying));
  EXPECT_EQ(b.Finish().code(), Status::Code::kCorruption);
  // A class out of range.
  o.classes = 4;
  AttachedRow c(kKey, "k", &o);
  c.OnRowsBegin(1);
  c.OnCell(0, kAttachedColData, View(data));
  c.OnCell(0, kAttachedColLabel, View(list));
  EXPECT_EQ(c.Finish().code(), Status::Code::kCorruption);
}

TEST(AttachedRowTest, TargetsFollowTheDataWithinTheLimit) {
  auto o = Options(LabelKind::kTarget, AttachedLabelType::kBlob);
  AttachedRow r(kKey, "k", &o);
  r.OnRowsBegin(1);
  const auto data = Bytes("image"), mask = Bytes("mask!!");
  r.OnCell(0, kAttachedColData, View(data));
  r.OnCell(0, kAttachedColLabel, View(mask));
  ASSERT_TRUE(r.Finish().ok());
  EXPECT_EQ(r.payload_size(), 11);
  EXPECT_EQ(r.image_size(), 5);
  EXPECT_EQ(std::string(r.kept_target().begin(), r.kept_target().end()), "mask!!");
  // Data plus target above the limit.
  o.max_bytes = 8;
  AttachedRow b(kKey, "k", &o);
  b.OnRowsBegin(1);
  b.OnCell(0, kAttachedColData, View(data));
  b.OnCell(0, kAttachedColLabel, View(mask));
  EXPECT_EQ(b.Finish().code(), Status::Code::kCorruption);
  EXPECT_TRUE(b.kept_target().empty());
}

// A null data cell fails the row at once, before its target is announced:
// a reader places the target at data_size(), which has no value then.
TEST(AttachedRowTest, ANullDataCellFailsBeforeItsTarget) {
  auto o = Options(LabelKind::kTarget, AttachedLabelType::kBlob);
  AttachedRow r(kKey, "k", &o);
  r.OnRowsBegin(1);
  r.OnCell(0, kAttachedColData, std::nullopt);
  EXPECT_EQ(r.status().code(), Status::Code::kCorruption);
  EXPECT_NE(r.status().message().find("its data cell is null"), std::string::npos) << r.status().message();
  EXPECT_LT(r.data_size(), 0);
  r.OnTargetSize(0, 6);
  const auto mask = Bytes("mask!!");
  r.OnCell(0, kAttachedColLabel, View(mask));
  const Status s = r.Finish();
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_NE(s.message().find("sample 2:41 (key k): its data cell is null in ks.data_train"), std::string::npos)
      << s.message();
  EXPECT_TRUE(r.kept_target().empty());
  // A target announced before any data cell has no place either.
  AttachedRow early(kKey, "k", &o);
  early.OnRowsBegin(1);
  early.OnTargetSize(0, 6);
  EXPECT_EQ(early.status().code(), Status::Code::kCorruption);
  EXPECT_NE(early.status().message().find("without a data cell"), std::string::npos) << early.status().message();
}

TEST(AttachedRowTest, RefusesMissingNullSeveralAndOversizedRows) {
  auto o = Options(LabelKind::kNone, AttachedLabelType::kNone);
  AttachedRow none(kKey, "1234", &o);
  none.OnRowsBegin(0);
  Status s = none.Finish();
  EXPECT_TRUE(s.IsNotFound());
  EXPECT_NE(s.message().find("sample 2:41 (key 1234) has no row in ks.data_train"), std::string::npos) << s.message();

  AttachedRow null(kKey, "k", &o);
  null.OnRowsBegin(1);
  null.OnCell(0, kAttachedColData, std::nullopt);
  EXPECT_EQ(null.Finish().code(), Status::Code::kCorruption);

  AttachedRow two(kKey, "k", &o);
  two.OnRowsBegin(2);
  const auto data = Bytes("x");
  two.OnCell(0, kAttachedColData, View(data));
  two.OnCell(1, kAttachedColData, View(data));
  EXPECT_EQ(two.Finish().code(), Status::Code::kCorruption);

  AttachedRow big(kKey, "k", &o);
  big.OnRowsBegin(1);
  big.OnDataSize(0, 1001);
  EXPECT_FALSE(big.status().ok());
  EXPECT_EQ(big.Finish().code(), Status::Code::kCorruption);
}

}  // namespace
}  // namespace cqlstream::store

namespace cqlstream::store {
namespace {

TEST(AttachedRowTest, SnapshotKeysDecodeAsTheKeyType) {
  const DataType uuid = DataType::Simple(TypeId::kUuid);
  std::vector<uint8_t> u(16);
  for (size_t i = 0; i < u.size(); ++i) u[i] = static_cast<uint8_t>(i);
  auto v = SnapshotKeyCell(kKey, 1, View(u), uuid, "ks.k_d");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->kind(), Value::Kind::kUuid);
  auto missing = SnapshotKeyCell(kKey, 0, std::nullopt, uuid, "ks.k_d");
  EXPECT_TRUE(missing.status().IsNotFound());
  EXPECT_NE(missing.status().message().find("sample 2:41 has no row in the key snapshot ks.k_d"), std::string::npos);
  const auto short_key = Bytes("0123456");
  EXPECT_EQ(SnapshotKeyCell(kKey, 1, View(short_key), uuid, "ks.k_d").status().code(), Status::Code::kCorruption);
  EXPECT_EQ(SnapshotKeyCell(kKey, 1, std::nullopt, uuid, "ks.k_d").status().code(), Status::Code::kCorruption);
  EXPECT_EQ(SnapshotKeyCell(kKey, 2, View(u), uuid, "ks.k_d").status().code(), Status::Code::kCorruption);
  const auto text = Bytes("a/b.jpg");
  auto t = SnapshotKeyCell(kKey, 1, View(text), DataType::Simple(TypeId::kVarchar), "ks.k_d");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->as_text(), "a/b.jpg");
  std::vector<uint8_t> huge(kMaxAttachedKeyBytes + 1, 'a');
  EXPECT_FALSE(SnapshotKeyCell(kKey, 1, View(huge), DataType::Simple(TypeId::kBlob), "ks.k_d").ok());
}

std::vector<uint8_t> Int4(int32_t v) {
  const auto u = static_cast<uint32_t>(v);
  return {static_cast<uint8_t>(u >> 24), static_cast<uint8_t>(u >> 16), static_cast<uint8_t>(u >> 8),
          static_cast<uint8_t>(u)};
}

// A lookup's answer as the node sends it: columns seg, idx, key (`columns`
// of them), typed blob (SnapshotKey reads cells, not types).
cql::Rows LookupAnswer(const std::vector<std::vector<cql::testing::Cell>>& rows, int32_t columns = 3) {
  auto body = std::make_shared<cql::Bytes>(cql::testing::RowsBody(columns, rows));
  cql::Reader r{cql::ByteView(*body)};
  int32_t kind = 0;
  EXPECT_TRUE(r.Int(&kind).ok());  // the Result kind: Rows
  auto decoded = cql::Rows::Decode(body, r);
  EXPECT_TRUE(decoded.ok()) << decoded.status().ToString();
  return decoded.ok() ? *decoded : cql::Rows();
}

// A lookup's row names its sample: another sample's row (an answer the
// server meant for another request) is never taken for this sample's key.
TEST(AttachedRowTest, ASnapshotLookupTakesOnlyTheSamplesOwnRow) {
  const DataType kIntKey = DataType::Simple(TypeId::kInt);
  const cql::Rows own = LookupAnswer({{Int4(2), Int4(41), Int4(5123)}});
  auto v = SnapshotKey(kKey, &own, kIntKey, "ks.k_d");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->as_int(), 5123);
  const cql::Rows other = LookupAnswer({{Int4(2), Int4(40), Int4(5120)}});
  auto o = SnapshotKey(kKey, &other, kIntKey, "ks.k_d");
  EXPECT_EQ(o.status().code(), Status::Code::kCorruption);
  EXPECT_NE(o.status().message().find("answered the row of sample 2:40"), std::string::npos) << o.status().ToString();
  const cql::Rows other_seg = LookupAnswer({{Int4(3), Int4(41), Int4(5120)}});
  EXPECT_EQ(SnapshotKey(kKey, &other_seg, kIntKey, "ks.k_d").status().code(), Status::Code::kCorruption);
  const cql::Rows long_idx = LookupAnswer({{Int4(2), std::vector<uint8_t>(8, 0), Int4(5120)}});
  auto l = SnapshotKey(kKey, &long_idx, kIntKey, "ks.k_d");
  EXPECT_NE(l.status().message().find("without an int seg and idx"), std::string::npos) << l.status().ToString();
  const cql::Rows null_seg = LookupAnswer({{std::nullopt, Int4(41), Int4(5120)}});
  EXPECT_EQ(SnapshotKey(kKey, &null_seg, kIntKey, "ks.k_d").status().code(), Status::Code::kCorruption);
  const cql::Rows key_only = LookupAnswer({{Int4(5123)}}, 1);  // the key alone: no sample named
  EXPECT_EQ(SnapshotKey(kKey, &key_only, kIntKey, "ks.k_d").status().code(), Status::Code::kCorruption);
  // A native read's answer for the same sample (seg, idx, size, ...): its
  // third cell is not a key.
  const cql::Rows native = LookupAnswer({{Int4(2), Int4(41), Int4(5123), Int4(0)}}, 4);
  auto n = SnapshotKey(kKey, &native, kIntKey, "ks.k_d");
  EXPECT_EQ(n.status().code(), Status::Code::kCorruption);
  EXPECT_NE(n.status().message().find("answered 4 columns"), std::string::npos) << n.status().ToString();
  const cql::Rows none = LookupAnswer({});
  EXPECT_TRUE(SnapshotKey(kKey, &none, kIntKey, "ks.k_d").status().IsNotFound());
  EXPECT_EQ(SnapshotKey(kKey, nullptr, kIntKey, "ks.k_d").status().code(), Status::Code::kCorruption);
}

// A data row's key cell must be the key bound, byte for byte.
TEST(AttachedRowTest, ForeignKeyMatchesOnlyTheBoundBytes) {
  const auto k = Int4(5123);
  EXPECT_TRUE(ForeignKeyMatches(View(k), k));
  EXPECT_FALSE(ForeignKeyMatches(View(Int4(5124)), k));
  EXPECT_FALSE(ForeignKeyMatches(View(std::vector<uint8_t>{0, 0, 0x14}), k));
  EXPECT_FALSE(ForeignKeyMatches(std::nullopt, k));
  EXPECT_TRUE(ForeignKeyMatches(View(std::vector<uint8_t>{}), std::span<const uint8_t>()));
}

TEST(AttachedRowTest, GroupedLookupsHandEachAskedSampleItsKey) {
  const auto s2 = Int4(2), i5 = Int4(5), i7 = Int4(7), i9 = Int4(9), s3 = Int4(3);
  const auto k5 = Bytes("key-5"), k7 = Bytes("key-7");
  const std::vector<int32_t> asked = {7, 5, 8};
  std::vector<SnapshotRowCells> rows = {{View(s2), View(i5), View(k5)}, {View(s2), View(i7), View(k7)}};
  auto f = GroupedSnapshotKeys(2, asked, rows, "ks.k_d");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->size(), 2u);  // 8: not in the answer (absent, NotFound for its own sample)
  EXPECT_EQ(std::vector<uint8_t>(f->at(5)->begin(), f->at(5)->end()), k5);
  EXPECT_EQ(std::vector<uint8_t>(f->at(7)->begin(), f->at(7)->end()), k7);
  EXPECT_FALSE(f->count(8));
  // A null key cell is handed on (SnapshotKeyCell refuses it for its sample).
  std::vector<SnapshotRowCells> null_key = {{View(s2), View(i5), std::nullopt}};
  auto n = GroupedSnapshotKeys(2, asked, null_key, "ks.k_d");
  ASSERT_TRUE(n.ok());
  EXPECT_FALSE(n->at(5).has_value());
  // Answers that are not what was asked fail the whole lookup, named.
  auto refused = [&](std::vector<SnapshotRowCells> r, const std::string& what) {
    auto g = GroupedSnapshotKeys(2, asked, r, "ks.k_d");
    ASSERT_FALSE(g.ok()) << what;
    EXPECT_EQ(g.status().code(), Status::Code::kCorruption) << what;
    EXPECT_NE(g.status().message().find(what), std::string::npos) << g.status().ToString();
    EXPECT_NE(g.status().message().find("ks.k_d"), std::string::npos) << g.status().ToString();
  };
  refused({{View(s2), View(i9), View(k5)}}, "of sample 2:9, which was not asked for");
  refused({{View(s3), View(i5), View(k5)}}, "of sample 3:5, which was not asked for");
  refused({{View(s2), View(i5), View(k5)}, {View(s2), View(i5), View(k7)}}, "of sample 2:5 a second time");
  const auto three = Bytes("abc");
  refused({{View(s2), View(three), View(k5)}}, "row 0 without an int seg and idx");
  refused({{std::nullopt, View(i5), View(k5)}}, "row 0 without an int seg and idx");
  // An empty answer: every sample absent.
  auto none = GroupedSnapshotKeys(2, asked, {}, "ks.k_d");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

}  // namespace
}  // namespace cqlstream::store
