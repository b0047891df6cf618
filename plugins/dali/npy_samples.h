// Copyright (c) cqlstream authors.
//
// The .npy side of output="npy" (docs/dali.md): every sample of a DALI batch
// parsed as a .npy file (loader/npy.h), checked against what one DALI
// output can hold, before any output is described or filled.
//
// What a batch must be (anything else fails with InvalidArgument naming the
// first offending sample by key and position in the batch):
//   - every sample (and with targets, every target) a valid .npy file;
//   - one dtype and one number of dimensions across the batch (a DALI
//     output has one type and one sample dimensionality); shapes may differ;
//   - a dtype DALI has (complex64 / complex128 have no DALI type);
//   - C order (DALI tensors are row-major: a Fortran-order file is refused,
//     not silently transposed; write it with np.ascontiguousarray).
// Big-endian files come out in native order (ParseNpy swaps them).
//
// Ownership: an NpySamples' arrays view the bytes of the SampleRefs' batches
// (or own swapped copies): keep the SampleRefs alive while using them.
// Thread-safety: ParseNpySamples is reentrant; results are values.
#ifndef CQLSTREAM_PLUGINS_DALI_NPY_SAMPLES_H_
#define CQLSTREAM_PLUGINS_DALI_NPY_SAMPLES_H_

#include <vector>

#include "cqlstream/status.h"
#include "epoch_assembler.h"
#include "loader/npy.h"

namespace cqlstream::dali_plugin {

struct NpySamples {
  std::vector<loader::NpyArray> data;    // one per sample when data is decoded, else empty
  std::vector<loader::NpyArray> target;  // one per sample when targets are decoded, else empty
};

// Parses the data bytes (the payload prefix of image_sizes) of every sample
// when `data`, and its target bytes when `targets` (see the top of this file).
StatusOr<NpySamples> ParseNpySamples(const std::vector<SampleRef>& samples, bool data, bool targets);

}  // namespace cqlstream::dali_plugin

#endif  // CQLSTREAM_PLUGINS_DALI_NPY_SAMPLES_H_
