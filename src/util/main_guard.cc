// Copyright (c) cqlstream authors.
#include "util/main_guard.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ios>
#include <new>
#include <stdexcept>

namespace cqlstream {
namespace {

const char* g_program = "cqlstream";

void WriteLine(const std::string& line) {
  // fputs may be unusable if the exception came from stdio itself; write(2)
  // to fd 2 is the most that can still be done.
  const std::string out = std::string(g_program) + ": error: " + line + "\n";
  size_t off = 0;
  while (off < out.size()) {
    const ssize_t w = ::write(STDERR_FILENO, out.data() + off, out.size() - off);
    if (w <= 0) break;
    off += static_cast<size_t>(w);
  }
}

[[noreturn]] void OnTerminate() noexcept {
  std::exception_ptr e = std::current_exception();
  WriteLine(e ? DescribeException(e) + " (escaped a thread)" : std::string("internal error: std::terminate called"));
  std::_Exit(1);
}

}  // namespace

std::string DescribeException(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::ios_base::failure& x) {
    return std::string("I/O failure: ") + x.what();
  } catch (const std::bad_alloc&) {
    return "out of memory";
  } catch (const std::invalid_argument& x) {
    return std::string("invalid number or argument (") + x.what() + ")";
  } catch (const std::out_of_range& x) {
    return std::string("value out of range (") + x.what() + ")";
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}

int GuardedMain(const char* program, const std::function<int()>& body) noexcept {
  if (program != nullptr) g_program = program;
  std::set_terminate(OnTerminate);
  try {
    return body();
  } catch (...) {
    WriteLine(DescribeException(std::current_exception()));
    return 1;
  }
}

}  // namespace cqlstream
