// Copyright (c) cqlstream authors.
#include "store/progress.h"

#include <fmt/format.h>

#include <csignal>
#include <cstring>

namespace cqlstream::store {
namespace {

std::atomic<bool> g_interrupted{false};

extern "C" void OnSignal(int) { g_interrupted.store(true); }

std::string Duration(double s) {
  if (s < 0 || s > 1e7) return "?";
  const int64_t t = static_cast<int64_t>(s + 0.5);
  if (t < 60) return fmt::format("{}s", t);
  if (t < 3600) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
}

}  // namespace

std::string Thousands(int64_t v) {
  std::string s = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return v < 0 ? "-" + out : out;
}

ProgressLine::ProgressLine(std::FILE* out, bool tty, std::string label)
    : out_(out), tty_(tty), label_(std::move(label)) {}

std::string ProgressLine::Format(const std::string& label, int64_t items, int64_t items_total, int64_t bytes,
                                 int64_t bytes_total, double seconds, const std::string& extra) {
  const double rate = seconds > 0 ? static_cast<double>(items) / seconds : 0;
  const double mbs = seconds > 0 ? static_cast<double>(bytes) / 1e6 / seconds : 0;
  const std::string eta = [&]() -> std::string {
    if (items_total > 0 && items >= items_total) return "0s";
    if (bytes_total > 0 && bytes > 0 && mbs > 0) return Duration(static_cast<double>(bytes_total - bytes) / 1e6 / mbs);
    if (items_total > 0 && rate > 0) return Duration(static_cast<double>(items_total - items) / rate);
    return "?";
  }();
  std::string s = fmt::format("{}{}{}/{} items  {:.1f} MB  {} items/s  {:.1f} MB/s  ETA {}", label,
                              label.empty() ? "" : ": ", Thousands(items), Thousands(items_total),
                              static_cast<double>(bytes) / 1e6, Thousands(static_cast<int64_t>(rate + 0.5)), mbs, eta);
  if (!extra.empty()) s += "  " + extra;
  return s;
}

void ProgressLine::Update(int64_t items, int64_t items_total, int64_t bytes, int64_t bytes_total,
                          const std::string& extra, bool force) {
  const auto now = std::chrono::steady_clock::now();
  const auto every = tty_ ? std::chrono::milliseconds(200) : std::chrono::milliseconds(10000);
  if (!force && last_.time_since_epoch().count() != 0 && now - last_ < every) return;
  if (!force && !tty_ && last_.time_since_epoch().count() == 0) {
    last_ = now;  // the first plain line comes after 10 s
    return;
  }
  last_ = now;
  const double secs = std::chrono::duration<double>(now - start_).count();
  const std::string line = Format(label_, items, items_total, bytes, bytes_total, secs, extra);
  if (tty_) {
    std::string pad = line.size() < last_width_ ? std::string(last_width_ - line.size(), ' ') : "";
    std::fprintf(out_, "\r%s%s", line.c_str(), pad.c_str());
    last_width_ = line.size();
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

void ProgressLine::Finish() {
  if (tty_ && last_width_ > 0) {
    std::fprintf(out_, "\r%s\r", std::string(last_width_, ' ').c_str());
    std::fflush(out_);
    last_width_ = 0;
  }
}

const std::atomic<bool>* InstallInterruptHandler() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = OnSignal;
  sa.sa_flags = SA_RESETHAND;  // a second signal takes the default action
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  return &g_interrupted;
}

}  // namespace cqlstream::store
