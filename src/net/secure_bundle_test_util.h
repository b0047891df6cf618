// Copyright (c) cqlstream authors.
//
// Test helper: writes zip files (secure-connect bundles) in memory with
// libarchive, and the config.json of a bundle. For unit, integration and
// fuzz-corpus use only.
//
// Thread-safety: free functions.
#ifndef CQLSTREAM_NET_SECURE_BUNDLE_TEST_UTIL_H_
#define CQLSTREAM_NET_SECURE_BUNDLE_TEST_UTIL_H_

#include <archive.h>
#include <archive_entry.h>

#include <ctime>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace cqlstream::net::testing {

// A zip of the (name, bytes) entries, in order; "" when libarchive fails.
inline std::string MakeZip(const std::vector<std::pair<std::string, std::string>>& entries) {
  size_t total = 4096;
  for (const auto& [name, data] : entries) total += name.size() * 3 + data.size() + 512;
  std::string out(total, '\0');
  size_t used = 0;
  archive* a = archive_write_new();
  bool ok = archive_write_set_format_zip(a) == ARCHIVE_OK &&
            archive_write_open_memory(a, out.data(), out.size(), &used) == ARCHIVE_OK;
  for (const auto& [name, data] : entries) {
    if (!ok) break;
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0600);
    archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
    archive_entry_set_mtime(e, 1700000000, 0);
    ok = archive_write_header(a, e) == ARCHIVE_OK &&
         archive_write_data(a, data.data(), data.size()) == static_cast<la_ssize_t>(data.size());
    archive_entry_free(e);
  }
  ok = archive_write_close(a) == ARCHIVE_OK && ok;
  archive_write_free(a);
  if (!ok) return "";
  out.resize(used);
  return out;
}

inline std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A bundle of config.json and the three PEMs under their default names.
inline std::string MakeBundle(const std::string& config_json, const std::string& ca_pem,
                              const std::string& cert_pem, const std::string& key_pem) {
  return MakeZip({{"config.json", config_json}, {"ca.crt", ca_pem}, {"cert", cert_pem}, {"key", key_pem}});
}

}  // namespace cqlstream::net::testing

#endif  // CQLSTREAM_NET_SECURE_BUNDLE_TEST_UTIL_H_
