// Copyright (c) cqlstream authors.
//
// Encrypted client keys and secure-connect bundles against the secure node
// (scripts/cassandra up --profile secure; scripts/test passes
// CQLSTREAM_TEST_SECURE_HOST / _CERTS / _USER / _PASSWORD). Everything goes
// through the option kit, as the CLI, Python and DALI do. The SNI-proxy path
// is tested from Python (tests/python/test_secure_bundle.py), which runs the
// test's SNI-routing proxy.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include "loader/option_kit.h"
#include "net/secure_bundle_test_util.h"
#include "net/session.h"
#include "secure_fixture.h"
#include "test_env.h"

namespace cqlstream {
namespace {

using testing::Env;

std::string WriteBundleFile(const std::string& name, const std::string& data) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
  ::chmod(path.c_str(), 0600);
  return path;
}

// `key_pem` re-encrypted (PKCS#8, AES-256-CBC) with `passphrase`; "" on failure.
std::string EncryptKey(const std::string& key_pem, const std::string& passphrase) {
  std::unique_ptr<BIO, decltype(&BIO_free)> in(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())),
                                               &BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(PEM_read_bio_PrivateKey(in.get(), nullptr, nullptr, nullptr),
                                                          &EVP_PKEY_free);
  if (!key) return "";
  std::unique_ptr<BIO, decltype(&BIO_free)> out(BIO_new(BIO_s_mem()), &BIO_free);
  if (PEM_write_bio_PKCS8PrivateKey(out.get(), key.get(), EVP_aes_256_cbc(), passphrase.data(),
                                    static_cast<int>(passphrase.size()), nullptr, nullptr) != 1) {
    return "";
  }
  char* data = nullptr;
  const long n = BIO_get_mem_data(out.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

class SecureBundleTest : public testing::SecureNodeTest {
 protected:
  void SetUp() override {
    SecureNodeTest::SetUp();
    if (HasFatalFailure()) return;
    password_file_ = WriteBundleFile("secure_bundle_pw", Env("CQLSTREAM_TEST_SECURE_PASSWORD", "cassandra") + "\n");
  }

  loader::OptionArgs Credentials() const {
    loader::OptionArgs a;
    a.username = Env("CQLSTREAM_TEST_SECURE_USER", "cassandra");
    a.password_file = password_file_;
    a.connect_timeout_s = 5;
    return a;
  }

  // Resolves `a` as the CLI does and opens a session on it.
  StatusOr<std::shared_ptr<net::Session>> Connect(const loader::OptionArgs& a) const {
    auto r = loader::ResolveOptions(a, loader::OptionSpelling::kFlag);
    if (!r.ok()) return r.status();
    return net::Session::Connect(r->connection);
  }

  std::string DirectBundle(const std::string& config) const {
    return WriteBundleFile("direct_bundle.zip", net::testing::MakeBundle(config, Read("ca.crt"), Read("client.crt"),
                                                                   Read("client.key")));
  }
  std::string Read(const std::string& name) const { return net::testing::ReadFileOrEmpty(certs_ + "/" + name); }

  std::string password_file_;
};

TEST_F(SecureBundleTest, EncryptedClientKeyWithItsPassphrase) {
  const std::string encrypted = EncryptKey(Read("client.key"), "correct horse battery");
  ASSERT_NE(encrypted.find("ENCRYPTED PRIVATE KEY"), std::string::npos);
  const std::string key = WriteBundleFile("client.enc.key", encrypted);
  loader::OptionArgs a = Credentials();
  a.hosts = std::vector<std::string>{host_};
  a.tls_ca = certs_ + "/ca.crt";
  a.tls_cert = certs_ + "/client.crt";
  a.tls_key = key;
  a.tls_key_passphrase_file = WriteBundleFile("key_pass", "correct horse battery\n");
  auto s = Connect(a);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto rows = (*s)->Query("SELECT release_version FROM system.local");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(rows->rows()->row_count(), 1);
  (*s)->Close();

  // A wrong passphrase: a TLS error naming the key file, not the passphrase.
  a.tls_key_passphrase_file = WriteBundleFile("key_pass_wrong", "wrong-xyzzy\n");
  s = Connect(a);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Status::Code::kTlsError) << s.status().ToString();
  EXPECT_NE(s.status().message().find("cannot decrypt TLS client key '" + key + "'"), std::string::npos)
      << s.status().ToString();
  EXPECT_EQ(s.status().ToString().find("xyzzy"), std::string::npos) << s.status().ToString();

  // None at all: said so, and no terminal prompt (the test would hang).
  a.tls_key_passphrase_file.reset();
  s = Connect(a);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("is encrypted and no passphrase was given"), std::string::npos)
      << s.status().ToString();
}

TEST_F(SecureBundleTest, DirectEndpointBundle) {
  loader::OptionArgs a = Credentials();
  a.secure_bundle = DirectBundle(fmt::format(R"({{"host": "{}", "cql_port": 9042, "keyspace": "system"}})", host_));
  auto r = loader::ResolveOptions(a, loader::OptionSpelling::kFlag);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->connection.keyspace, "system");
  auto s = net::Session::Connect(r->connection);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto rows = (*s)->Query("SELECT host_id FROM system.local");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(rows->rows()->row_count(), 1);
  (*s)->Close();
}

TEST_F(SecureBundleTest, BundleWithAnotherCaFailsVerification) {
  loader::OptionArgs a = Credentials();
  a.secure_bundle = WriteBundleFile(
      "other_ca_bundle.zip",
      net::testing::MakeBundle(fmt::format(R"({{"host": "{}", "cql_port": 9042}})", host_), Read("other-ca.crt"),
                               Read("client.crt"), Read("client.key")));
  auto s = Connect(a);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Status::Code::kTlsError) << s.status().ToString();
  EXPECT_NE(s.status().message().find("certificate verification failed"), std::string::npos)
      << s.status().ToString();
}

TEST_F(SecureBundleTest, PingWithABundleFromTheCommandLine) {
  const std::string bundle = DirectBundle(fmt::format(R"({{"host": "{}", "cql_port": 9042}})", host_));
  const std::string build = Env("CQLSTREAM_BUILD_DIR", testing::SourceDir() + "/build");
  const std::string cli = Env("CQLSTREAM_CLI", (build.front() == '/' ? "" : testing::SourceDir() + "/") + build +
                                                   "/src/cli/cqlstream");
  const std::string cmd =
      fmt::format("{} ping --count 2 --secure-bundle {} --username {} --password-file {} 2>&1", cli, bundle,
                  Env("CQLSTREAM_TEST_SECURE_USER", "cassandra"), password_file_);
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << cmd << "\n" << out;
  // Combined with --hosts: refused before anything is sent.
  p = ::popen(fmt::format("{} ping --secure-bundle {} --hosts 127.0.0.1 2>&1", cli, bundle).c_str(), "r");
  ASSERT_NE(p, nullptr);
  out.clear();
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  EXPECT_NE(::pclose(p), 0);
  EXPECT_NE(out.find("--secure-bundle cannot be combined with --hosts"), std::string::npos) << out;
}

}  // namespace
}  // namespace cqlstream
