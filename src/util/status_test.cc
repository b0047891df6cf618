// Copyright (c) cqlstream authors.
#include "cqlstream/status.h"

#include <gtest/gtest.h>

#include "cqlstream/errors.h"

namespace cqlstream {
namespace {

TEST(StatusTest, OkIsCheapAndEmpty) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kOk);
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(s.server_error(), nullptr);
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = Status::Timeout("read of key 7 after 2000 ms");
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.IsTimeout());
  EXPECT_EQ(s.ToString(), "Timeout: read of key 7 after 2000 ms");
  Status c = s.WithContext("loader");
  EXPECT_EQ(c.message(), "loader: read of key 7 after 2000 ms");
  EXPECT_EQ(c.code(), Status::Code::kTimeout);
}

TEST(StatusTest, ServerErrorsMapToTypedCodes) {
  auto e = std::make_shared<ServerError>();
  e->code = static_cast<int32_t>(ServerErrorCode::kOverloaded);
  e->message = "too many requests";
  Status s = Status::FromServer(e);
  EXPECT_EQ(s.code(), Status::Code::kOverloaded);
  ASSERT_NE(s.server_error(), nullptr);
  EXPECT_EQ(s.server_error()->typed(), ServerErrorCode::kOverloaded);
  EXPECT_EQ(s.message(), "Overloaded: too many requests");

  auto u = std::make_shared<ServerError>();
  u->code = static_cast<int32_t>(ServerErrorCode::kUnavailable);
  u->consistency = 0x0004;
  u->required = 2;
  u->alive = 1;
  u->message = "Cannot achieve consistency level QUORUM";
  Status su = Status::FromServer(u);
  EXPECT_EQ(su.code(), Status::Code::kServerError);
  EXPECT_EQ(su.message(),
            "Unavailable (consistency QUORUM, required 2, alive 1): Cannot achieve consistency level QUORUM");
  EXPECT_EQ(ServerErrorCodeName(0x7777), "Unknown(0x7777)");
}

StatusOr<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument("odd");
  return x / 2;
}

Status UseHalf(int x, int* out) {
  CQLS_ASSIGN_OR_RETURN(*out, Half(x));
  return Status::OK();
}

TEST(StatusTest, StatusOrAndMacros) {
  int v = 0;
  EXPECT_TRUE(UseHalf(8, &v).ok());
  EXPECT_EQ(v, 4);
  Status s = UseHalf(7, &v);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(v, 4);
  StatusOr<std::string> so = std::string("x");
  ASSERT_TRUE(so.ok());
  EXPECT_EQ(*so, "x");
}

}  // namespace
}  // namespace cqlstream
