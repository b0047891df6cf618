// Copyright (c) cqlstream authors.
//
// cqlstream-hostile-loader: reads the hostile server's dataset with the C++
// Loader and says what came of it, for hostile_tests (which runs it as a
// child process, so that a crash or a hang is observed, not suffered).
//
//   cqlstream-hostile-loader --port PORT [--ordered] [--dataset NAME] [--epochs N]
//                            [--fixed-window W] [--recheck-after-ms MS]
//
// NAME is the native dataset toy (default), the attached one (toy's
// payloads, h::SamplePayload, and more samples) or tiny (native, one chunk
// per sample, read in coalesced groups; h::TinyPayload).
// N epochs (default 1): a later epoch reads the keys an earlier one found.
// W: a window fixed at W samples in flight (LoaderOptions::adaptive false,
// max_in_flight W): the samples issued after the first W answers are many,
// and the groups keep their size (a quarter of the window), whatever the
// timing (an adaptive window may shrink under load until no group forms).
// MS: every batch is kept, and after the last epoch, MS milliseconds later,
// compared again: bytes that land in a batch after it was handed out (the
// rest of an answer whose request timed out) are a wrong result too.
//
// Exit 0 and "OK <n> retries <r> coalesced <c> group_failures <g> timeouts <t>
// ignored_peer_rows <p>": every sample exactly once per epoch with its
// honest payload (n: the samples of one epoch; r: the Loader's retries, which show that answers were refused;
// c: its requests that read several samples; g: samples a grouped read did
// not deliver, LoaderMetrics::group_failures; t: its requests that timed
// out, which a busy machine may cause in any mode; p: the system.peers rows
// the session left out, LoaderMetrics::ignored_peer_rows).
// Exit 1 and "ERROR <status>": the Loader returned an error Status.
// Exit 3 and "WRONG <what>": the Loader returned data that is not the
// dataset (a silently wrong result).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cqlstream/loader.h"
#include "hostile/honest_world.h"

namespace {

namespace h = cqlstream::hostile;

int Wrong(const std::string& what) {
  fmt::print("WRONG {}\n", what);
  return 3;
}

int Main(int argc, char** argv) {
  cqlstream::LoaderOptions o;
  o.connection.hosts = {"127.0.0.1"};
  o.connection.keyspace = h::kKeyspace;
  o.connection.connect_timeout = std::chrono::milliseconds(2000);
  o.connection.request_timeout = std::chrono::milliseconds(1000);
  o.dataset = h::kDataset;
  o.split = h::kSplit;
  o.batch_size = 8;
  o.epochs = 1;
  o.rank = 0;
  o.world_size = 1;
  o.request_timeout = std::chrono::milliseconds(1000);
  o.max_attempts = 3;
  o.retry_budget = std::chrono::milliseconds(5000);
  int recheck_ms = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--port" && i + 1 < argc) {
      o.connection.port = static_cast<uint16_t>(std::atoi(argv[++i]));
    } else if (a == "--ordered") {
      o.ordered = true;
    } else if (a == "--dataset" && i + 1 < argc) {
      o.dataset = argv[++i];
    } else if (a == "--epochs" && i + 1 < argc) {
      o.epochs = std::atoi(argv[++i]);
    } else if (a == "--fixed-window" && i + 1 < argc) {
      o.max_in_flight = std::atoi(argv[++i]);
      o.adaptive = false;
    } else if (a == "--recheck-after-ms" && i + 1 < argc) {
      recheck_ms = std::atoi(argv[++i]);
    } else {
      fmt::print(stderr,
                 "usage: cqlstream-hostile-loader --port PORT [--ordered] [--dataset NAME] [--epochs N] "
                 "[--fixed-window W] [--recheck-after-ms MS]\n");
      return 2;
    }
  }
  auto l = cqlstream::Loader::Open(o);
  if (!l.ok()) {
    fmt::print("ERROR {}\n", l.status().ToString());
    return 1;
  }
  const int32_t count = h::SamplesOf(o.dataset);
  if (count == 0) {
    fmt::print(stderr, "cqlstream-hostile-loader: no dataset '{}' in the hostile world\n", o.dataset);
    return 2;
  }
  // The payload check of every sample of `batch`; "" when all are honest.
  auto check = [&](const cqlstream::Batch& batch) -> std::string {
    for (size_t i = 0; i < batch.size(); ++i) {
      const auto idx = static_cast<int32_t>(batch.keys[i] & 0xffffffffu);
      const auto want = h::PayloadOf(o.dataset, idx);
      const auto got = batch.sample(i);
      if (got.size() != want.size() || !std::equal(got.begin(), got.end(), want.begin())) {
        return fmt::format("sample 0:{}: {} bytes that are not its payload ({} bytes)", idx, got.size(), want.size());
      }
    }
    return "";
  };
  std::vector<cqlstream::BatchPtr> kept;
  for (int64_t e = 0; e < o.epochs; ++e) {
    // Next() answers nullptr at the end of each epoch.
    std::set<cqlstream::SampleKey> seen;
    for (;;) {
      auto b = (*l)->Next();
      if (!b.ok()) {
        fmt::print("ERROR {}\n", b.status().ToString());
        return 1;
      }
      if (*b == nullptr) break;
      const cqlstream::Batch& batch = **b;
      if (batch.epoch != e) return Wrong(fmt::format("a batch of epoch {} in epoch {}", batch.epoch, e));
      for (size_t i = 0; i < batch.size(); ++i) {
        const cqlstream::SampleKey k = batch.keys[i];
        const auto idx = static_cast<int32_t>(k & 0xffffffffu);
        if ((k >> 32) != 0 || idx < 0 || idx >= count) return Wrong(fmt::format("unknown key {:#x}", k));
        if (!seen.insert(k).second) return Wrong(fmt::format("sample 0:{} delivered twice in epoch {}", idx, e));
      }
      if (const std::string bad = check(batch); !bad.empty()) return Wrong(bad);
      if (recheck_ms >= 0) kept.push_back(std::move(*b));
    }
    if (seen.size() != static_cast<size_t>(count)) {
      return Wrong(fmt::format("{} of {} samples delivered in epoch {}", seen.size(), count, e));
    }
  }
  if (recheck_ms >= 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(recheck_ms));
    for (const auto& b : kept) {
      const std::string bad = check(*b);
      if (!bad.empty()) return Wrong(fmt::format("after {} ms, {}", recheck_ms, bad));
    }
  }
  const cqlstream::LoaderMetrics m = (*l)->Metrics();
  fmt::print("OK {} retries {} coalesced {} group_failures {} timeouts {} ignored_peer_rows {}\n", count, m.retries,
             m.coalesced_requests, m.group_failures, m.timeouts, m.ignored_peer_rows);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    fmt::print("ERROR exception: {}\n", e.what());
    return 1;
  }
}
