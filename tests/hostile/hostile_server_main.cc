// Copyright (c) cqlstream authors.
//
// cqlstream-hostile-server: the hostile fake CQL server as a process, for
// tests that drive the CLI or the Python package against it.
//
//   cqlstream-hostile-server --mode MODE [--listen 127.0.0.1:PORT]
//       serves until SIGINT/SIGTERM; PORT 0 (default) picks a free port.
//       Prints "listening 127.0.0.1:PORT" on stdout once it accepts, and
//       "lie told" once the first lie was told (see HostileServer::lies_told).
//   cqlstream-hostile-server --list-modes
//       one line per mode: NAME EXPECT_READ EXPECT_CONNECT EXPECT_ATTACHED EXPECT_TINY PROBLEM-WORDS
//   cqlstream-hostile-server --print-dataset [native|attached|tiny]
//       the honest native dataset toy (or the attached one, or the native
//       one read in coalesced groups) as JSON: keyspace,
//       dataset, split, and per sample its key ("seg:idx") and payload in hex.
#include <fmt/format.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>

#include "hostile/hostile_server.h"

namespace {

using cqlstream::hostile::Expect;

const char* ExpectName(Expect e) {
  switch (e) {
    case Expect::kCorrect:
      return "correct";
    case Expect::kError:
      return "error";
    case Expect::kEither:
      return "either";
  }
  return "?";
}

// The dataset `which` names ("native": toy, "attached", "tiny"): seg 0,
// idx i, holding PayloadOf(dataset, i) (the attached dataset's samples are
// its key snapshot's, their bytes in the foreign table).
void PrintDataset(const std::string& which) {
  namespace h = cqlstream::hostile;
  const std::string dataset = which == "attached" ? h::kAttachedDataset : which == "tiny" ? h::kTinyDataset
                                                                                           : h::kDataset;
  fmt::print("{{\"keyspace\": \"{}\", \"dataset\": \"{}\", \"split\": \"{}\", \"samples\": [", h::kKeyspace,
             dataset, h::kSplit);
  const int32_t n = h::SamplesOf(dataset);
  for (int32_t i = 0; i < n; ++i) {
    std::string hex;
    for (uint8_t b : h::PayloadOf(dataset, i)) hex += fmt::format("{:02x}", b);
    fmt::print("{}{{\"key\": \"0:{}\", \"hex\": \"{}\"}}", i ? ", " : "", i, hex);
  }
  fmt::print("]}}\n");
}

int Usage(const std::string& why) {
  fmt::print(stderr,
             "cqlstream-hostile-server: {}\nusage: cqlstream-hostile-server --mode MODE [--listen HOST:PORT] | "
             "--list-modes | --print-dataset [native|attached|tiny]\n",
             why);
  return 2;
}

int Main(int argc, char** argv) {
  std::string mode, listen = "127.0.0.1:0";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--list-modes") {
      for (const auto& m : cqlstream::hostile::AllModes()) {
        fmt::print("{} {} {} {} {} {}\n", m.name, ExpectName(m.expect), ExpectName(m.expect_connect),
                   ExpectName(m.expect_attached), ExpectName(m.expect_tiny), *m.problem ? m.problem : "-");
      }
      return 0;
    }
    if (a == "--print-dataset") {
      const std::string which = i + 1 < argc ? argv[i + 1] : "native";
      if (which != "native" && which != "attached" && which != "tiny") {
        return Usage("--print-dataset takes native, attached or tiny");
      }
      PrintDataset(which);
      return 0;
    }
    if ((a == "--mode" || a == "--listen") && i + 1 < argc) {
      (a == "--mode" ? mode : listen) = argv[++i];
      continue;
    }
    return Usage(fmt::format("unknown argument '{}'", a));
  }
  auto m = cqlstream::hostile::FindMode(mode);
  if (!m) return Usage(mode.empty() ? "--mode is required" : fmt::format("unknown mode '{}'", mode));
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return Usage(fmt::format("--listen wants HOST:PORT, got '{}'", listen));
  char* end = nullptr;
  const unsigned long port = std::strtoul(listen.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port > 65535) return Usage(fmt::format("bad port in '{}'", listen));
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before any thread starts: they inherit the mask
  auto s = cqlstream::hostile::HostileServer::Start(m->mode, listen.substr(0, colon), static_cast<uint16_t>(port));
  if (!s.ok()) {
    fmt::print(stderr, "cqlstream-hostile-server: {}\n", s.status().ToString());
    return 1;
  }
  fmt::print("listening {}:{}\n", listen.substr(0, colon), (*s)->port());
  std::fflush(stdout);
  // "lie told" once, when the first is: a test that must act while a lie
  // holds its reader (a Ctrl-C while a data read is swallowed) waits for it.
  std::atomic<bool> done{false};
  std::thread announce([&done, server = s->get()] {
    while (!done.load() && server->lies_told() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (done.load()) return;
    fmt::print("lie told\n");
    std::fflush(stdout);
  });
  int sig = 0;
  sigwait(&set, &sig);
  done = true;
  announce.join();
  (*s)->Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "cqlstream-hostile-server: {}\n", e.what());
    return 1;
  }
}
