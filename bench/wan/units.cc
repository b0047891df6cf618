// Copyright (c) cqlstream authors.
#include "wan/units.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

namespace cqlstream::wan {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

StatusOr<uint64_t> ParseByteSize(std::string_view text) {
  if (text.empty()) return Status::InvalidArgument("empty byte size");
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  std::string_view number = text.substr(0, i);
  std::string suffix = Lower(text.substr(i));
  if (number.empty()) return Status::InvalidArgument(fmt::format("bad byte size '{}'", text));

  uint64_t mult = 1;
  if (suffix.empty() || suffix == "b") {
    mult = 1;
  } else if (suffix == "k" || suffix == "kib" || suffix == "ki") {
    mult = uint64_t{1} << 10;
  } else if (suffix == "m" || suffix == "mib" || suffix == "mi") {
    mult = uint64_t{1} << 20;
  } else if (suffix == "g" || suffix == "gib" || suffix == "gi") {
    mult = uint64_t{1} << 30;
  } else if (suffix == "kb") {
    mult = 1000;
  } else if (suffix == "mb") {
    mult = 1000 * 1000;
  } else if (suffix == "gb") {
    mult = 1000 * 1000 * 1000;
  } else {
    return Status::InvalidArgument(fmt::format("bad byte size suffix in '{}'", text));
  }

  if (number.find('.') == std::string_view::npos) {
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
    if (ec != std::errc() || p != number.data() + number.size()) {
      return Status::InvalidArgument(fmt::format("bad byte size '{}'", text));
    }
    if (v != 0 && mult > std::numeric_limits<uint64_t>::max() / v) {
      return Status::InvalidArgument(fmt::format("byte size '{}' overflows", text));
    }
    return v * mult;
  }
  if (mult == 1) return Status::InvalidArgument(fmt::format("fractional byte count '{}'", text));
  double v = 0;
  auto [p, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
  if (ec != std::errc() || p != number.data() + number.size() || !std::isfinite(v)) {
    return Status::InvalidArgument(fmt::format("bad byte size '{}'", text));
  }
  double bytes = std::round(v * static_cast<double>(mult));
  if (bytes >= 1.8e19) return Status::InvalidArgument(fmt::format("byte size '{}' overflows", text));
  return static_cast<uint64_t>(bytes);
}

std::string HostPort::ToString() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

StatusOr<HostPort> ParseHostPort(std::string_view text) {
  HostPort hp;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return Status::InvalidArgument(fmt::format("bad address '{}' (want [V6]:PORT)", text));
    }
    hp.host = std::string(text.substr(1, close - 1));
    port_text = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || colon == 0) {
      return Status::InvalidArgument(fmt::format("bad address '{}' (want HOST:PORT)", text));
    }
    hp.host = std::string(text.substr(0, colon));
    if (hp.host.find(':') != std::string::npos) {
      return Status::InvalidArgument(fmt::format("IPv6 address needs brackets: '{}'", text));
    }
    port_text = text.substr(colon + 1);
  }
  if (hp.host == "localhost") hp.host = "127.0.0.1";
  if (hp.host.empty()) return Status::InvalidArgument(fmt::format("empty host in '{}'", text));
  unsigned port = 0;
  auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || p != port_text.data() + port_text.size() ||
      port > 65535) {
    return Status::InvalidArgument(fmt::format("bad port in '{}'", text));
  }
  hp.port = static_cast<uint16_t>(port);
  return hp;
}

StatusOr<MappingSpec> ParseMapping(std::string_view text) {
  size_t eq = text.find('=');
  if (eq == std::string_view::npos) {
    return Status::InvalidArgument(fmt::format("bad mapping '{}' (want LISTEN=TARGET)", text));
  }
  MappingSpec m;
  CQLS_ASSIGN_OR_RETURN(m.listen, ParseHostPort(text.substr(0, eq)));
  CQLS_ASSIGN_OR_RETURN(m.target, ParseHostPort(text.substr(eq + 1)));
  if (m.target.port == 0) return Status::InvalidArgument(fmt::format("target port 0 in '{}'", text));
  return m;
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  return fmt::format("{:.2f} {}", v, kUnits[u]);
}

}  // namespace cqlstream::wan
