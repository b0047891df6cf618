// Copyright (c) cqlstream authors.
//
// Test fixture (unit tests only): a JPEG with any chroma subsampling, written
// with libjpeg's own compressor (TurboJPEG's API only writes the subsamplings
// it can classify). Used to check that the ingest, preprocessing and the
// loader read JPEGs whose subsampling libjpeg-turbo 2.1's header call refuses
// to classify (store::ReadJpegHeader).
//
// Header-only; the test binaries that include it link libjpeg. Thread-safety:
// reentrant.
#ifndef CQLSTREAM_STORE_JPEG_SAMPLING_FIXTURE_H_
#define CQLSTREAM_STORE_JPEG_SAMPLING_FIXTURE_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <jpeglib.h>

namespace cqlstream::store::testing {

// A w x h colour JPEG (quality 95) whose luma component has sampling factors
// y_h x y_v and whose chroma components have 1 x 1: 4 x 2 is "4:1:0", which
// libjpeg-turbo 2.1 decodes but does not classify. `rgb` holds w*h*3 bytes.
inline std::vector<uint8_t> MakeJpegWithSampling(const std::vector<uint8_t>& rgb, int w, int h, int y_h, int y_v) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);  // parameters are the test's own: exit() on misuse
  jpeg_create_compress(&c);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &out, &size);
  c.image_width = static_cast<JDIMENSION>(w);
  c.image_height = static_cast<JDIMENSION>(h);
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 95, TRUE);
  c.comp_info[0].h_samp_factor = y_h;
  c.comp_info[0].v_samp_factor = y_v;
  for (int i = 1; i < 3; ++i) {
    c.comp_info[i].h_samp_factor = 1;
    c.comp_info[i].v_samp_factor = 1;
  }
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(rgb.data() + static_cast<size_t>(c.next_scanline) * static_cast<size_t>(w) * 3);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  std::vector<uint8_t> bytes(out, out + size);
  jpeg_destroy_compress(&c);
  std::free(out);
  return bytes;
}

}  // namespace cqlstream::store::testing

#endif  // CQLSTREAM_STORE_JPEG_SAMPLING_FIXTURE_H_
