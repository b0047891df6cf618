// Copyright (c) cqlstream authors.
#include "hostile/child_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern char** environ;

namespace cqlstream::hostile {
namespace {

// VmHWM of a running process in KiB; 0 when it cannot be read (gone, zombie).
long VmHwmKb(pid_t pid) {
  FILE* f = std::fopen(fmt::format("/proc/{}/status", pid).c_str(), "r");
  if (f == nullptr) return 0;
  char line[256];
  long kb = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, "VmHWM:", 6) == 0) {
      kb = std::strtol(line + 6, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return kb;
}

constexpr size_t kKeep = 1 << 20;

struct Running {
  pid_t pid = -1;
  int out = -1, err = -1;
  bool done = false;
  std::chrono::steady_clock::time_point start;
};

void Drain(int* fd, std::string* into) {
  if (*fd < 0) return;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(*fd, buf, sizeof buf);
    if (n > 0) {
      if (into->size() < kKeep) into->append(buf, std::min<size_t>(static_cast<size_t>(n), kKeep - into->size()));
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      ::close(*fd);
      *fd = -1;
    }
    return;
  }
}

}  // namespace

std::string ChildResult::Describe() const {
  std::string how;
  if (!started) {
    how = "could not start";
  } else if (timed_out) {
    how = fmt::format("still running after {:.1f} s: killed (a hang past the bound)", seconds);
  } else if (signal != 0) {
    how = fmt::format("killed by signal {} ({}) after {:.1f} s", signal, strsignal(signal), seconds);
  } else {
    how = fmt::format("exit {} after {:.1f} s", exit_code, seconds);
  }
  auto tail = [](const std::string& s) { return s.size() > 1500 ? "..." + s.substr(s.size() - 1500) : s; };
  return fmt::format("{}: {}, peak RSS {} MB\n--- stdout:\n{}\n--- stderr:\n{}", label, how, peak_rss_kb / 1024,
                     tail(out), tail(err));
}

std::vector<ChildResult> RunAll(const std::vector<ChildSpec>& specs, std::chrono::seconds bound) {
  std::vector<ChildResult> res(specs.size());
  std::vector<Running> run(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    res[i].label = specs[i].label;
    int po[2], pe[2];
    if (::pipe2(po, O_CLOEXEC) != 0) continue;
    if (::pipe2(pe, O_CLOEXEC) != 0) {
      ::close(po[0]);
      ::close(po[1]);
      continue;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    std::vector<char*> argv;
    for (const auto& a : specs[i].argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    run[i].start = std::chrono::steady_clock::now();
    const int rc = posix_spawn(&run[i].pid, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(po[1]);
    ::close(pe[1]);
    run[i].out = po[0];
    run[i].err = pe[0];
    ::fcntl(po[0], F_SETFL, O_NONBLOCK);
    ::fcntl(pe[0], F_SETFL, O_NONBLOCK);
    if (rc != 0) {
      res[i].err = fmt::format("posix_spawn {}: {}", specs[i].argv[0], std::strerror(rc));
      run[i].done = true;
      continue;
    }
    res[i].started = true;
  }
  const auto deadline = std::chrono::steady_clock::now() + bound;
  std::vector<long> sampled(specs.size(), 0);
  for (;;) {
    bool any = false;
    std::vector<pollfd> fds;
    for (size_t i = 0; i < run.size(); ++i) {
      Drain(&run[i].out, &res[i].out);
      Drain(&run[i].err, &res[i].err);
      if (run[i].done) continue;
      int status = 0;
      rusage ru{};
      const long hwm = VmHwmKb(run[i].pid);  // before wait4 reaps it
      sampled[i] = std::max(sampled[i], hwm);
      const pid_t p = ::wait4(run[i].pid, &status, WNOHANG, &ru);
      const bool late = std::chrono::steady_clock::now() >= deadline;
      if (p == 0 && late) {
        ::kill(run[i].pid, SIGKILL);
        ::wait4(run[i].pid, &status, 0, &ru);
        res[i].timed_out = true;
      }
      if (p == run[i].pid || res[i].timed_out) {
        run[i].done = true;
        res[i].seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - run[i].start).count();
        res[i].peak_rss_kb = sampled[i] > 0 ? sampled[i] : ru.ru_maxrss;
        if (!res[i].timed_out && WIFEXITED(status)) res[i].exit_code = WEXITSTATUS(status);
        if (!res[i].timed_out && WIFSIGNALED(status)) res[i].signal = WTERMSIG(status);
        continue;
      }
      any = true;
      if (run[i].out >= 0) fds.push_back({run[i].out, POLLIN, 0});
      if (run[i].err >= 0) fds.push_back({run[i].err, POLLIN, 0});
    }
    if (!any) break;
    ::poll(fds.data(), fds.size(), 20);
  }
  for (size_t i = 0; i < run.size(); ++i) {
    Drain(&run[i].out, &res[i].out);
    Drain(&run[i].err, &res[i].err);
    if (run[i].out >= 0) ::close(run[i].out);
    if (run[i].err >= 0) ::close(run[i].err);
  }
  return res;
}

}  // namespace cqlstream::hostile
