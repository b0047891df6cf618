// Copyright (c) cqlstream authors.
#include "util/cql_keywords.h"

#include <gtest/gtest.h>

namespace cqlstream {
namespace {

TEST(CqlKeywords, ReservedWordsAreRecognizedInAnyCase) {
  for (const char* w : {"select", "SELECT", "Token", "from", "keyspace", "table", "where", "null", "nan", "infinity"}) {
    EXPECT_TRUE(IsCqlReservedWord(w)) << w;
  }
}

TEST(CqlKeywords, OrdinaryAndNonReservedWordsPass) {
  for (const char* w : {"cqlstream", "it_1234", "st_99", "key", "count", "ttl", "writetime", "values", "text",
                        "selected", "tokens", ""}) {
    EXPECT_FALSE(IsCqlReservedWord(w)) << w;
  }
}

TEST(CqlKeywords, RefusalNamesTheProblem) {
  EXPECT_TRUE(RefuseReservedWord("keyspace", "cqlstream").ok());
  Status s = RefuseReservedWord("keyspace", "select");
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("keyspace name 'select' is a CQL reserved word"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace cqlstream
