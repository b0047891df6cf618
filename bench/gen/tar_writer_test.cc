// Copyright (c) cqlstream authors.
#include "gen/tar_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gen/test_tar.h"

namespace cqlstream::gen {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(TarWriterTest, HeaderFieldsAndChecksum) {
  auto h = UstarHeader("n00000001_00000007.jpg", 12345, 1700000000);
  ASSERT_TRUE(h.ok());
  const char* p = h->data();
  EXPECT_STREQ(p, "n00000001_00000007.jpg");
  EXPECT_STREQ(p + 100, "0000644");
  EXPECT_STREQ(p + 124, "00000030071");  // 12345 in octal
  EXPECT_EQ(testing::ParseOctal(p + 136, 12), 1700000000u);
  EXPECT_EQ(p[156], '0');
  EXPECT_EQ(std::string(p + 257, 8), std::string("ustar\0" "00", 8));
  unsigned sum = 0;
  for (size_t i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(p[i]);
  EXPECT_EQ(testing::ParseOctal(p + 148, 8), sum);
}

TEST(TarWriterTest, LongNamesUseThePrefixField) {
  const std::string dir(120, 'd');
  const std::string name = dir + "/file.jpg";
  auto h = UstarHeader(name, 1, 0);
  ASSERT_TRUE(h.ok());
  EXPECT_STREQ(h->data(), "file.jpg");
  EXPECT_EQ(std::string(h->data() + 345), dir);
  EXPECT_FALSE(UstarHeader(std::string(101, 'x'), 1, 0).ok());  // no '/' to split at
  EXPECT_FALSE(UstarHeader(std::string(200, 'x') + "/a", 1, 0).ok());
  EXPECT_FALSE(UstarHeader("", 1, 0).ok());
  EXPECT_FALSE(UstarHeader("big", 1ull << 33, 0).ok());  // needs 12 octal digits
}

TEST(TarWriterTest, WritesAReadableArchive) {
  const std::string path = ::testing::TempDir() + "/tar_writer_test.tar";
  auto w = TarWriter::Create(path, 42);
  ASSERT_TRUE(w.ok());
  const std::string jpg(1000, '\xff'), cls = "17", exact(512, 'a');
  ASSERT_TRUE((*w)->Add("k1.jpg", Bytes(jpg)).ok());
  ASSERT_TRUE((*w)->Add("k1.cls", Bytes(cls)).ok());
  ASSERT_TRUE((*w)->Add("k2.bin", Bytes(exact)).ok());
  ASSERT_TRUE((*w)->Add("empty", Bytes(std::string())).ok());
  ASSERT_TRUE((*w)->Finish().ok());
  EXPECT_FALSE((*w)->Add("late", Bytes(cls)).ok());
  const std::string tar = ReadAll(path);
  EXPECT_EQ(tar.size(), (*w)->bytes_written());
  // 4 headers + 1024 (jpg) + 512 (cls) + 512 (exact) + 0 + 2 end blocks.
  EXPECT_EQ(tar.size(), 512u * 4 + 1024 + 512 + 512 + 1024);
  auto members = testing::ParseTar(tar);
  ASSERT_TRUE(members.ok()) << members.status().ToString();
  ASSERT_EQ(members->size(), 4u);
  EXPECT_EQ((*members)[0].name, "k1.jpg");
  EXPECT_EQ((*members)[0].data, jpg);
  EXPECT_EQ((*members)[0].mtime, 42u);
  EXPECT_EQ((*members)[1].name, "k1.cls");
  EXPECT_EQ((*members)[1].data, cls);
  EXPECT_EQ((*members)[2].data, exact);
  EXPECT_EQ((*members)[3].data, "");
  std::filesystem::remove(path);
}

TEST(TarWriterTest, ReportsUnwritablePaths) {
  EXPECT_FALSE(TarWriter::Create("/nonexistent-dir/x.tar").ok());
}

}  // namespace
}  // namespace cqlstream::gen
