// Copyright (c) cqlstream authors.
#include "util/main_guard.h"

#include <gtest/gtest.h>

#include <fstream>
#include <ios>
#include <stdexcept>
#include <string>
#include <thread>

namespace cqlstream {
namespace {

int Guarded(const std::function<int()>& body, std::string* err) {
  ::testing::internal::CaptureStderr();
  const int rc = GuardedMain("prog", body);
  *err = ::testing::internal::GetCapturedStderr();
  return rc;
}

TEST(MainGuard, PassesTheExitCodeThrough) {
  std::string err;
  EXPECT_EQ(Guarded([] { return 0; }, &err), 0);
  EXPECT_EQ(Guarded([] { return 7; }, &err), 7);
  EXPECT_EQ(err, "");
}

TEST(MainGuard, IostreamFailureBecomesExitOne) {
  std::string err;
  const int rc = Guarded(
      [] {
        std::ifstream f;
        f.exceptions(std::ios::failbit | std::ios::badbit);
        f.open("/");  // a directory: what `--selection DIR` did
        std::string line;
        std::getline(f, line);
        return 0;
      },
      &err);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find("prog: error: I/O failure"), std::string::npos) << err;
}

TEST(MainGuard, StoiFailuresBecomeExitOne) {
  std::string err;
  EXPECT_EQ(Guarded([] { return std::stoi("zz", nullptr, 16); }, &err), 1);
  EXPECT_NE(err.find("prog: error: invalid number"), std::string::npos) << err;
  EXPECT_EQ(Guarded([] { return std::stoi("99999999999999999999"); }, &err), 1);
  EXPECT_NE(err.find("prog: error: value out of range"), std::string::npos) << err;
}

TEST(MainGuard, AnyTypeIsCaught) {
  std::string err;
  EXPECT_EQ(Guarded([]() -> int { throw 42; }, &err), 1);
  EXPECT_NE(err.find("prog: error: unknown exception"), std::string::npos) << err;
  EXPECT_EQ(Guarded([]() -> int { throw std::runtime_error("boom"); }, &err), 1);
  EXPECT_NE(err.find("prog: error: boom"), std::string::npos) << err;
}

TEST(MainGuardDeathTest, ExceptionEscapingAThreadExitsOneNotAbort) {
  EXPECT_EXIT(
      {
        GuardedMain("prog", [] {
          std::thread t([] { throw std::runtime_error("worker failed"); });
          t.join();
          return 0;
        });
      },
      ::testing::ExitedWithCode(1), "prog: error: worker failed \\(escaped a thread\\)");
}

}  // namespace
}  // namespace cqlstream
