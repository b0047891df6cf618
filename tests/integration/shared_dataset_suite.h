// Copyright (c) cqlstream authors.
//
// SharedDatasetSuite<Derived>: a test suite whose tests share one dataset,
// written once before the suite's first test. Derived defines
//
//   static testing::SyntheticDataset Make(net::Session& s);
//
// which writes the dataset (MakeSyntheticDataset, an attach, a pack, rows
// damaged on purpose) and returns what the tests check against; they read
// it as data_. The session Make gets is closed after it returns.
//
// Ownership: the suite owns data_ from SetUpTestSuite to TearDownTestSuite.
// Thread-safety: gtest calls the hooks on the test thread; data_ is not
// written while tests run, so loader threads may read it.
#ifndef CQLSTREAM_TESTS_INTEGRATION_SHARED_DATASET_SUITE_H_
#define CQLSTREAM_TESTS_INTEGRATION_SHARED_DATASET_SUITE_H_

#include <gtest/gtest.h>

#include "dataset_fixture.h"
#include "test_env.h"

namespace cqlstream::testing {

template <class Derived>
class SharedDatasetSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto s = TestSession();
    ASSERT_NE(s, nullptr);
    data_ = new SyntheticDataset(Derived::Make(*s));
    s->Close();
  }
  static void TearDownTestSuite() {
    delete data_;
    data_ = nullptr;
  }
  static inline SyntheticDataset* data_ = nullptr;
};

}  // namespace cqlstream::testing

#endif  // CQLSTREAM_TESTS_INTEGRATION_SHARED_DATASET_SUITE_H_
