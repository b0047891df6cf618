// Copyright (c) cqlstream authors.
#include "util/cql_keywords.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <cctype>
#include <string>

namespace cqlstream {
namespace {

// Upper case.
constexpr std::string_view kReserved[] = {
    "ADD",          "ALLOW",     "ALTER",      "AND",          "ANY",       "APPLY",      "ASC",
    "AUTHORIZE",    "BATCH",     "BEGIN",      "BETWEEN",      "BY",        "COLUMNFAMILY", "CREATE",
    "DEFAULT",      "DELETE",    "DESC",       "DESCRIBE",     "DROP",      "EACH_QUORUM", "ENTRIES",
    "EXECUTE",      "FROM",      "FULL",       "GRANT",        "IF",        "IN",         "INDEX",
    "INFINITY",     "INSERT",    "INTO",       "IS",           "KEYSPACE",  "LIMIT",      "LOCAL_ONE",
    "LOCAL_QUORUM", "MATERIALIZED", "MBEAN",   "MBEANS",       "MODIFY",    "NAN",        "NORECURSIVE",
    "NOT",          "NULL",      "OF",         "ON",           "ONE",       "OR",         "ORDER",
    "PRIMARY",      "QUORUM",    "RENAME",     "REPLACE",      "REVOKE",    "SCHEMA",     "SELECT",
    "SET",          "TABLE",     "THREE",      "TO",           "TOKEN",     "TRUNCATE",   "TWO",
    "UNLOGGED",     "UNSET",     "UPDATE",     "USE",          "USING",     "VIEW",       "WHERE",
    "WITH",
};

}  // namespace

bool IsCqlReservedWord(std::string_view word) {
  std::string up(word);
  for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return std::find(std::begin(kReserved), std::end(kReserved), up) != std::end(kReserved);
}

Status RefuseReservedWord(std::string_view what, std::string_view name) {
  if (!IsCqlReservedWord(name)) return Status::OK();
  return Status::InvalidArgument(fmt::format(
      "{} name '{}' is a CQL reserved word (the server would reject every statement naming it): choose another name",
      what, name));
}

}  // namespace cqlstream
