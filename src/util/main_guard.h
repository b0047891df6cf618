// Copyright (c) cqlstream authors.
//
// The last line of defence of every binary's main(): whatever escapes the
// program's own error handling (an exception of any type, including
// std::ios_base::failure and the std::invalid_argument / std::out_of_range of
// std::stoi) becomes one line "<program>: error: <what>" on stderr and exit
// code 1, never SIGABRT. The core reports errors as Status; this only catches
// what slipped through.
//
// GuardedMain also installs a std::terminate handler, so an exception that
// escapes a worker thread (which main() cannot catch) ends the process the
// same way (message, exit code 1) instead of with a signal.
//
// Thread-safety: call once, from main(). The terminate handler may run on any
// thread.
#ifndef CQLSTREAM_UTIL_MAIN_GUARD_H_
#define CQLSTREAM_UTIL_MAIN_GUARD_H_

#include <exception>
#include <functional>
#include <string>

namespace cqlstream {

// Runs body() and returns its exit code, or 1 after printing what escaped.
int GuardedMain(const char* program, const std::function<int()>& body) noexcept;

// A one-line description of an exception ("what()", or "unknown exception"),
// with the exception's kind for the iostream and number-parsing cases.
std::string DescribeException(const std::exception_ptr& e);

}  // namespace cqlstream

#endif  // CQLSTREAM_UTIL_MAIN_GUARD_H_
