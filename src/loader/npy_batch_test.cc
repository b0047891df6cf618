// Copyright (c) cqlstream authors.
#include "loader/npy_batch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace cqlstream::loader {
namespace {

// A .npy file as numpy.lib.format writes it (format 1.0, data at a multiple of 64).
std::vector<uint8_t> Npy(const std::string& descr, const std::string& shape, const std::string& data) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header + data;
  return {out.begin(), out.end()};
}

template <typename T>
std::string Items(const std::vector<T>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)};
}

// A batch over a plain vector; Add(sample, target) appends one sample.
struct VectorBatch final : Batch {
  std::vector<uint8_t> bytes;
  std::span<const uint8_t> data() const override { return bytes; }
  void Add(const std::vector<uint8_t>& b, const std::vector<uint8_t>& target = {}) {
    offsets.push_back(bytes.size());
    sizes.push_back(b.size() + target.size());
    image_sizes.push_back(b.size());
    labels.push_back(-1);
    keys.push_back(MakeKey(3, static_cast<int32_t>(keys.size())));
    bytes.insert(bytes.end(), b.begin(), b.end());
    bytes.insert(bytes.end(), target.begin(), target.end());
  }
};

// Owns what DecodeNpyBatch allocates.
struct Decoded {
  NpyBatchLayout layout;
  uint8_t* buffer = nullptr;
  int64_t skipped = 0;
  ~Decoded() { std::free(buffer); }
  Status Run(const Batch& b, NpyTargets targets, bool skip_bad) {
    DecodePool pool(3);
    return DecodeNpyBatch(
        pool, b, targets, skip_bad,
        [](size_t n) { return static_cast<uint8_t*>(std::aligned_alloc(kNpyAlign, (n + 63) / 64 * 64 + 64)); },
        &layout, &buffer, &skipped);
  }
  template <typename T>
  std::vector<T> At(const NpyItem& it) const {
    std::vector<T> v(it.bytes / sizeof(T));
    std::memcpy(v.data(), buffer + it.offset, it.bytes);
    return v;
  }
};

TEST(NpyBatchTest, SameDtypeAndShapeStackBackToBack) {
  VectorBatch b;
  for (int i = 0; i < 5; ++i) {
    b.Add(Npy("<f4", "(2, 3)", Items(std::vector<float>{1.f * i, 2, 3, 4, 5, 6.5f})));
  }
  Decoded d;
  ASSERT_TRUE(d.Run(b, NpyTargets::kNone, false).ok());
  EXPECT_TRUE(d.layout.stacked);
  ASSERT_EQ(d.layout.arrays.size(), 5u);
  EXPECT_TRUE(d.layout.targets.empty());
  EXPECT_EQ(d.layout.total_bytes, 5u * 24);
  for (size_t i = 0; i < 5; ++i) {
    const NpyItem& it = d.layout.arrays[i];
    EXPECT_EQ(it.dtype, NpyDtype::kFloat32);
    EXPECT_EQ(it.shape, (std::vector<uint64_t>{2, 3}));
    EXPECT_EQ(it.offset, i * 24);
    EXPECT_EQ(d.At<float>(it), (std::vector<float>{1.f * static_cast<float>(i), 2, 3, 4, 5, 6.5f}));
  }
}

TEST(NpyBatchTest, MixedShapesAreAlignedAndBigEndianIsSwapped) {
  VectorBatch b;
  b.Add(Npy("<i8", "(3,)", Items(std::vector<int64_t>{1, -2, 3})));
  // >i2 [258, -1]
  b.Add(Npy(">i2", "(2,)", std::string("\x01\x02\xff\xff", 4)));
  b.Add(Npy("|u1", "()", "\x07"));
  Decoded d;
  ASSERT_TRUE(d.Run(b, NpyTargets::kNone, false).ok());
  EXPECT_FALSE(d.layout.stacked);
  ASSERT_EQ(d.layout.arrays.size(), 3u);
  for (const NpyItem& it : d.layout.arrays) EXPECT_EQ(it.offset % kNpyAlign, 0u);
  EXPECT_EQ(d.At<int64_t>(d.layout.arrays[0]), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(d.At<int16_t>(d.layout.arrays[1]), (std::vector<int16_t>{258, -1}));
  EXPECT_TRUE(d.layout.arrays[2].shape.empty());
  EXPECT_EQ(d.At<uint8_t>(d.layout.arrays[2]), (std::vector<uint8_t>{7}));
}

TEST(NpyBatchTest, TargetsAsBytesOrAsNpy) {
  VectorBatch b;
  const auto mask = Npy("|u1", "(2, 2)", std::string("\x00\x01\x01\x00", 4));
  b.Add(Npy("<f4", "(1,)", Items(std::vector<float>{0.5f})), mask);
  b.Add(Npy("<f4", "(1,)", Items(std::vector<float>{1.5f})), mask);
  Decoded raw;
  ASSERT_TRUE(raw.Run(b, NpyTargets::kBytes, false).ok());
  EXPECT_TRUE(raw.layout.stacked);
  ASSERT_EQ(raw.layout.targets.size(), 2u);
  EXPECT_EQ(raw.layout.targets[1].shape, (std::vector<uint64_t>{mask.size()}));
  EXPECT_EQ(raw.At<uint8_t>(raw.layout.targets[1]), mask);
  Decoded npy;
  ASSERT_TRUE(npy.Run(b, NpyTargets::kNpy, false).ok());
  ASSERT_EQ(npy.layout.targets.size(), 2u);
  EXPECT_EQ(npy.layout.targets[0].dtype, NpyDtype::kUInt8);
  EXPECT_EQ(npy.layout.targets[0].shape, (std::vector<uint64_t>{2, 2}));
  EXPECT_EQ(npy.layout.targets[0].offset % kNpyAlign, 0u);
  EXPECT_EQ(npy.At<uint8_t>(npy.layout.targets[0]), (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_EQ(npy.At<float>(npy.layout.arrays[1]), (std::vector<float>{1.5f}));
}

TEST(NpyBatchTest, BadSampleIsNamedOrSkipped) {
  VectorBatch b;
  const auto mask = Npy("|u1", "(1,)", "\x01");
  b.Add(Npy("<i4", "(1,)", Items(std::vector<int32_t>{1})), mask);
  b.Add({'n', 'o', 't', ' ', 'n', 'p', 'y'}, mask);
  b.Add(Npy("<i4", "(1,)", Items(std::vector<int32_t>{3})), {'b', 'a', 'd'});
  Decoded raise;
  Status s = raise.Run(b, NpyTargets::kNone, false);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("sample 3:1: not a valid .npy array"), std::string::npos) << s.ToString();
  EXPECT_EQ(raise.buffer, nullptr);  // nothing allocated

  Decoded skip;
  ASSERT_TRUE(skip.Run(b, NpyTargets::kNone, true).ok());
  EXPECT_EQ(skip.skipped, 1);
  EXPECT_EQ(skip.layout.kept, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(skip.At<int32_t>(skip.layout.arrays[1]), (std::vector<int32_t>{3}));

  Decoded target;
  s = target.Run(b, NpyTargets::kNpy, true);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(target.skipped, 2);  // 3:1 (its data) and 3:2 (its target)
  EXPECT_EQ(target.layout.kept, (std::vector<size_t>{0}));
  Decoded target_raise;
  s = target_raise.Run(b, NpyTargets::kNpy, false);
  EXPECT_NE(s.message().find("sample 3:1:"), std::string::npos) << s.ToString();
}

TEST(NpyBatchTest, EmptyBatchAndEmptyArrays) {
  VectorBatch empty;
  Decoded d;
  ASSERT_TRUE(d.Run(empty, NpyTargets::kNone, false).ok());
  EXPECT_TRUE(d.layout.arrays.empty());
  EXPECT_EQ(d.layout.total_bytes, 0u);
  VectorBatch zero;
  zero.Add(Npy("<f8", "(0, 4)", ""));
  Decoded z;
  ASSERT_TRUE(z.Run(zero, NpyTargets::kNone, false).ok());
  EXPECT_EQ(z.layout.arrays[0].bytes, 0u);
  EXPECT_EQ(z.layout.arrays[0].shape, (std::vector<uint64_t>{0, 4}));
}

}  // namespace
}  // namespace cqlstream::loader
