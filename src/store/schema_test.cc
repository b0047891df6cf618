// Copyright (c) cqlstream authors.
#include "store/schema.h"

#include <gtest/gtest.h>

#include "store/ingest.h"

namespace cqlstream::store {
namespace {

TEST(ReplicationTest, Simple) {
  auto r = Replication::Parse("simple:3");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->kind, Replication::Kind::kSimple);
  EXPECT_EQ(r->replication_factor, 3);
  EXPECT_EQ(r->ToString(), "simple:3");
  EXPECT_EQ(r->ToCql(), "{'class': 'SimpleStrategy', 'replication_factor': '3'}");
  EXPECT_TRUE(r->Matches({{"class", "org.apache.cassandra.locator.SimpleStrategy"}, {"replication_factor", "3"}}));
  EXPECT_FALSE(r->Matches({{"class", "SimpleStrategy"}, {"replication_factor", "1"}}));
  EXPECT_FALSE(r->Matches({{"class", "NetworkTopologyStrategy"}, {"dc1", "3"}}));
}

TEST(ReplicationTest, NetworkTopology) {
  auto r = Replication::Parse("nts:dc1=3,eu-west.2=2");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->kind, Replication::Kind::kNetworkTopology);
  ASSERT_EQ(r->dc_factors.size(), 2u);
  EXPECT_EQ(r->dc_factors[1], (std::pair<std::string, int>{"eu-west.2", 2}));
  EXPECT_EQ(r->ToString(), "nts:dc1=3,eu-west.2=2");
  EXPECT_EQ(r->ToCql(), "{'class': 'NetworkTopologyStrategy', 'dc1': '3', 'eu-west.2': '2'}");
  EXPECT_TRUE(r->Matches({{"class", "org.apache.cassandra.locator.NetworkTopologyStrategy"},
                          {"dc1", "3"},
                          {"eu-west.2", "2"}}));
  EXPECT_FALSE(r->Matches({{"class", "NetworkTopologyStrategy"}, {"dc1", "3"}}));
  auto zero = Replication::Parse("nts:dc1=3,dc2=0");
  ASSERT_TRUE(zero.ok());
  EXPECT_TRUE(zero->Matches({{"class", "NetworkTopologyStrategy"}, {"dc1", "3"}}));
}

TEST(ReplicationTest, Errors) {
  for (const char* bad : {"", "simple", "simple:", "simple:0", "simple:x", "simple:100", "nts:", "nts:dc1",
                          "nts:dc1=", "nts:dc1=3,dc1=2", "nts:dc'1=3", "nts:dc1=0", "nts:dc1=3,", "quorum:3",
                          "nts:dc1=-1"}) {
    auto r = Replication::Parse(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
      EXPECT_NE(r.status().message().find("--replication"), std::string::npos);
    }
  }
}

TEST(SchemaTest, DdlFollowsTheLayout) {
  auto r = Replication::Parse("simple:1").value();
  EXPECT_EQ(CreateKeyspaceCql("ks", r),
            "CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': "
            "'1'}");
  const auto cat = CatalogTablesCql("ks");
  ASSERT_EQ(cat.size(), 2u);
  EXPECT_NE(cat[0].find("ks.datasets (name text PRIMARY KEY"), std::string::npos);
  EXPECT_NE(cat[1].find("PRIMARY KEY ((dataset), seg)"), std::string::npos);
  const auto ds = DatasetTablesCql("ks", "mnist");
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_NE(ds[0].find("ks.d_mnist"), std::string::npos);
  EXPECT_NE(ds[0].find("PRIMARY KEY ((seg, idx), chunk)"), std::string::npos);
  EXPECT_NE(ds[0].find("size bigint static"), std::string::npos);
  EXPECT_NE(ds[0].find("'enabled': 'false'"), std::string::npos);
  EXPECT_NE(ds[1].find("ks.m_mnist"), std::string::npos);
  EXPECT_NE(ds[1].find("PRIMARY KEY ((seg, block), idx)"), std::string::npos);
  // Every column of the grammar appears in the DDL.
  for (const auto& [col, def] : ExpectedDataColumns()) EXPECT_NE(ds[0].find(col), std::string::npos) << col;
  for (const auto& [col, def] : ExpectedMetaColumns()) EXPECT_NE(ds[1].find(col), std::string::npos) << col;
}

TEST(SchemaTest, CompatibilityMessages) {
  DatasetInfo d;
  d.name = "pets";
  d.label_kind = LabelKind::kClass;
  d.class_names = {"cat", "dog"};
  d.chunk_size = 1 << 20;
  DatasetSpec s;
  s.name = "pets";
  s.label_kind = LabelKind::kClass;
  s.class_names = {"dog"};
  EXPECT_TRUE(CheckCompatible(d, s).ok());

  s.class_names = {"dog", "emu", "yak"};
  auto st = CheckCompatible(d, s);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'emu', 'yak'"), std::string::npos) << st.message();

  s.class_names = {};
  s.label_kind = LabelKind::kNone;
  st = CheckCompatible(d, s);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Status::Code::kAlreadyExists);
  EXPECT_NE(st.message().find("label kind 'class'"), std::string::npos) << st.message();

  s.label_kind = LabelKind::kClass;
  s.chunk_size = 4096;
  s.chunk_size_given = true;
  st = CheckCompatible(d, s);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("chunk size 1048576"), std::string::npos) << st.message();
  s.chunk_size_given = false;
  EXPECT_TRUE(CheckCompatible(d, s).ok());

  d.layout_version = 2;
  st = CheckCompatible(d, s);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Status::Code::kUnsupported);
  EXPECT_NE(st.message().find("layout version 2"), std::string::npos);
}

TEST(IngestHelpersTest, SizeBuckets) {
  EXPECT_EQ(SizeBucket(0), 0);
  EXPECT_EQ(SizeBucket(1), 0);
  EXPECT_EQ(SizeBucket(2), 1);
  EXPECT_EQ(SizeBucket(3), 1);
  EXPECT_EQ(SizeBucket(1024), 10);
  EXPECT_EQ(SizeBucket(2047), 10);
  EXPECT_EQ(SizeBucket(int64_t{1} << 40), 40);
}

TEST(IngestHelpersTest, SkipsAreGroupedByReason) {
  IngestReport r;
  for (int i = 0; i < 25; ++i) r.skips.push_back({"train", "e" + std::to_string(i) + ".jpg", "empty file"});
  r.skips.push_back({"test", "x.txt", "not an image (unknown signature)"});
  const std::string s = r.FormatSkips(20);
  EXPECT_NE(s.find("empty file (25):"), std::string::npos) << s;
  EXPECT_NE(s.find("train: e19.jpg"), std::string::npos);
  EXPECT_EQ(s.find("train: e20.jpg"), std::string::npos);
  EXPECT_NE(s.find("... and 5 more"), std::string::npos);
  EXPECT_NE(s.find("not an image (unknown signature) (1):\n    test: x.txt"), std::string::npos) << s;
  EXPECT_NE(s.find("total skipped: 26"), std::string::npos);
  EXPECT_LT(s.find("empty file"), s.find("not an image"));  // most frequent first
}

}  // namespace
}  // namespace cqlstream::store
