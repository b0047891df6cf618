// Copyright (c) cqlstream authors.
#include "net/sni_endpoint.h"

#include <gtest/gtest.h>

#include <memory>

namespace cqlstream::net {
namespace {

HostPtr MakeHost(const std::string& address, const std::string& host_id) {
  auto h = std::make_shared<Host>();
  h->address = address;
  h->host_id = host_id;
  return h;
}

TEST(SniEndpointTest, HostIdsComeFromTheTopologyElseTheAddressIsOne) {
  Topology t;
  t.hosts = {MakeHost("11111111-aaaa-bbbb-cccc-000000000001", "11111111-aaaa-bbbb-cccc-000000000001"),
             MakeHost("10.0.0.2", "22222222-aaaa-bbbb-cccc-000000000002"), MakeHost("10.0.0.3", "")};
  EXPECT_EQ(SniHostId(&t, "10.0.0.2"), "22222222-aaaa-bbbb-cccc-000000000002");
  EXPECT_EQ(SniHostId(&t, "11111111-aaaa-bbbb-cccc-000000000001"), "11111111-aaaa-bbbb-cccc-000000000001");
  EXPECT_EQ(SniHostId(&t, "10.0.0.3"), "10.0.0.3");  // no host id known: as given
  EXPECT_EQ(SniHostId(nullptr, "33333333-aaaa-bbbb-cccc-000000000003"), "33333333-aaaa-bbbb-cccc-000000000003");
}

TEST(SniEndpointTest, ConnectionsGoToTheProxyWithTheHostIdAsServerName) {
  TransportOptions t;
  t.host = "10.0.0.2";
  t.port = 9042;
  RouteThroughSniProxy(SniProxy{"proxy.example", 29042}, "22222222-aaaa-bbbb-cccc-000000000002", &t);
  EXPECT_EQ(t.host, "proxy.example");
  EXPECT_EQ(t.port, 29042);
  EXPECT_EQ(t.tls_server_name, "22222222-aaaa-bbbb-cccc-000000000002");
  ASSERT_TRUE(t.tls_verify_name.has_value());
  EXPECT_EQ(*t.tls_verify_name, "");  // the chain only

  TransportOptions named;
  named.tls_server_name = "nodes.example";  // --tls-server-name: still checked
  RouteThroughSniProxy(SniProxy{"proxy.example", 29042}, "id", &named);
  EXPECT_EQ(named.tls_server_name, "id");
  EXPECT_EQ(named.tls_verify_name.value_or("?"), "nodes.example");
}

}  // namespace
}  // namespace cqlstream::net
