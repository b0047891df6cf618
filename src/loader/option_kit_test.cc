// Copyright (c) cqlstream authors.
#include "loader/option_kit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

namespace cqlstream::loader {
namespace {

TEST(OptionKitTest, SpellsNamesAsTheFrontEndDoes) {
  EXPECT_EQ(OptionName("max_in_flight", OptionSpelling::kFlag), "--max-in-flight");
  EXPECT_EQ(OptionName("max_in_flight", OptionSpelling::kKeyword), "max_in_flight");
  OptionArgs a;
  a.port = 70000;
  auto r = ResolveOptions(a, OptionSpelling::kFlag);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "--port must be in [1, 65535], got 70000");
  r = ResolveOptions(a, OptionSpelling::kKeyword);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "port must be in [1, 65535], got 70000");
}

TEST(OptionKitTest, DurationsMustBeFinitePositiveAndBounded) {
  for (const double bad : {std::numeric_limits<double>::infinity(), std::nan(""), 1e300, -1.0, 0.0, 86401.0}) {
    OptionArgs a;
    a.request_timeout_s = bad;
    auto r = ResolveOptions(a, OptionSpelling::kKeyword);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("request_timeout must be a finite number of seconds"), std::string::npos)
        << r.status().ToString();
    OptionArgs b;
    b.connect_timeout_s = bad;
    r = ResolveOptions(b, OptionSpelling::kFlag);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--connect-timeout"), std::string::npos) << r.status().ToString();
  }
  OptionArgs a;
  a.retry_budget_s = 0.0004;  // rounds to at least 1 ms, never to 0 (automatic)
  auto r = ResolveOptions(a, OptionSpelling::kKeyword);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->retry_budget.count(), 1);
}

TEST(OptionKitTest, ThrottlesAreCheckedAndApplied) {
  OptionArgs a;
  a.max_in_flight = int64_t{1} << 31;
  auto r = ResolveOptions(a, OptionSpelling::kKeyword);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("max_in_flight must be in [1, 2147483647]"), std::string::npos);

  OptionArgs b;
  b.max_in_flight = 64;
  b.max_connections_per_host = 4;
  b.connections_per_host = 3;
  b.io_threads = 2;
  b.request_timeout_s = 1.5;
  r = ResolveOptions(b, OptionSpelling::kKeyword);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  LoaderOptions lo;
  lo.max_attempts = 7;
  r->ApplyTo(&lo);
  EXPECT_EQ(lo.max_in_flight, 64);
  EXPECT_EQ(lo.max_connections_per_host, 4);
  EXPECT_EQ(lo.max_attempts, 7);  // not given: untouched
  EXPECT_EQ(lo.request_timeout.count(), 1500);
  EXPECT_EQ(lo.connection.connections_per_host, 3);
  EXPECT_EQ(lo.connection.io_threads, 2);
}

TEST(OptionKitTest, ArgumentsWinOverTheEnvironment) {
  ASSERT_EQ(::setenv("CQLSTREAM_PORT", "9999", 1), 0);
  ASSERT_EQ(::setenv("CQLSTREAM_KEYSPACE", "from_env", 1), 0);
  OptionArgs a;
  a.port = 9043;
  auto r = ResolveOptions(a, OptionSpelling::kFlag);
  ::unsetenv("CQLSTREAM_PORT");
  ::unsetenv("CQLSTREAM_KEYSPACE");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->connection.port, 9043);
  EXPECT_EQ(r->connection.keyspace, "from_env");
}

TEST(OptionKitTest, InsecureTlsIsAWarningNamedAsTheFrontEndSpellsIt) {
  OptionArgs a;
  a.tls_insecure_skip_verify = true;
  a.tls_server_name = "node1.example";
  auto r = ResolveOptions(a, OptionSpelling::kFlag);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->connection.tls.has_value());
  EXPECT_EQ(r->connection.tls->server_name, "node1.example");
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_EQ(r->warnings[0], InsecureTlsWarning("--tls-insecure-skip-verify"));
  a.tls_insecure_skip_verify = false;
  r = ResolveOptions(a, OptionSpelling::kFlag);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->warnings.empty());
}

TEST(OptionKitTest, EmptyHostListsAreRefused) {
  OptionArgs a;
  a.hosts = std::vector<std::string>{"", ""};
  auto r = ResolveOptions(a, OptionSpelling::kKeyword);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "hosts names no host");
}

}  // namespace
}  // namespace cqlstream::loader
