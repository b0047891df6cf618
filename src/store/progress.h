// Copyright (c) cqlstream authors.
//
// Progress display for long-running tools (ingest, verify, export) and the
// SIGINT flag they stop on.
//
// ProgressLine: on a terminal, one line rewritten in place ("\r", at most 5
// times a second); elsewhere (logs, CI) a plain line every 10 seconds. The
// line shows items done/total, bytes, items/s, MB/s and the ETA. Finish()
// ends the line. Nothing secret is ever passed to it.
//
// Thread-safety: a ProgressLine is used from one thread at a time (callers
// that report from worker threads serialize). InterruptFlag() is
// async-signal-safe to set and safe to read from any thread.
#ifndef CQLSTREAM_STORE_PROGRESS_H_
#define CQLSTREAM_STORE_PROGRESS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace cqlstream::store {

class ProgressLine {
 public:
  // `out` is usually stderr; `tty` says whether it is a terminal.
  ProgressLine(std::FILE* out, bool tty, std::string label);
  // Shows the state (throttled unless `force`).
  void Update(int64_t items, int64_t items_total, int64_t bytes, int64_t bytes_total, const std::string& extra,
              bool force = false);
  // Clears the terminal line (if one is shown).
  void Finish();
  // The text of one update, without any "\r" (for tests and logs).
  static std::string Format(const std::string& label, int64_t items, int64_t items_total, int64_t bytes,
                            int64_t bytes_total, double seconds, const std::string& extra);

 private:
  std::FILE* out_;
  bool tty_;
  std::string label_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_{};
  size_t last_width_ = 0;
};

// Installs a SIGINT/SIGTERM handler that sets the returned flag; a second
// signal terminates the process at once (default action).
const std::atomic<bool>* InstallInterruptHandler();

// "12,345"
std::string Thousands(int64_t v);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_PROGRESS_H_
