// Copyright (c) cqlstream authors.
//
// Small measurements shared by the benchmark tools (`cqlstream bench`,
// cqlstream-cql-micro, cqlstream-wan-validate) and the store's reports: this
// process's CPU time and peak resident memory, percentiles of a sample, and
// seconds elapsed on the steady clock.
//
// Thread-safety: all functions are thread-safe (no shared state).
#ifndef CQLSTREAM_UTIL_MEASURE_H_
#define CQLSTREAM_UTIL_MEASURE_H_

#include <chrono>
#include <vector>

namespace cqlstream {

// User + system CPU seconds of this process, all threads (getrusage).
double ProcessCpuSeconds();
// Peak resident set size of this process, in MiB.
double PeakRssMb();
// The p-th percentile (0..100) by nearest rank of `v`; 0 when empty.
double Percentile(std::vector<double> v, double p);
// Seconds on the steady clock since `since`.
inline double SecondsSince(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace cqlstream

#endif  // CQLSTREAM_UTIL_MEASURE_H_
