// Copyright (c) cqlstream authors.
//
// The fixture of the dataset-command suites (store_hardening_test.cc, and
// through IngestFixture store_test.cc and store_resume_test.cc): one
// keyspace <prefix>_<pid> (SimpleStrategy, RF 1) on the test node, created
// when the suite starts and dropped when it ends; ingest options sized for
// tests; a statement that must succeed; and running the cqlstream binary.
//
// A suite derives from StoreFixture and names its keyspace prefix:
//   class StoreTest : public testing::StoreFixture {
//    protected:
//     static void SetUpTestSuite() { SetUpStore("st"); }
//   };
//
// Thread-safety: test bodies (one thread); the suites of one binary run one
// after another, so the static session and keyspace are those of the suite
// that runs.
#ifndef CQLSTREAM_TESTS_INTEGRATION_STORE_FIXTURE_H_
#define CQLSTREAM_TESTS_INTEGRATION_STORE_FIXTURE_H_

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cqlstream/dataset.h"
#include "net/session.h"
#include "store/catalog.h"
#include "store/ingest.h"
#include "store/schema.h"
#include "test_env.h"

namespace cqlstream::testing {

// The cqlstream binary: $CQLSTREAM_CLI, else src/cli/cqlstream of the build
// folder of this test binary.
inline std::string CliPath() {
  std::string env = Env("CQLSTREAM_CLI");
  if (!env.empty()) return env;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (self.parent_path().parent_path() / "src/cli/cqlstream").string();
}

// Exit code of `cmd` run by the shell (-1 when a signal ended it) and its
// output (both streams).
inline std::pair<int, std::string> Sh(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = ::pclose(p);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out};
}

class StoreFixture : public ::testing::Test {
 protected:
  // Connects and creates keyspace <prefix>_<pid>.
  static void SetUpStore(const char* prefix) {
    keyspace_ = fmt::format("{}_{}", prefix, ::getpid());
    session_ = TestSession();
    if (!session_) return;
    std::string note;
    Status st = store::EnsureKeyspace(*session_, keyspace_, store::Replication::Parse("simple:1").value(), true, &note);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  static void TearDownTestSuite() {
    if (session_) {
      (void)store::RunDdl(*session_, "DROP KEYSPACE IF EXISTS " + keyspace_);
      session_->Close();
      session_.reset();
    }
  }
  void SetUp() override { ASSERT_NE(session_, nullptr); }

  net::Session& S() { return *session_; }

  // Ingest options for tests: small concurrency, frequent commits.
  store::IngestOptions Opts(const std::string& dataset, std::vector<std::string> sources,
                            const std::string& ks = "") {
    store::IngestOptions o;
    o.keyspace = ks.empty() ? keyspace_ : ks;
    o.dataset = dataset;
    o.source.sources = std::move(sources);
    o.concurrency = 8;
    o.readers = 2;
    o.commit_interval = std::chrono::milliseconds(200);
    return o;
  }

  DatasetInfo Load(const std::string& name) {
    auto d = store::LoadDataset(S(), keyspace_, name);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? *d : DatasetInfo();
  }

  // A statement that must succeed (at LOCAL_QUORUM).
  void Cql(const std::string& q, std::vector<Value> v = {}) {
    net::Statement st = net::Statement::Query(q, std::move(v));
    st.consistency = cql::Consistency::kLocalQuorum;
    auto r = S().Execute(st);
    ASSERT_TRUE(r.ok()) << q << ": " << r.status().ToString();
  }

  // The connection flags of the binary for this suite's keyspace.
  std::string Common() const {
    return fmt::format("--keyspace {} --hosts {}", keyspace_, Env("CQLSTREAM_TEST_HOSTS", "127.0.0.1"));
  }

  inline static std::string keyspace_;
  inline static std::shared_ptr<net::Session> session_;
};

}  // namespace cqlstream::testing

#endif  // CQLSTREAM_TESTS_INTEGRATION_STORE_FIXTURE_H_
