// Copyright (c) cqlstream authors.
#include "store/select.h"

#include <gtest/gtest.h>

#include <set>

namespace cqlstream::store {
namespace {

DatasetInfo Pets() {
  DatasetInfo d;
  d.name = "pets";
  d.label_kind = LabelKind::kClass;
  d.class_names = {"cat", "dog", "emu"};
  return d;
}

TEST(SelectTest, LabelFilterByNameOrIndex) {
  auto s = ResolveLabelFilter(Pets(), {"dog", "2"});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(*s, (std::set<int32_t>{1, 2}));
  auto bad = ResolveLabelFilter(Pets(), {"yak"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cat, dog, emu"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(ResolveLabelFilter(Pets(), {"3"}).ok());
  DatasetInfo none = Pets();
  none.label_kind = LabelKind::kNone;
  EXPECT_FALSE(ResolveLabelFilter(none, {"cat"}).ok());
  EXPECT_TRUE(ResolveLabelFilter(none, {}).ok());
}

TEST(SelectTest, MatchesLabelsAndExtra) {
  MetaRow m;
  m.label = 1;
  m.extra = {{"source", "web"}, {"q", "hi"}};
  EXPECT_TRUE(Matches(m, {}, {}));
  EXPECT_TRUE(Matches(m, {1, 2}, {{"source", "web"}}));
  EXPECT_FALSE(Matches(m, {0}, {}));
  EXPECT_FALSE(Matches(m, {}, {{"source", "book"}}));
  EXPECT_FALSE(Matches(m, {}, {{"missing", ""}}));
  MetaRow multi;
  multi.labels = {0, 2};
  EXPECT_TRUE(Matches(multi, {2}, {}));
  EXPECT_FALSE(Matches(multi, {1}, {}));
  auto kv = ParseExtraFilter("a=b=c");
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->first, "a");
  EXPECT_EQ(kv->second, "b=c");
  EXPECT_FALSE(ParseExtraFilter("=x").ok());
  EXPECT_FALSE(ParseExtraFilter("novalue").ok());
}

TEST(SelectTest, FractionIsDeterministicExactAndNested) {
  std::vector<SampleKey> keys;
  for (int32_t i = 0; i < 1000; ++i) keys.push_back(MakeKey(i % 3, i));
  std::sort(keys.begin(), keys.end());
  const auto a = SampleFraction(keys, 0.25, 7);
  EXPECT_EQ(a.size(), 250u);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_EQ(a, SampleFraction(keys, 0.25, 7));
  EXPECT_NE(a, SampleFraction(keys, 0.25, 8));
  const auto b = SampleFraction(keys, 0.5, 7);
  EXPECT_TRUE(std::includes(b.begin(), b.end(), a.begin(), a.end()));
  EXPECT_TRUE(SampleFraction(keys, 0, 7).empty());
  EXPECT_EQ(SampleFraction(keys, 1, 7), keys);
  EXPECT_EQ(SampleFraction({}, 0.5, 1).size(), 0u);
}

}  // namespace
}  // namespace cqlstream::store
