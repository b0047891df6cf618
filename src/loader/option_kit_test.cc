// Copyright (c) cqlstream authors.
#include "loader/option_kit.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>

#include "net/secure_bundle_test_util.h"

namespace cqlstream::loader {
namespace {

// The number of fields of an aggregate: the most initializers it takes.
struct AnyField {
  template <class T>
  operator T() const {  // NOLINT: converts to every field type (only used unevaluated)
    return T{};
  }
};
template <class T, class... A>
constexpr size_t FieldCount() {
  if constexpr (requires { T{A{}..., AnyField{}}; }) {
    return FieldCount<T, A..., AnyField>();
  } else {
    return sizeof...(A);
  }
}
// A field added to OptionArgs must be named in kOptionArgNames (and so be
// checked in every front end by tests/python/test_tls_options.py).
static_assert(FieldCount<OptionArgs>() == std::size(kOptionArgNames),
              "OptionArgs and kOptionArgNames differ: name the new option in kOptionArgNames");

std::string TempFile(const std::string& name, const std::string& data) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
  ::chmod(path.c_str(), 0600);
  return path;
}

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
  b.max_shard_connections = 1000;
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
  EXPECT_EQ(lo.connection.max_shard_connections, 1000);
}

// The shard cap of ScyllaDB's shard-aware pools: 1..65535, named as the
// front end spells it; unset, the default.
TEST(OptionKitTest, MaxShardConnectionsIsCheckedAndApplied) {
  for (int64_t bad : {int64_t{0}, int64_t{-1}, int64_t{65536}, int64_t{1} << 40}) {
    OptionArgs a;
    a.max_shard_connections = bad;
    auto r = ResolveOptions(a, OptionSpelling::kFlag);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(), fmt::format("--max-shard-connections must be in [1, 65535], got {}", bad));
  }
  OptionArgs none;
  auto r = ResolveOptions(none, OptionSpelling::kKeyword);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->connection.max_shard_connections, ConnectionOptions().max_shard_connections);
  OptionArgs one;
  one.max_shard_connections = 1;
  r = ResolveOptions(one, OptionSpelling::kKeyword);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->connection.max_shard_connections, 1);
}

TEST(OptionKitTest, CoalesceIsCheckedAndApplied) {
  for (const int64_t bad : {int64_t{-1}, int64_t{101}, int64_t{1} << 40}) {
    OptionArgs a;
    a.coalesce = bad;
    auto r = ResolveOptions(a, OptionSpelling::kKeyword);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("coalesce must be in [0, 100], got " + std::to_string(bad)),
              std::string::npos)
        << r.status().message();
  }
  OptionArgs flag;
  flag.coalesce = 101;
  auto r = ResolveOptions(flag, OptionSpelling::kFlag);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--coalesce must be in [0, 100]"), std::string::npos);

  for (const int v : {0, 1, 32, 100}) {
    OptionArgs a;
    a.coalesce = v;
    r = ResolveOptions(a, OptionSpelling::kKeyword);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    LoaderOptions lo;
    r->ApplyTo(&lo);
    EXPECT_EQ(lo.coalesce, v);
  }
  // Not given: a value already in the options is kept.
  r = ResolveOptions(OptionArgs{}, OptionSpelling::kKeyword);
  ASSERT_TRUE(r.ok());
  LoaderOptions lo;
  lo.coalesce = 8;
  r->ApplyTo(&lo);
  EXPECT_EQ(lo.coalesce, 8);
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

TEST(OptionKitTest, KeyPassphraseComesFromAFileOrTheEnvironment) {
  OptionArgs a;
  a.tls_cert = "client.crt";
  a.tls_key = "client.key";
  a.tls_key_passphrase_file = TempFile("passphrase", "s3cret-phrase\n");
  auto r = ResolveOptions(a, OptionSpelling::kFlag);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->connection.tls.has_value());
  EXPECT_EQ(r->connection.tls->key_passphrase.reveal(), "s3cret-phrase");
  EXPECT_EQ(r->connection.Describe().find("s3cret"), std::string::npos);

  OptionArgs b;
  b.tls_key_passphrase_file = "/nonexistent/passphrase";
  r = ResolveOptions(b, OptionSpelling::kKeyword);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("key passphrase file given by tls_key_passphrase_file"), std::string::npos)
      << r.status().ToString();
  EXPECT_EQ(r.status().message().find("/nonexistent"), std::string::npos) << r.status().ToString();

  ASSERT_EQ(::setenv("CQLSTREAM_TLS_KEY_PASSPHRASE", "from-env", 1), 0);
  OptionArgs c;
  c.tls_cert = "client.crt";
  c.tls_key = "client.key";
  r = ResolveOptions(c, OptionSpelling::kKeyword);
  ::unsetenv("CQLSTREAM_TLS_KEY_PASSPHRASE");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->connection.tls->key_passphrase.reveal(), "from-env");

  OptionArgs d;  // a passphrase without a key is a mistake worth naming
  d.tls_key_passphrase_file = a.tls_key_passphrase_file;
  r = ResolveOptions(d, OptionSpelling::kFlag);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("without a client key"), std::string::npos) << r.status().ToString();
}

TEST(OptionKitTest, SecureBundleGivesEndpointAndCertificates) {
  const std::string ca = "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n";
  const std::string bundle = TempFile(
      "bundle.zip", net::testing::MakeBundle(R"({"host": "127.0.1.1", "cql_port": 9142, "keyspace": "from_bundle",
                                                 "localDC": "dc9"})",
                                             ca, ca, "-----BEGIN PRIVATE KEY-----\nK\n-----END PRIVATE KEY-----\n"));
  ASSERT_EQ(::setenv("CQLSTREAM_HOSTS", "10.9.9.9", 1), 0);  // replaced by the bundle's endpoint
  OptionArgs a;
  a.secure_bundle = bundle;
  auto r = ResolveOptions(a, OptionSpelling::kFlag);
  ::unsetenv("CQLSTREAM_HOSTS");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->connection.hosts, std::vector<std::string>{"127.0.1.1"});
  EXPECT_EQ(r->connection.port, 9142);
  EXPECT_EQ(r->connection.keyspace, "from_bundle");
  EXPECT_EQ(r->connection.local_dc, "dc9");
  ASSERT_TRUE(r->connection.tls.has_value());
  EXPECT_EQ(r->connection.tls->ca_pem, ca);

  a.keyspace = "mine";  // arguments win over the bundle's defaults
  a.local_dc = "dc1";
  r = ResolveOptions(a, OptionSpelling::kFlag);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->connection.keyspace, "mine");
  EXPECT_EQ(r->connection.local_dc, "dc1");

  for (const char* conflicting : {"hosts", "port", "tls_ca"}) {
    OptionArgs b;
    b.secure_bundle = bundle;
    if (std::string(conflicting) == "hosts") b.hosts = std::vector<std::string>{"h"};
    if (std::string(conflicting) == "port") b.port = 9042;
    if (std::string(conflicting) == "tls_ca") b.tls_ca = "ca.crt";
    r = ResolveOptions(b, OptionSpelling::kFlag);
    ASSERT_FALSE(r.ok()) << conflicting;
    EXPECT_NE(r.status().message().find("--secure-bundle cannot be combined with " + OptionName(conflicting,
                                                                                                OptionSpelling::kFlag)),
              std::string::npos)
        << r.status().ToString();
  }
  OptionArgs c;
  c.secure_bundle = TempFile("not-a-bundle.zip", "PK garbage");
  r = ResolveOptions(c, OptionSpelling::kKeyword);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a zip file"), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace cqlstream::loader
