// Copyright (c) cqlstream authors.
//
// Authentication (PasswordAuthenticator) and TLS against a real node that
// requires both: scripts/cassandra up --profile secure, with the CA and
// certificates made by scripts/make-test-certs (scripts/test starts it and
// passes CQLSTREAM_TEST_SECURE_HOST / _CERTS / _USER / _PASSWORD).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "net/session.h"
#include "secure_fixture.h"
#include "test_env.h"

namespace cqlstream {
namespace {

using testing::Env;

class SecureTest : public testing::SecureNodeTest {
 protected:
  ConnectionOptions Options(const std::string& ca = "ca.crt") const {
    ConnectionOptions o;
    o.hosts = {host_};
    o.username = Env("CQLSTREAM_TEST_SECURE_USER", "cassandra");
    o.password = Secret(Env("CQLSTREAM_TEST_SECURE_PASSWORD", "cassandra"));
    o.tls.emplace();
    o.tls->ca_file = certs_ + "/" + ca;
    o.connect_timeout = std::chrono::milliseconds(5000);
    return o;
  }
};

TEST_F(SecureTest, PasswordAndVerifiedTls) {
  auto s = net::Session::Connect(Options());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto r = (*s)->Query("SELECT release_version FROM system.local");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rows()->row_count(), 1);
  (*s)->Close();
}

TEST_F(SecureTest, ClientCertificateIsAccepted) {
  auto o = Options();
  o.tls->cert_file = certs_ + "/client.crt";
  o.tls->key_file = certs_ + "/client.key";
  auto s = net::Session::Connect(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  (*s)->Close();
}

TEST_F(SecureTest, WrongPasswordIsAnAuthErrorThatDoesNotShowThePassword) {
  auto o = Options();
  o.password = Secret("not-the-password-xyzzy");
  auto s = net::Session::Connect(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Status::Code::kAuthError) << s.status().ToString();
  EXPECT_EQ(s.status().ToString().find("xyzzy"), std::string::npos) << s.status().ToString();
  EXPECT_EQ(o.Describe().find("xyzzy"), std::string::npos);
}

TEST_F(SecureTest, MissingCredentialsAreAnAuthError) {
  auto o = Options();
  o.username.clear();
  o.password = Secret();
  auto s = net::Session::Connect(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Status::Code::kAuthError) << s.status().ToString();
  EXPECT_NE(s.status().message().find("requires authentication"), std::string::npos) << s.status().ToString();
}

TEST_F(SecureTest, AnUnknownCaFailsVerification) {
  auto s = net::Session::Connect(Options("other-ca.crt"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Status::Code::kTlsError) << s.status().ToString();
  EXPECT_NE(s.status().message().find("certificate verification failed"), std::string::npos)
      << s.status().ToString();
}

TEST_F(SecureTest, AHostNameMismatchFailsVerification) {
  auto o = Options();
  o.tls->server_name = "not-this-server.example";
  auto s = net::Session::Connect(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Status::Code::kTlsError) << s.status().ToString();
  EXPECT_NE(s.status().message().find("mismatch"), std::string::npos) << s.status().ToString();
}

TEST_F(SecureTest, SkippingVerificationNeedsTheExplicitOption) {
  auto o = Options("other-ca.crt");
  o.tls->insecure_skip_verify = true;
  auto s = net::Session::Connect(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  (*s)->Close();
}

TEST_F(SecureTest, PlaintextToATlsPortFailsWithoutHanging) {
  auto o = Options();
  o.tls.reset();
  const auto t0 = std::chrono::steady_clock::now();
  auto s = net::Session::Connect(o);
  ASSERT_FALSE(s.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
}

TEST_F(SecureTest, PingFromTheCommandLine) {
  const std::string pw = ::testing::TempDir() + "/cqlstream_pw";
  {
    std::ofstream f(pw);
    f << Env("CQLSTREAM_TEST_SECURE_PASSWORD", "cassandra") << "\n";
  }
  const std::string cli = testing::SourceDir() + "/build/src/cli/cqlstream";
  const std::string base = fmt::format("{} ping --count 2 --hosts {} --tls-ca {}/ca.crt --username {} --password-file {}",
                                       Env("CQLSTREAM_CLI", cli), host_, certs_,
                                       Env("CQLSTREAM_TEST_SECURE_USER", "cassandra"), pw);
  EXPECT_EQ(std::system((base + " > /dev/null 2>&1").c_str()), 0) << base;
  // Wrong CA: a non-zero exit and a message naming the problem.
  FILE* p = ::popen(fmt::format("{} ping --hosts {} --tls-ca {}/other-ca.crt --username cassandra --password-file {} 2>&1",
                                Env("CQLSTREAM_CLI", cli), host_, certs_, pw)
                        .c_str(),
                    "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int rc = ::pclose(p);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("certificate verification failed"), std::string::npos) << out;
}

}  // namespace
}  // namespace cqlstream
