// Copyright (c) cqlstream authors.
#include "serving_stats.h"

#include <fmt/format.h>

#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "util/mutex.h"

namespace cqlstream::dali_plugin {
namespace {

struct Entry {
  const RequestPrefetcher* p = nullptr;
  int max_outstanding = 0;
};

Mutex& RegistryMu() {
  static Mutex mu;
  return mu;
}
// Guarded by RegistryMu(). Per name, the live operators in the order they
// were built: pipelines of the same model (or two in one process) share
// operator names, so one entry per name would let the newest hide, and its
// destruction unregister, an older one that still serves.
std::map<std::string, std::vector<Entry>>& Registry() {
  static std::map<std::string, std::vector<Entry>> m;
  return m;
}

}  // namespace

void RegisterServingStats(const std::string& name, const RequestPrefetcher* p, int max_outstanding) {
  MutexLock l(&RegistryMu());
  Registry()[name].push_back(Entry{p, max_outstanding});
}

void UnregisterServingStats(const std::string& name, const RequestPrefetcher* p) {
  MutexLock l(&RegistryMu());
  auto it = Registry().find(name);
  if (it == Registry().end()) return;
  std::erase_if(it->second, [p](const Entry& e) { return e.p == p; });
  if (it->second.empty()) Registry().erase(it);
}

}  // namespace cqlstream::dali_plugin

extern "C" int cqlstream_serving_stats(const char* name, char* buf, int len) {
  using namespace cqlstream::dali_plugin;  // NOLINT(build/namespaces)
  if (name == nullptr) return -1;
  std::string text;
  {
    cqlstream::MutexLock l(&RegistryMu());
    auto it = Registry().find(name);
    if (it == Registry().end() || it->second.empty()) return -1;
    const Entry& latest = it->second.back();
    const PrefetcherStats s = latest.p->Stats();
    text = fmt::format(
        "requests={} iterations={} fetches={} failed_requests={} issued_ahead={} in_flight={} "
        "peak_in_flight={} peak_outstanding={} max_outstanding={} operators={}",
        s.requests, s.iterations, s.fetches, s.failed_requests, s.issued_ahead, s.in_flight, s.peak_in_flight,
        s.peak_outstanding, latest.max_outstanding, it->second.size());
  }
  if (buf != nullptr && len > 0) {
    const size_t n = std::min(text.size(), static_cast<size_t>(len - 1));
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  }
  return static_cast<int>(text.size());
}
