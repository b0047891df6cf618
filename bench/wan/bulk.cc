// Copyright (c) cqlstream authors.
#include "wan/bulk.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace cqlstream::wan {
namespace {

// The pattern repeats with a period that is no power of two, so a chunk that
// is lost, duplicated or moved by a round number of bytes does not line up.
constexpr size_t kPeriod = (1 << 20) + 4093;
constexpr size_t kWriteSize = 1 << 20;
constexpr size_t kReadSize = 1 << 20;

const std::vector<uint8_t>& PatternBuffer() {
  // kPeriod + kWriteSize bytes so that any window of kWriteSize starting in
  // the first period is contiguous.
  static const std::vector<uint8_t> buf = [] {
    std::vector<uint8_t> b(kPeriod + kWriteSize);
    uint64_t x = 0x243f6a8885a308d3ull;
    for (size_t i = 0; i < kPeriod; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      b[i] = static_cast<uint8_t>(x >> 32);
    }
    for (size_t i = kPeriod; i < b.size(); ++i) b[i] = b[i - kPeriod];
    return b;
  }();
  return buf;
}

std::string Errno(const char* what) { return fmt::format("{}: {}", what, std::strerror(errno)); }

// Best effort: on Linux, PRIO_PROCESS with the thread id sets one thread.
void SetThreadNice(int nice) {
  if (nice != 0) (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), nice);
}

}  // namespace

uint8_t BulkPatternByte(uint64_t i) { return PatternBuffer()[i % kPeriod]; }

StatusOr<std::unique_ptr<BulkSource>> BulkSource::Start(uint64_t bytes_per_connection, int nice) {
  (void)PatternBuffer();
  std::unique_ptr<BulkSource> s(new BulkSource());
  s->limit_ = bytes_per_connection;
  s->nice_ = nice;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IOError(Errno("socket"));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 128) != 0) {
    Status st = Status::IOError(Errno("bind/listen"));
    ::close(fd);
    return st;
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  s->listen_fd_ = fd;
  s->port_ = ntohs(addr.sin_port);
  s->accept_thread_ = std::thread([p = s.get()] { p->AcceptLoop(); });
  return s;
}

BulkSource::~BulkSource() { Stop(); }

void BulkSource::AcceptLoop() {
  while (!stop_.load()) {
    pollfd pfd{listen_fd_, POLLIN, 0};
    if (::poll(&pfd, 1, 50) <= 0) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    accepted_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_.load()) {
      ::close(fd);
      break;
    }
    fds_.push_back(fd);
    writers_.emplace_back([this, fd] { WriteLoop(fd); });
  }
}

void BulkSource::WriteLoop(int fd) {
  SetThreadNice(nice_);
  const std::vector<uint8_t>& pat = PatternBuffer();
  uint64_t pos = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    size_t n = kWriteSize;
    if (limit_ != 0) {
      if (pos >= limit_) break;
      n = static_cast<size_t>(std::min<uint64_t>(n, limit_ - pos));
    }
    ssize_t w = ::send(fd, pat.data() + pos % kPeriod, n, MSG_NOSIGNAL);
    if (w <= 0) {
      if (w < 0 && errno == EINTR) continue;
      return;  // the peer went away (or Stop() shut the socket down)
    }
    pos += static_cast<uint64_t>(w);
  }
  if (limit_ != 0) ::shutdown(fd, SHUT_WR);  // orderly EOF after the last byte
}

void BulkSource::Stop() {
  if (stop_.exchange(true)) return;
  if (accept_thread_.joinable()) accept_thread_.join();
  std::vector<std::thread> writers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    writers.swap(writers_);
  }
  for (auto& t : writers) t.join();
  for (int fd : fds_) ::close(fd);
  fds_.clear();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
}

StatusOr<std::unique_ptr<BulkSink>> BulkSink::Start(const std::string& host, uint16_t port, int n,
                                                    bool verify, bool paused, int nice) {
  (void)PatternBuffer();
  std::unique_ptr<BulkSink> s(new BulkSink());
  s->paused_.store(paused);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return Status::InvalidArgument(fmt::format("bad IPv4 address '{}'", host));
  }
  for (int i = 0; i < n; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Status::IOError(Errno("socket"));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      Status st = Status::ConnectFailed(Errno("connect"));
      ::close(fd);
      return st;
    }
    s->fds_.push_back(fd);
  }
  for (int fd : s->fds_) {
    s->readers_.emplace_back([p = s.get(), fd, verify, nice] { p->ReadLoop(fd, verify, nice); });
  }
  return s;
}

BulkSink::~BulkSink() { Stop(); }

void BulkSink::ReadLoop(int fd, bool verify, int nice) {
  SetThreadNice(nice);
  std::vector<uint8_t> buf(kReadSize);
  const std::vector<uint8_t>& pat = PatternBuffer();
  uint64_t pos = 0;
  while (true) {
    if (paused_.load(std::memory_order_relaxed)) {
      std::unique_lock<std::mutex> lock(mu_);
      resume_.wait(lock, [this] { return !paused_.load() || stop_.load(); });
    }
    ssize_t r = ::recv(fd, buf.data(), buf.size(), 0);
    if (r == 0) {
      if (!stop_.load()) eofs_.fetch_add(1);
      return;
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      if (!stop_.load()) errors_.fetch_add(1);
      return;
    }
    const auto n = static_cast<size_t>(r);
    if (verify) {
      // Compare in pieces that stay inside one period window.
      size_t done = 0;
      while (done < n) {
        size_t off = static_cast<size_t>((pos + done) % kPeriod);
        size_t take = std::min(n - done, kWriteSize);
        if (std::memcmp(buf.data() + done, pat.data() + off, take) != 0) {
          std::lock_guard<std::mutex> lock(mu_);
          if (verify_status_.ok()) {
            verify_status_ = Status::Corruption(
                fmt::format("stream differs from the pattern near offset {}", pos + done));
          }
          break;
        }
        done += take;
      }
    }
    pos += n;
    bytes_.fetch_add(n, std::memory_order_relaxed);
  }
}

Status BulkSink::verify_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return verify_status_;
}

void BulkSink::SetPaused(bool paused) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    paused_.store(paused);
  }
  resume_.notify_all();
}

void BulkSink::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_.exchange(true)) return;
  }
  resume_.notify_all();
  for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
  for (auto& t : readers_) t.join();
  // Abortive close (RST): the sender learns at once that nobody reads any
  // more. A graceful close can leave it probing a zero window for a minute.
  const linger abort{1, 0};
  for (int fd : fds_) {
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
    ::close(fd);
  }
  fds_.clear();
  readers_.clear();
}

}  // namespace cqlstream::wan
