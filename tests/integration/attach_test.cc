// Copyright (c) cqlstream authors.
//
// cqlstream attach against the real node: tables in the reference system's
// layout (uuid keys), bigint and text keys, text labels as class names, a
// snapshot over several segments, refresh, and the refusals (composite
// partition keys, clustering columns, wrong types) with their messages.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "store/attach.h"
#include "store/attached.h"
#include "store/attached_row.h"
#include "store/catalog.h"
#include "store_fixture.h"

namespace cqlstream::testing {
namespace {

std::string Bytes(std::span<const uint8_t> b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

std::string BigEndian(int64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i) {
    out[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  return out;
}

// A deterministic uuid (version 4 bits set) for sample i.
Uuid SampleUuid(int i, int salt) {
  Uuid u;
  for (int b = 0; b < 16; ++b) u.bytes[static_cast<size_t>(b)] = static_cast<uint8_t>((i * 131 + b * 17 + salt) >> (b % 3));
  u.bytes[0] = static_cast<uint8_t>(i >> 8);
  u.bytes[1] = static_cast<uint8_t>(i);
  u.bytes[2] = static_cast<uint8_t>(salt);
  u.bytes[6] = static_cast<uint8_t>((u.bytes[6] & 0x0f) | 0x40);
  u.bytes[8] = static_cast<uint8_t>((u.bytes[8] & 0x3f) | 0x80);
  return u;
}

std::string Payload(int i) { return fmt::format("sample-{}-", i) + std::string(static_cast<size_t>(i % 50), 'x'); }

class AttachTest : public StoreFixture {
 protected:
  static void SetUpTestSuite() { SetUpStore("at"); }

  store::AttachSpec Spec(const std::string& dataset, const std::string& table, const std::string& key) {
    store::AttachSpec s;
    s.dataset = dataset;
    s.table = keyspace_ + "." + table;
    s.key_column = key;
    s.data_column = "data";
    s.scan.concurrency = 4;
    s.scan.ranges = 16;
    s.scan.page_size = 100;
    return s;
  }

  // The reference layout with n samples (label i % 10) keyed by SampleUuid(i, salt).
  std::map<std::string, std::string> ReferenceTable(const std::string& table, int first, int n, int salt) {
    Cql(fmt::format("CREATE TABLE IF NOT EXISTS {}.{} (id uuid PRIMARY KEY, label int, data blob) WITH compression = "
                    "{{'enabled': false}}",
                    keyspace_, table));
    std::map<std::string, std::string> rows;  // key bytes -> payload
    for (int i = first; i < first + n; ++i) {
      const Uuid u = SampleUuid(i, salt);
      Cql(fmt::format("INSERT INTO {}.{} (id, label, data) VALUES (?, ?, ?)", keyspace_, table),
          {Value::FromUuid(u), Value::Int(i % 10), Value::Blob(Payload(i))});
      rows[Bytes(u.bytes)] = Payload(i);
    }
    return rows;
  }

  // Every (seg, idx) of the dataset's split: its k_ key, checked to be
  // dense and unique; returns key bytes -> SampleKey.
  std::map<std::string, SampleKey> SnapshotKeys(const DatasetInfo& d, const std::string& split) {
    auto q = S().Prepare(store::KeyLookupCql(keyspace_, d.name));
    EXPECT_TRUE(q.ok()) << q.status().ToString();
    std::map<std::string, SampleKey> out;
    if (!q.ok()) return out;
    for (const auto& g : d.SplitSegments(split)) {
      EXPECT_EQ(g.state, "sealed");
      for (int32_t idx = 0; idx < g.count; ++idx) {
        auto r = S().Execute(net::Statement::Bound(*q, {Value::Int(g.seg), Value::Int(idx)}));
        EXPECT_TRUE(r.ok() && r->rows() && r->rows()->row_count() == 1) << g.seg << ":" << idx;
        if (!r.ok() || !r->rows() || r->rows()->row_count() != 1) continue;
        auto key = r->rows()->Get<cql::ByteView>(0, store::kSnapshotColKey);
        EXPECT_TRUE(key.ok());
        EXPECT_TRUE(out.emplace(Bytes(*key), MakeKey(g.seg, idx)).second) << "key listed twice";
      }
    }
    return out;
  }
};

TEST_F(AttachTest, ReferenceLayoutUuidKeys) {
  const auto rows = ReferenceTable("data_train", 0, 300, 1);
  Cql(fmt::format("CREATE TABLE {}.metadata_train (id uuid PRIMARY KEY, label int, or_label text, or_split text)",
                  keyspace_));
  store::AttachSpec spec = Spec("ref", "data_train", "id");
  spec.label_column = "label";
  spec.metadata_table = keyspace_ + ".metadata_train";
  auto r = store::Attach(S(), keyspace_, spec);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->created);
  EXPECT_EQ(r->snapshot.keys, 300);

  const DatasetInfo d = Load("ref");
  ASSERT_TRUE(d.attached());
  EXPECT_EQ(d.label_kind, LabelKind::kClass);
  EXPECT_EQ(d.checksum, "none");
  EXPECT_EQ(d.Count("train"), 300);
  auto a = store::AttachedTable::FromSource(d);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->key_type, "uuid");
  EXPECT_EQ(a->label_type, "int");
  EXPECT_EQ(a->generation, 1);
  EXPECT_EQ(a->metadata_tables.at("train"), spec.metadata_table);
  ASSERT_EQ(d.SplitSegments("train").size(), 1u);
  EXPECT_EQ(d.SplitSegments("train")[0].source_id, "attach:1:train");

  // The snapshot holds every key once, and each key reads its own row back
  // through the data read, bound as the key's type.
  const auto keys = SnapshotKeys(d, "train");
  ASSERT_EQ(keys.size(), rows.size());
  auto read = S().Prepare(a->DataReadCql("train"));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  for (const auto& [key, payload] : rows) {
    ASSERT_TRUE(keys.contains(key));
    Uuid u;
    std::copy(key.begin(), key.end(), u.bytes.begin());
    auto row = S().Execute(net::Statement::Bound(*read, {Value::FromUuid(u)}));
    ASSERT_TRUE(row.ok() && row->rows() && row->rows()->row_count() == 1);
    // The row names its key first (the reader checks it), then the data.
    auto named = row->rows()->cell(0, 0);
    ASSERT_TRUE(named.has_value());
    EXPECT_EQ(Bytes(*named), key);
    auto blob = row->rows()->Get<cql::ByteView>(0, 1);
    ASSERT_TRUE(blob.ok());
    EXPECT_EQ(Bytes(*blob), payload);
  }

  // ls marks it; a second attach of the split needs --refresh; drop removes k_.
  auto [rc, out] = Sh(fmt::format("{} ls {}", CliPath(), Common()));
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("attached"), std::string::npos) << out;
  auto again = store::Attach(S(), keyspace_, spec);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("--refresh"), std::string::npos) << again.status().ToString();
}

TEST_F(AttachTest, BigintKeysAcrossSegments) {
  Cql(fmt::format("CREATE TABLE {}.big (k bigint PRIMARY KEY, data blob, tags set<int>)", keyspace_));
  std::set<std::string> expect;
  for (int64_t i = 0; i < 250; ++i) {
    const int64_t k = (i - 125) * 1000003;  // negative keys too
    Cql(fmt::format("INSERT INTO {}.big (k, data, tags) VALUES (?, ?, ?)", keyspace_),
        {Value::Bigint(k), Value::Blob(Payload(static_cast<int>(i))), Value::List({Value::Int(1), Value::Int(2)})});
    expect.insert(BigEndian(k));
  }
  store::AttachSpec spec = Spec("big", "big", "k");
  spec.label_column = "tags";
  spec.scan.segment_capacity = 100;  // 250 keys: segments of 100, 100, 50
  auto r = store::Attach(S(), keyspace_, spec);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const DatasetInfo d = Load("big");
  EXPECT_EQ(d.label_kind, LabelKind::kMultiLabel);
  const auto segs = d.SplitSegments("train");
  ASSERT_EQ(segs.size(), 3u);
  EXPECT_EQ(segs[0].count + segs[1].count + segs[2].count, 250);
  EXPECT_EQ(segs[0].count, 100);
  const auto keys = SnapshotKeys(d, "train");
  std::set<std::string> got;
  for (const auto& [k, v] : keys) got.insert(k);
  EXPECT_EQ(got, expect);
}

TEST_F(AttachTest, TextKeysAndTextLabels) {
  Cql(fmt::format("CREATE TABLE {}.txt (name text PRIMARY KEY, data blob, cls text)", keyspace_));
  const std::vector<std::string> classes = {"zebra", "ant", "moth", "ant"};
  std::set<std::string> expect;
  for (int i = 0; i < 120; ++i) {
    const std::string name = fmt::format("img/{:04d}.jpg", i);
    Cql(fmt::format("INSERT INTO {}.txt (name, data, cls) VALUES (?, ?, ?)", keyspace_),
        {Value::Text(name), Value::Blob(Payload(i)), Value::Text(classes[static_cast<size_t>(i) % classes.size()])});
    expect.insert(name);
  }
  store::AttachSpec spec = Spec("txt", "txt", "name");
  spec.label_column = "cls";
  spec.split = "val";
  auto r = store::Attach(S(), keyspace_, spec);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const DatasetInfo d = Load("txt");
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"ant", "moth", "zebra"}));
  EXPECT_EQ(d.Count("val"), 120);
  std::set<std::string> got;
  for (const auto& [k, v] : SnapshotKeys(d, "val")) got.insert(k);
  EXPECT_EQ(got, expect);  // UTF-8 bytes, as the protocol serializes text

  // A second split with a text the first did not have ("bee", sorting before
  // every old one) and one it had: the old names keep their indices, the new
  // one is appended, and select reads the val split's labels by name.
  Cql(fmt::format("CREATE TABLE {}.txt2 (name text PRIMARY KEY, data blob, cls text)", keyspace_));
  for (int i = 0; i < 6; ++i) {
    Cql(fmt::format("INSERT INTO {}.txt2 (name, data, cls) VALUES (?, ?, ?)", keyspace_),
        {Value::Text(fmt::format("t/{}", i)), Value::Blob(Payload(i)), Value::Text(i % 2 ? "bee" : "moth")});
  }
  store::AttachSpec train = Spec("txt", "txt2", "name");
  train.label_column = "cls";
  ASSERT_TRUE(store::Attach(S(), keyspace_, train).ok());
  const DatasetInfo d2 = Load("txt");
  EXPECT_EQ(d2.class_names, (std::vector<std::string>{"ant", "moth", "zebra", "bee"}));
  const std::string dir = ::testing::TempDir() + fmt::format("attach_txt_{}", ::getpid());
  std::filesystem::create_directories(dir);
  for (const auto& [split, label, want] : std::vector<std::tuple<std::string, std::string, size_t>>{
           {"val", "zebra", 30}, {"val", "ant", 60}, {"train", "bee", 3}, {"train", "moth", 3}}) {
    auto [rc, out] = Sh(fmt::format("{} select txt --split {} --label {} -o {}/s.sel {}", CliPath(), split, label,
                                    dir, Common()));
    ASSERT_EQ(rc, 0) << out;
    auto sel = Selection::Load(dir + "/s.sel");
    ASSERT_TRUE(sel.ok()) << sel.status().ToString();
    EXPECT_EQ(sel->keys.size(), want) << split << " " << label;
  }
  std::filesystem::remove_all(dir);
}

TEST_F(AttachTest, RefreshPicksUpNewRows) {
  auto first = ReferenceTable("data_r", 0, 80, 2);
  store::AttachSpec spec = Spec("refr", "data_r", "id");
  spec.label_column = "label";
  ASSERT_TRUE(store::Attach(S(), keyspace_, spec).ok());
  const DatasetInfo before = Load("refr");
  const int32_t old_seg = before.SplitSegments("train").at(0).seg;

  auto more = ReferenceTable("data_r", 80, 40, 2);
  Cql(fmt::format("DELETE FROM {}.data_r WHERE id = ?", keyspace_), {Value::FromUuid(SampleUuid(0, 2))});
  first.erase(Bytes(SampleUuid(0, 2).bytes));
  first.insert(more.begin(), more.end());

  spec.refresh = true;
  auto r = store::Attach(S(), keyspace_, spec);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->created);
  EXPECT_EQ(r->removed_segments, std::vector<int32_t>{old_seg});
  const DatasetInfo after = Load("refr");
  EXPECT_EQ(after.Count("train"), 119);
  ASSERT_EQ(after.SplitSegments("train").size(), 1u);
  EXPECT_NE(after.SplitSegments("train")[0].seg, old_seg);
  EXPECT_EQ(after.SplitSegments("train")[0].source_id, "attach:2:train");
  for (const auto& g : after.segments) EXPECT_NE(g.seg, old_seg) << "the old generation's segment row is gone";
  EXPECT_EQ(store::AttachedTable::FromSource(after)->generation, 2);
  std::set<std::string> got, want;
  for (const auto& [k, v] : SnapshotKeys(after, "train")) got.insert(k);
  for (const auto& [k, v] : first) want.insert(k);
  EXPECT_EQ(got, want);

  // A second split joins the dataset; --refresh of a split that is not there is refused.
  ReferenceTable("data_rv", 0, 10, 3);
  store::AttachSpec val = Spec("refr", "data_rv", "id");
  val.label_column = "label";
  val.split = "val";
  val.refresh = true;
  EXPECT_FALSE(store::Attach(S(), keyspace_, val).ok());
  val.refresh = false;
  ASSERT_TRUE(store::Attach(S(), keyspace_, val).ok());
  const DatasetInfo both = Load("refr");
  EXPECT_EQ(both.Count("val"), 10);
  EXPECT_EQ(both.Count("train"), 119);
  // A split's refresh or re-attach naming another table is refused and
  // changes nothing: another table is another dataset.
  for (bool refresh : {true, false}) {
    store::AttachSpec moved = Spec("refr", "data_rv", "id");
    moved.label_column = "label";
    moved.refresh = refresh;
    auto r2 = store::Attach(S(), keyspace_, moved);
    ASSERT_FALSE(r2.ok()) << refresh;
    EXPECT_NE(r2.status().message().find("is attached to " + keyspace_ + ".data_r, not " + keyspace_ + ".data_rv"),
              std::string::npos)
        << r2.status().ToString();
    EXPECT_NE(r2.status().message().find("under another dataset name"), std::string::npos) << r2.status().ToString();
    const DatasetInfo same = Load("refr");
    auto a2 = store::AttachedTable::FromSource(same);
    ASSERT_TRUE(a2.ok());
    EXPECT_EQ(a2->tables.at("train"), keyspace_ + ".data_r");
    EXPECT_EQ(a2->generation, store::AttachedTable::FromSource(both)->generation);
    EXPECT_EQ(same.Count("train"), 119);
    EXPECT_EQ(same.SplitSegments("train").at(0).seg, both.SplitSegments("train").at(0).seg);
  }
  // Columns must match across splits.
  store::AttachSpec other = val;
  other.split = "test";
  other.label_column.clear();
  auto mismatch = store::Attach(S(), keyspace_, other);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("every split must share them"), std::string::npos);
}

// select reads labels with the loader's checks (store::AttachedRow): an int
// label below -1, a negative list entry, are problems naming the sample and
// the table (left out, counted), and an int -1 read as multilabel is no
// label, as verify and the loader see them.
TEST_F(AttachTest, SelectChecksLabelsAsTheLoader) {
  Cql(fmt::format("CREATE TABLE {}.lbl (k int PRIMARY KEY, data blob, label int, tags list<int>)", keyspace_));
  for (int i = 0; i < 12; ++i) {
    const int label = i < 10 ? i % 4 : (i == 10 ? -5 : -1);
    std::vector<Value> tags = {Value::Int(i % 2)};
    if (i == 6) tags.push_back(Value::Int(-3));
    Cql(fmt::format("INSERT INTO {}.lbl (k, data, label, tags) VALUES (?, ?, ?, ?)", keyspace_),
        {Value::Int(i), Value::Blob(Payload(i)), Value::Int(label), Value::List(std::move(tags))});
  }
  const std::string dir = ::testing::TempDir() + fmt::format("attach_lbl_{}", ::getpid());
  std::filesystem::create_directories(dir);
  struct Case {
    std::string dataset, attach, label;
    size_t selected;
    std::string problem;
  };
  const std::vector<Case> cases = {
      {"lblc", "--label-column label", "0", 3, "its label -5 is not a class"},
      {"lblm", "--label-column label --label-kind multilabel", "0", 3, "its labels hold -5"},
      {"lbll", "--label-column tags", "1", 6, "its labels hold -3"},
  };
  for (const auto& c : cases) {
    auto [rc, out] = Sh(fmt::format("{} attach --dataset {} --table {}.lbl --key-column k --data-column data {} {}",
                                    CliPath(), c.dataset, keyspace_, c.attach, Common()));
    ASSERT_EQ(rc, 0) << out;
    auto [src, sout] = Sh(fmt::format("{} select {} --split train --label {} -o {}/s.sel {}", CliPath(), c.dataset,
                                      c.label, dir, Common()));
    ASSERT_EQ(src, 0) << sout;
    EXPECT_NE(sout.find("1 sample(s)"), std::string::npos) << c.dataset << "\n" << sout;
    EXPECT_NE(sout.find(c.problem), std::string::npos) << c.dataset << "\n" << sout;
    EXPECT_NE(sout.find(keyspace_ + ".lbl"), std::string::npos) << c.dataset << "\n" << sout;
    auto sel = Selection::Load(dir + "/s.sel");
    ASSERT_TRUE(sel.ok()) << sel.status().ToString();
    EXPECT_EQ(sel->keys.size(), c.selected) << c.dataset;
    // verify (the loader's reads) finds the same one problem.
    auto [vrc, vout] = Sh(fmt::format("{} verify {} {}", CliPath(), c.dataset, Common()));
    EXPECT_EQ(vrc, 1) << vout;
    EXPECT_NE(vout.find("1 problem"), std::string::npos) << c.dataset << "\n" << vout;
    EXPECT_NE(vout.find(c.problem), std::string::npos) << c.dataset << "\n" << vout;
  }
  std::filesystem::remove_all(dir);
}

// export of text keys whose names are too long for a file name (300
// characters; two differing only at the end; multi-byte UTF-8): each file's
// name is cut with a hash of the key, distinct, valid UTF-8, and the export
// writes every sample instead of failing with ENAMETOOLONG.
TEST_F(AttachTest, ExportCutsLongKeyNames) {
  Cql(fmt::format("CREATE TABLE {}.longkey (name text PRIMARY KEY, data blob, label int)", keyspace_));
  std::string e300;
  for (int i = 0; i < 300; ++i) e300 += "\xc3\xa9";  // 300 x U+00E9, 600 bytes
  const std::vector<std::string> keys = {std::string(300, 'k') + "1", std::string(300, 'k') + "2", e300, "short"};
  std::map<std::string, std::string> want;  // payload -> key
  for (size_t i = 0; i < keys.size(); ++i) {
    Cql(fmt::format("INSERT INTO {}.longkey (name, data, label) VALUES (?, ?, ?)", keyspace_),
        {Value::Text(keys[i]), Value::Blob(Payload(static_cast<int>(i))), Value::Int(1)});
    want[Payload(static_cast<int>(i))] = keys[i];
  }
  auto [rc, out] = Sh(fmt::format("{} attach --dataset longkey --table {}.longkey --key-column name --data-column "
                                  "data --label-column label {}",
                                  CliPath(), keyspace_, Common()));
  ASSERT_EQ(rc, 0) << out;
  const std::string dir = ::testing::TempDir() + fmt::format("attach_long_{}", ::getpid());
  std::filesystem::remove_all(dir);
  auto [erc, eout] = Sh(fmt::format("{} export longkey {}/out {}", CliPath(), dir, Common()));
  ASSERT_EQ(erc, 0) << eout;
  EXPECT_NE(eout.find("exported 4 of 4"), std::string::npos) << eout;
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/out/train/1")) {
    const std::string name = e.path().filename().string();
    EXPECT_LE(name.size(), 200u) << name;
    EXPECT_TRUE(names.insert(name).second);
    std::ifstream f(e.path(), std::ios::binary);
    const std::string got((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    ASSERT_TRUE(want.contains(got)) << name;
    const std::string& key = want.at(got);
    if (key.size() <= 200) {
      EXPECT_EQ(name, key);
      continue;
    }
    // A prefix of the key (whole characters), then ~ and 16 hex digits.
    const size_t tilde = name.rfind('~');
    ASSERT_NE(tilde, std::string::npos) << name;
    EXPECT_EQ(name.size() - tilde, 17u) << name;
    EXPECT_EQ(key.compare(0, tilde, name, 0, tilde), 0) << name;
    EXPECT_NE(static_cast<unsigned char>(key[tilde]) & 0xC0, 0x80) << "cut inside a character: " << name;
  }
  EXPECT_EQ(names.size(), 4u);
  std::filesystem::remove_all(dir);
}

TEST_F(AttachTest, RefusalsNameWhatAndWhy) {
  Cql(fmt::format("CREATE TABLE {}.comp (a int, b int, data blob, PRIMARY KEY ((a, b)))", keyspace_));
  Cql(fmt::format("CREATE TABLE {}.clus (id uuid, frame int, data blob, PRIMARY KEY (id, frame))", keyspace_));
  Cql(fmt::format("CREATE TABLE {}.dbl (id double PRIMARY KEY, data blob)", keyspace_));
  Cql(fmt::format("CREATE TABLE {}.txtdata (id uuid PRIMARY KEY, data text, lbl map<int, int>)", keyspace_));
  Cql(fmt::format("CREATE TABLE {}.badlabel (id uuid PRIMARY KEY, data blob, lbl map<int, int>)", keyspace_));
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {"--table {ks}.comp --key-column a --data-column data", "composite partition key"},
      {"--table {ks}.clus --key-column id --data-column data", "clustering column(s) (frame)"},
      {"--table {ks}.dbl --key-column id --data-column data", "is of type double"},
      {"--table {ks}.txtdata --key-column id --data-column data", "must be a blob"},
      {"--table {ks}.badlabel --key-column id --data-column data --label-column lbl", "is of type map<int, int>"},
      {"--table {ks}.nothere --key-column id --data-column data", "does not exist"},
      {"--table {ks}.badlabel --key-column id --data-column nope", "has no column 'nope'"},
      {"--table nodot --key-column id --data-column data", "KEYSPACE.TABLE"},
  };
  for (const auto& c : cases) {
    const std::string args = fmt::format(fmt::runtime(c.args), fmt::arg("ks", keyspace_));
    auto [rc, out] = Sh(fmt::format("{} attach --dataset bad {} {}", CliPath(), args, Common()));
    EXPECT_NE(rc, 0) << args;
    EXPECT_NE(out.find(c.expect), std::string::npos) << args << "\n" << out;
  }
  // Nothing of the refused attaches is visible.
  auto d = store::LoadDataset(S(), keyspace_, "bad");
  EXPECT_TRUE(d.status().IsNotFound()) << d.status().ToString();
}

TEST_F(AttachTest, CliAttachInfoDrop) {
  ReferenceTable("data_cli", 0, 40, 4);
  auto [rc, out] = Sh(fmt::format("{} attach --dataset cli --table {}.data_cli --key-column id --data-column data "
                                  "--label-column label --scan-concurrency 2 {}",
                                  CliPath(), keyspace_, Common()));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("40 keys"), std::string::npos) << out;
  EXPECT_NE(out.find("keys/s"), std::string::npos) << out;
  auto [irc, info] = Sh(fmt::format("{} info cli {}", CliPath(), Common()));
  ASSERT_EQ(irc, 0) << info;
  EXPECT_NE(info.find(keyspace_ + ".data_cli"), std::string::npos) << info;
  EXPECT_NE(info.find("native-only"), std::string::npos) << info;
  auto [drc, dropped] = Sh(fmt::format("{} drop cli --yes {}", CliPath(), Common()));
  ASSERT_EQ(drc, 0) << dropped;
  EXPECT_NE(dropped.find("k_cli"), std::string::npos) << dropped;
  // The foreign table is untouched.
  auto r = S().Execute(net::Statement::Query(fmt::format("SELECT count(*) FROM {}.data_cli", keyspace_)));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rows()->Get<int64_t>(0, 0).value(), 40);
}

TEST_F(AttachTest, VerifyExportSelect) {
  const auto rows = ReferenceTable("data_v", 0, 60, 5);
  auto [rc, out] = Sh(fmt::format("{} attach --dataset ves --table {}.data_v --key-column id --data-column data "
                                  "--label-column label {}",
                                  CliPath(), keyspace_, Common()));
  ASSERT_EQ(rc, 0) << out;
  auto [vrc, vout] = Sh(fmt::format("{} verify ves {}", CliPath(), Common()));
  EXPECT_EQ(vrc, 0) << vout;
  EXPECT_NE(vout.find("verified 60 of 60 samples"), std::string::npos) << vout;
  EXPECT_NE(vout.find(": 0 problems"), std::string::npos) << vout;

  // select: int labels by number (no class names).
  const std::string dir = ::testing::TempDir() + fmt::format("attach_{}", ::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto [src, sout] = Sh(fmt::format("{} select ves --split train --label 3 -o {}/l3.sel {}", CliPath(), dir, Common()));
  ASSERT_EQ(src, 0) << sout;
  auto sel = Selection::Load(dir + "/l3.sel");
  ASSERT_TRUE(sel.ok()) << sel.status().ToString();
  int want = 0;
  for (int i = 0; i < 60; ++i) want += i % 10 == 3;
  EXPECT_EQ(static_cast<int>(sel->keys.size()), want);

  // export: one file per sample, named by its uuid, in a folder per int label.
  auto [erc, eout] = Sh(fmt::format("{} export ves {}/out {}", CliPath(), dir, Common()));
  ASSERT_EQ(erc, 0) << eout;
  int files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir + "/out")) {
    if (!e.is_regular_file()) continue;
    ++files;
    auto u = Uuid::Parse(e.path().filename().string());
    ASSERT_TRUE(u.ok()) << e.path();
    const auto it = rows.find(Bytes(u->bytes));
    ASSERT_NE(it, rows.end()) << e.path();
    std::ifstream f(e.path(), std::ios::binary);
    const std::string got((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_EQ(got, it->second) << e.path();
    int i = -1;
    ASSERT_EQ(std::sscanf(got.c_str(), "sample-%d-", &i), 1);
    EXPECT_EQ(e.path().parent_path().filename().string(), std::to_string(i % 10)) << e.path();
  }
  EXPECT_EQ(files, 60);

  // A row the third party deleted: verify and export name the sample and the table.
  Cql(fmt::format("DELETE FROM {}.data_v WHERE id = ?", keyspace_), {Value::FromUuid(SampleUuid(7, 5))});
  auto [brc, bout] = Sh(fmt::format("{} verify ves {}", CliPath(), Common()));
  EXPECT_EQ(brc, 1) << bout;
  EXPECT_NE(bout.find("1 problem"), std::string::npos) << bout;
  EXPECT_NE(bout.find(keyspace_ + ".data_v"), std::string::npos) << bout;
  auto [xrc, xout] = Sh(fmt::format("{} export ves {}/out2 {}", CliPath(), dir, Common()));
  EXPECT_NE(xout.find("exported 59 of 60"), std::string::npos) << xout;
  EXPECT_NE(xout.find("not exported"), std::string::npos) << xout;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cqlstream::testing
