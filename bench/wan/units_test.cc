// Copyright (c) cqlstream authors.
#include "wan/units.h"

#include <gtest/gtest.h>

namespace cqlstream::wan {
namespace {

TEST(UnitsTest, ParsesByteSizes) {
  EXPECT_EQ(*ParseByteSize("0"), 0u);
  EXPECT_EQ(*ParseByteSize("4194304"), 4194304u);
  EXPECT_EQ(*ParseByteSize("4MiB"), 4u << 20);
  EXPECT_EQ(*ParseByteSize("4m"), 4u << 20);
  EXPECT_EQ(*ParseByteSize("512KiB"), 512u << 10);
  EXPECT_EQ(*ParseByteSize("512k"), 512u << 10);
  EXPECT_EQ(*ParseByteSize("2GiB"), 2ull << 30);
  EXPECT_EQ(*ParseByteSize("4MB"), 4'000'000u);
  EXPECT_EQ(*ParseByteSize("1.5MiB"), 3u << 19);
  EXPECT_EQ(*ParseByteSize("100B"), 100u);
}

TEST(UnitsTest, RejectsBadByteSizes) {
  for (const char* bad : {"", "MiB", "-1", "4XB", "1.5", "1.2.3MiB", "99999999999999999999",
                          "99999999999GiB", " 4MiB"}) {
    EXPECT_FALSE(ParseByteSize(bad).ok()) << bad;
  }
}

TEST(UnitsTest, ParsesHostPortAndMappings) {
  auto hp = ParseHostPort("127.0.0.2:9042");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "127.0.0.2");
  EXPECT_EQ(hp->port, 9042);
  auto v6 = ParseHostPort("[::1]:19042");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->ToString(), "[::1]:19042");
  EXPECT_EQ(ParseHostPort("localhost:1")->host, "127.0.0.1");
  for (const char* bad : {"127.0.0.1", ":9042", "1.2.3.4:", "1.2.3.4:70000", "::1:9042",
                          "[::1]9042", "1.2.3.4:x"}) {
    EXPECT_FALSE(ParseHostPort(bad).ok()) << bad;
  }
  auto m = ParseMapping("127.0.0.2:9042=127.0.0.1:9043");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->listen.ToString(), "127.0.0.2:9042");
  EXPECT_EQ(m->target.ToString(), "127.0.0.1:9043");
  EXPECT_FALSE(ParseMapping("127.0.0.2:9042").ok());
  EXPECT_FALSE(ParseMapping("127.0.0.2:9042=127.0.0.1:0").ok());
}

TEST(UnitsTest, FormatsBytes) {
  EXPECT_EQ(FormatBytes(312), "312 B");
  EXPECT_EQ(FormatBytes(3u << 19), "1.50 MiB");
  EXPECT_EQ(FormatBytes(2ull << 30), "2.00 GiB");
}

}  // namespace
}  // namespace cqlstream::wan
