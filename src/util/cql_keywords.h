// Copyright (c) cqlstream authors.
//
// CQL reserved words. Generated CQL puts keyspace names into statements
// unquoted (`SELECT ... FROM <keyspace>.datasets`); a keyspace named `select`
// or `token` passes the name rule [a-z][a-z0-9_]* yet makes every statement a
// server syntax error. Such names are refused up front with a message naming
// the rule (quoting would also work, but the names then differ from what
// cqlsh users type; refusing keeps one spelling).
//
// The list is the union of Apache Cassandra's reserved keywords (3.x to 5.0,
// org.apache.cassandra.cql3.ReservedKeywords and the CQL docs' appendix) and
// ScyllaDB's; a few words reserved only by some versions are included so a
// name that works on one server works on all.
//
// Thread-safety: pure functions.
#ifndef CQLSTREAM_UTIL_CQL_KEYWORDS_H_
#define CQLSTREAM_UTIL_CQL_KEYWORDS_H_

#include <string_view>

#include "cqlstream/status.h"

namespace cqlstream {

// Case-insensitive.
bool IsCqlReservedWord(std::string_view word);

// InvalidArgument naming `what` (e.g. "keyspace") when `name` is reserved.
Status RefuseReservedWord(std::string_view what, std::string_view name);

}  // namespace cqlstream

#endif  // CQLSTREAM_UTIL_CQL_KEYWORDS_H_
