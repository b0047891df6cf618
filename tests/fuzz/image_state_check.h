// Copyright (c) cqlstream authors.
//
// A check shared by the image fuzz targets: whatever the input did, the
// calling thread's TurboJPEG decompressor (store/image_check.h, reused by
// the ingest check, preprocessing and the loader's decoder) still reads a
// valid JPEG as itself. libjpeg-turbo 2.1 leaves a handle mid-header after a
// failed header read; without the reset the next valid image was refused or
// read with the broken one's state.
#ifndef CQLSTREAM_TESTS_FUZZ_IMAGE_STATE_CHECK_H_
#define CQLSTREAM_TESTS_FUZZ_IMAGE_STATE_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "store/image_check.h"
#include "store/testing_fixtures.h"

namespace cqlstream::fuzz {

inline void CheckThreadJpegDecoderIsClean() {
  static const std::vector<uint8_t> kJpeg = store::testing::MakeJpeg(24, 16, 1);
  store::ImageInfo info;
  if (!store::CheckImage(kJpeg, &info).empty() || info.width != 24 || info.height != 16) {
    std::fprintf(stderr, "the thread's JPEG decompressor kept state from the previous input\n");
    std::abort();
  }
}

}  // namespace cqlstream::fuzz

#endif  // CQLSTREAM_TESTS_FUZZ_IMAGE_STATE_CHECK_H_
