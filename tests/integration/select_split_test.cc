// Copyright (c) cqlstream authors.
//
// Issue 11 §2 against the real node: `select --invert` is the complement of
// a selection within its split; `cqlstream split` writes disjoint, complete,
// stratified parts and cross-validation folds; and weighted, ordered
// selections (keys repeated and in a fixed order, CQLSSEL2 files) are read
// by the loader with each entry delivered once per epoch: in the exact order
// with shuffle off, as many times as it appears on 2 and 3 ranks with
// shuffle on, and exactly once across a mid-epoch checkpoint and resume on
// another world size.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <map>
#include <set>

#include "cqlstream/loader.h"
#include "dataset_fixture.h"
#include "loader/plan.h"
#include "shared_dataset_suite.h"
#include "store/catalog.h"
#include "store/select.h"
#include "store/testing_fixtures.h"
#include "store_fixture.h"
#include "test_env.h"

namespace cqlstream {
namespace {

namespace fs = std::filesystem;
using store::testing::TempDir;
using testing::Delivered;
using testing::ReadEpoch;
using testing::SyntheticDataset;

using testing::CliPath;
using testing::Sh;

std::multiset<SampleKey> Multi(const std::vector<SampleKey>& k) { return {k.begin(), k.end()}; }

class SelectSplitTest : public testing::SharedDatasetSuite<SelectSplitTest> {
 public:
  static SyntheticDataset Make(net::Session& s) {
    testing::SyntheticSpec spec;
    spec.name = "selsplit";
    spec.samples = 600;  // 60 per class, over 3 segments
    spec.segments = 3;
    return testing::MakeSyntheticDataset(s, testing::TestKeyspace(), spec);
  }

 protected:
  static std::vector<SampleKey> AllKeys() {
    std::vector<SampleKey> out;
    for (const auto& [k, v] : data_->payload) out.push_back(k);
    return out;
  }
  static LoaderOptions Options(const std::string& selection) {
    LoaderOptions o;
    o.connection = testing::TestOptions();
    o.connection.keyspace = testing::TestKeyspace();
    o.dataset = "selsplit";
    o.selection_path = selection;
    return o;
  }
  std::string Common() const {
    return fmt::format("--keyspace {} --hosts {}", testing::TestKeyspace(),
                       testing::Env("CQLSTREAM_TEST_HOSTS", "127.0.0.1"));
  }
};

TEST_F(SelectSplitTest, InvertIsTheComplementWithinTheSplit) {
  auto s = testing::TestSession();
  ASSERT_NE(s, nullptr);
  auto d = store::LoadDataset(*s, testing::TestKeyspace(), "selsplit");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  store::SelectOptions o;
  o.split = "train";
  o.labels = {"class3", "7"};
  o.fraction = 0.5;
  o.seed = 9;
  auto picked = store::Select(*s, *d, o);
  ASSERT_TRUE(picked.ok()) << picked.status().ToString();
  EXPECT_EQ(picked->keys.size(), 60u);  // half of 2 x 60
  o.invert = true;
  auto rest = store::Select(*s, *d, o);
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  EXPECT_EQ(rest->keys.size(), 540u);
  EXPECT_NE(rest->query.find("invert"), std::string::npos) << rest->query;
  std::vector<SampleKey> both;
  std::set_union(picked->keys.begin(), picked->keys.end(), rest->keys.begin(), rest->keys.end(),
                 std::back_inserter(both));
  EXPECT_EQ(both, AllKeys());
  o.split = "nosuch";
  EXPECT_EQ(store::Select(*s, *d, o).status().code(), Status::Code::kNotFound);
  s->Close();
}

TEST_F(SelectSplitTest, SplitCommandWritesDisjointStratifiedPartsAndFolds) {
  const std::string cli = CliPath();
  ASSERT_TRUE(fs::exists(cli)) << cli << " is missing: build the cqlstream target (or set CQLSTREAM_CLI)";
  TempDir dir("split");
  auto [rc, out] = Sh(fmt::format("{} split selsplit --from train --into train=0.8,val=0.2 --stratify --seed 4 "
                                  "--out-dir {} {}",
                                  cli, dir.path(), Common()));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("train: 480 of 600"), std::string::npos) << out;
  auto train = Selection::Load((dir / "train.sel").string());
  auto val = Selection::Load((dir / "val.sel").string());
  ASSERT_TRUE(train.ok() && val.ok()) << train.status().ToString() << val.status().ToString();
  EXPECT_EQ(train->dataset, "selsplit");
  EXPECT_EQ(train->split, "train");
  std::map<int32_t, int> per_class;
  for (SampleKey k : val->keys) per_class[data_->label.at(k)]++;
  EXPECT_EQ(per_class.size(), 10u);
  for (const auto& [c, n] : per_class) EXPECT_EQ(n, 12) << "class " << c;  // 20% of 60
  std::vector<SampleKey> all;
  std::merge(train->keys.begin(), train->keys.end(), val->keys.begin(), val->keys.end(), std::back_inserter(all));
  EXPECT_EQ(all, AllKeys()) << "every sample in exactly one part";
  // The same seed gives the same parts; per-part paths.
  const std::string again = (dir / "again.sel").string();
  fs::create_directories(dir / "x");
  auto same = Sh(fmt::format("{} split selsplit --from train --into train=0.8,val=0.2 --stratify --seed 4 "
                        "--out-dir {} -o val={} {}",
                        cli, (dir / "x").string(), again, Common()));
  ASSERT_EQ(same.first, 0) << same.second;
  EXPECT_EQ(Selection::Load(again)->keys, val->keys);
  // Folds: the val folds partition the split, train is the rest.
  std::set<SampleKey> vals;
  for (int f = 0; f < 3; ++f) {
    const std::string fd = (dir / fmt::format("fold{}", f)).string();
    fs::create_directories(fd);
    auto r = Sh(fmt::format("{} split selsplit --from train --folds 3 --fold {} --stratify --out-dir {} {}", cli, f,
                            fd, Common()));
    ASSERT_EQ(r.first, 0) << r.second;
    auto ft = Selection::Load(fd + "/train.sel");
    auto fv = Selection::Load(fd + "/val.sel");
    ASSERT_TRUE(ft.ok() && fv.ok());
    EXPECT_EQ(fv->keys.size(), 200u);
    EXPECT_EQ(ft->keys.size(), 400u);
    for (SampleKey k : fv->keys) EXPECT_TRUE(vals.insert(k).second) << "in two val folds: " << FormatKey(k);
  }
  EXPECT_EQ(vals.size(), 600u);
  // Balance after a label filter; fractions over 1 are refused.
  auto bal = Sh(fmt::format("{} split selsplit --from train --label class1 --label class2 --into all=1 --balance "
                            "--out-dir {} {}",
                            cli, dir.path(), Common()));
  ASSERT_EQ(bal.first, 0) << bal.second;
  EXPECT_EQ(Selection::Load((dir / "all.sel").string())->keys.size(), 120u);
  auto over = Sh(fmt::format("{} split selsplit --from train --into a=0.8,b=0.3 {}", cli, Common()));
  EXPECT_EQ(over.first, 2) << over.second;  // a usage error
  EXPECT_NE(over.second.find("more than 1"), std::string::npos) << over.second;
  // select --invert from the command line.
  const std::string inv = (dir / "inv.sel").string();
  auto si = Sh(fmt::format("{} select selsplit --split train --label class0 --invert -o {} {}", cli, inv, Common()));
  ASSERT_EQ(si.first, 0) << si.second;
  EXPECT_EQ(Selection::Load(inv)->keys.size(), 540u);
}

// A curriculum with oversampling: 3 passes over a key order that is not
// sorted, some keys listed up to 4 times.
Selection Weighted(const std::vector<SampleKey>& all) {
  Selection sel;
  sel.dataset = "selsplit";
  sel.split = "train";
  sel.query = "weighted curriculum";
  for (int i = 0; i < 97; ++i) {
    const SampleKey k = all[static_cast<size_t>((i * 37) % 600)];
    for (int rep = 0; rep <= i % 4; ++rep) sel.keys.push_back(k);
  }
  for (int i = 96; i >= 0; i -= 3) sel.keys.push_back(all[static_cast<size_t>(i)]);
  return sel;
}

TEST_F(SelectSplitTest, WeightedOrderedSelectionsAreDeliveredEntryByEntry) {
  TempDir dir("weighted");
  const std::string path = (dir / "w.sel").string();
  const Selection sel = Weighted(AllKeys());
  ASSERT_FALSE(sel.SortedUnique());
  ASSERT_TRUE(sel.Save(path).ok());
  const size_t n = sel.keys.size();
  // Shuffle off, one rank, ordered: exactly the file's order.
  {
    LoaderOptions o = Options(path);
    o.shuffle = false;
    o.ordered = true;
    o.batch_size = 7;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    EXPECT_EQ((*l)->SamplesPerEpoch(), static_cast<int64_t>(n));
    Delivered d = ReadEpoch(**l, *data_);
    ASSERT_TRUE(d.error.empty()) << d.error;
    EXPECT_EQ(d.keys, sel.keys);
  }
  // Shuffle off, 3 ranks, ordered: each rank gets its contiguous slice of the list.
  for (int r = 0; r < 3; ++r) {
    LoaderOptions o = Options(path);
    o.shuffle = false;
    o.ordered = true;
    o.batch_size = 16;
    o.rank = r;
    o.world_size = 3;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    Delivered d = ReadEpoch(**l, *data_);
    ASSERT_TRUE(d.error.empty()) << d.error;
    const auto slice = loader::RankSlice(n, r, 3);
    EXPECT_EQ(d.keys, std::vector<SampleKey>(sel.keys.begin() + static_cast<ptrdiff_t>(slice.begin),
                                             sel.keys.begin() + static_cast<ptrdiff_t>(slice.end)))
        << "rank " << r;
  }
  // Shuffle on, 2 and 3 ranks, both assembly modes: each entry as many times as listed.
  for (int world : {2, 3}) {
    for (bool ordered : {false, true}) {
      SCOPED_TRACE(fmt::format("world {} ordered {}", world, ordered));
      std::vector<std::future<Delivered>> ranks;
      for (int r = 0; r < world; ++r) {
        ranks.push_back(std::async(std::launch::async, [&, r] {
          LoaderOptions o = Options(path);
          o.seed = 17;
          o.ordered = ordered;
          o.batch_size = 10;
          o.rank = r;
          o.world_size = world;
          auto l = Loader::Open(o);
          if (!l.ok()) {
            Delivered d;
            d.error = l.status().ToString();
            return d;
          }
          return ReadEpoch(**l, *data_);
        }));
      }
      std::multiset<SampleKey> got;
      for (auto& f : ranks) {
        Delivered d = f.get();
        ASSERT_TRUE(d.error.empty()) << d.error;
        got.insert(d.keys.begin(), d.keys.end());
      }
      EXPECT_EQ(got, Multi(sel.keys));
    }
  }
}

TEST_F(SelectSplitTest, WeightedSelectionsResumeExactlyOnceOnAnotherWorldSize) {
  TempDir dir("weighted");
  const std::string path = (dir / "w.sel").string();
  const Selection sel = Weighted(AllKeys());
  ASSERT_TRUE(sel.Save(path).ok());
  std::multiset<SampleKey> got;
  std::vector<std::string> states;
  for (int r = 0; r < 2; ++r) {
    LoaderOptions o = Options(path);
    o.seed = 23;
    o.batch_size = 12;
    o.rank = r;
    o.world_size = 2;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    Delivered part = ReadEpoch(**l, *data_, 2 + r);  // ranks stop at different points
    ASSERT_TRUE(part.error.empty()) << part.error;
    got.insert(part.keys.begin(), part.keys.end());
    states.push_back((*l)->State());
  }
  const size_t before = got.size();
  for (int r = 0; r < 3; ++r) {
    LoaderOptions o = Options(path);
    o.seed = 23;
    o.batch_size = 12;
    o.rank = r;
    o.world_size = 3;
    auto l = Loader::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    Status rs = (*l)->Restore(states);
    ASSERT_TRUE(rs.ok()) << rs.ToString();
    Delivered rest = ReadEpoch(**l, *data_);
    ASSERT_TRUE(rest.error.empty()) << rest.error;
    got.insert(rest.keys.begin(), rest.keys.end());
  }
  EXPECT_GT(got.size(), before);
  EXPECT_EQ(got, Multi(sel.keys)) << "each entry once over the checkpoint";
  // A different list (another weighting) is not the same sample set: refused.
  Selection other = sel;
  other.keys.push_back(other.keys.front());
  const std::string opath = (dir / "o.sel").string();
  ASSERT_TRUE(other.Save(opath).ok());
  LoaderOptions o = Options(opath);
  o.seed = 23;
  o.batch_size = 12;
  o.rank = 0;
  o.world_size = 2;
  auto l = Loader::Open(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_FALSE((*l)->Restore(states).ok());
}

}  // namespace
}  // namespace cqlstream
