// Copyright (c) cqlstream authors.
//
// ConnectionBudget: half the soft descriptor limit less what else is open,
// at least one; the process's own count moves with the descriptors it opens.
#include "net/fd_budget.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <limits>
#include <vector>

namespace cqlstream::net {
namespace {

TEST(FdBudget, HalfTheSoftLimitLessTheOtherDescriptors) {
  EXPECT_EQ(ConnectionBudget(1024, 40, 0), 512 - 40);
  // Our own connections are not "other" descriptors.
  EXPECT_EQ(ConnectionBudget(1024, 240, 200), 512 - 40);
  // Four hosts x 256 connections would need 1024: the default limit leaves 472.
  EXPECT_LT(ConnectionBudget(1024, 40, 0), 4 * 256);
  // Never below one, even with the descriptors all used elsewhere.
  EXPECT_EQ(ConnectionBudget(64, 60, 0), 1);
  EXPECT_EQ(ConnectionBudget(1048576, 10, 0), 524288 - 10);
}

TEST(FdBudget, CountsThisProcesssDescriptors) {
  const int before = OpenDescriptors();
  ASSERT_GT(before, 2);  // stdin, stdout, stderr at least
  std::vector<int> fds;
  for (int i = 0; i < 5; ++i) fds.push_back(open("/dev/null", O_RDONLY | O_CLOEXEC));
  EXPECT_EQ(OpenDescriptors(), before + 5);
  const int with = ConnectionBudget(0);
  for (int fd : fds) close(fd);
  // (An unlimited soft limit gives no budget to move.)
  EXPECT_EQ(ConnectionBudget(0), with == std::numeric_limits<int>::max() ? with : with + 5);
}

}  // namespace
}  // namespace cqlstream::net
