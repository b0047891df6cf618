// Copyright (c) cqlstream authors.
//
// Attached datasets against the real node, beyond the attach itself
// (attach_test.cc): the metadata rows (Dataset.metadata(): key, path = the
// key's text, label, extra = the metadata table's columns, bounded), two
// refreshes racing (exactly one new generation), and verify/export reading
// each segment's recorded source table rather than the catalog's.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "store/attach.h"
#include "store/attached.h"
#include "store/attached_extra.h"
#include "store/dataset_view.h"
#include "store_fixture.h"

namespace cqlstream::testing {
namespace {

class AttachMetadataTest : public StoreFixture {
 protected:
  static void SetUpTestSuite() { SetUpStore("atm"); }

  store::AttachSpec Spec(const std::string& dataset, const std::string& table) {
    store::AttachSpec s;
    s.dataset = dataset;
    s.table = keyspace_ + "." + table;
    s.key_column = "k";
    s.data_column = "data";
    s.label_column = "label";
    s.scan.concurrency = 2;
    s.scan.ranges = 8;
    s.scan.page_size = 10;
    return s;
  }

  // text keys "s<i>", label i % 3, data "<tag>-<i>".
  void DataTable(const std::string& table, int n, const std::string& tag) {
    Cql(fmt::format("CREATE TABLE IF NOT EXISTS {}.{} (k text PRIMARY KEY, label int, data blob)", keyspace_, table));
    for (int i = 0; i < n; ++i) {
      Cql(fmt::format("INSERT INTO {}.{} (k, label, data) VALUES (?, ?, ?)", keyspace_, table),
          {Value::Text(fmt::format("s{}", i)), Value::Int(i % 3), Value::Blob(fmt::format("{}-{}", tag, i))});
    }
  }
};

TEST_F(AttachMetadataTest, MetadataJoinsTheMetadataTable) {
  DataTable("md_data", 12, "img");
  Cql(fmt::format("CREATE TABLE {}.md_meta (k text PRIMARY KEY, note text, n int, tags list<text>, raw blob)",
                  keyspace_));
  const std::string long_note(1000, 'x');
  for (int i = 0; i < 12; ++i) {
    if (i == 5) continue;  // a key without a metadata row
    Cql(fmt::format("INSERT INTO {}.md_meta (k, note, n, tags, raw) VALUES (?, ?, ?, ?, ?)", keyspace_),
        {Value::Text(fmt::format("s{}", i)), Value::Text(i == 7 ? long_note : fmt::format("note {}", i)),
         Value::Int(i * 10), Value::List({Value::Text("a"), Value::Text(fmt::format("t{}", i))}),
         i == 3 ? Value::Null() : Value::Blob(std::string(i == 9 ? 500 : 2, '\x01'))});
  }
  store::AttachSpec spec = Spec("md", "md_data");
  spec.metadata_table = keyspace_ + ".md_meta";
  auto a = store::Attach(S(), keyspace_, spec);
  ASSERT_TRUE(a.ok()) << a.status().ToString();

  auto view = store::DatasetView::Open([] {
    ConnectionOptions o = TestOptions();
    o.keyspace = keyspace_;
    return o;
  }(), "md");
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  auto rows = (*view)->Metadata(std::string("train"), 4);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 12u);
  std::map<std::string, const store::DatasetView::Row*> by_path;
  for (const auto& r : *rows) {
    EXPECT_EQ(r.split, "train");
    EXPECT_FALSE(r.meta.extra.contains("_problem")) << r.meta.extra.at("_problem");
    by_path[r.meta.path] = &r;
  }
  ASSERT_EQ(by_path.size(), 12u);
  for (int i = 0; i < 12; ++i) {
    const auto* r = by_path.at(fmt::format("s{}", i));
    ASSERT_TRUE(r->meta.label.has_value());
    EXPECT_EQ(*r->meta.label, i % 3);
    EXPECT_EQ(r->meta.size, 0) << "attached sizes are not known without reading the data";
    const auto& e = r->meta.extra;
    if (i == 5) {
      EXPECT_TRUE(e.empty()) << "no metadata row, no extra";
      continue;
    }
    EXPECT_FALSE(e.contains("k")) << "the key column is not repeated in extra";
    EXPECT_EQ(e.at("n"), std::to_string(i * 10));
    EXPECT_NE(e.at("tags").find(fmt::format("t{}", i)), std::string::npos) << e.at("tags");
    if (i == 7) {
      EXPECT_EQ(e.at("note").substr(0, store::kMaxExtraValueBytes), long_note.substr(0, store::kMaxExtraValueBytes));
      EXPECT_NE(e.at("note").find("...[cut: 1000 bytes]"), std::string::npos) << e.at("note");
      EXPECT_LT(e.at("note").size(), store::kMaxExtraValueBytes + 32);
    } else {
      EXPECT_EQ(e.at("note"), fmt::format("note {}", i));
    }
    if (i == 3) {
      EXPECT_FALSE(e.contains("raw")) << "a null cell gives no entry";
    } else if (i == 9) {
      EXPECT_NE(e.at("raw").find("...[cut: 500 bytes]"), std::string::npos) << e.at("raw");
    } else {
      EXPECT_EQ(e.at("raw"), "0x0101");
    }
  }
  // The key set stays the split's: SplitKeys and the metadata agree.
  std::vector<SampleKey> keys;
  for (const auto& r : *rows) keys.push_back(r.meta.key);
  EXPECT_EQ(keys, (*view)->SplitKeys("train"));

  // A sample whose data row is gone is still a row, its problem in extra.
  Cql(fmt::format("DELETE FROM {}.md_data WHERE k = 's4'", keyspace_));
  auto again = (*view)->Metadata(std::nullopt, 2);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_EQ(again->size(), 12u);
  int problems = 0;
  for (const auto& r : *again) {
    if (!r.meta.extra.contains("_problem")) continue;
    ++problems;
    EXPECT_NE(r.meta.extra.at("_problem").find("md_data"), std::string::npos) << r.meta.extra.at("_problem");
  }
  EXPECT_EQ(problems, 1);
}

// Two refreshes of one dataset at once: both read generation 1 and scan
// (they wait for each other inside the scan, so both started before either
// commits); exactly one commits generation 2, the other fails with a clear
// error and leaves no segment row behind.
TEST_F(AttachMetadataTest, RacingRefreshesWriteOneGeneration) {
  DataTable("race_data", 40, "img");
  store::AttachSpec spec = Spec("race", "race_data");
  ASSERT_TRUE(store::Attach(S(), keyspace_, spec).ok());
  ASSERT_EQ(store::AttachedTable::FromSource(Load("race"))->generation, 1);

  std::atomic<int> in_scan{0};
  auto refresh = [&]() {
    store::AttachSpec r = spec;
    r.refresh = true;
    bool waited = false;
    r.scan.on_progress = [&in_scan, waited](int64_t) mutable {
      if (waited) return;
      waited = true;
      in_scan.fetch_add(1);
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (in_scan.load() < 2 && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    };
    return store::Attach(S(), keyspace_, r);
  };
  StatusOr<store::AttachReport> r1 = Status::Internal("not run"), r2 = Status::Internal("not run");
  std::thread t1([&] { r1 = refresh(); });
  std::thread t2([&] { r2 = refresh(); });
  t1.join();
  t2.join();
  ASSERT_EQ(in_scan.load(), 2) << "both refreshes reached their scan";
  ASSERT_NE(r1.ok(), r2.ok()) << (r1.ok() ? "both committed" : r1.status().ToString() + " / " + r2.status().ToString());
  const Status& lost = r1.ok() ? r2.status() : r1.status();
  EXPECT_EQ(lost.code(), Status::Code::kAlreadyExists) << lost.ToString();
  EXPECT_NE(lost.message().find("another attach or refresh of dataset 'race' committed while this one ran"),
            std::string::npos)
      << lost.ToString();
  const DatasetInfo d = Load("race");
  EXPECT_EQ(store::AttachedTable::FromSource(d)->generation, 2);
  ASSERT_EQ(d.segments.size(), 1u) << "one generation's segment, the loser's claims removed";
  EXPECT_EQ(d.segments[0].source_id, "attach:2:train");
  EXPECT_EQ(d.segments[0].state, "sealed");
  EXPECT_EQ(d.Count("train"), 40);
  const auto& won = r1.ok() ? *r1 : *r2;
  EXPECT_EQ(won.snapshot.segments.at(0).seg, d.segments[0].seg);
}

// verify and export read an attached segment's keys from the table its
// snapshot was taken from (the segment's source), as the loader does: with
// the catalog switched to a table of the same keys and other bytes, they
// still check and write the snapshot's table's bytes.
TEST_F(AttachMetadataTest, VerifyAndExportReadTheSegmentsSource) {
  DataTable("src_old", 6, "old");
  DataTable("src_new", 6, "new");
  ASSERT_TRUE(store::Attach(S(), keyspace_, Spec("srcds", "src_old")).ok());
  Cql(fmt::format("UPDATE {}.datasets SET source['table:train'] = '{}.src_new' WHERE name = 'srcds'", keyspace_,
                  keyspace_));
  const DatasetInfo d = Load("srcds");
  ASSERT_EQ(d.source.at("table:train"), keyspace_ + ".src_new");
  ASSERT_EQ(d.segments.at(0).source, keyspace_ + ".src_old");
  // Rows only the old table has problems with: a deleted key is reported in src_old.
  Cql(fmt::format("DELETE FROM {}.src_old WHERE k = 's2'", keyspace_));
  auto [vrc, vout] = Sh(fmt::format("{} verify srcds {}", CliPath(), Common()));
  EXPECT_EQ(vrc, 1) << vout;
  EXPECT_NE(vout.find("1 problem"), std::string::npos) << vout;
  EXPECT_NE(vout.find(keyspace_ + ".src_old"), std::string::npos) << vout;

  const std::string dir = ::testing::TempDir() + fmt::format("attach_src_{}", ::getpid());
  std::filesystem::remove_all(dir);
  auto [erc, eout] = Sh(fmt::format("{} export srcds {}/out {}", CliPath(), dir, Common()));
  EXPECT_NE(eout.find("exported 5 of 6"), std::string::npos) << eout;
  int files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir + "/out")) {
    if (!e.is_regular_file()) continue;
    ++files;
    std::ifstream f(e.path(), std::ios::binary);
    const std::string got((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_EQ(got.substr(0, 4), "old-") << e.path() << ": " << got;
  }
  EXPECT_EQ(files, 5);
  std::filesystem::remove_all(dir);
}

// After each --refresh the replaced generation's k_ rows stay (a Loader
// opened before it still reads them) and those of the generation before it
// are deleted: at most two generations' snapshot rows per split.
TEST_F(AttachMetadataTest, RefreshKeepsOnePreviousGenerationOfKeyRows) {
  DataTable("gen_data", 30, "img");
  store::AttachSpec spec = Spec("gen", "gen_data");
  ASSERT_TRUE(store::Attach(S(), keyspace_, spec).ok());
  auto rows_of = [&](int32_t seg, int64_t n) {
    int found = 0;
    for (int32_t idx = 0; idx < n; ++idx) {
      auto r = S().Execute(net::Statement::Query(fmt::format("SELECT key FROM {}.{} WHERE seg = ? AND idx = ?",
                                                             keyspace_, store::KeyTableName("gen")),
                                                 {Value::Int(seg), Value::Int(idx)}));
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      found += r.ok() && r->rows() != nullptr && r->rows()->row_count() == 1;
    }
    return found;
  };
  std::vector<int32_t> segs = {Load("gen").segments.at(0).seg};
  spec.refresh = true;
  for (int gen = 2; gen <= 4; ++gen) {
    auto r = store::Attach(S(), keyspace_, spec);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->retire_note.empty()) << r->retire_note;
    EXPECT_EQ(r->deleted_key_rows, gen >= 3 ? 30 : 0) << gen;
    const DatasetInfo d = Load("gen");
    ASSERT_EQ(d.segments.size(), 1u);
    segs.push_back(d.segments[0].seg);
    EXPECT_EQ(rows_of(segs[segs.size() - 1], 30), 30) << "the new generation";
    EXPECT_EQ(rows_of(segs[segs.size() - 2], 30), 30) << "the replaced generation stays for open readers";
    if (segs.size() >= 3) {
      EXPECT_EQ(rows_of(segs[segs.size() - 3], 30), 0) << "older generations are deleted";
    }
  }
  auto [rc, out] = Sh(fmt::format("{} attach --dataset gen --table {}.gen_data --key-column k --data-column data "
                                  "--label-column label --refresh {}",
                                  CliPath(), keyspace_, Common()));
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("deleted 30 k_ rows of the generation before the replaced one"), std::string::npos) << out;
}

}  // namespace
}  // namespace cqlstream::testing
