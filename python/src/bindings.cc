// Copyright (c) cqlstream authors.
//
// cqlstream._core: the private nanobind module under the `cqlstream`
// package. Each concept binds itself in its own bind_*.cc; this file only
// lists them. Status values become Python exceptions in one place
// (status_error.h: the classes live in cqlstream/errors.py).
//
// Zero-copy: every array handed to Python points into C++ memory and owns a
// capsule that keeps that memory alive (bind_batch.h, bind_decode.h,
// bind_npy.h). The GIL is released wherever C++ may block (bind_loader.h,
// bind_dataset.h, bind_decode.h).
#include <nanobind/nanobind.h>

#include "bind_batch.h"
#include "bind_dataset.h"
#include "bind_decode.h"
#include "bind_keys.h"
#include "bind_loader.h"
#include "bind_npy.h"
#include "bind_writer.h"
#include "status_error.h"

NB_MODULE(_core, m) {
  using namespace cqlstream::python;
  m.doc() = "cqlstream's compiled core (private: use the cqlstream package)";
  RegisterStatusTranslator();
  BindKeys(m);
  BindDecode(m);
  BindBatch(m);
  BindLoader(m);
  BindDataset(m);
  BindNpy(m);
  BindWriter(m);
}
