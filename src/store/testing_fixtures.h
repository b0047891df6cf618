// Copyright (c) cqlstream authors.
//
// Test fixtures for the store layer (unit and integration tests only): real
// JPEG and PNG files made with libjpeg-turbo and libpng, a ustar writer for
// WebDataset shards, and a temporary folder that removes itself.
//
// Header-only so that the store library does not ship it. Thread-safety:
// functions are reentrant; a TempDir belongs to one test.
#ifndef CQLSTREAM_STORE_TESTING_FIXTURES_H_
#define CQLSTREAM_STORE_TESTING_FIXTURES_H_

#include <png.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cqlstream::store::testing {

// A w x h RGB JPEG whose pixels depend on `seed`.
inline std::vector<uint8_t> MakeJpeg(int w, int h, uint32_t seed, int quality = 90) {
  std::vector<uint8_t> rgb(static_cast<size_t>(w) * static_cast<size_t>(h) * 3);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : rgb) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
  tjhandle tj = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  tjCompress2(tj, rgb.data(), w, 0, h, TJPF_RGB, &out, &size, TJSAMP_420, quality, 0);
  std::vector<uint8_t> v(out, out + size);
  tjFree(out);
  tjDestroy(tj);
  return v;
}

// JPEGs whose header is broken after its frame header (SOF), made from the
// valid JPEG `jpeg`: cut before the first scan, ended (EOI) before it, and a
// second SOF. Each leaves libjpeg-turbo 2.1's decompressor mid-header.
inline std::vector<std::vector<uint8_t>> CorruptJpegHeaders(const std::vector<uint8_t>& jpeg) {
  size_t sos = 2;
  while (sos + 1 < jpeg.size() && !(jpeg[sos] == 0xFF && jpeg[sos + 1] == 0xDA)) ++sos;
  std::vector<std::vector<uint8_t>> out;
  const std::vector<uint8_t> head(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(sos));
  out.push_back(head);
  out.push_back(head);
  out.back().insert(out.back().end(), {0xFF, 0xD9});
  out.push_back(head);
  out.back().insert(out.back().end(), {0xFF, 0xC0, 0x00, 0x02});
  return out;
}

// A w x h PNG of libpng's simplified-API `format` (PNG_FORMAT_GRAY, _GA,
// _RGB, _RGBA) from raw pixels; empty when libpng refuses them.
inline std::vector<uint8_t> EncodePng(int w, int h, png_uint_32 format, const std::vector<uint8_t>& px) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(w);
  image.height = static_cast<png_uint_32>(h);
  image.format = format;
  png_alloc_size_t size = 0;
  png_image_write_to_memory(&image, nullptr, &size, 0, px.data(), 0, nullptr);
  std::vector<uint8_t> out(size);
  if (png_image_write_to_memory(&image, out.data(), &size, 0, px.data(), 0, nullptr) == 0) size = 0;
  out.resize(size);
  png_image_free(&image);
  return out;
}

// A w x h 8-bit grayscale PNG whose pixels depend on `seed`.
inline std::vector<uint8_t> MakePng(int w, int h, uint32_t seed) {
  std::vector<uint8_t> px(static_cast<size_t>(w) * static_cast<size_t>(h));
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * 7 + seed * 31) ^ (i >> 3));
  return EncodePng(w, h, PNG_FORMAT_GRAY, px);
}

// A WebP (lossless, VP8L) header of w x h followed by filler: enough for the
// header check, not a decodable picture.
inline std::vector<uint8_t> MakeWebpHeader(int w, int h) {
  std::vector<uint8_t> v = {'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8', 'L', 10, 0, 0, 0, 0x2f};
  const uint32_t bits = static_cast<uint32_t>(w - 1) | (static_cast<uint32_t>(h - 1) << 14);
  for (int i = 0; i < 4; ++i) v.push_back(static_cast<uint8_t>(bits >> (8 * i)));
  v.resize(40, 0);
  const uint32_t riff = static_cast<uint32_t>(v.size() - 8);
  for (int i = 0; i < 4; ++i) v[4 + static_cast<size_t>(i)] = static_cast<uint8_t>(riff >> (8 * i));
  return v;
}

inline void WriteFile(const std::filesystem::path& p, std::span<const uint8_t> bytes) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}
inline void WriteFile(const std::filesystem::path& p, std::string_view text) {
  WriteFile(p, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}
inline std::vector<uint8_t> ReadFile(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// A ustar archive in memory.
class TarBuilder {
 public:
  void Add(std::string_view name, std::span<const uint8_t> data) {
    char h[512];
    std::memset(h, 0, sizeof h);
    std::memcpy(h, name.data(), std::min<size_t>(name.size(), 100));
    std::snprintf(h + 100, 8, "%07o", 0644);
    std::snprintf(h + 108, 8, "%07o", 0);
    std::snprintf(h + 116, 8, "%07o", 0);
    std::snprintf(h + 124, 12, "%011llo", static_cast<unsigned long long>(data.size()));
    std::snprintf(h + 136, 12, "%011o", 0);
    h[156] = '0';
    std::memcpy(h + 257, "ustar", 6);
    std::memcpy(h + 263, "00", 2);
    std::memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (char c : h) sum += static_cast<unsigned char>(c);
    std::snprintf(h + 148, 8, "%06o", sum);
    bytes_.insert(bytes_.end(), h, h + 512);
    bytes_.insert(bytes_.end(), data.begin(), data.end());
    bytes_.resize((bytes_.size() + 511) / 512 * 512, 0);
  }
  void Add(std::string_view name, std::string_view text) {
    Add(name, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  }
  std::vector<uint8_t> Finish() const {
    std::vector<uint8_t> out = bytes_;
    out.resize(out.size() + 1024, 0);
    return out;
  }

 private:
  std::vector<uint8_t> bytes_;
};

// A fresh folder under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
 public:
  explicit TempDir(std::string_view tag = "store") {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/cqls_" + std::string(tag) + "_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    path_ = ::mkdtemp(buf.data()) ? std::string(buf.data()) : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::filesystem::path operator/(std::string_view rel) const { return std::filesystem::path(path_) / rel; }

 private:
  std::string path_;
};

}  // namespace cqlstream::store::testing

#endif  // CQLSTREAM_STORE_TESTING_FIXTURES_H_
