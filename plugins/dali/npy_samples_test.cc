// Copyright (c) cqlstream authors.
#include "npy_samples.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace cqlstream::dali_plugin {
namespace {

// A .npy file as numpy.lib.format writes it (format 1.0).
std::string Npy(const std::string& descr, const std::string& shape, const std::string& data, bool fortran = false) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                       ", 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

struct VectorBatch final : Batch {
  std::vector<uint8_t> bytes;
  std::span<const uint8_t> data() const override { return bytes; }
  void Add(const std::string& b, const std::string& target = "") {
    offsets.push_back(bytes.size());
    sizes.push_back(b.size() + target.size());
    image_sizes.push_back(b.size());
    labels.push_back(-1);
    keys.push_back(MakeKey(5, static_cast<int32_t>(keys.size())));
    bytes.insert(bytes.end(), b.begin(), b.end());
    bytes.insert(bytes.end(), target.begin(), target.end());
  }
};

std::vector<SampleRef> Refs(const std::shared_ptr<VectorBatch>& b) {
  std::vector<SampleRef> r;
  for (size_t i = 0; i < b->size(); ++i) r.push_back(SampleRef{b, i, false});
  return r;
}

TEST(NpySamplesTest, ParsesDataAndTargetsWithDifferentShapes) {
  auto b = std::make_shared<VectorBatch>();
  b->Add(Npy("<f4", "(2,)", std::string("\0\0\x80\x3f\0\0\0\x40", 8)), Npy("|u1", "(1, 2)", std::string("\x01\x00", 2)));
  b->Add(Npy(">f4", "(1,)", std::string("\x40\x40\0\0", 4)), Npy("|u1", "(1, 1)", "\x01"));
  auto s = ParseNpySamples(Refs(b), true, true);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->data.size(), 2u);
  ASSERT_EQ(s->target.size(), 2u);
  EXPECT_EQ(s->data[1].shape, (std::vector<uint64_t>{1}));
  float f = 0;
  std::memcpy(&f, s->data[1].data().data(), 4);
  EXPECT_EQ(f, 3.0f);  // big-endian swapped
  EXPECT_EQ(s->target[0].shape, (std::vector<uint64_t>{1, 2}));
  // Targets only: the data bytes need not be .npy.
  auto t = std::make_shared<VectorBatch>();
  t->Add("\xff\xd8 a JPEG", Npy("|u1", "(1,)", "\x02"));
  auto only = ParseNpySamples(Refs(t), false, true);
  ASSERT_TRUE(only.ok()) << only.status().ToString();
  EXPECT_TRUE(only->data.empty());
  EXPECT_EQ(only->target.size(), 1u);
}

TEST(NpySamplesTest, RefusesWhatOneDaliOutputCannotHoldNamingTheSample) {
  const std::string ok = Npy("<i4", "(1,)", std::string(4, '\0'));
  auto expect = [&](const std::string& second, const std::string& want) {
    auto b = std::make_shared<VectorBatch>();
    b->Add(ok);
    b->Add(second);
    auto s = ParseNpySamples(Refs(b), true, false);
    ASSERT_FALSE(s.ok()) << want;
    EXPECT_EQ(s.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(s.status().message().find("sample 5:1 (position 1 in the batch)"), std::string::npos)
        << s.status().ToString();
    EXPECT_NE(s.status().message().find(want), std::string::npos) << s.status().ToString();
  };
  expect("plain bytes", "not a valid .npy array");
  expect(Npy("<i8", "(1,)", std::string(8, '\0')), "must share dtype and number of dimensions");
  expect(Npy("<i4", "(1, 1)", std::string(4, '\0')), "must share dtype and number of dimensions");
  expect(Npy("<c8", "(1,)", std::string(8, '\0')), "no complex type");
  expect(Npy("<i4", "(1, 1)", std::string(4, '\0'), true), "Fortran");
  // Different shapes of one ndim are fine.
  auto b = std::make_shared<VectorBatch>();
  b->Add(ok);
  b->Add(Npy("<i4", "(3,)", std::string(12, '\0')));
  EXPECT_TRUE(ParseNpySamples(Refs(b), true, false).ok());
}

}  // namespace
}  // namespace cqlstream::dali_plugin
