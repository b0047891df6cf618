// Copyright (c) cqlstream authors.
//
// Ingest-time preprocessing against the real node (store/preprocess.h):
// `cqlstream ingest --resize-shorter 64 --center-crop 56 --reencode jpeg:90`
// of 20 JPEGs and PNGs of various sizes (and a WebP, skipped with its
// reason); what is read back decodes to 56x56 JPEGs, byte-identical to
// Apply on the source file; the catalog and `cqlstream info` record the
// preprocessing and an ingest with other preprocessing is refused; masks
// with --resize-target get the image's geometry as PNG, without it they are
// stored as they came.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <filesystem>
#include <map>

#include "store/export.h"
#include "store/image_check.h"
#include "store/preprocess.h"
#include "store/testing_fixtures.h"
#include "store_fixture.h"

namespace cqlstream {
namespace {

namespace fs = std::filesystem;
using store::testing::MakeJpeg;
using store::testing::MakePng;
using store::testing::ReadFile;
using store::testing::TempDir;
using store::testing::WriteFile;

class PreprocessTest : public testing::StoreFixture {
 protected:
  static void SetUpTestSuite() { SetUpStore("pp"); }

  // Exports `name` into a fresh folder and returns relative path -> bytes.
  std::map<std::string, std::vector<uint8_t>> Exported(const std::string& name, TempDir* out) {
    store::ExportOptions eo;
    eo.dir = out->path();
    store::ExportReport er;
    Status st = store::Export(S(), Load(name), eo, &er);
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_TRUE(er.problems.empty()) << er.problems.front();
    std::map<std::string, std::vector<uint8_t>> files;
    for (const auto& e : fs::recursive_directory_iterator(out->path())) {
      if (e.is_regular_file()) files[fs::relative(e.path(), out->path()).string()] = ReadFile(e.path());
    }
    return files;
  }
};

TEST_F(PreprocessTest, CliIngestResizesCropsAndReencodes) {
  TempDir src("pp-src");
  // 20 images: JPEGs landscape and portrait, small (enlarged) and large
  // (DCT-scaled), grayscale PNGs.
  std::map<std::string, std::vector<uint8_t>> sources;
  for (int i = 0; i < 20; ++i) {
    const int w = 30 + 47 * i, h = 40 + 31 * ((i * 7) % 20);
    const std::string cls = i % 2 ? "cat" : "dog";
    const std::string name = fmt::format("train/{}/img{:02}.{}", cls, i, i % 4 == 3 ? "png" : "jpg");
    sources[name] = i % 4 == 3 ? MakePng(w, h, static_cast<uint32_t>(i)) : MakeJpeg(w, h, static_cast<uint32_t>(i));
    WriteFile(fs::path(src.path()) / name, sources[name]);
  }
  WriteFile(fs::path(src.path()) / "train/cat/anim.webp", store::testing::MakeWebpHeader(300, 300));

  const std::string flags = "--resize-shorter 64 --center-crop 56 --reencode jpeg:90";
  auto [rc, out] = testing::Sh(fmt::format("{} ingest --dataset ppa {} {} {}", testing::CliPath(), src.path(), flags,
                                           Common()));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("20 samples written"), std::string::npos) << out;
  EXPECT_NE(out.find("preprocess: WebP images cannot be preprocessed"), std::string::npos) << out;

  const std::string canonical = "resize-shorter=64,center-crop=56,reencode=jpeg:90";
  EXPECT_EQ(Load("ppa").preprocess, canonical);
  auto [irc, info] = testing::Sh(fmt::format("{} info ppa {}", testing::CliPath(), Common()));
  ASSERT_EQ(irc, 0) << info;
  EXPECT_NE(info.find("preprocess   " + canonical), std::string::npos) << info;

  // Read back: every sample a 56x56 JPEG, exactly what Apply makes of its
  // source, exported under the stored format's extension (img03.png -> .jpg).
  TempDir exported("pp-export");
  const auto files = Exported("ppa", &exported);
  ASSERT_EQ(files.size(), 20u);
  const store::PreprocessSpec spec = store::PreprocessSpec::Parse(canonical).value();
  tjhandle tj = tjInitDecompress();
  for (const auto& [rel, bytes] : files) {
    EXPECT_EQ(fs::path(rel).extension(), ".jpg") << rel;
    const std::string stem = "train/" + fs::path(rel).parent_path().filename().string() + "/" +
                             fs::path(rel).stem().string();
    const std::string source = sources.count(stem + ".jpg") ? stem + ".jpg" : stem + ".png";
    ASSERT_TRUE(sources.count(source)) << rel;
    int w = 0, h = 0, subsamp = 0, cs = 0;
    ASSERT_EQ(tjDecompressHeader3(tj, bytes.data(), static_cast<unsigned long>(bytes.size()), &w, &h, &subsamp, &cs), 0)
        << rel;
    std::vector<uint8_t> px(static_cast<size_t>(w * h * 3));
    ASSERT_EQ(tjDecompress2(tj, bytes.data(), static_cast<unsigned long>(bytes.size()), px.data(), w, 0, h, TJPF_RGB, 0),
              0)
        << rel;
    EXPECT_EQ(w, 56) << rel;
    EXPECT_EQ(h, 56) << rel;
    auto expect = store::Apply(spec, sources[source]);
    ASSERT_TRUE(expect.ok()) << expect.status().ToString();
    EXPECT_EQ(bytes, expect->bytes) << rel;
  }
  tjDestroy(tj);

  // Another preprocessing (or none) into the same dataset is refused, nothing written.
  for (const std::string other : {"--resize-shorter 32", "", "--resize-shorter 64 --center-crop 56 --reencode png"}) {
    auto [rc2, out2] = testing::Sh(fmt::format("{} ingest --dataset ppa {} {} {}", testing::CliPath(), src.path(),
                                               other, Common()));
    EXPECT_NE(rc2, 0) << other << ": " << out2;
    EXPECT_NE(out2.find("exists with ingest preprocessing '" + canonical + "'"), std::string::npos) << out2;
  }
  EXPECT_EQ(Load("ppa").Count("train"), 20);
  // The same flags again: already complete.
  auto [rc3, out3] = testing::Sh(fmt::format("{} ingest --dataset ppa {} {} {}", testing::CliPath(), src.path(), flags,
                                             Common()));
  EXPECT_EQ(rc3, 0) << out3;
  EXPECT_NE(out3.find("already complete"), std::string::npos) << out3;
}

TEST_F(PreprocessTest, MasksFollowTheImageOnlyWithResizeTarget) {
  TempDir src("pp-masks");
  std::string csv = "path,target\n";
  for (int i = 0; i < 4; ++i) {
    const int w = 80 + 20 * i, h = 60 + 10 * i;
    WriteFile(fs::path(src.path()) / fmt::format("img/{}.jpg", i), MakeJpeg(w, h, static_cast<uint32_t>(i)));
    WriteFile(fs::path(src.path()) / fmt::format("mask/{}.png", i), MakePng(w, h, static_cast<uint32_t>(i + 10)));
    csv += fmt::format("img/{}.jpg,mask/{}.png\n", i, i);
  }
  WriteFile(fs::path(src.path()) / "m.csv", csv);
  for (const bool resize_target : {true, false}) {
    const std::string name = resize_target ? "ppm" : "ppk";
    store::IngestOptions o = Opts(name, {(fs::path(src.path()) / "m.csv").string()});
    o.source.split = "train";
    o.preprocess = resize_target ? "resize-shorter=32,center-crop=30,resize-target" : "resize-shorter=32";
    store::IngestReport rep;
    Status st = store::Ingest(S(), o, &rep);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(rep.written, 4) << rep.FormatSkips();
    EXPECT_EQ(Load(name).preprocess, o.preprocess);
    TempDir exported("pp-mexport");
    const auto files = Exported(name, &exported);
    int masks = 0;
    for (const auto& [rel, bytes] : files) {
      if (rel.find("/mask/") == std::string::npos) continue;
      ++masks;
      store::ImageInfo info;
      ASSERT_EQ(store::CheckImage(bytes, &info), "") << rel;
      EXPECT_EQ(info.format, store::ImageFormat::kPng) << rel;
      const std::vector<uint8_t> original = ReadFile(fs::path(src.path()) / rel.substr(rel.find("mask/")));
      if (resize_target) {
        EXPECT_EQ(info.width, 30) << rel;
        EXPECT_EQ(info.height, 30) << rel;
      } else {
        EXPECT_EQ(bytes, original) << rel;  // stored as it came
      }
    }
    EXPECT_EQ(masks, 4);
  }
}

}  // namespace
}  // namespace cqlstream
