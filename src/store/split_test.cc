// Copyright (c) cqlstream authors.
//
// Tests of store/split: parts by fraction (plain and stratified), folds,
// class balancing; disjointness, coverage, proportions, determinism.
#include "store/split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

namespace cqlstream::store {
namespace {

// n keys over segments 0..2; class c gets weight[c] of them (in order).
std::vector<LabeledKey> Keys(const std::vector<int>& per_class) {
  std::vector<LabeledKey> out;
  int i = 0;
  for (size_t c = 0; c < per_class.size(); ++c) {
    for (int k = 0; k < per_class[c]; ++k, ++i) out.push_back({MakeKey(i % 3, i), static_cast<int32_t>(c)});
  }
  return out;
}

std::map<int32_t, int> ClassCounts(const std::vector<LabeledKey>& all, const std::vector<SampleKey>& part) {
  std::map<SampleKey, int32_t> label;
  for (const auto& k : all) label[k.key] = k.label;
  std::map<int32_t, int> out;
  for (SampleKey k : part) out[label.at(k)]++;
  return out;
}

TEST(SplitTest, ParsesParts) {
  auto p = ParseSplitParts("train=0.8,val=0.15,test-a=0.05");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->size(), 3u);
  EXPECT_EQ((*p)[2].name, "test-a");
  EXPECT_DOUBLE_EQ((*p)[1].fraction, 0.15);
  EXPECT_TRUE(ParseSplitParts("a=1").ok());
  EXPECT_TRUE(ParseSplitParts("a=0.1,b=0.2,c=0.7").ok());  // sums to 1 within rounding
  for (const char* bad : {"", "train", "train=0.8,val=0.3", "a=0", "a=-0.1", "a=nan", "a=inf", "a=0.5x",
                          "a=0.5,a=0.2", "A=0.5", "=0.5", "a=0.5,", "a b=0.1", "a=1.5"}) {
    auto r = ParseSplitParts(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << bad;
    }
  }
  EXPECT_NE(ParseSplitParts("a=0.8,b=0.3").status().message().find("more than 1"), std::string::npos);
}

TEST(SplitTest, PartsAreDisjointAndCoverEverything) {
  const auto keys = Keys({500, 300, 200});
  const auto parts = *ParseSplitParts("train=0.7,val=0.2,test=0.1");
  for (bool stratify : {false, true}) {
    const auto out = PartitionKeys(keys, parts, stratify, 42);
    ASSERT_EQ(out.size(), 3u);
    std::set<SampleKey> seen;
    size_t total = 0;
    for (const auto& p : out) {
      EXPECT_TRUE(std::is_sorted(p.begin(), p.end()));
      total += p.size();
      seen.insert(p.begin(), p.end());
    }
    EXPECT_EQ(total, keys.size()) << "every key in exactly one part";
    EXPECT_EQ(seen.size(), keys.size());
    EXPECT_EQ(out[0].size(), 700u);
    EXPECT_EQ(out[1].size(), 200u);
    EXPECT_EQ(out[2].size(), 100u);
  }
}

TEST(SplitTest, StratifiedPartsKeepClassProportions) {
  const auto keys = Keys({600, 300, 100});
  const auto out = PartitionKeys(keys, *ParseSplitParts("train=0.8,val=0.2"), true, 7);
  const auto train = ClassCounts(keys, out[0]), val = ClassCounts(keys, out[1]);
  EXPECT_EQ(train.at(0), 480);
  EXPECT_EQ(train.at(1), 240);
  EXPECT_EQ(train.at(2), 80);
  EXPECT_EQ(val.at(0), 120);
  EXPECT_EQ(val.at(1), 60);
  EXPECT_EQ(val.at(2), 20);
}

TEST(SplitTest, FractionsBelowOneLeaveTheRestOut) {
  const auto keys = Keys({1000});
  const auto out = PartitionKeys(keys, *ParseSplitParts("a=0.1,b=0.25"), false, 1);
  EXPECT_EQ(out[0].size(), 100u);
  EXPECT_EQ(out[1].size(), 250u);
  std::vector<SampleKey> both;
  std::set_intersection(out[0].begin(), out[0].end(), out[1].begin(), out[1].end(), std::back_inserter(both));
  EXPECT_TRUE(both.empty());
}

TEST(SplitTest, DeterministicFromSeedAndIndependentOfInputOrder) {
  auto keys = Keys({400, 400});
  const auto parts = *ParseSplitParts("train=0.5,val=0.5");
  const auto a = PartitionKeys(keys, parts, true, 3);
  std::shuffle(keys.begin(), keys.end(), std::mt19937(5));
  EXPECT_EQ(PartitionKeys(keys, parts, true, 3), a);
  EXPECT_NE(PartitionKeys(keys, parts, true, 4), a) << "another seed, other parts";
}

TEST(SplitTest, FoldsPartitionTheKeys) {
  const auto keys = Keys({103, 50, 7});
  for (bool stratify : {false, true}) {
    std::set<SampleKey> all_val;
    size_t val_total = 0;
    for (int f = 0; f < 5; ++f) {
      auto fp = FoldKeys(keys, 5, f, stratify, 9);
      ASSERT_TRUE(fp.ok()) << fp.status().ToString();
      EXPECT_EQ(fp->train.size() + fp->val.size(), keys.size());
      EXPECT_EQ(fp->val.size(), 32u);  // 160 keys, 5 folds
      std::vector<SampleKey> both;
      std::set_intersection(fp->train.begin(), fp->train.end(), fp->val.begin(), fp->val.end(),
                            std::back_inserter(both));
      EXPECT_TRUE(both.empty());
      val_total += fp->val.size();
      all_val.insert(fp->val.begin(), fp->val.end());
      if (stratify) {
        const auto c = ClassCounts(keys, fp->val);
        EXPECT_GE(c.at(0), 20);  // 103 / 5 = 20.6
        EXPECT_LE(c.at(0), 21);
        EXPECT_EQ(c.at(1), 10);
      }
    }
    EXPECT_EQ(val_total, keys.size()) << "the val folds partition the keys";
    EXPECT_EQ(all_val.size(), keys.size());
  }
  EXPECT_FALSE(FoldKeys(keys, 1, 0, false, 0).ok());
  EXPECT_FALSE(FoldKeys(keys, 5, 5, false, 0).ok());
  EXPECT_FALSE(FoldKeys(keys, 5, -1, false, 0).ok());
}

TEST(SplitTest, BalanceDownSamplesToTheSmallestClass) {
  const auto keys = Keys({500, 120, 80});
  const auto b = BalanceClasses(keys, 11);
  std::map<int32_t, int> c;
  for (const auto& k : b) c[k.label]++;
  EXPECT_EQ(c, (std::map<int32_t, int>{{0, 80}, {1, 80}, {2, 80}}));
  EXPECT_EQ(BalanceClasses(keys, 11).size(), b.size());
  EXPECT_EQ(BalanceClasses(keys, 11)[5].key, b[5].key) << "deterministic";
  EXPECT_TRUE(BalanceClasses({}, 1).empty());
}

TEST(SplitTest, StratumOfMultilabelIsTheSmallestLabel) {
  EXPECT_EQ(StratumOf(3, {}), 3);
  EXPECT_EQ(StratumOf(std::nullopt, {5, 2, 9}), 2);
  EXPECT_EQ(StratumOf(std::nullopt, {}), kNoLabel);
}

}  // namespace
}  // namespace cqlstream::store
