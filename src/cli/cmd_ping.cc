// Copyright (c) cqlstream authors.
//
// `cqlstream ping`: connects, prints the cluster name and every host (address,
// data center, release version, token count) and the round-trip time of a
// trivial query to each host. The state shown is the one measured: a host
// whose round trips failed is `down`, whatever the cluster's gossip says.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <vector>

#include "cli/cli.h"

namespace cqlstream::cli {

void RegisterPing(CLI::App& app, Action* action) {
  auto* cmd = app.add_subcommand("ping", "Connect to the cluster and show its hosts and round-trip time");
  auto flags = std::make_shared<ConnectionFlags>();
  flags->Add(cmd);
  auto count = std::make_shared<int>(5);
  cmd->add_option("--count", *count, "Queries to time (the median is printed)")->check(CLI::Range(1, 1000));
  cmd->callback([action, flags, count] {
    *action = [flags, count]() -> int {
      net::SessionOptions so;
      so.watch_events = false;
      auto session = flags->Connect(so);
      if (!session.ok()) return ReportError(session.status());
      auto& s = **session;
      fmt::print("cluster: {}\n", s.cluster_name());
      fmt::print("local data center: {}\n", s.local_dc());
      if (const int ignored = s.IgnoredPeerRows(); ignored > 0) {
        fmt::print("system.peers rows left out: {} (each named a host already listed)\n", ignored);
      }
      auto hosts = s.Hosts();
      fmt::print("{:<24} {:<12} {:<10} {:<10} {:>7} {:>6} {:>12}\n", "host", "dc", "rack", "release", "tokens",
                 "state", "rtt (median)");
      int failed = 0;
      for (const auto& h : hosts) {
        // Round trip of a trivial query sent to this host only.
        std::vector<double> rtts;
        Status err;
        for (int i = 0; i < *count && err.ok(); ++i) {
          net::Statement st = net::Statement::Query("SELECT release_version FROM system.local WHERE key='local'");
          st.target_host = h.address;
          st.idempotent = true;
          auto t0 = std::chrono::steady_clock::now();
          auto r = s.Execute(st);
          auto t1 = std::chrono::steady_clock::now();
          if (!r.ok()) err = r.status();
          rtts.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        }
        std::sort(rtts.begin(), rtts.end());
        std::string rtt = err.ok() ? fmt::format("{:.3f} ms", rtts[rtts.size() / 2]) : "failed";
        fmt::print("{:<24} {:<12} {:<10} {:<10} {:>7} {:>6} {:>12}\n", fmt::format("{}:{}", h.address, h.port),
                   h.datacenter, h.rack, h.release_version, h.token_count, err.ok() ? "up" : "down", rtt);
        if (!err.ok()) {
          std::fprintf(stderr, "cqlstream: host %s: %s\n", h.address.c_str(), err.ToString().c_str());
          ++failed;
        }
      }
      s.Close();
      return failed == 0 ? 0 : 1;
    };
  });
}

}  // namespace cqlstream::cli
