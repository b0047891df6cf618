// Copyright (c) cqlstream authors.
//
// Helpers shared by the fuzz targets: a property check whose failure is a
// finding (libFuzzer reports the input that aborted), and the nullable
// cells a target feeds to a decoder of CQL rows.
//
// Thread-safety: free functions over their arguments.
#ifndef CQLSTREAM_TESTS_FUZZ_FUZZ_CHECK_H_
#define CQLSTREAM_TESTS_FUZZ_FUZZ_CHECK_H_

#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <vector>

namespace cqlstream::fuzz {

// Aborts when a property the target asserts does not hold.
inline void Check(bool ok) {
  if (!ok) std::abort();
}

// A cell the input chooses: null one time in `null_one_in` (by the next
// value the input gives), else up to `max` bytes of it.
inline std::optional<std::vector<uint8_t>> NullableBytes(FuzzedDataProvider& in, size_t max, int null_one_in) {
  if (in.ConsumeIntegralInRange<int>(0, null_one_in - 1) == 0) return std::nullopt;
  return in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, max));
}

// A cell as a row decoder receives it (nullopt: a null cell).
inline std::optional<std::span<const uint8_t>> View(const std::optional<std::vector<uint8_t>>& c) {
  if (!c) return std::nullopt;
  return std::span<const uint8_t>(*c);
}

}  // namespace cqlstream::fuzz

#endif  // CQLSTREAM_TESTS_FUZZ_FUZZ_CHECK_H_
