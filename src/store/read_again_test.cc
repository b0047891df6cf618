// Copyright (c) cqlstream authors.
#include "store/read_again.h"

#include <gtest/gtest.h>

#include <string>

namespace cqlstream::store {
namespace {

TEST(ReadAgainTest, AnAnswerAtTheFirstAttemptIsReadOnce) {
  int calls = 0;
  StatusOr<int> r = ReadAgainOnCorruption(kReadAttempts, [&]() -> StatusOr<int> { return ++calls * 10; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 10);
  EXPECT_EQ(calls, 1);
}

TEST(ReadAgainTest, ACorruptionIsReadAgainUntilAnAnswerComes) {
  int calls = 0;
  StatusOr<std::string> r = ReadAgainOnCorruption(3, [&]() -> StatusOr<std::string> {
    if (++calls < 3) return Status::Corruption("an answer meant for another read");
    return std::string("rows");
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "rows");
  EXPECT_EQ(calls, 3);
}

TEST(ReadAgainTest, ACorruptionEveryTimeStandsAfterTheLastAttempt) {
  int calls = 0;
  Status st = ReadAgainOnCorruption(3, [&] { return Status::Corruption("answer " + std::to_string(++calls)); });
  EXPECT_EQ(st.code(), Status::Code::kCorruption);
  EXPECT_EQ(calls, 3);
  // The last answer's error is the one returned.
  EXPECT_NE(st.ToString().find("answer 3"), std::string::npos) << st.ToString();
}

TEST(ReadAgainTest, OtherErrorsAreNotReadAgain) {
  int calls = 0;
  Status st = ReadAgainOnCorruption(3, [&] {
    ++calls;
    return Status::Timeout("no answer in time");
  });
  EXPECT_EQ(st.code(), Status::Code::kTimeout);
  EXPECT_EQ(calls, 1);
}

TEST(ReadAgainTest, FewerThanOneAttemptReadsOnce) {
  int calls = 0;
  Status st = ReadAgainOnCorruption(0, [&] {
    ++calls;
    return Status::Corruption("stray");
  });
  EXPECT_EQ(st.code(), Status::Code::kCorruption);
  EXPECT_EQ(calls, 1);
}

TEST(ReadAgainTest, ThePredicateSaysWhatIsReadAgain) {
  // An OK result the reader's own checks refuse (another sample's rows) is
  // read again like a Corruption.
  int calls = 0;
  auto count = [&]() -> StatusOr<int> { return ++calls; };
  StatusOr<int> r = ReadAgainWhile(3, count, [](const StatusOr<int>& x) { return x.ok() && *x < 3; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 3);
  EXPECT_EQ(calls, 3);
  // Refused every time: the last result stands after `attempts`.
  calls = 0;
  r = ReadAgainWhile(2, count, [](const StatusOr<int>&) { return true; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 2);
  EXPECT_EQ(calls, 2);
  // A Corruption the predicate does not refuse is returned at once.
  calls = 0;
  Status st = ReadAgainWhile(
      3,
      [&] {
        ++calls;
        return Status::Corruption("x");
      },
      [](const Status&) { return false; });
  EXPECT_EQ(st.code(), Status::Code::kCorruption);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace cqlstream::store
