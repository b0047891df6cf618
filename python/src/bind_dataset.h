// Copyright (c) cqlstream authors.
//
// The dataset view and selection files in cqlstream._core (bind_dataset.cc):
// DatasetArgs, DatasetHandle, save_selection, load_selection. The Python
// classes cqlstream.Dataset and cqlstream.Selection wrap them.
#ifndef CQLSTREAM_PYTHON_BIND_DATASET_H_
#define CQLSTREAM_PYTHON_BIND_DATASET_H_

#include <nanobind/nanobind.h>

namespace cqlstream::python {

// Adds the classes and functions above to `m` (from NB_MODULE).
void BindDataset(nanobind::module_& m);

}  // namespace cqlstream::python

#endif  // CQLSTREAM_PYTHON_BIND_DATASET_H_
