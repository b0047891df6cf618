// Copyright (c) cqlstream authors.
//
// Escaping untrusted text for human output (terminal lines of info, ls,
// verify, ingest, export, ...). Class names, paths, descriptions and source
// names come from the keyspace or from files and may hold any bytes: printed
// raw, a C0/C1 control sequence can rewrite the terminal, hide a line or fake
// one. PrintableText() turns
//
//   C0 controls (0x00-0x1f) and DEL (0x7f)   \n \r \t or \xNN
//   C1 controls (U+0080-U+009F, UTF-8 c2 80-9f)  \u0080 .. \u009f
//   bytes that are not valid UTF-8           \xNN (each byte)
//   backslash                                \\  (so the output is unambiguous)
//
// and keeps every other valid UTF-8 sequence as it is. Machine output (CSV,
// JSON, selection files) is not escaped this way; it has its own quoting.
//
// Thread-safety: pure functions.
#ifndef CQLSTREAM_UTIL_ESCAPE_H_
#define CQLSTREAM_UTIL_ESCAPE_H_

#include <string>
#include <string_view>

namespace cqlstream {

std::string PrintableText(std::string_view s);

}  // namespace cqlstream

#endif  // CQLSTREAM_UTIL_ESCAPE_H_
