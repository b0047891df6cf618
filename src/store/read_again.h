// Copyright (c) cqlstream authors.
//
// Reading an answer again when it was not the answer to this read.
//
// A read that checks its answer (its result columns, net/result_columns.h,
// or the keys and positions its rows name) refuses an answer meant for
// another request with a Corruption. Such an answer says nothing about the
// data, only about the path it came over (a stray or repeated frame), so the
// read is worth sending again; any other error is returned at once.
// ReadAgainOnCorruption runs `read` until it returns something other than a
// Corruption, `attempts` times in all, and returns the last result: the
// caller decides what a Corruption after the last attempt means (the end of
// a command, or one sample's problem). ReadAgainWhile takes the test of
// what is meant for another request from the caller.
//
// Thread-safety: a free function; `read` runs on the calling thread.
#ifndef CQLSTREAM_STORE_READ_AGAIN_H_
#define CQLSTREAM_STORE_READ_AGAIN_H_

#include <type_traits>
#include <utility>

#include "cqlstream/status.h"

namespace cqlstream::store {

// How often the store's checking reads are sent in all before a Corruption
// stands.
inline constexpr int kReadAttempts = 3;

namespace read_again_internal {
inline Status::Code CodeOf(const Status& s) { return s.code(); }
template <typename T>
Status::Code CodeOf(const StatusOr<T>& s) {
  return s.ok() ? Status::Code::kOk : s.status().code();
}
}  // namespace read_again_internal

// The general form: `meant_for_another(result)` says which results are
// answers meant for another request (a reader whose own checks find one
// without an error: the rows of another sample). `read` returns Status or
// StatusOr<T> (by value: the result is kept across attempts). `attempts`
// below 1 counts as 1.
template <typename Read, typename Refused>
std::remove_cvref_t<std::invoke_result_t<Read&>> ReadAgainWhile(int attempts, Read&& read,
                                                                 Refused&& meant_for_another) {
  for (int attempt = 1;; ++attempt) {
    std::remove_cvref_t<std::invoke_result_t<Read&>> r = read();
    if (attempt >= attempts || !meant_for_another(r)) return r;
  }
}

// Reads again while the result is a Corruption.
template <typename Read>
std::remove_cvref_t<std::invoke_result_t<Read&>> ReadAgainOnCorruption(int attempts, Read&& read) {
  return ReadAgainWhile(attempts, read,
                        [](const auto& r) { return read_again_internal::CodeOf(r) == Status::Code::kCorruption; });
}

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_READ_AGAIN_H_
