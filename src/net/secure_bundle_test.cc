// Copyright (c) cqlstream authors.
#include "net/secure_bundle.h"

#include <gtest/gtest.h>

#include <string>

#include "net/secure_bundle_test_util.h"

namespace cqlstream::net {
namespace {

using testing::MakeBundle;
using testing::MakeZip;

const std::string kCa = "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n";
const std::string kCert = "-----BEGIN CERTIFICATE-----\nCLIENT\n-----END CERTIFICATE-----\n";
const std::string kKey = "-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n";

StatusOr<SecureBundle> Parse(const std::string& zip) { return ParseSecureBundle(zip, "db.zip"); }

void ExpectInvalid(const StatusOr<SecureBundle>& b, const std::string& part) {
  ASSERT_FALSE(b.ok()) << "expected an error containing: " << part;
  EXPECT_EQ(b.status().code(), Status::Code::kInvalidArgument) << b.status().ToString();
  EXPECT_NE(b.status().message().find(part), std::string::npos) << b.status().ToString();
  EXPECT_NE(b.status().message().find("secure bundle 'db.zip'"), std::string::npos) << b.status().ToString();
}

TEST(SecureBundleTest, DirectEndpoint) {
  auto b = Parse(MakeBundle(R"({"host": "127.0.1.1", "cql_port": 9042, "keyspace": "ks", "localDC": "dc1"})",
                            kCa, kCert, kKey));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->route, SecureBundle::Route::kDirect);
  EXPECT_EQ(b->host, "127.0.1.1");
  EXPECT_EQ(b->cql_port, 9042);
  EXPECT_EQ(b->keyspace, "ks");
  EXPECT_EQ(b->local_dc, "dc1");
  EXPECT_EQ(b->ca_pem, kCa);
  EXPECT_EQ(b->cert_pem, kCert);
  EXPECT_EQ(b->key_pem.reveal(), kKey);

  ConnectionOptions o;
  o.tls.emplace();
  o.tls->server_name = "node.example";
  ASSERT_TRUE(ApplySecureBundle(*b, &o).ok());
  EXPECT_EQ(o.hosts, std::vector<std::string>{"127.0.1.1"});
  EXPECT_EQ(o.port, 9042);
  ASSERT_TRUE(o.tls.has_value());
  EXPECT_EQ(o.tls->server_name, "node.example");  // kept
  EXPECT_EQ(o.tls->ca_pem, kCa);
  EXPECT_EQ(o.tls->key_pem.reveal(), kKey);
  EXPECT_EQ(o.local_dc, "dc1");
  EXPECT_FALSE(o.sni_proxy.has_value());
  EXPECT_TRUE(o.Validate().ok()) << o.Validate().ToString();
  EXPECT_EQ(o.Describe().find("KEY"), std::string::npos) << o.Describe();
}

TEST(SecureBundleTest, EntryNamesFromConfigAndStringPorts) {
  auto zip = MakeZip({{"./config.json", R"({"host": "db.example", "cql_port": "29042",
                       "caCertLocation": "./trust.pem", "certLocation": "./me.pem", "keyLocation": "me.key"})"},
                      {"./trust.pem", kCa},
                      {"me.pem", kCert},
                      {"./me.key", kKey},
                      {"identity.jks", "binary"}});
  auto b = Parse(zip);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->cql_port, 29042);
  EXPECT_EQ(b->ca_pem, kCa);
  EXPECT_EQ(b->key_pem.reveal(), kKey);
}

TEST(SecureBundleTest, InlineContactInfoRoutesThroughTheSniProxy) {
  auto b = Parse(MakeBundle(R"({"keyspace": "ks", "contact_info": {"type": "sni_proxy", "local_dc": "dc7",
      "contact_points": ["0b8e5d4a-1111-2222-3333-444455556666", "1c9f6e5b-1111-2222-3333-444455556666"],
      "sni_proxy_address": "proxy.example:29042"}})",
                            kCa, kCert, kKey));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->route, SecureBundle::Route::kSniProxy);
  EXPECT_EQ(b->sni_proxy.host, "proxy.example");
  EXPECT_EQ(b->sni_proxy.port, 29042);
  ASSERT_EQ(b->host_ids.size(), 2u);
  EXPECT_EQ(b->local_dc, "dc7");
  ConnectionOptions o;
  ASSERT_TRUE(ApplySecureBundle(*b, &o).ok());
  EXPECT_EQ(o.hosts, b->host_ids);
  ASSERT_TRUE(o.sni_proxy.has_value());
  EXPECT_EQ(o.sni_proxy->port, 29042);
  EXPECT_TRUE(o.Validate().ok());
}

TEST(SecureBundleTest, MetadataServiceAnswerIsParsed) {
  auto b = Parse(MakeBundle(R"({"host": "db.example", "port": 29080, "cql_port": 29042})", kCa, kCert, kKey));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->route, SecureBundle::Route::kMetadataService);
  EXPECT_EQ(b->metadata_port, 29080);
  ConnectionOptions o;
  Status s = ApplySecureBundle(*b, &o);
  EXPECT_EQ(s.code(), Status::Code::kInternal) << s.ToString();  // FetchContactInfo first

  Status p = ParseContactInfo(R"({"version": 1, "region": "r", "contact_info": {"type": "sni_proxy",
      "local_dc": "dc1", "contact_points": ["a"], "sni_proxy_address": "[::1]:9042"}})",
                              &*b);
  ASSERT_TRUE(p.ok()) << p.ToString();
  EXPECT_EQ(b->route, SecureBundle::Route::kSniProxy);
  EXPECT_EQ(b->sni_proxy.host, "::1");
  EXPECT_FALSE(ParseContactInfo(R"({"version": 1})", &*b).ok());
}

TEST(SecureBundleTest, DamagedBundlesAreClearErrors) {
  ExpectInvalid(Parse("not a zip at all"), "not a zip file");
  ExpectInvalid(Parse(MakeZip({{"ca.crt", kCa}})), "has no config.json");
  ExpectInvalid(Parse(MakeBundle("{", kCa, kCert, kKey)), "not valid JSON");
  ExpectInvalid(Parse(MakeBundle("[1]", kCa, kCert, kKey)), "not a JSON object");
  ExpectInvalid(Parse(MakeBundle(R"({"a":)" + std::string(40, '[') + std::string(40, ']') + "}", kCa, kCert, kKey)),
                "nests deeper");
  ExpectInvalid(Parse(MakeBundle(R"({"keyspace": "k"})", kCa, kCert, kKey)), "names no endpoint");
  ExpectInvalid(Parse(MakeBundle(R"({"host": "h"})", kCa, kCert, kKey)), "neither port nor cql_port");
  ExpectInvalid(Parse(MakeBundle(R"({"host": "h", "cql_port": 70000})", kCa, kCert, kKey)), "'cql_port' is not a TCP port");
  ExpectInvalid(Parse(MakeBundle(R"({"host": 5, "cql_port": 1})", kCa, kCert, kKey)), "'host' is not a string");
  ExpectInvalid(Parse(MakeBundle(R"({"contact_info": {"sni_proxy_address": "noport", "contact_points": ["a"]}})",
                                 kCa, kCert, kKey)),
                "is not host:port");
  ExpectInvalid(Parse(MakeBundle(R"({"contact_info": {"sni_proxy_address": "p:1", "contact_points": []}})", kCa,
                                 kCert, kKey)),
                "contact_points is not a list of host ids");
  ExpectInvalid(Parse(MakeBundle(R"({"contact_info": {"sni_proxy_address": "p:1", "contact_points": [3]}})", kCa,
                                 kCert, kKey)),
                "non-host-id");
  const std::string direct = R"({"host": "h", "cql_port": 1})";
  ExpectInvalid(Parse(MakeZip({{"config.json", direct}, {"ca.crt", kCa}, {"cert", kCert}})), "no entry 'key'");
  ExpectInvalid(Parse(MakeBundle(direct, "garbage", kCert, kKey)), "entry 'ca.crt' is not PEM");
  ExpectInvalid(Parse(MakeZip({{"config.json", direct}, {"config.json", direct}})), "appears twice");
  ExpectInvalid(Parse(MakeBundle(direct, kCa + std::string(kMaxSecureBundleEntryBytes, 'x'), kCert, kKey)),
                "entry 'ca.crt' holds");
  std::vector<std::pair<std::string, std::string>> many;
  for (int i = 0; i <= kMaxSecureBundleEntries; ++i) many.emplace_back("f" + std::to_string(i), "x");
  ExpectInvalid(Parse(MakeZip(many)), "more than 64 entries");
  ExpectInvalid(Parse(std::string(kMaxSecureBundleBytes + 1, 'P')), "at most");
}

TEST(SecureBundleTest, LoadReadsOnlyRegularFiles) {
  auto b = LoadSecureBundle("/nonexistent/db.zip");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("cannot open secure bundle '/nonexistent/db.zip'"), std::string::npos);
  b = LoadSecureBundle("/");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("not a regular file"), std::string::npos) << b.status().ToString();
}

}  // namespace
}  // namespace cqlstream::net
