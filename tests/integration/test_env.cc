// Copyright (c) cqlstream authors.
#include "test_env.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <sstream>

namespace cqlstream::testing {
namespace {

std::shared_ptr<net::Session> g_admin;  // used for the keyspace lifecycle
std::string g_keyspace;

class KeyspaceEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    if (g_admin && !g_keyspace.empty()) {
      (void)g_admin->Query(fmt::format("DROP KEYSPACE IF EXISTS {}", g_keyspace));
    }
    if (g_admin) g_admin->Close();
    g_admin.reset();
  }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new KeyspaceEnvironment);

}  // namespace

std::string Env(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::string SourceDir() { return Env("CQLSTREAM_SOURCE_DIR", CQLSTREAM_SOURCE_DIR); }

ConnectionOptions TestOptions() {
  ConnectionOptions o;
  o.hosts.clear();
  std::stringstream ss(Env("CQLSTREAM_TEST_HOSTS", "127.0.0.1"));
  std::string h;
  while (std::getline(ss, h, ',')) o.hosts.push_back(h);
  o.request_timeout = std::chrono::milliseconds(20000);
  return o;
}

std::shared_ptr<net::Session> TestSession(net::SessionOptions so) {
  auto s = net::Session::Connect(TestOptions(), std::move(so));
  if (!s.ok()) {
    ADD_FAILURE() << "cannot connect to the test node (" << TestOptions().Describe()
                  << "); start it with scripts/cassandra up: " << s.status().ToString();
    return nullptr;
  }
  return *s;
}

const std::string& TestKeyspace() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_keyspace = fmt::format("it_{}", ::getpid());
    g_admin = TestSession();
    if (!g_admin) return;
    MustRun(*g_admin, fmt::format("CREATE KEYSPACE IF NOT EXISTS {} WITH replication = "
                                  "{{'class': 'SimpleStrategy', 'replication_factor': 1}}",
                                  g_keyspace));
  });
  return g_keyspace;
}

void MustRun(net::Session& s, const std::string& cql) {
  net::Statement st = net::Statement::Query(cql);
  st.timeout = std::chrono::milliseconds(60000);
  auto r = s.Execute(st);
  ASSERT_TRUE(r.ok()) << cql << ": " << r.status().ToString();
  if (std::holds_alternative<cql::SchemaChange>(r->result)) {
    Status agreed = s.WaitForSchemaAgreement(std::chrono::seconds(60));
    ASSERT_TRUE(agreed.ok()) << agreed.ToString();
  }
}

void DropClusterKeyspaces(const std::vector<std::string>& keyspaces) {
  const std::string hosts = Env("CQLSTREAM_TEST_CLUSTER_HOSTS");
  if (hosts.empty()) return;
  ConnectionOptions o;
  o.hosts = {hosts};
  auto s = net::Session::Connect(o);
  if (!s.ok()) return;
  for (const auto& ks : keyspaces) {
    net::Statement st = net::Statement::Query(fmt::format("DROP KEYSPACE IF EXISTS {}", ks));
    st.timeout = std::chrono::milliseconds(60000);
    (void)(*s)->Execute(st);
  }
  (*s)->Close();
}

}  // namespace cqlstream::testing
