// Copyright (c) cqlstream authors.
//
// Errors from the C++ core at the Python edge: a Status travels as a
// StatusError (a C++ exception, safe to throw with or without the GIL) and
// the translator registered by the module (RegisterStatusTranslator) turns
// it into the cqlstream.errors exception of its code, with .code set; should
// the package not be importable (the module loaded alone), a RuntimeError
// "Code: message". The one place that does this for every binding file.
//
// Thread-safety: free functions; Check and Unwrap only throw.
#ifndef CQLSTREAM_PYTHON_STATUS_ERROR_H_
#define CQLSTREAM_PYTHON_STATUS_ERROR_H_

#include <nanobind/nanobind.h>

#include <exception>
#include <utility>

#include "cqlstream/status.h"

namespace cqlstream::python {

class StatusError : public std::exception {
 public:
  explicit StatusError(Status s) : status_(std::move(s)) {}
  const char* what() const noexcept override { return status_.message().c_str(); }
  const Status& status() const { return status_; }

 private:
  Status status_;
};

inline void Check(const Status& s) {
  if (!s.ok()) throw StatusError(s);
}

template <typename T>
T Unwrap(StatusOr<T> r) {
  if (!r.ok()) throw StatusError(r.status());
  return std::move(r).value();
}

// Registers the StatusError translator on the module (once, in NB_MODULE).
void RegisterStatusTranslator();

}  // namespace cqlstream::python

#endif  // CQLSTREAM_PYTHON_STATUS_ERROR_H_
