// Copyright (c) cqlstream authors.
//
// A test fixture over one synthetic dataset (dataset_fixture.h) that its
// tests damage with CQL (rows deleted, cells changed) and then read: the
// derived fixture says which dataset (Spec) and may prepare more after it
// is written (AfterMake: e.g. its packs). ReadOneEpoch checks every
// delivered sample's bytes against the fixture (ReadEpoch).
//
// Thread-safety: call from the test thread.
#ifndef CQLSTREAM_TESTS_INTEGRATION_DAMAGED_DATASET_FIXTURE_H_
#define CQLSTREAM_TESTS_INTEGRATION_DAMAGED_DATASET_FIXTURE_H_

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include "cqlstream/loader.h"
#include "dataset_fixture.h"
#include "net/session.h"
#include "test_env.h"

namespace cqlstream::testing {

class DamagedDatasetTest : public ::testing::Test {
 protected:
  // The dataset the tests damage.
  virtual SyntheticSpec Spec() const = 0;
  // Runs once the dataset is written.
  virtual void AfterMake() {}

  void SetUp() override {
    s_ = TestSession();
    ASSERT_NE(s_, nullptr);
    d_ = MakeSyntheticDataset(*s_, TestKeyspace(), Spec());
    AfterMake();
  }
  void TearDown() override {
    if (s_) s_->Close();
  }
  // Runs `cql`, whose {} is the test keyspace.
  void Run(const std::string& cql) { MustRun(*s_, fmt::format(fmt::runtime(cql), TestKeyspace())); }
  // Reads one epoch with `o`; returns the error that ended it (empty: none)
  // and the samples delivered, and the loader's metrics in `*m` (if given).
  std::pair<std::string, size_t> ReadOneEpoch(const LoaderOptions& o, LoaderMetrics* m) {
    auto l = Loader::Open(o);
    if (!l.ok()) return {l.status().ToString(), 0};
    Delivered r = ReadEpoch(**l, d_);
    if (m) *m = (*l)->Metrics();
    return {r.error, r.keys.size()};
  }

  std::shared_ptr<net::Session> s_;
  SyntheticDataset d_;
};

}  // namespace cqlstream::testing

#endif  // CQLSTREAM_TESTS_INTEGRATION_DAMAGED_DATASET_FIXTURE_H_
