// Copyright (c) cqlstream authors.
//
// cqlstream._core.Batch (bind_batch.cc): one batch of the loader, raw bytes
// or decoded frames, as zero-copy arrays and tensors. Every array handed to
// Python points into C++ memory and owns a capsule holding a shared_ptr to
// that memory (the loader's batch, or a decoded batch), so the memory stays
// valid while any array, tensor or Batch object refers to it, also after the
// Loader is closed and gone.
//
// Thread-safety: a PyBatch is used under the GIL only; the batch memory it
// refers to is immutable.
#ifndef CQLSTREAM_PYTHON_BIND_BATCH_H_
#define CQLSTREAM_PYTHON_BIND_BATCH_H_

#include <nanobind/nanobind.h>

#include <cstddef>
#include <cstdint>

#include "loader/decode_stream.h"

namespace cqlstream::python {

// What cqlstream._core.Batch holds: the stream's item until release().
struct PyBatch {
  loader::Item item;
  bool released = false;

  // Raises ValueError once the batch was released.
  void CheckLive() const;
  // The raw batch; raises ValueError naming `what` on a decoded batch.
  const Batch& Raw(const char* what) const;
  // The decoded batch; raises ValueError on a raw batch.
  const loader::DecodedBatch& Decoded() const;
  // A capsule that keeps the batch memory alive (the owner of every array).
  nanobind::capsule Owner() const;
  size_t size() const;
  // The raw bytes (never null, also for an empty batch).
  const uint8_t* DataPtr() const;
};

// Adds the Batch class to `m` (from NB_MODULE).
void BindBatch(nanobind::module_& m);

}  // namespace cqlstream::python

#endif  // CQLSTREAM_PYTHON_BIND_BATCH_H_
