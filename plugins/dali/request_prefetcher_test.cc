// Copyright (c) cqlstream authors.
//
// RequestPrefetcher without DALI or a database: a fake Fetch that returns a
// batch whose bytes name the keys, optionally held at a gate so that the
// tests control when answers arrive.
#include "request_prefetcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <span>

namespace cqlstream::dali_plugin {
namespace {

class FakeBatch : public Batch {
 public:
  std::span<const uint8_t> data() const override { return bytes; }
  std::vector<uint8_t> bytes;
};

// A fetch that answers when its gate opens; keys >= kBad fail.
class FakeFetch {
 public:
  static constexpr SampleKey kBad = 1000;

  StatusOr<BatchPtr> operator()(const std::vector<SampleKey>& keys) {
    MutexLock l(&mu_);
    calls_++;
    started_.push_back(keys.front());
    cv_.SignalAll();
    while (!open_ && !released_.count(keys.front())) cv_.Wait(&mu_);
    for (SampleKey k : keys) {
      if (k >= kBad) return Status::NotFound("no sample " + std::to_string(k));
    }
    auto b = std::make_shared<FakeBatch>();
    for (SampleKey k : keys) {
      b->offsets.push_back(b->bytes.size());
      b->sizes.push_back(1);
      b->image_sizes.push_back(1);
      b->labels.push_back(static_cast<int32_t>(k));
      b->keys.push_back(k);
      b->bytes.push_back(static_cast<uint8_t>(k));
    }
    return BatchPtr(b);
  }
  void Open() {
    MutexLock l(&mu_);
    open_ = true;
    cv_.SignalAll();
  }
  // Lets the chunk whose first key is `first` answer.
  void Release(SampleKey first) {
    MutexLock l(&mu_);
    released_.insert(first);
    cv_.SignalAll();
  }
  void WaitStarted(size_t n) {
    MutexLock l(&mu_);
    while (started_.size() < n) cv_.Wait(&mu_);
  }
  int calls() {
    MutexLock l(&mu_);
    return calls_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool open_ = false;
  std::set<SampleKey> released_;
  std::vector<SampleKey> started_;
  int calls_ = 0;
};

std::vector<SampleKey> Range(SampleKey from, SampleKey to) {
  std::vector<SampleKey> v;
  for (SampleKey k = from; k < to; ++k) v.push_back(k);
  return v;
}

std::vector<SampleKey> KeysOf(const RequestPrefetcher::Iteration& it) {
  std::vector<SampleKey> v;
  for (const auto& s : it.samples) v.push_back(s.batch->keys[s.index]);
  return v;
}

TEST(RequestPrefetcher, InteractiveServesEachRequestInOrder) {
  FakeFetch f;
  f.Open();
  RequestPrefetcher p({0, 4, 16}, [&](const auto& k) { return f(k); });
  const std::vector<std::vector<SampleKey>> reqs = {{5, 1, 9}, {2}, {7, 7, 3, 0}};
  for (const auto& r : reqs) p.Add(r);
  for (const auto& r : reqs) {
    ASSERT_EQ(p.NextIterationSize(), static_cast<int>(r.size()));
    p.AssignIteration();
    auto it = p.TakeIteration();
    ASSERT_TRUE(it.ok()) << it.status().ToString();
    EXPECT_EQ(KeysOf(*it), r);
    EXPECT_TRUE(it->last_of_request);
  }
  EXPECT_FALSE(p.NextIterationSize().has_value());
  EXPECT_EQ(p.PendingIterations(), 0);
}

TEST(RequestPrefetcher, QueuedRequestsAreFetchedWhileTheFirstIsServed) {
  FakeFetch f;
  RequestPrefetcher p({0, 3, 16}, [&](const auto& k) { return f(k); });
  for (SampleKey r = 0; r < 5; ++r) p.Add({r * 10, r * 10 + 1});
  // Three fetches start at once (the bound), none has answered yet.
  f.WaitStarted(3);
  EXPECT_EQ(f.calls(), 3);
  EXPECT_FALSE(p.WantsRequest());
  auto s = p.Stats();
  EXPECT_EQ(s.peak_outstanding, 3);
  EXPECT_EQ(s.issued_ahead, 2);
  f.Open();
  for (SampleKey r = 0; r < 5; ++r) {
    p.AssignIteration();
    auto it = p.TakeIteration();
    ASSERT_TRUE(it.ok());
    EXPECT_EQ(KeysOf(*it), (std::vector<SampleKey>{r * 10, r * 10 + 1}));
  }
  s = p.Stats();
  EXPECT_EQ(s.fetches, 5);
  EXPECT_LE(s.peak_outstanding, 3);
  EXPECT_EQ(s.iterations, 5);
}

TEST(RequestPrefetcher, OneAtATimeWithABoundOfOne) {
  FakeFetch f;
  f.Open();
  RequestPrefetcher p({0, 1, 16}, [&](const auto& k) { return f(k); });
  for (SampleKey r = 0; r < 4; ++r) p.Add({r});
  for (SampleKey r = 0; r < 4; ++r) {
    p.AssignIteration();
    ASSERT_TRUE(p.TakeIteration().ok());
  }
  auto s = p.Stats();
  EXPECT_EQ(s.peak_outstanding, 1);
  EXPECT_EQ(s.peak_in_flight, 1);
  EXPECT_EQ(s.issued_ahead, 0);
}

TEST(RequestPrefetcher, ABadRequestFailsAloneAndNamesTheKey) {
  FakeFetch f;
  f.Open();
  RequestPrefetcher p({0, 4, 16}, [&](const auto& k) { return f(k); });
  p.Add({1, 2});
  p.Add({3, FakeFetch::kBad + 7});
  p.Add({4});
  p.AssignIteration();
  p.AssignIteration();
  p.AssignIteration();
  EXPECT_TRUE(p.TakeIteration().ok());
  auto bad = p.TakeIteration();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("1007"), std::string::npos) << bad.status().ToString();
  auto next = p.TakeIteration();
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(KeysOf(*next), std::vector<SampleKey>{4});
  EXPECT_EQ(p.Stats().failed_requests, 1);
}

// A request the operator could not read (wrong key type or shape) keeps its
// place: it fails its own iteration, and the requests around it get theirs.
TEST(RequestPrefetcher, AnInvalidRequestFailsInItsPlaceAndShiftsNothing) {
  FakeFetch f;
  f.Open();
  RequestPrefetcher p({0, 4, 16}, [&](const auto& k) { return f(k); });
  p.Add({1, 2});
  p.AddInvalid(Status::InvalidArgument("keys must be int64, not int32"), 3);
  p.Add({4, 5, 6});
  std::vector<int> sizes;
  while (auto n = p.NextIterationSize()) {
    sizes.push_back(*n);
    p.AssignIteration();
  }
  EXPECT_EQ(sizes, (std::vector<int>{2, 3, 3}));
  auto first = p.TakeIteration();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(KeysOf(*first), (std::vector<SampleKey>{1, 2}));
  auto bad = p.TakeIteration();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("not int32"), std::string::npos) << bad.status().ToString();
  auto third = p.TakeIteration();
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ(KeysOf(*third), (std::vector<SampleKey>{4, 5, 6}));
  EXPECT_EQ(p.PendingIterations(), 0);
  EXPECT_EQ(f.calls(), 2);  // nothing is fetched for the invalid request
  auto s = p.Stats();
  EXPECT_EQ(s.requests, 3);
  EXPECT_EQ(s.failed_requests, 1);
}

TEST(RequestPrefetcher, DecoupledInvalidRequestFailsEachOfItsPlannedIterations) {
  FakeFetch f;
  f.Open();
  RequestPrefetcher p({2, 2, 16}, [&](const auto& k) { return f(k); });
  p.AddInvalid(Status::InvalidArgument("bad shape"), 5);  // three iterations: 2, 2, 1
  p.AddInvalid(Status::InvalidArgument("empty"), 0);      // none, as Add of no keys
  p.Add({6, 7});
  std::vector<int> sizes;
  while (auto n = p.NextIterationSize()) {
    sizes.push_back(*n);
    p.AssignIteration();
  }
  EXPECT_EQ(sizes, (std::vector<int>{2, 2, 1, 2}));
  for (int i = 0; i < 3; ++i) {
    auto it = p.TakeIteration();
    ASSERT_FALSE(it.ok());
    EXPECT_NE(it.status().ToString().find("bad shape"), std::string::npos) << it.status().ToString();
  }
  auto next = p.TakeIteration();
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(KeysOf(*next), (std::vector<SampleKey>{6, 7}));
  EXPECT_EQ(p.Stats().failed_requests, 1);
}

TEST(RequestPrefetcher, InteractiveRequestLargerThanTheBatchFailsClearly) {
  FakeFetch f;
  f.Open();
  RequestPrefetcher p({0, 2, 4}, [&](const auto& k) { return f(k); });
  p.Add(Range(0, 5));
  ASSERT_EQ(p.NextIterationSize(), 4);  // what DALI accepts; the iteration then fails
  p.AssignIteration();
  auto it = p.TakeIteration();
  ASSERT_FALSE(it.ok());
  EXPECT_NE(it.status().ToString().find("max_batch_size (4)"), std::string::npos);
  EXPECT_EQ(f.calls(), 0);
}

TEST(RequestPrefetcher, DecoupledStreamsEachKeyOnceInArrivalOrder) {
  FakeFetch f;
  RequestPrefetcher p({4, 3, 16}, [&](const auto& k) { return f(k); });
  p.Add(Range(0, 14));  // chunks 0-3, 4-7, 8-11, 12-13
  std::vector<int> sizes;
  while (auto n = p.NextIterationSize()) {
    sizes.push_back(*n);
    p.AssignIteration();
  }
  EXPECT_EQ(sizes, (std::vector<int>{4, 4, 4, 2}));
  f.WaitStarted(3);
  f.Release(8);  // the third chunk answers first
  auto first = p.TakeIteration();
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(KeysOf(*first), (std::vector<SampleKey>{8, 9, 10, 11}));
  EXPECT_FALSE(first->last_of_request);
  f.Open();
  const std::vector<SampleKey> first_keys = KeysOf(*first);
  std::multiset<SampleKey> seen(first_keys.begin(), first_keys.end());
  for (int i = 1; i < 4; ++i) {
    auto it = p.TakeIteration();
    ASSERT_TRUE(it.ok());
    EXPECT_EQ(it->samples.size(), static_cast<size_t>(sizes[static_cast<size_t>(i)]));
    EXPECT_EQ(it->last_of_request, i == 3);
    for (SampleKey k : KeysOf(*it)) seen.insert(k);
  }
  const std::vector<SampleKey> all = Range(0, 14);
  EXPECT_EQ(seen, std::multiset<SampleKey>(all.begin(), all.end()));
  EXPECT_LE(p.Stats().peak_outstanding, 3);
}

TEST(RequestPrefetcher, DecoupledErrorEndsOnlyThatRequest) {
  FakeFetch f;
  f.Open();
  RequestPrefetcher p({2, 2, 16}, [&](const auto& k) { return f(k); });
  p.Add({1, 2, FakeFetch::kBad, 3, 4, 5});  // three iterations planned
  p.Add({6, 7});
  std::vector<bool> failed;
  for (int i = 0; i < 3; ++i) {
    p.AssignIteration();
    auto it = p.TakeIteration();
    failed.push_back(!it.ok());
    if (!it.ok()) {
      EXPECT_NE(it.status().ToString().find("1000"), std::string::npos);
    }
  }
  // Good mini-batches may arrive before the bad one; from the first error on, all fail
  // (4 good samples cannot fill 3 iterations of 2).
  EXPECT_TRUE(failed[2]);
  EXPECT_TRUE(std::is_sorted(failed.begin(), failed.end()));
  ASSERT_EQ(p.NextIterationSize(), 2);
  p.AssignIteration();
  auto next = p.TakeIteration();
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(KeysOf(*next), (std::vector<SampleKey>{6, 7}));
  EXPECT_EQ(p.Stats().failed_requests, 1);
}

TEST(RequestPrefetcher, DestructorEndsWithFetchesPending) {
  FakeFetch f;
  {
    RequestPrefetcher p({0, 2, 16}, [&](const auto& k) { return f(k); });
    p.Add({1});
    p.Add({2});
    p.Add({3});
    f.WaitStarted(2);
    f.Open();  // the worker threads return; the queued third chunk is never fetched
  }
  EXPECT_LE(f.calls(), 3);
}

}  // namespace
}  // namespace cqlstream::dali_plugin
