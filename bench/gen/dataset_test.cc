// Copyright (c) cqlstream authors.
#include "gen/dataset.h"

#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "gen/test_tar.h"

namespace cqlstream::gen {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Every regular file under `root`, by relative path.
std::map<std::string, std::string> Tree(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file()) out[fs::relative(e.path(), root).string()] = ReadAll(e.path());
  }
  return out;
}

bool IsJpeg(const std::string& data) {
  tjhandle d = tjInitDecompress();
  int w = 0, h = 0, ss = 0, cs = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  bool ok = tjDecompressHeader3(d, p, data.size(), &w, &h, &ss, &cs) == 0;
  if (ok) {
    std::vector<unsigned char> rgb(static_cast<size_t>(w) * h * 3);
    ok = tjDecompress2(d, p, data.size(), rgb.data(), w, 0, h, TJPF_RGB, 0) == 0;
  }
  tjDestroy(d);
  return ok;
}

DatasetOptions Tiny(const fs::path& out, int threads, bool tar) {
  DatasetOptions o;
  o.out = out.string();
  o.count = 30;
  o.classes = 4;
  o.val_fraction = 0.3;
  o.tar = tar;
  o.shard_size = 7;
  o.manifest = true;
  o.threads = threads;
  o.synth.seed = 5;
  o.synth.mean_bytes = 12'000;
  return o;
}

class DatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / "cqlstream_dataset_test";
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(DatasetTest, FolderIsByteIdenticalAcrossRunsAndThreadCounts) {
  auto a = WriteDataset(Tiny(root_ / "a", 1, false));
  auto b = WriteDataset(Tiny(root_ / "b", 3, false));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  auto ta = Tree(root_ / "a"), tb = Tree(root_ / "b");
  EXPECT_EQ(ta.size(), 31u);  // 30 images + manifest
  EXPECT_EQ(ta, tb);
  EXPECT_GT(a->train, 0u);
  EXPECT_GT(a->val, 0u);
  EXPECT_EQ(a->train + a->val, 30u);

  // The manifest lists every image, in index order, and each decodes.
  std::istringstream manifest(ta.at("manifest.csv"));
  std::string line;
  std::getline(manifest, line);
  EXPECT_EQ(line, "path,label,split");
  int rows = 0;
  while (std::getline(manifest, line)) {
    const size_t c1 = line.find(','), c2 = line.rfind(',');
    const std::string path = line.substr(0, c1), label = line.substr(c1 + 1, c2 - c1 - 1),
                      split = line.substr(c2 + 1);
    EXPECT_EQ(label, std::to_string(rows % 4));
    EXPECT_EQ(path.rfind(split + "/n0000000" + label + "/", 0), 0u) << path;
    ASSERT_TRUE(ta.count(path)) << path;
    EXPECT_TRUE(IsJpeg(ta.at(path))) << path;
    EXPECT_EQ(ta.at(path).size(), a->sizes[static_cast<size_t>(rows)]);
    ++rows;
  }
  EXPECT_EQ(rows, 30);

  auto c = WriteDataset([&] {
    auto o = Tiny(root_ / "c", 2, false);
    o.synth.seed = 6;
    return o;
  }());
  ASSERT_TRUE(c.ok());
  EXPECT_NE(Tree(root_ / "c"), ta);
}

TEST_F(DatasetTest, TarShardsHoldTheSameImages) {
  auto f = WriteDataset(Tiny(root_ / "folder", 2, false));
  auto t1 = WriteDataset(Tiny(root_ / "tar1", 1, true));
  auto t2 = WriteDataset(Tiny(root_ / "tar2", 3, true));
  ASSERT_TRUE(f.ok() && t1.ok() && t2.ok());
  EXPECT_EQ(Tree(root_ / "tar1"), Tree(root_ / "tar2"));
  auto folder = Tree(root_ / "folder");
  int images = 0;
  for (const auto& [name, data] : Tree(root_ / "tar1")) {
    if (name == "manifest.csv") continue;
    auto members = testing::ParseTar(data);
    ASSERT_TRUE(members.ok()) << name << ": " << members.status().ToString();
    ASSERT_EQ(members->size() % 2, 0u);
    EXPECT_LE(members->size(), 2u * 7);
    for (size_t i = 0; i < members->size(); i += 2) {
      const auto& jpg = (*members)[i];
      const auto& cls = (*members)[i + 1];
      const std::string key = jpg.name.substr(0, jpg.name.size() - 4);
      EXPECT_EQ(jpg.name, key + ".jpg");
      EXPECT_EQ(cls.name, key + ".cls");
      // n0000000<label>_<index>: the class member carries the label.
      EXPECT_EQ(cls.data, key.substr(8, 1));
      const std::string split = name.substr(0, name.find('-'));
      const std::string folder_path = split + "/" + key.substr(0, 9) + "/" + jpg.name;
      ASSERT_TRUE(folder.count(folder_path)) << folder_path;
      EXPECT_EQ(jpg.data, folder.at(folder_path));
      ++images;
    }
  }
  EXPECT_EQ(images, 30);
  EXPECT_EQ(t1->shards, (t1->train + 6) / 7 + (t1->val + 6) / 7);
  EXPECT_NE(t1->paths[0].find(".tar/n00000000_00000000.jpg"), std::string::npos);
}

TEST_F(DatasetTest, RejectsBadOptions) {
  auto o = Tiny(root_ / "x", 1, false);
  o.count = 0;
  EXPECT_FALSE(WriteDataset(o).ok());
  o = Tiny(root_ / "x", 1, false);
  o.out = "";
  EXPECT_FALSE(WriteDataset(o).ok());
}

}  // namespace
}  // namespace cqlstream::gen
