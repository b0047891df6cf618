// Copyright (c) cqlstream authors.
#include "net/fd_budget.h"

#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <system_error>

namespace cqlstream::net {

int OpenDescriptors() {
  std::error_code ec;
  std::filesystem::directory_iterator it("/proc/self/fd", ec);
  if (ec) return -1;
  int n = 0;
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (ec) return -1;
    ++n;
  }
  return std::max(0, n - 1);  // less the iterator's own descriptor
}

int ConnectionBudget(long soft_limit, int open_descriptors, int own_connections) {
  const long others = std::max(0, open_descriptors - own_connections);
  const long budget = soft_limit / 2 - others;
  return static_cast<int>(std::clamp<long>(budget, 1, std::numeric_limits<int>::max()));
}

int ConnectionBudget(int own_connections) {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return std::numeric_limits<int>::max();
  const long soft = static_cast<long>(std::min<rlim_t>(r.rlim_cur, std::numeric_limits<int>::max()));
  const int open = OpenDescriptors();
  return ConnectionBudget(soft, open < 0 ? own_connections : open, own_connections);
}

}  // namespace cqlstream::net
