// Copyright (c) cqlstream authors.
#include "loader/foreign_key_cache.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace cqlstream::loader {
namespace {

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(ForeignKeyCacheTest, KeepsEachSamplesKeyAndFindsItAgain) {
  ForeignKeyCache c({{3, 4}, {7, 2}}, 1 << 20);
  std::string out;
  EXPECT_FALSE(c.Find(MakeKey(3, 0), &out));
  ASSERT_TRUE(c.Add(MakeKey(3, 1), Bytes("alpha")));
  ASSERT_TRUE(c.Add(MakeKey(7, 0), Bytes(std::string("\0\x01\x02", 3))));
  ASSERT_TRUE(c.Add(MakeKey(3, 3), Bytes("z")));
  ASSERT_TRUE(c.Find(MakeKey(3, 1), &out));
  EXPECT_EQ(out, "alpha");
  ASSERT_TRUE(c.Find(MakeKey(7, 0), &out));
  EXPECT_EQ(out, std::string("\0\x01\x02", 3));
  ASSERT_TRUE(c.Find(MakeKey(3, 3), &out));
  EXPECT_EQ(out, "z");
  EXPECT_FALSE(c.Find(MakeKey(3, 0), &out));
  EXPECT_FALSE(c.Find(MakeKey(3, 2), &out));
  EXPECT_FALSE(c.Find(MakeKey(7, 1), &out));
  EXPECT_TRUE(c.Has(MakeKey(3, 1)));
  EXPECT_FALSE(c.Has(MakeKey(3, 2)));
  EXPECT_FALSE(c.Has(MakeKey(9, 0)));
  EXPECT_EQ(c.keys(), 3);
  // Tables of 4 and 2 entries, 9 key bytes.
  EXPECT_EQ(c.bytes(), 6 * 8 + 9);
}

TEST(ForeignKeyCacheTest, SecondAddOfASampleKeepsTheFirstKey) {
  ForeignKeyCache c({{0, 2}}, 1 << 20);
  ASSERT_TRUE(c.Add(MakeKey(0, 1), Bytes("first")));
  EXPECT_TRUE(c.Add(MakeKey(0, 1), Bytes("second")));
  std::string out;
  ASSERT_TRUE(c.Find(MakeKey(0, 1), &out));
  EXPECT_EQ(out, "first");
  EXPECT_EQ(c.keys(), 1);
}

TEST(ForeignKeyCacheTest, RefusesWhatNoSegmentHoldsAndEmptyKeys) {
  ForeignKeyCache c({{1, 3}}, 1 << 20);
  EXPECT_FALSE(c.Add(MakeKey(2, 0), Bytes("k")));   // no such segment
  EXPECT_FALSE(c.Add(MakeKey(1, 3), Bytes("k")));   // idx == count
  EXPECT_FALSE(c.Add(MakeKey(1, -1), Bytes("k")));  // negative idx
  EXPECT_FALSE(c.Add(MakeKey(1, 0), Bytes("")));    // empty key
  std::string out;
  EXPECT_FALSE(c.Find(MakeKey(1, -1), &out));
  EXPECT_FALSE(c.Find(MakeKey(2, 0), &out));
  EXPECT_EQ(c.keys(), 0);
  EXPECT_EQ(c.bytes(), 0);
  EXPECT_EQ(c.rejected(), 0);  // none of these is the budget's doing
}

TEST(ForeignKeyCacheTest, StopsAddingAtTheBudgetAndKeepsWhatItHas) {
  // One segment of 10 samples: an 80-byte table, then 16-byte keys.
  ForeignKeyCache c({{0, 10}}, 80 + 3 * 16);
  const std::string key(16, 'k');
  for (int i = 0; i < 10; ++i) c.Add(MakeKey(0, i), Bytes(key));
  EXPECT_EQ(c.keys(), 3);
  EXPECT_EQ(c.rejected(), 7);
  EXPECT_LE(c.bytes(), 80 + 3 * 16);
  std::string out;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(c.Find(MakeKey(0, i), &out)) << i;
  for (int i = 3; i < 10; ++i) EXPECT_FALSE(c.Find(MakeKey(0, i), &out)) << i;
  // A segment whose table alone exceeds the budget is never started.
  ForeignKeyCache small({{0, 1000}}, 100);
  EXPECT_FALSE(small.Add(MakeKey(0, 0), Bytes("k")));
  EXPECT_EQ(small.bytes(), 0);
}

TEST(ForeignKeyCacheTest, ConcurrentAddsAndFindsAgree) {
  constexpr int kSamples = 4000;
  ForeignKeyCache c({{0, kSamples}}, 1 << 24);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&c, w] {
      std::string out;
      for (int i = w; i < kSamples; i += 2) {  // every sample added by two threads
        const std::string key = "key-" + std::to_string(i);
        c.Add(MakeKey(0, i), Bytes(key));
        if (c.Find(MakeKey(0, i), &out)) {
          EXPECT_EQ(out, key);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.keys(), kSamples);
  std::string out;
  for (int i = 0; i < kSamples; ++i) {
    ASSERT_TRUE(c.Find(MakeKey(0, i), &out));
    EXPECT_EQ(out, "key-" + std::to_string(i));
  }
}

}  // namespace
}  // namespace cqlstream::loader
