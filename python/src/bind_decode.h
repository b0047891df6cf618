// Copyright (c) cqlstream authors.
//
// Decoding outside the loader in cqlstream._core (bind_decode.cc):
// decode_image and decode_images, and the decode options every binding builds
// from its keywords (MakeDecode).
//
// Thread-safety: free functions; decoding runs without the GIL.
#ifndef CQLSTREAM_PYTHON_BIND_DECODE_H_
#define CQLSTREAM_PYTHON_BIND_DECODE_H_

#include <nanobind/nanobind.h>

#include <cstdint>
#include <string>
#include <utility>

#include "cqlstream/status.h"
#include "loader/decode.h"

namespace cqlstream::python {

// Decode options from the Python keywords (size = (H, W); mode "crop" or
// "stretch"), validated; InvalidArgument names the bad keyword.
StatusOr<loader::DecodeOptions> MakeDecode(std::pair<int, int> size, int channels, const std::string& mode,
                                           bool jpeg_scaling, uint64_t max_decode_pixels = 0);

// Adds decode_image and decode_images to `m` (from NB_MODULE).
void BindDecode(nanobind::module_& m);

}  // namespace cqlstream::python

#endif  // CQLSTREAM_PYTHON_BIND_DECODE_H_
