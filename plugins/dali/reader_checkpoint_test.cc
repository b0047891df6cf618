// Copyright (c) cqlstream authors.
#include "reader_checkpoint.h"

#include <gtest/gtest.h>

namespace cqlstream::dali_plugin {
namespace {

TEST(ReaderCheckpoint, Base64RoundTrip) {
  for (std::string s : {std::string(), std::string("a"), std::string("ab"), std::string("abc"),
                        std::string("\0\xff\x10 binary\n", 11)}) {
    const std::string e = Base64Encode(s);
    EXPECT_EQ(e.size() % 4, 0u);
    auto d = Base64Decode(e);
    ASSERT_TRUE(d.ok()) << e;
    EXPECT_EQ(*d, s);
  }
  EXPECT_EQ(Base64Encode("Man"), "TWFu");
  EXPECT_EQ(Base64Encode("Ma"), "TWE=");
  EXPECT_FALSE(Base64Decode("TW=u").ok());
  EXPECT_FALSE(Base64Decode("TWF").ok());
  EXPECT_FALSE(Base64Decode("TW!u").ok());
}

TEST(ReaderCheckpoint, RoundTrip) {
  ReaderCheckpoint c;
  c.shard_id = 2;
  c.num_shards = 3;
  c.batch_size = 64;
  c.samples = 60000;
  c.slot = 128;
  c.real = 127;
  c.loader_ended = true;
  c.has_last = true;
  c.last_key = (uint64_t{3} << 32) | 17;
  c.pending = {1, 2, uint64_t{1} << 40};
  c.loader_state = std::string("\x01\x00state", 7);
  const std::string text = c.Encode();
  for (char ch : text) EXPECT_TRUE(isalnum(static_cast<unsigned char>(ch)) || ch == '+' || ch == '/' || ch == '=');
  auto d = ReaderCheckpoint::Decode(text);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->shard_id, 2);
  EXPECT_EQ(d->num_shards, 3);
  EXPECT_EQ(d->batch_size, 64);
  EXPECT_EQ(d->samples, 60000u);
  EXPECT_EQ(d->slot, 128u);
  EXPECT_EQ(d->real, 127u);
  EXPECT_TRUE(d->loader_ended);
  EXPECT_TRUE(d->has_last);
  EXPECT_EQ(d->last_key, c.last_key);
  EXPECT_EQ(d->pending, c.pending);
  EXPECT_EQ(d->loader_state, c.loader_state);
}

TEST(ReaderCheckpoint, RejectsForeignOrDamagedText) {
  EXPECT_FALSE(ReaderCheckpoint::Decode(Base64Encode("CQLSSEL1 something else")).ok());
  ReaderCheckpoint c;
  c.loader_state = "xyz";
  std::string bytes = *Base64Decode(c.Encode());
  EXPECT_FALSE(ReaderCheckpoint::Decode(Base64Encode(bytes.substr(0, bytes.size() - 1))).ok());
  EXPECT_FALSE(ReaderCheckpoint::Decode(Base64Encode(bytes + "!")).ok());
  EXPECT_FALSE(ReaderCheckpoint::Decode("not base64").ok());
}

}  // namespace
}  // namespace cqlstream::dali_plugin
