// Copyright (c) cqlstream authors.
//
// The loader in cqlstream._core (bind_loader.cc): OpenArgs (everything
// cqlstream.Loader passes to the core), Loader (the decode-ahead stream of
// loader/decode_stream.h) and insecure_tls_warning. The Python class
// cqlstream.Loader wraps them.
//
// The GIL is released wherever C++ may block: opening (connecting), next()
// (waiting for data), fetch(), state(), restore() and close().
#ifndef CQLSTREAM_PYTHON_BIND_LOADER_H_
#define CQLSTREAM_PYTHON_BIND_LOADER_H_

#include <nanobind/nanobind.h>

namespace cqlstream::python {

// Adds the classes and functions above to `m` (from NB_MODULE, after
// BindBatch: Loader.next returns a Batch).
void BindLoader(nanobind::module_& m);

}  // namespace cqlstream::python

#endif  // CQLSTREAM_PYTHON_BIND_LOADER_H_
