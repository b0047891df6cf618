// Copyright (c) cqlstream authors.
//
// cqlstream._core.decode_npy (bind_npy.cc): a .npy blob (loader/npy.h) to a
// numpy array.
#ifndef CQLSTREAM_PYTHON_BIND_NPY_H_
#define CQLSTREAM_PYTHON_BIND_NPY_H_

#include <nanobind/nanobind.h>

namespace cqlstream::python {

// Adds decode_npy to `m` (from NB_MODULE).
void BindNpy(nanobind::module_& m);

}  // namespace cqlstream::python

#endif  // CQLSTREAM_PYTHON_BIND_NPY_H_
