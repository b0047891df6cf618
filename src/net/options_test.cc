// Copyright (c) cqlstream authors.
#include "cqlstream/options.h"

#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

namespace cqlstream {
namespace {

// A fresh directory under the system temp dir, removed at the end.
class PasswordFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = std::string(::testing::TempDir()) + "options_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }
  std::string Write(const std::string& name, const std::string& content, mode_t mode) {
    const std::string p = dir_ + "/" + name;
    std::ofstream(p, std::ios::binary) << content;
    EXPECT_EQ(::chmod(p.c_str(), mode), 0);
    return p;
  }
  std::string dir_;
};

TEST_F(PasswordFileTest, ReadsTheFirstLine) {
  ConnectionOptions o;
  ASSERT_TRUE(o.LoadPasswordFile(Write("pw", "s3cret\r\nsecond line\n", 0600)).ok());
  EXPECT_EQ(o.password.reveal(), "s3cret");
}

TEST_F(PasswordFileTest, RefusesDevZeroWithoutReadingIt) {
  ConnectionOptions o;
  const Status s = o.LoadPasswordFile("/dev/zero");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not a regular file"), std::string::npos) << s.ToString();
  EXPECT_TRUE(o.password.empty());
}

TEST_F(PasswordFileTest, RefusesADirectoryAndAFifoWithoutBlocking) {
  ConnectionOptions o;
  Status s = o.LoadPasswordFile(dir_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("a directory"), std::string::npos) << s.ToString();

  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto t0 = std::chrono::steady_clock::now();
  s = o.LoadPasswordFile(fifo);  // no writer: a blocking open would hang here
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("a FIFO"), std::string::npos) << s.ToString();
}

TEST_F(PasswordFileTest, RefusesAFileLargerThanTheBound) {
  ConnectionOptions o;
  const Status s = o.LoadPasswordFile(Write("big", std::string(kMaxPasswordFileBytes + 1, 'x'), 0600));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("at most 4096"), std::string::npos) << s.ToString();
  // Exactly the bound is fine.
  EXPECT_TRUE(o.LoadPasswordFile(Write("edge", std::string(kMaxPasswordFileBytes, 'y'), 0600)).ok());
  EXPECT_EQ(o.password.reveal().size(), kMaxPasswordFileBytes);
}

TEST_F(PasswordFileTest, NeverEchoesTheArgument) {
  // A user who pastes the password where the file name belongs.
  ConnectionOptions o;
  const std::string pasted = "Tr0ub4dor&3-not-a-file";
  const Status s = o.LoadPasswordFile(pasted, "--password-file");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.ToString().find(pasted), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("--password-file"), std::string::npos) << s.ToString();
  EXPECT_EQ(o.Describe().find(pasted), std::string::npos);
}

TEST_F(PasswordFileTest, WarnsOnAGroupOrWorldReadableFile) {
  ConnectionOptions o;
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(o.LoadPasswordFile(Write("open", "pw\n", 0644)).ok());
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("readable by every user"), std::string::npos) << err;
  EXPECT_EQ(err.find("pw\n"), std::string::npos);

  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(o.LoadPasswordFile(Write("group", "pw\n", 0640)).ok());
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("readable by its group"), std::string::npos) << err;

  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(o.LoadPasswordFile(Write("private", "pw\n", 0600)).ok());
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST_F(PasswordFileTest, LoadingAPasswordMakesTheProcessNonDumpable) {
  ASSERT_EQ(::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), 0);
  ASSERT_EQ(::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), 1);
  ConnectionOptions o;
  ASSERT_TRUE(o.LoadPasswordFile(Write("pw", "pw\n", 0600)).ok());
  EXPECT_EQ(::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), 0);
}

TEST_F(PasswordFileTest, PasswordFromTheEnvironmentMakesTheProcessNonDumpable) {
  ASSERT_EQ(::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), 0);
  ASSERT_EQ(::setenv("CQLSTREAM_PASSWORD", "from-env", 1), 0);
  ConnectionOptions o;
  const Status s = o.ApplyEnvironment();
  ::unsetenv("CQLSTREAM_PASSWORD");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(o.password.reveal(), "from-env");
  EXPECT_EQ(::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), 0);
}

TEST(SecretTest, ClearZeroesTheBytesItHeld) {
  Secret s(std::string(64, 'k'));  // beyond the small-string buffer: heap memory
  const char* p = s.reveal().data();
  s.Clear();
  EXPECT_TRUE(s.empty());
  // The capacity is kept, so the old buffer is still this string's memory.
  ASSERT_EQ(s.reveal().data(), p);
  for (int i = 0; i < 64; ++i) ASSERT_EQ(p[i], '\0') << "byte " << i;
}

TEST(SecretTest, MovesLeaveNothingBehindAndCopiesAreIndependent) {
  Secret a(std::string(40, 'a'));
  Secret b(std::move(a));
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): the contract under test
  EXPECT_EQ(b.reveal(), std::string(40, 'a'));
  Secret c;
  c = std::move(b);
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move)
  Secret d(c);
  c.Clear();
  EXPECT_EQ(d.reveal(), std::string(40, 'a'));
  d = Secret("x", 1);
  EXPECT_EQ(d.reveal(), "x");
}

TEST(SecretTest, InsecureTlsWarningNamesTheOption) {
  const std::string w = InsecureTlsWarning("tls_insecure_skip_verify");
  EXPECT_NE(w.find("DISABLED (tls_insecure_skip_verify)"), std::string::npos);
}

TEST(ConnectionOptionsTest, MaxShardConnectionsIsInRange) {
  ConnectionOptions o;
  EXPECT_EQ(o.max_shard_connections, 256);
  for (int n : {1, 256, 65535}) {
    o.max_shard_connections = n;
    EXPECT_TRUE(o.Validate().ok()) << n;
  }
  for (int n : {0, -1, 65536}) {
    o.max_shard_connections = n;
    const Status st = o.Validate();
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << n;
    EXPECT_NE(st.ToString().find("max shard connections must be in 1..65535"), std::string::npos) << st.ToString();
  }
}

}  // namespace
}  // namespace cqlstream
