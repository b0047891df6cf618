// Copyright (c) cqlstream authors.
//
// libFuzzer target for the image code that sees outside bytes: the ingest
// sniffer and header check (store::SniffImage, store::CheckImage: JPEG via
// libjpeg-turbo, PNG via libpng, WebP by hand) and the loader's decoders
// (loader::DecodeTo: JPEG and PNG to a fixed HWC frame, with DCT scaling,
// crop or stretch, and the decoded-pixel bound).
//
// Input layout:
//   byte 0  bit 0 channels (1 / 3); bit 1 mode (crop / stretch); bit 2 JPEG
//           scaling; bits 3-7 max_decode_pixels: 0 (automatic) or 1 << (b % 29)
//   byte 1  output height 1 + b % 64
//   byte 2  output width 1 + b % 64
//   rest    the image bytes (a row of the keyspace, a file of a shard)
//
// Checked beyond "no crash, no leak, no UB":
//  - the header check reports the format the sniffer names;
//  - a full-size decode that succeeds implies the header check accepted the
//    image with the same dimensions (the check is what ingest trusts);
//  - a decode never yields more pixels than the bound it was given;
//  - the thread's JPEG decompressor reads a valid JPEG as itself afterwards.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "loader/decode.h"
#include "store/image_check.h"
#include "image_state_check.h"
#include "fuzz_check.h"

namespace {

using cqlstream::loader::DecodeOptions;

using cqlstream::fuzz::Check;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const uint8_t flags = data[0];
  DecodeOptions o;
  o.channels = (flags & 1) != 0 ? 3 : 1;
  o.mode = (flags & 2) != 0 ? cqlstream::loader::ResizeMode::kStretch : cqlstream::loader::ResizeMode::kCrop;
  o.jpeg_scaling = (flags & 4) != 0;
  const int shift = (flags >> 3) % 29;
  o.max_decode_pixels = shift == 0 ? 0 : uint64_t{1} << shift;
  o.height = 1 + data[1] % 64;
  o.width = 1 + data[2] % 64;
  const std::span<const uint8_t> bytes(data + 3, size - 3);

  cqlstream::store::ImageInfo info;
  const std::string why = cqlstream::store::CheckImage(bytes, &info);
  if (why.empty()) Check(info.width > 0 && info.height > 0);
  Check(info.format == cqlstream::store::SniffImage(bytes) || bytes.empty());

  if (o.Validate().ok()) {
    std::vector<uint8_t> frame(o.frame_bytes());
    (void)cqlstream::loader::DecodeTo(bytes, o, frame);
  }

  cqlstream::loader::Image img;
  const uint64_t bound = o.MaxPixels();
  if (cqlstream::loader::DecodeImage(bytes, o.channels, 1, &img, bound).ok()) {
    Check(static_cast<uint64_t>(img.width) * static_cast<uint64_t>(img.height) <= bound);
    Check(img.pixels.size() ==
          static_cast<size_t>(img.width) * static_cast<size_t>(img.height) * static_cast<size_t>(img.channels));
    Check(why.empty());
    Check(info.width == img.width && info.height == img.height);
  }
  cqlstream::fuzz::CheckThreadJpegDecoderIsClean();
  return 0;
}
