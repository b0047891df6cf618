// Copyright (c) cqlstream authors.
//
// The base of the suites that run against the secure profile's node
// (secure_test.cc, secure_bundle_test.cc): its address and the test
// certificates' folder from the environment scripts/test sets, asserted
// (not skipped) in SetUp.
//
// Thread-safety: test bodies (one thread).
#ifndef CQLSTREAM_TESTS_INTEGRATION_SECURE_FIXTURE_H_
#define CQLSTREAM_TESTS_INTEGRATION_SECURE_FIXTURE_H_

#include <gtest/gtest.h>

#include <string>

#include "test_env.h"

namespace cqlstream::testing {

class SecureNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_ = Env("CQLSTREAM_TEST_SECURE_HOST");
    certs_ = Env("CQLSTREAM_TEST_CERTS");
    // Not a skip: without the secure node these tests cannot pass.
    ASSERT_FALSE(host_.empty() || certs_.empty())
        << "CQLSTREAM_TEST_SECURE_HOST / CQLSTREAM_TEST_CERTS are not set: run through scripts/test, or start "
           "scripts/cassandra up --profile secure and export them";
  }

  std::string host_;   // the secure node's address
  std::string certs_;  // folder of ca.crt, client.crt, client.key, ...
};

}  // namespace cqlstream::testing

#endif  // CQLSTREAM_TESTS_INTEGRATION_SECURE_FIXTURE_H_
