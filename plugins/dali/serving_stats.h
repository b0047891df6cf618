// Copyright (c) cqlstream authors.
//
// A process-wide registry of the serving operators' counters, by operator
// name, so that Python (cqlstream.serving.stats) and monitoring can read them
// without a pipeline output: the plugin exports
//
//   extern "C" int cqlstream_serving_stats(const char* name, char* buf, int len);
//
// which writes "key=value" pairs separated by spaces (requests, iterations,
// fetches, failed_requests, issued_ahead, in_flight, peak_in_flight,
// peak_outstanding, max_outstanding) of the most recently built operator of
// that name that still lives, then operators=<how many live operators have
// that name>, and returns the length of the text (without the terminating
// NUL; the text is cut to len - 1 bytes), or -1 when no such operator lives.
// Several operators may share a name (two pipelines in one process, or
// instances of one Triton model): each is registered until it is destroyed,
// so destroying the newest makes the one before it visible again.
//
// Thread-safety: all functions may be called from any thread (one mutex).
// Ownership: the registry does not own the prefetchers; an operator
// unregisters its own before destroying it.
#ifndef CQLSTREAM_PLUGINS_DALI_SERVING_STATS_H_
#define CQLSTREAM_PLUGINS_DALI_SERVING_STATS_H_

#include <string>

#include "request_prefetcher.h"

namespace cqlstream::dali_plugin {

void RegisterServingStats(const std::string& name, const RequestPrefetcher* p, int max_outstanding);
void UnregisterServingStats(const std::string& name, const RequestPrefetcher* p);

}  // namespace cqlstream::dali_plugin

extern "C" __attribute__((visibility("default"))) int cqlstream_serving_stats(const char* name, char* buf, int len);

#endif  // CQLSTREAM_PLUGINS_DALI_SERVING_STATS_H_
