// Copyright (c) cqlstream authors.
//
// The sample writer in cqlstream._core (bind_writer.cc): WriterArgs and
// WriterHandle over store::SampleWriter. The Python class cqlstream.Writer
// wraps them.
#ifndef CQLSTREAM_PYTHON_BIND_WRITER_H_
#define CQLSTREAM_PYTHON_BIND_WRITER_H_

#include <nanobind/nanobind.h>

namespace cqlstream::python {

// Adds WriterArgs and WriterHandle to `m` (from NB_MODULE).
void BindWriter(nanobind::module_& m);

}  // namespace cqlstream::python

#endif  // CQLSTREAM_PYTHON_BIND_WRITER_H_
