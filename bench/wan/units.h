// Copyright (c) cqlstream authors.
//
// Small parsers shared by the bench tools: byte sizes ("4MiB", "512k",
// "1e6"), host:port pairs ("127.0.0.1:9042", "[::1]:9042") and proxy
// mappings ("LISTEN=TARGET"), plus human-readable formatting of byte counts.
//
// Thread-safety: free functions without shared state; safe from any thread.
#ifndef CQLSTREAM_BENCH_WAN_UNITS_H_
#define CQLSTREAM_BENCH_WAN_UNITS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "cqlstream/status.h"

namespace cqlstream::wan {

// Parses a byte count. Accepted: a plain integer ("4194304"); binary suffixes
// k/K/KiB, M/MiB, G/GiB (powers of 1024); decimal suffixes KB/MB/GB (powers
// of 1000). Case-insensitive suffix, optional "B", no sign, no fraction
// except with a suffix ("1.5MiB"). Overflow and garbage are InvalidArgument.
StatusOr<uint64_t> ParseByteSize(std::string_view text);

struct HostPort {
  std::string host;  // numeric IPv4 or IPv6 address, without brackets
  uint16_t port = 0;
  std::string ToString() const;  // "1.2.3.4:5" or "[::1]:5"
};

// Parses "ADDR:PORT" or "[V6ADDR]:PORT". The address must be numeric (the
// proxy never resolves names); "localhost" is accepted as 127.0.0.1. Port 0
// is allowed (the caller decides whether "any free port" makes sense).
StatusOr<HostPort> ParseHostPort(std::string_view text);

struct MappingSpec {
  HostPort listen;
  HostPort target;
};

// Parses "LISTEN=TARGET", each side as in ParseHostPort.
StatusOr<MappingSpec> ParseMapping(std::string_view text);

// "1.50 MiB", "312 B", "2.00 GiB".
std::string FormatBytes(uint64_t bytes);

}  // namespace cqlstream::wan

#endif  // CQLSTREAM_BENCH_WAN_UNITS_H_
