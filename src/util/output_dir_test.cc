// Copyright (c) cqlstream authors.
#include "util/output_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace cqlstream {
namespace {

namespace fs = std::filesystem;

class OutputDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "cqls_outdir_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }
  static std::string Read(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  static void Write(const fs::path& p, const std::string& s) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << s;
  }
  fs::path root_;
};

TEST_F(OutputDirTest, CreatesFoldersAndAppends) {
  auto d = OutputDir::Open((root_ / "new/out").string(), false);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  auto c = (*d)->CreateExclusive("a/b/c.bin");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(*c);
  const uint8_t bytes[] = {'x', 'y'};
  ASSERT_TRUE((*d)->Append("a/b/c.bin", bytes, 2).ok());
  ASSERT_TRUE((*d)->Append("a/b/c.bin", bytes, 1).ok());
  EXPECT_EQ(Read(root_ / "new/out/a/b/c.bin"), "xyx");
  auto again = (*d)->CreateExclusive("a/b/c.bin");
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);  // taken: nothing changed
  EXPECT_EQ(Read(root_ / "new/out/a/b/c.bin"), "xyx");
  ASSERT_TRUE((*d)->Remove("a/b/c.bin").ok());
  EXPECT_FALSE(fs::exists(root_ / "new/out/a/b/c.bin"));
}

TEST_F(OutputDirTest, RefusesANonEmptyFolderUnlessAllowed) {
  Write(root_ / "old.txt", "old");
  auto d = OutputDir::Open(root_.string(), false);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("not empty"), std::string::npos) << d.status().ToString();
  auto forced = OutputDir::Open(root_.string(), true);
  ASSERT_TRUE(forced.ok());
  auto c = (*forced)->CreateExclusive("old.txt");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(*c);
  EXPECT_EQ(Read(root_ / "old.txt"), "old");
}

TEST_F(OutputDirTest, NeverFollowsLinks) {
  const fs::path outside = root_ / "outside";
  Write(outside / "victim", "precious");
  fs::create_directories(root_ / "out");
  fs::create_symlink(outside, root_ / "out/dir");
  fs::create_symlink(outside / "victim", root_ / "out/file");
  auto d = OutputDir::Open((root_ / "out").string(), true);
  ASSERT_TRUE(d.ok());
  auto through_dir = (*d)->CreateExclusive("dir/new");
  ASSERT_FALSE(through_dir.ok());
  EXPECT_NE(through_dir.status().message().find("symbolic link"), std::string::npos)
      << through_dir.status().ToString();
  EXPECT_FALSE(fs::exists(outside / "new"));
  auto file = (*d)->CreateExclusive("file");
  ASSERT_TRUE(file.ok());
  EXPECT_FALSE(*file);  // the link's name is taken; the target is not touched
  const uint8_t b[] = {'!'};
  EXPECT_FALSE((*d)->Append("file", b, 1).ok());  // O_NOFOLLOW
  EXPECT_EQ(Read(outside / "victim"), "precious");
}

TEST_F(OutputDirTest, RefusesUnsafeNames) {
  auto d = OutputDir::Open(root_.string(), true);
  ASSERT_TRUE(d.ok());
  for (const char* bad : {"", "/etc/x", "../x", "a/../x", "a/./x", "a//x", "a/"}) {
    auto c = (*d)->CreateExclusive(bad);
    EXPECT_FALSE(c.ok()) << bad;
    if (!c.ok()) {
      EXPECT_EQ(c.status().code(), Status::Code::kInvalidArgument) << bad;
    }
  }
}

}  // namespace
}  // namespace cqlstream
