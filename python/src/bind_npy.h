// Copyright (c) cqlstream authors.
//
// cqlstream._core.decode_npy (bind_npy.cc): a .npy blob (loader/npy.h) to a
// numpy array; and the accessors of a Batch decoded with decode='npy'
// (arrays, array, stacked, targets, batch[i]): zero-copy numpy arrays over
// the decoded batch (loader/npy_batch.h) that keep it alive. They raise
// ValueError on a batch that holds raw bytes or images. Thread-safety: under
// the GIL.
#ifndef CQLSTREAM_PYTHON_BIND_NPY_H_
#define CQLSTREAM_PYTHON_BIND_NPY_H_

#include <nanobind/nanobind.h>

#include <cstddef>

namespace cqlstream::python {

struct PyBatch;

// One array per sample, in sample order.
nanobind::list NpyArraysOf(const PyBatch& b);
// The (n, *shape) stack of the arrays (zero-copy); ValueError naming the
// first sample whose dtype, shape or order differs from sample 0's.
nanobind::object NpyStackedOf(const PyBatch& b);
// Whether NpyStackedOf succeeds.
bool NpyIsStacked(const PyBatch& b);
// One target per sample (arrays, or 1-D uint8 bytes); empty without targets.
nanobind::list NpyTargetsOf(const PyBatch& b);
// Sample i's array. REQUIRES: i < size (std::out_of_range otherwise).
nanobind::object NpySampleOf(const PyBatch& b, size_t i);

// Adds decode_npy to `m` (from NB_MODULE).
void BindNpy(nanobind::module_& m);

}  // namespace cqlstream::python

#endif  // CQLSTREAM_PYTHON_BIND_NPY_H_
