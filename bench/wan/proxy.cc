// Copyright (c) cqlstream authors.
//
// The proxy's listener, worker threads and statistics (proxy.h); the
// connections themselves are in proxy_connection.cc.
#include "wan/proxy.h"

#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

#include <asio.hpp>
#include <chrono>
#include <limits>
#include <memory>
#include <thread>

#include "wan/proxy_internal.h"

namespace cqlstream::wan {
namespace proxy_internal {

void BlockSigpipe() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void ConsumeSigpipe() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  const timespec zero{0, 0};
  while (sigtimedwait(&set, nullptr, &zero) == SIGPIPE) {
  }
}

double ThreadCpuSeconds(clockid_t clock) {
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return -1;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void SetBuffers(tcp::socket& s, int bytes) {
  if (bytes <= 0) return;
  asio::error_code ec;
  s.set_option(asio::socket_base::receive_buffer_size(bytes), ec);
  s.set_option(asio::socket_base::send_buffer_size(bytes), ec);
}

}  // namespace proxy_internal

using namespace proxy_internal;

namespace {

// Many kernel pipes per connection on the splice paths: allow as many file
// descriptors as the hard limit does.
void RaiseFdLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace

Status Proxy::Impl::Init() {
  if (options_.mappings.empty()) return Status::InvalidArgument("no mappings");
  if (options_.threads < 1) return Status::InvalidArgument("threads must be >= 1");
  if (options_.read_chunk < 2 * kMinRead) {
    return Status::InvalidArgument(fmt::format("read chunk must be >= {}", 2 * kMinRead));
  }
  if (options_.delay.count() < 0 || options_.jitter.count() < 0 || options_.change_after.count() < 0) {
    return Status::InvalidArgument("negative delay, jitter or change time");
  }
  if (options_.realtime_priority < 0 || options_.realtime_priority > 99) {
    return Status::InvalidArgument("realtime priority must be 0..99");
  }
  if (options_.zero_copy) RaiseFdLimit();
  for (int i = 0; i < options_.threads; ++i) {
    workers_.push_back(std::make_unique<Worker>(options_.read_chunk));
  }
  asio::io_context& accept_io = workers_[0]->io;
  for (const MappingSpec& spec : options_.mappings) {
    auto m = std::make_unique<MappingState>();
    m->spec = spec;
    asio::error_code ec;
    auto listen_addr = asio::ip::make_address(spec.listen.host, ec);
    if (ec) return Status::InvalidArgument(fmt::format("bad listen address '{}'", spec.listen.host));
    auto target_addr = asio::ip::make_address(spec.target.host, ec);
    if (ec) return Status::InvalidArgument(fmt::format("bad target address '{}'", spec.target.host));
    m->target = tcp::endpoint(target_addr, spec.target.port);
    tcp::endpoint listen_ep(listen_addr, spec.listen.port);
    m->acceptor = std::make_unique<tcp::acceptor>(accept_io);
    m->retry_timer = std::make_unique<asio::steady_timer>(accept_io);
    tcp::acceptor& a = *m->acceptor;
    a.open(listen_ep.protocol(), ec);
    if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec && options_.socket_buffer_bytes > 0) {
      // Accepted sockets inherit these (and the window scale they imply).
      a.set_option(asio::socket_base::receive_buffer_size(options_.socket_buffer_bytes), ec);
      if (!ec) a.set_option(asio::socket_base::send_buffer_size(options_.socket_buffer_bytes), ec);
    }
    if (!ec) a.bind(listen_ep, ec);
    if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return Status::IOError(
          fmt::format("cannot listen on {}: {}", spec.listen.ToString(), ec.message()));
    }
    tcp::endpoint bound = a.local_endpoint(ec);
    HostPort hp{spec.listen.host, bound.port()};
    m->name = fmt::format("{}->{}", hp.ToString(), spec.target.ToString());
    bound_.push_back(hp);
    mappings_.push_back(std::move(m));
  }
  for (auto& m : mappings_) DoAccept(m.get());
  realtime_ok_ = options_.realtime_priority > 0;
  for (auto& w : workers_) {
    Worker* wp = w.get();
    wp->guard.emplace(wp->io.get_executor());
    wp->thread = std::thread([this, wp] {
      BlockSigpipe();
      if (options_.realtime_priority > 0) {
        sched_param sp{};
        sp.sched_priority = options_.realtime_priority;
        if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) != 0) realtime_ok_ = false;
      }
      if (pthread_getcpuclockid(pthread_self(), &wp->cpu_clock) == 0) {
        wp->clock_valid.store(true, std::memory_order_release);
      }
      wp->io.run();
      wp->final_cpu.store(ThreadCpuSeconds(CLOCK_THREAD_CPUTIME_ID), std::memory_order_release);
      wp->clock_valid.store(false, std::memory_order_release);
    });
  }
  return Status::OK();
}

void Proxy::Impl::DoAccept(MappingState* m) {
  Worker* w = workers_[next_worker_++ % workers_.size()].get();
  m->acceptor->async_accept(w->io, [this, m, w](const asio::error_code& ec, tcp::socket s) {
    if (ec == asio::error::operation_aborted || !m->acceptor->is_open()) return;
    if (ec) {
      // E.g. out of file descriptors: try again shortly instead of spinning.
      m->retry_timer->expires_after(std::chrono::milliseconds(50));
      m->retry_timer->async_wait([this, m](const asio::error_code& e) {
        if (!e) DoAccept(m);
      });
      return;
    }
    m->accepted.fetch_add(1, std::memory_order_relaxed);
    StartConnection(this, w, m, std::move(s));
    DoAccept(m);
  });
}

void Proxy::Impl::Stop() {
  if (stopped_) return;
  stopped_ = true;
  for (auto& w : workers_) {
    w->guard.reset();
    w->io.stop();
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
  for (auto& m : mappings_) {
    m->retry_timer.reset();
    m->acceptor.reset();
  }
  // Destroying the io_contexts destroys the pending handlers and with them the
  // connections (which still reference their mapping's counters).
  workers_.clear();
}

std::vector<MappingStats> Proxy::Impl::Stats() const {
  std::vector<MappingStats> out;
  for (const auto& m : mappings_) {
    MappingStats s;
    s.name = m->name;
    s.accepted = m->accepted.load(std::memory_order_relaxed);
    s.active = m->active.load(std::memory_order_relaxed);
    s.connect_failures = m->connect_failures.load(std::memory_order_relaxed);
    s.errors = m->errors.load(std::memory_order_relaxed);
    s.bytes_up = m->bytes_up.load(std::memory_order_relaxed);
    s.bytes_down = m->bytes_down.load(std::memory_order_relaxed);
    for (size_t i = 0; i < kLateBuckets; ++i) s.late_bytes[i] = m->late_bytes[i].load(std::memory_order_relaxed);
    out.push_back(std::move(s));
  }
  return out;
}

double Proxy::Impl::CpuSeconds() const {
  double total = 0;
  for (const auto& w : workers_) {
    double v = -1;
    if (w->clock_valid.load(std::memory_order_acquire)) v = ThreadCpuSeconds(w->cpu_clock);
    if (v < 0) v = w->final_cpu.load(std::memory_order_acquire);
    total += v;
  }
  return total;
}

StatusOr<std::unique_ptr<Proxy>> Proxy::Start(const ProxyOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  CQLS_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<Proxy>(new Proxy(std::move(impl)));
}

Proxy::Proxy(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Proxy::~Proxy() { Stop(); }
void Proxy::Stop() { impl_->Stop(); }
std::vector<HostPort> Proxy::listen_endpoints() const { return impl_->listen_endpoints(); }
double MappingStats::LateQuantileMs(double q) const {
  uint64_t total = 0;
  for (uint64_t b : late_bytes) total += b;
  if (total == 0) return 0;
  uint64_t seen = 0;
  for (size_t i = 0; i + 1 < kLateBuckets; ++i) {
    seen += late_bytes[i];
    if (static_cast<double>(seen) >= q * static_cast<double>(total)) return kLateBucketMs[i];
  }
  return std::numeric_limits<double>::infinity();
}

std::vector<MappingStats> Proxy::Stats() const { return impl_->Stats(); }
double Proxy::CpuSeconds() const { return impl_->CpuSeconds(); }
bool Proxy::realtime() const { return impl_->realtime(); }

}  // namespace cqlstream::wan
