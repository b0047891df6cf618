// Copyright (c) cqlstream authors.
//
// SplitMix64's finalizer: a 64-bit mixing function that spreads nearby
// inputs (seeds, counters, small ids) over all 64 bits. Used where a value
// must look random but be reproducible (the plan's permutation keys) and
// where small ids are combined into one (net/topology.cc replica set ids).
//
// Thread-safety: a pure function.
#ifndef CQLSTREAM_UTIL_MIX_H_
#define CQLSTREAM_UTIL_MIX_H_

#include <cstdint>

namespace cqlstream {

constexpr uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace cqlstream

#endif  // CQLSTREAM_UTIL_MIX_H_
