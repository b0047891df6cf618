// Copyright (c) cqlstream authors.
//
// Environment of the integration tests: the real Cassandra node(s) started
// by scripts/cassandra (scripts/test starts one when none is running).
//
//   CQLSTREAM_TEST_HOSTS        contact points (default 127.0.0.1)
//   CQLSTREAM_TEST_SECURE_HOST  the node with PasswordAuthenticator + TLS
//   CQLSTREAM_TEST_CERTS        the folder made by scripts/make-test-certs
//
// Each test binary works in its own keyspace (it_<pid>), created on first use
// and dropped at exit, so runs never see each other's tables.
//
// Thread-safety: call from test bodies (one thread).
#ifndef CQLSTREAM_TESTS_INTEGRATION_TEST_ENV_H_
#define CQLSTREAM_TESTS_INTEGRATION_TEST_ENV_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "cqlstream/options.h"
#include "net/session.h"

namespace cqlstream::testing {

ConnectionOptions TestOptions();
// A session for the test node; fails the test (fatally) when it cannot connect.
std::shared_ptr<net::Session> TestSession(net::SessionOptions so = {});
// The per-run keyspace (created on first call).
const std::string& TestKeyspace();
// Runs a statement that must succeed (DDL and setup), waiting for schema
// agreement after schema changes.
void MustRun(net::Session& s, const std::string& cql);
std::string Env(const char* name, const std::string& fallback = "");
// Repo root (for scripts), from CQLSTREAM_SOURCE_DIR or the compile-time path.
std::string SourceDir();
// Drops these keyspaces on the 3-node cluster ($CQLSTREAM_TEST_CLUSTER_HOSTS),
// best effort (suite tear-down: nothing to do when the cluster is not set).
void DropClusterKeyspaces(const std::vector<std::string>& keyspaces);

}  // namespace cqlstream::testing

#endif  // CQLSTREAM_TESTS_INTEGRATION_TEST_ENV_H_
