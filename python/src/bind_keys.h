// Copyright (c) cqlstream authors.
//
// Sample keys and checkpoints in cqlstream._core (bind_keys.cc): format_key,
// make_key and describe_state.
#ifndef CQLSTREAM_PYTHON_BIND_KEYS_H_
#define CQLSTREAM_PYTHON_BIND_KEYS_H_

#include <nanobind/nanobind.h>

namespace cqlstream::python {

// Adds the functions above to `m` (from NB_MODULE).
void BindKeys(nanobind::module_& m);

}  // namespace cqlstream::python

#endif  // CQLSTREAM_PYTHON_BIND_KEYS_H_
