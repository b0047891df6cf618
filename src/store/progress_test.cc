// Copyright (c) cqlstream authors.
#include "store/progress.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace cqlstream::store {
namespace {

TEST(ProgressTest, Thousands) {
  EXPECT_EQ(Thousands(0), "0");
  EXPECT_EQ(Thousands(999), "999");
  EXPECT_EQ(Thousands(1000), "1,000");
  EXPECT_EQ(Thousands(70000), "70,000");
  EXPECT_EQ(Thousands(-1234567), "-1,234,567");
}

TEST(ProgressTest, LineShowsRatesAndEta) {
  const std::string s = ProgressLine::Format("ingest", 5000, 10000, 50000000, 100000000, 10.0, "[train]");
  EXPECT_EQ(s, "ingest: 5,000/10,000 items  50.0 MB  500 items/s  5.0 MB/s  ETA 10s  [train]");
  EXPECT_NE(ProgressLine::Format("", 10, 10, 0, 0, 1.0, "").find("ETA 0s"), std::string::npos);
  EXPECT_NE(ProgressLine::Format("", 0, 10, 0, 0, 0.0, "").find("ETA ?"), std::string::npos);
  EXPECT_NE(ProgressLine::Format("x", 1, 7201, 0, 0, 1.0, "").find("ETA 2h00m"), std::string::npos);
}

TEST(ProgressTest, PlainOutputIsThrottledToTenSeconds) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  ProgressLine line(f, /*tty=*/false, "verify");
  for (int i = 0; i < 100; ++i) line.Update(i, 100, 0, 0, "");
  line.Update(100, 100, 0, 0, "", /*force=*/true);
  line.Finish();
  std::fclose(f);
  const std::string out(buf, len);
  std::free(buf);
  EXPECT_EQ(out, "verify: 100/100 items  0.0 MB  " + out.substr(out.find("MB  ") + 4));
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1);
  EXPECT_EQ(out.find('\r'), std::string::npos);
}

TEST(ProgressTest, TerminalOutputRewritesOneLine) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  ProgressLine line(f, /*tty=*/true, "x");
  line.Update(1, 2, 0, 0, "", true);
  line.Update(2, 2, 0, 0, "", true);
  line.Finish();
  std::fclose(f);
  const std::string out(buf, len);
  std::free(buf);
  EXPECT_EQ(out.find('\n'), std::string::npos);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\r'), 4);  // two updates, clear: "\r...\r"
}

}  // namespace
}  // namespace cqlstream::store
