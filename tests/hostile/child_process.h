// Copyright (c) cqlstream authors.
//
// Test-only: runs programs as child processes under a wall-clock bound and
// reports how they ended (exit code, signal, killed at the bound), their
// output and their peak resident memory, so that a test can tell a clean
// error from a crash, a hang or runaway memory.
//
// Thread-safety: RunAll is reentrant; it spawns with posix_spawn (no code
// runs between fork and exec), so it is safe in a process with threads.
#ifndef CQLSTREAM_TESTS_HOSTILE_CHILD_PROCESS_H_
#define CQLSTREAM_TESTS_HOSTILE_CHILD_PROCESS_H_

#include <chrono>
#include <string>
#include <vector>

namespace cqlstream::hostile {

struct ChildResult {
  std::string label;
  bool started = false;
  bool timed_out = false;    // still running at the bound: killed with SIGKILL
  int exit_code = -1;        // when it exited
  int signal = 0;            // when a signal ended it (other than our SIGKILL)
  std::string out, err;      // at most 1 MiB each are kept
  // The child's own peak RSS: the largest VmHWM of /proc/<pid>/status seen
  // while it ran (sampled every poll, at most 20 ms apart; VmHWM belongs to
  // the memory the child has had since its exec). wait4's ru_maxrss is not
  // used when a sample exists: Linux carries the spawning process's
  // high-water mark over the exec, so under ASan (a ~400 MB test process)
  // every child would look that large. Without a sample (a child that ended
  // before the first poll) it is ru_maxrss, which can only overstate.
  long peak_rss_kb = 0;
  double seconds = 0;
  std::string Describe() const;  // "label: exit 1 after 0.3 s, 12 MB; stderr: ..."
};

struct ChildSpec {
  std::string label;
  std::vector<std::string> argv;
};

// Runs every spec at once; each is killed when `bound` has passed.
std::vector<ChildResult> RunAll(const std::vector<ChildSpec>& specs, std::chrono::seconds bound);

}  // namespace cqlstream::hostile

#endif  // CQLSTREAM_TESTS_HOSTILE_CHILD_PROCESS_H_
