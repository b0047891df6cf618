// Copyright (c) cqlstream authors.
//
// cqlstream-cql-micro: raw read throughput of cqlstream's own CQL client
// (net::Session), without the loader. Keeps C requests in flight (a new one
// is started from the completion of the previous one) and lands every blob
// straight in caller memory through a CellSink, as the loader does.
//
// Two workloads:
//   * blobs (default): `SELECT v FROM <ks>.micro_blobs WHERE k = ?` over
//     --keys rows of --blob-size bytes (--setup writes them once);
//   * --dataset NAME [--split S]: `store::DataReadQuery(dataset)` over the
//     committed keys of the split (shuffled), each sample's chunks landing in
//     one buffer of its size, the key columns checked first — the request the
//     loader sends for every sample.
//
// For each concurrency level (--concurrency 1,64,1024,8192) it runs
// --warmup-s, then measures --measure-s and prints requests/s, MB/s (blob
// bytes, 10^6), client CPU seconds per GB (getrusage of this process: user +
// system, all threads) and the p50/p99 latency of the requests completed in
// the measured interval. --json prints one JSON line per level.
//
// Threading: completions run on the session's I/O threads; the counters are
// atomics and the latency samples sit behind a mutex (one push per request).
#include <fmt/format.h>
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cql/frame_decoder.h"
#include "cqlstream/dataset.h"
#include "cqlstream/options.h"
#include "net/session.h"
#include "store/catalog.h"
#include "store/sample_row.h"
#include "util/main_guard.h"
#include "util/measure.h"

namespace cqlstream::bench {
namespace {

using Clock = std::chrono::steady_clock;

int64_t BigEndian(cql::ByteView b) {
  int64_t v = 0;
  for (uint8_t c : b) v = (v << 8) | c;
  if (b.size() == 4) v = static_cast<int32_t>(static_cast<uint32_t>(v));
  return v;
}

// Lands the blob of one answer in memory it allocates (uninitialised, like
// a pooled batch buffer). Blob mode: the single cell of column 0. Dataset
// mode: the data cells (column 7) of all rows, in order, into one region of
// the sample's size (static column 2, which precedes them), after checking
// that the key columns name the sample asked for.
class Landing final : public cql::CellSink {
 public:
  Landing(bool dataset, int32_t seg, int32_t idx) : dataset_(dataset), seg_(seg), idx_(idx) {}
  Status OnRowsBegin(const cql::RowsMetadata&, int32_t) override { return Status::OK(); }
  std::span<uint8_t> CellDestination(int32_t row, int32_t col, int32_t size) override {
    if (!dataset_) {
      if (col != 0 || row != 0) return {};
      Reserve(static_cast<uint64_t>(size));
      return {buf_.get(), static_cast<size_t>(size)};
    }
    if (col != store::kColData || !key_ok_ || size_ < 0) return {};
    if (written_ + static_cast<uint64_t>(size) > static_cast<uint64_t>(size_)) return {};
    if (!buf_) Reserve(static_cast<uint64_t>(size_));
    return {buf_.get() + written_, static_cast<size_t>(size)};
  }
  Status OnCell(int32_t row, int32_t col, std::optional<cql::ByteView> data) override {
    if (!dataset_) {
      if (row == 0 && col == 0 && data) written_ += data->size();
      return Status::OK();
    }
    if (!data) return Status::OK();
    if (col == store::kColSeg && BigEndian(*data) != seg_) return Status::Corruption("answer for another segment");
    if (col == store::kColIdx) {
      if (BigEndian(*data) != idx_) return Status::Corruption("answer for another index");
      key_ok_ = true;
    }
    if (col == store::kColSize && row == 0) size_ = BigEndian(*data);
    if (col == store::kColData) {
      if (!buf_ || data->data() != buf_.get() + written_) return Status::Internal("data cell not landed in place");
      written_ += data->size();
    }
    return Status::OK();
  }
  uint64_t written() const { return written_; }
  bool complete() const { return !dataset_ || (size_ >= 0 && written_ == static_cast<uint64_t>(size_)); }

 private:
  void Reserve(uint64_t n) { buf_.reset(new uint8_t[std::max<uint64_t>(n, 1)]); }
  bool dataset_;
  int32_t seg_, idx_;
  bool key_ok_ = false;
  int64_t size_ = -1;
  uint64_t written_ = 0;
  std::unique_ptr<uint8_t[]> buf_;
};

struct Args {
  std::vector<std::string> hosts = {"127.0.0.1"};
  uint16_t port = 9042;
  std::string keyspace = "cqlstream_micro";
  std::string dataset, split = "train";
  std::vector<int> concurrency = {1, 64, 1024, 8192};
  double warmup_s = 2, measure_s = 10;
  int connections = 2, io_threads = 0, keys = 2048, blob_size = 100000, page_size = 64;
  bool setup = false, json = false;
};

struct Level {
  int concurrency;
  uint64_t requests = 0, bytes = 0, errors = 0;
  double seconds = 0, cpu = 0, p50 = 0, p99 = 0;
};

class Runner {
 public:
  Runner(std::shared_ptr<net::Session> s, net::PreparedPtr stmt, std::vector<uint64_t> keys, bool dataset,
         int page_size)
      : s_(std::move(s)), stmt_(std::move(stmt)), keys_(std::move(keys)), dataset_(dataset), page_size_(page_size) {}

  StatusOr<Level> Run(int concurrency, double warmup_s, double measure_s) {
    Level r{concurrency};
    {
      std::lock_guard<std::mutex> l(mu_);
      lat_.clear();
      in_flight_ = 0;
      stop_ = false;
      measuring_ = false;
      first_error_ = Status::OK();
    }
    m_requests_ = 0;
    m_bytes_ = 0;
    m_errors_ = 0;
    for (int i = 0; i < concurrency; ++i) Launch();
    std::this_thread::sleep_for(std::chrono::duration<double>(warmup_s));
    const double cpu0 = ProcessCpuSeconds();
    const auto t0 = Clock::now();
    measuring_ = true;
    std::this_thread::sleep_for(std::chrono::duration<double>(measure_s));
    measuring_ = false;
    const auto t1 = Clock::now();
    const double cpu1 = ProcessCpuSeconds();
    {
      std::unique_lock<std::mutex> l(mu_);
      stop_ = true;
      if (!cv_.wait_for(l, std::chrono::seconds(120), [&] { return in_flight_ == 0; })) {
        return Status::Timeout(fmt::format("{} requests still in flight after 120 s", in_flight_));
      }
      if (!first_error_.ok() && m_requests_ == 0) return first_error_;
    }
    r.seconds = std::chrono::duration<double>(t1 - t0).count();
    r.cpu = cpu1 - cpu0;
    r.requests = m_requests_;
    r.bytes = m_bytes_;
    r.errors = m_errors_;
    std::lock_guard<std::mutex> l(mu_);
    r.p50 = Percentile(lat_, 50);
    r.p99 = Percentile(lat_, 99);
    return r;
  }

 private:
  void Launch() {
    const uint64_t n = next_.fetch_add(1, std::memory_order_relaxed);
    const uint64_t key = keys_[n % keys_.size()];
    const int32_t a = KeySegment(key), b = KeyIndex(key);
    net::Statement st = dataset_ ? net::Statement::Bound(stmt_, {Value::Int(a), Value::Int(b)})
                                 : net::Statement::Bound(stmt_, {Value::Int(b)});
    st.idempotent = true;
    st.consistency = cql::Consistency::kLocalOne;
    st.page_size = page_size_;
    auto sink = std::make_shared<Landing>(dataset_, a, b);
    st.sink = [sink](int) { return sink; };
    {
      std::lock_guard<std::mutex> l(mu_);
      ++in_flight_;
    }
    const auto t = Clock::now();
    s_->ExecuteAsync(std::move(st), [this, sink, t](StatusOr<net::ResultSet> r) { Done(sink, t, std::move(r)); });
  }

  void Done(const std::shared_ptr<Landing>& sink, Clock::time_point t, StatusOr<net::ResultSet> r) {
    const auto now = Clock::now();
    const bool ok = r.ok() && sink->complete() && (!r->paging_state());
    bool again;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (measuring_) {
        if (ok) {
          m_requests_++;
          m_bytes_ += sink->written();
          lat_.push_back(std::chrono::duration<double, std::milli>(now - t).count());
        } else {
          m_errors_++;
        }
      }
      if (!ok && first_error_.ok()) {
        first_error_ = r.ok() ? Status::Internal("incomplete answer (paged or short)") : r.status();
      }
      again = !stop_;
      --in_flight_;
      if (in_flight_ == 0) cv_.notify_all();
    }
    if (again) Launch();
  }

  std::shared_ptr<net::Session> s_;
  net::PreparedPtr stmt_;
  std::vector<uint64_t> keys_;
  bool dataset_;
  int page_size_;
  std::atomic<uint64_t> next_{0};
  std::atomic<bool> measuring_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  int in_flight_ = 0;
  bool stop_ = false;
  Status first_error_;
  uint64_t m_requests_ = 0, m_bytes_ = 0, m_errors_ = 0;
  std::vector<double> lat_;
};

Status Setup(net::Session& s, const Args& a) {
  auto run = [&](const std::string& q) -> Status {
    net::Statement st = net::Statement::Query(q);
    st.timeout = std::chrono::seconds(60);
    auto r = s.Execute(st);
    return r.ok() ? Status::OK() : r.status();
  };
  CQLS_RETURN_IF_ERROR(run(fmt::format(
      "CREATE KEYSPACE IF NOT EXISTS {} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}",
      a.keyspace)));
  CQLS_RETURN_IF_ERROR(run(fmt::format(
      "CREATE TABLE IF NOT EXISTS {}.micro_blobs (k int PRIMARY KEY, v blob) WITH compression = {{'enabled': 'false'}}",
      a.keyspace)));
  CQLS_RETURN_IF_ERROR(s.WaitForSchemaAgreement());
  CQLS_ASSIGN_OR_RETURN(auto ins, s.Prepare(fmt::format("INSERT INTO {}.micro_blobs (k, v) VALUES (?, ?)", a.keyspace)));
  std::mt19937_64 rng(42);
  std::vector<uint8_t> blob(static_cast<size_t>(a.blob_size));
  for (int k = 0; k < a.keys; ++k) {
    for (auto& c : blob) c = static_cast<uint8_t>(rng());
    net::Statement st = net::Statement::Bound(ins, {Value::Int(k), Value::Ref(blob)});
    st.idempotent = true;
    st.timeout = std::chrono::seconds(30);
    auto r = s.Execute(st);
    if (!r.ok()) return r.status();
  }
  return Status::OK();
}

// Splits "a,b,c" at commas, dropping empty items.
std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out;
  for (std::stringstream ss(text); ss.good();) {
    std::string item;
    std::getline(ss, item, ',');
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

void AddFlags(CLI::App& app, Args* a, std::string* hosts, std::string* levels) {
  app.add_option("--hosts", *hosts, "Contact points, comma-separated");
  app.add_option("--port", a->port, "Native port");
  app.add_option("--keyspace", a->keyspace, "Keyspace (blob mode: of micro_blobs; dataset mode: of the dataset)");
  app.add_option("--dataset", a->dataset, "Read a cqlstream dataset's data table instead of micro_blobs");
  app.add_option("--split", a->split, "Split of --dataset (default train)");
  app.add_option("--concurrency", *levels, "Requests in flight, comma-separated levels");
  app.add_option("--warmup-s", a->warmup_s, "Warm-up seconds per level");
  app.add_option("--measure-s", a->measure_s, "Measured seconds per level");
  app.add_option("--connections", a->connections, "Connections per host (default 2, the loader's initial value)");
  app.add_option("--io-threads", a->io_threads, "I/O threads (0: the session's default)");
  app.add_option("--keys", a->keys, "Blob mode: rows");
  app.add_option("--blob-size", a->blob_size, "Blob mode: bytes per blob");
  app.add_option("--page-size", a->page_size, "Rows per page (the loader uses 64)");
  app.add_flag("--setup", a->setup, "Blob mode: create and fill micro_blobs first");
  app.add_flag("--json", a->json, "One JSON line per level");
}

// What to read: the keys (shuffled) and the query that reads one.
struct Workload {
  std::vector<uint64_t> keys;
  std::string query;
};

// The keys and query of the dataset (--dataset) or of micro_blobs (after
// --setup fills it); false after printing why there is nothing to read.
bool MakeWorkload(net::Session& s, const Args& a, Workload* w) {
  if (!a.dataset.empty()) {
    auto d = store::LoadDataset(s, a.keyspace, a.dataset);
    if (!d.ok()) {
      fmt::print(stderr, "dataset: {}\n", d.status().ToString());
      return false;
    }
    for (const auto& g : d->SplitSegments(a.split)) {
      for (int64_t i = 0; i < g.count; ++i) w->keys.push_back(MakeKey(g.seg, static_cast<int32_t>(i)));
    }
    w->query = store::DataReadQuery(*d);
  } else {
    if (a.setup) {
      Status st = Setup(s, a);
      if (!st.ok()) {
        fmt::print(stderr, "setup: {}\n", st.ToString());
        return false;
      }
    }
    for (int k = 0; k < a.keys; ++k) w->keys.push_back(MakeKey(0, k));
    w->query = fmt::format("SELECT v FROM {}.micro_blobs WHERE k = ?", a.keyspace);
  }
  if (w->keys.empty()) {
    fmt::print(stderr, "no keys to read\n");
    return false;
  }
  std::shuffle(w->keys.begin(), w->keys.end(), std::mt19937_64(7));
  return true;
}

// One concurrency level's line (a table row, or JSON).
void PrintLevel(const Args& a, int c, const Level& r) {
  const bool dataset = !a.dataset.empty();
  const double rps = static_cast<double>(r.requests) / r.seconds;
  const double mbps = static_cast<double>(r.bytes) / 1e6 / r.seconds;
  const double cpu_gb = r.bytes ? r.cpu / (static_cast<double>(r.bytes) / 1e9) : 0;
  if (a.json) {
    fmt::print("{{\"client\": \"cqlstream\", \"mode\": \"{}\", \"concurrency\": {}, \"connections\": {}, "
               "\"requests_per_s\": {:.1f}, \"mb_per_s\": {:.2f}, \"cpu_s_per_gb\": {:.3f}, \"p50_ms\": {:.3f}, "
               "\"p99_ms\": {:.3f}, \"requests\": {}, \"errors\": {}, \"seconds\": {:.2f}, \"cpu_s\": {:.3f}, "
               "\"peak_rss_mb\": {:.1f}}}\n",
               dataset ? "dataset" : "blobs", c, a.connections, rps, mbps, cpu_gb, r.p50, r.p99, r.requests,
               r.errors, r.seconds, r.cpu, PeakRssMb());
  } else {
    fmt::print("{:>8} {:>10.0f} {:>9.1f} {:>10.3f} {:>9.2f} {:>9.2f} {:>7}\n", c, rps, mbps, cpu_gb, r.p50, r.p99,
               r.errors);
  }
  std::fflush(stdout);
}

int Main(int argc, char** argv) {
  Args a;
  CLI::App app{"Raw read throughput of cqlstream's CQL client (no loader)"};
  std::string hosts = "127.0.0.1", levels = "1,64,1024,8192";
  AddFlags(app, &a, &hosts, &levels);
  CLI11_PARSE(app, argc, argv);
  a.hosts = SplitCommas(hosts);
  a.concurrency.clear();
  for (const std::string& c : SplitCommas(levels)) a.concurrency.push_back(std::stoi(c));
  // Keep freed blob buffers in the heap (no mmap/munmap per blob, no
  // trimming): the loader recycles its batch buffers the same way.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);

  ConnectionOptions co;
  co.hosts = a.hosts;
  co.port = a.port;
  co.keyspace = a.keyspace;
  co.connections_per_host = a.connections;
  co.io_threads = a.io_threads;
  net::SessionOptions so;
  so.watch_events = false;
  auto s = net::Session::Connect(co, so);
  if (!s.ok()) {
    fmt::print(stderr, "connect: {}\n", s.status().ToString());
    return 1;
  }
  Workload w;
  if (!MakeWorkload(**s, a, &w)) return 1;
  auto p = (*s)->Prepare(w.query);
  if (!p.ok()) {
    fmt::print(stderr, "prepare: {}\n", p.status().ToString());
    return 1;
  }
  const bool dataset = !a.dataset.empty();
  Runner runner(*s, *p, std::move(w.keys), dataset, a.page_size);
  if (!a.json) {
    fmt::print("client cqlstream, {} {}, {} connection(s) per host\n", dataset ? "dataset" : "blobs",
               dataset ? a.dataset + "/" + a.split : fmt::format("{} x {} B", a.keys, a.blob_size), a.connections);
    fmt::print("{:>8} {:>10} {:>9} {:>10} {:>9} {:>9} {:>7}\n", "inflight", "req/s", "MB/s", "CPU s/GB", "p50 ms",
               "p99 ms", "errors");
  }
  int rc = 0;
  for (int c : a.concurrency) {
    auto r = runner.Run(c, a.warmup_s, a.measure_s);
    if (!r.ok()) {
      fmt::print(stderr, "concurrency {}: {}\n", c, r.status().ToString());
      rc = 1;
      break;
    }
    PrintLevel(a, c, *r);
  }
  (*s)->Close();
  return rc;
}

}  // namespace
}  // namespace cqlstream::bench

int main(int argc, char** argv) {
  return cqlstream::GuardedMain("cqlstream-cql-micro", [&] { return cqlstream::bench::Main(argc, argv); });
}
