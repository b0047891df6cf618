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
  ForeignKeyCache c({{3, 4}, {7, 2}}, 1 << 24);
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
  // Dense tables of 4 and 2 entries and one arena block.
  EXPECT_EQ(c.bytes(), 6 * 8 + static_cast<int64_t>(ForeignKeyCache::kBlockBytes));
}

TEST(ForeignKeyCacheTest, SecondAddOfASampleKeepsTheFirstKey) {
  ForeignKeyCache c({{0, 2}}, 1 << 24);
  ASSERT_TRUE(c.Add(MakeKey(0, 1), Bytes("first")));
  EXPECT_TRUE(c.Add(MakeKey(0, 1), Bytes("second")));
  std::string out;
  ASSERT_TRUE(c.Find(MakeKey(0, 1), &out));
  EXPECT_EQ(out, "first");
  EXPECT_EQ(c.keys(), 1);
}

TEST(ForeignKeyCacheTest, RefusesWhatNoSegmentHoldsAndEmptyKeys) {
  ForeignKeyCache c({{1, 3}}, 1 << 24);
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
  constexpr int64_t kBlock = static_cast<int64_t>(ForeignKeyCache::kBlockBytes);
  // One segment of 10 samples (an 80-byte dense table) and one block: two
  // keys of half a block fill it, the third would need a second block.
  ForeignKeyCache c({{0, 10}}, kBlock + 80);
  const std::string half(ForeignKeyCache::kBlockBytes / 2, 'k');
  for (int i = 0; i < 10; ++i) c.Add(MakeKey(0, i), Bytes(half));
  EXPECT_EQ(c.keys(), 2);
  EXPECT_EQ(c.rejected(), 8);
  EXPECT_EQ(c.bytes(), kBlock + 80);
  std::string out;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(c.Find(MakeKey(0, i), &out)) << i;
    EXPECT_EQ(out, half);
  }
  for (int i = 2; i < 10; ++i) EXPECT_FALSE(c.Find(MakeKey(0, i), &out)) << i;
  // A key of a block or more is never kept.
  ForeignKeyCache big({{0, 1}}, 1 << 30);
  EXPECT_FALSE(big.Add(MakeKey(0, 0), Bytes(std::string(ForeignKeyCache::kBlockBytes, 'x'))));
  EXPECT_EQ(big.rejected(), 0);
}

TEST(ForeignKeyCacheTest, ALargeSegmentFillsTheBudgetKeyByKey) {
  constexpr int64_t kBlock = static_cast<int64_t>(ForeignKeyCache::kBlockBytes);
  // 10 million samples: a dense table (80 MB) would not fit in the budget,
  // so entries are kept one by one, kSparseEntryBytes each.
  ForeignKeyCache c({{4, 10'000'000}}, kBlock + 3 * ForeignKeyCache::kSparseEntryBytes);
  for (int i = 0; i < 5; ++i) c.Add(MakeKey(4, 9'000'000 + i), Bytes("key-" + std::to_string(i)));
  EXPECT_EQ(c.keys(), 3);
  EXPECT_EQ(c.rejected(), 2);
  EXPECT_EQ(c.bytes(), kBlock + 3 * ForeignKeyCache::kSparseEntryBytes);
  std::string out;
  ASSERT_TRUE(c.Find(MakeKey(4, 9'000'002), &out));
  EXPECT_EQ(out, "key-2");
  EXPECT_TRUE(c.Has(MakeKey(4, 9'000'000)));
  EXPECT_FALSE(c.Has(MakeKey(4, 9'000'003)));
  EXPECT_FALSE(c.Has(MakeKey(4, 10'000'000)));  // idx == count
}

TEST(ForeignKeyCacheTest, KeysSpanManyBlocks) {
  // 3,000 keys of 1,000 bytes: three blocks; each key comes back whole
  // (none straddles two blocks).
  ForeignKeyCache c({{1, 3000}}, int64_t{1} << 30);
  for (int i = 0; i < 3000; ++i) {
    std::string k(1000, static_cast<char>('a' + i % 26));
    k.replace(0, std::to_string(i).size(), std::to_string(i));
    ASSERT_TRUE(c.Add(MakeKey(1, i), Bytes(k)));
  }
  EXPECT_EQ(c.bytes(), 3000 * 8 + 3 * static_cast<int64_t>(ForeignKeyCache::kBlockBytes));
  std::string out;
  for (int i = 0; i < 3000; ++i) {
    std::string k(1000, static_cast<char>('a' + i % 26));
    k.replace(0, std::to_string(i).size(), std::to_string(i));
    ASSERT_TRUE(c.Find(MakeKey(1, i), &out));
    ASSERT_EQ(out, k) << i;
  }
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
