// Copyright (c) cqlstream authors.
#include <gtest/gtest.h>

#include "cql/response.h"
#include "cql/test_util.h"

namespace cqlstream::cql {
namespace {

using testing::MakeRows;
using testing::RowsSpec;

DataType T(TypeId id) { return DataType::Simple(id); }

Rows Sample() {
  RowsSpec s;
  s.keyspace = "system";
  s.table = "local";
  s.columns = {{"name", T(TypeId::kVarchar)},
               {"n", T(TypeId::kInt)},
               {"big", T(TypeId::kBigint)},
               {"id", T(TypeId::kUuid)},
               {"tokens", DataType::Set(T(TypeId::kVarchar))},
               {"labels", DataType::List(T(TypeId::kInt))},
               {"repl", DataType::Map(T(TypeId::kVarchar), T(TypeId::kVarchar))},
               {"addr", T(TypeId::kInet)},
               {"data", T(TypeId::kBlob)}};
  auto id = Uuid::Parse("11111111-2222-3333-4444-555555555555");
  s.rows.push_back({Value::Text("a"), Value::Int(7), Value::Bigint(1LL << 40), Value::FromUuid(*id),
                    Value::List({Value::Text("-5"), Value::Text("9")}), Value::List({Value::Int(1), Value::Int(2)}),
                    Value::Map({{Value::Text("class"), Value::Text("SimpleStrategy")}}), Value::Blob(Bytes{127, 0, 0, 2}),
                    Value::Blob(Bytes{1, 2, 3})});
  s.rows.push_back({std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt,
                    std::nullopt, std::nullopt, std::nullopt});
  return MakeRows(s);
}

TEST(RowsGet, TypedValuesByNameAndIndex) {
  const Rows r = Sample();
  EXPECT_EQ(*r.Get<std::string>(0, "name"), "a");
  EXPECT_EQ(*r.Get<int32_t>(0, 1), 7);
  EXPECT_EQ(*r.Get<int64_t>(0, "big"), 1LL << 40);
  EXPECT_EQ(r.Get<Uuid>(0, "id")->ToString(), "11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(*r.Get<std::vector<std::string>>(0, "tokens"), (std::vector<std::string>{"-5", "9"}));
  EXPECT_EQ(*r.Get<std::vector<int32_t>>(0, "labels"), (std::vector<int32_t>{1, 2}));
  using StringMap = std::map<std::string, std::string>;
  EXPECT_EQ(r.Get<StringMap>(0, "repl")->at("class"), "SimpleStrategy");
  EXPECT_EQ(r.Get<InetAddress>(0, "addr")->ToString(), "127.0.0.2");
  EXPECT_EQ(r.Get<ByteView>(0, "data")->size(), 3u);
  EXPECT_EQ(r.Get<Value>(0, "n")->as_int(), 7);
  EXPECT_EQ(*r.ColumnOf<int32_t>("n"), 1);
}

TEST(RowsGet, NullIsAnErrorForGetAndNulloptForGetOptional) {
  const Rows r = Sample();
  auto g = r.Get<std::string>(1, "name");
  EXPECT_EQ(g.status().code(), Status::Code::kProtocolError);
  EXPECT_NE(g.status().message().find("'name' of system.local is null"), std::string::npos) << g.status().ToString();
  auto o = r.GetOptional<std::string>(1, "name");
  ASSERT_TRUE(o.ok());
  EXPECT_FALSE(o->has_value());
  EXPECT_EQ(r.GetOptional<std::string>(0, "name")->value(), "a");
}

TEST(RowsGet, MissingColumnIsAProtocolErrorNamingIt) {
  const Rows r = Sample();
  auto g = r.Get<std::string>(0, "data_center");
  EXPECT_EQ(g.status().code(), Status::Code::kProtocolError);
  EXPECT_NE(g.status().message().find("system.local lacks the requested column 'data_center'"), std::string::npos)
      << g.status().ToString();
  EXPECT_EQ(r.ColumnOf<std::string>("nope").status().code(), Status::Code::kProtocolError);
}

TEST(RowsGet, WrongTypeIsAProtocolErrorNamingBothTypes) {
  const Rows r = Sample();
  auto g = r.Get<std::string>(0, "n");
  EXPECT_EQ(g.status().code(), Status::Code::kProtocolError);
  EXPECT_NE(g.status().message().find("has type int, expected text"), std::string::npos) << g.status().ToString();
  EXPECT_FALSE(r.Get<int32_t>(0, "big").ok());
  EXPECT_FALSE(r.Get<std::vector<int32_t>>(0, "tokens").ok());
  using StringMap = std::map<std::string, std::string>;
  EXPECT_FALSE(r.Get<StringMap>(0, "labels").ok());
  EXPECT_FALSE(r.Get<Uuid>(0, "name").ok());
  EXPECT_FALSE(r.ColumnOf<InetAddress>("data").ok());  // blob is not inet
}

TEST(RowsGet, MalformedCellsAreProtocolErrors) {
  RowsSpec s;
  s.columns = {{"addr", T(TypeId::kInet)}, {"n", T(TypeId::kInt)}, {"id", T(TypeId::kUuid)}};
  s.raw.push_back({Bytes{1, 2, 3}, Bytes{1, 2}, Bytes{1}});
  const Rows r = MakeRows(s);
  EXPECT_EQ(r.Get<InetAddress>(0, "addr").status().code(), Status::Code::kProtocolError);
  EXPECT_EQ(r.Get<int32_t>(0, "n").status().code(), Status::Code::kProtocolError);
  EXPECT_EQ(r.Get<Uuid>(0, "id").status().code(), Status::Code::kProtocolError);
}

TEST(RowsGet, IndexOutsideTheResultIsInvalidArgument) {
  const Rows r = Sample();
  EXPECT_EQ(r.Get<int32_t>(2, 1).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(r.Get<int32_t>(0, 99).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(r.Get<int32_t>(-1, 1).status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace cqlstream::cql
