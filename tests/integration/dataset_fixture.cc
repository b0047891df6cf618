// Copyright (c) cqlstream authors.
#include "dataset_fixture.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "test_env.h"

namespace cqlstream::testing {

std::vector<uint8_t> PayloadFor(SampleKey key, int64_t size) {
  std::vector<uint8_t> v(static_cast<size_t>(size));
  std::mt19937_64 rng(key * 0x9e3779b97f4a7c15ULL + 1);
  for (size_t i = 0; i < v.size(); i += 8) {
    const uint64_t x = rng();
    for (size_t j = 0; j < 8 && i + j < v.size(); ++j) {
      v[i + j] = static_cast<uint8_t>(x >> (8 * j));
    }
  }
  return v;
}

namespace {

void Run(net::Session& s, const std::string& q, std::vector<Value> v = {},
         cql::Consistency consistency = cql::Consistency::kLocalOne) {
  net::Statement st = net::Statement::Query(q, std::move(v));
  st.consistency = consistency;
  st.timeout = std::chrono::milliseconds(60000);
  st.idempotent = true;
  auto r = s.Execute(st);
  ASSERT_TRUE(r.ok()) << q << ": " << r.status().ToString();
  if (std::holds_alternative<cql::SchemaChange>(r->result)) {
    ASSERT_TRUE(s.WaitForSchemaAgreement().ok());
  }
}

// The catalog tables, a fresh d_<name> and m_<name>, no segments of the
// dataset, and its catalog row (classes class0 ..).
void CreateSchema(net::Session& s, const std::string& ks, const SyntheticSpec& spec) {
  const std::string& n = spec.name;
  Run(s, fmt::format("CREATE TABLE IF NOT EXISTS {}.datasets (name text PRIMARY KEY, layout_version int, "
                     "created timestamp, label_kind text, class_names list<text>, checksum text, chunk_size int, "
                     "description text)",
                     ks));
  Run(s, fmt::format("CREATE TABLE IF NOT EXISTS {}.segments (dataset text, seg int, split text, source_id text, "
                     "source text, fingerprint text, count int, bytes bigint, max_size bigint, size_hist list<bigint>, "
                     "next_pos bigint, state text, created timestamp, updated timestamp, PRIMARY KEY ((dataset), seg))",
                     ks));
  Run(s, fmt::format("DROP TABLE IF EXISTS {}.d_{}", ks, n));
  Run(s, fmt::format("DROP TABLE IF EXISTS {}.m_{}", ks, n));
  Run(s, fmt::format("DELETE FROM {}.segments WHERE dataset = ?", ks), {Value::Text(n)}, spec.consistency);
  Run(s, fmt::format("CREATE TABLE {}.d_{} (seg int, idx int, chunk int, size bigint static, image_size bigint static, "
                     "checksum bigint static, label int static, labels list<int> static, data blob, "
                     "PRIMARY KEY ((seg, idx), chunk)) WITH compression = {{'enabled': 'false'}}",
                     ks, n));
  Run(s, fmt::format("CREATE TABLE {}.m_{} (seg int, block int, idx int, path text, target_path text, label int, "
                     "labels list<int>, size bigint, image_size bigint, checksum bigint, extra map<text, text>, "
                     "PRIMARY KEY ((seg, block), idx))",
                     ks, n));
  std::vector<Value> classes;
  for (int c = 0; c < spec.classes; ++c) classes.push_back(Value::Text(fmt::format("class{}", c)));
  Run(s, fmt::format("INSERT INTO {}.datasets (name, layout_version, created, label_kind, class_names, checksum, "
                     "chunk_size, description) VALUES (?, 1, toTimestamp(now()), 'class', ?, 'xxh64', ?, 'synthetic')",
                     ks),
      {Value::Text(n), Value::List(classes), Value::Int(spec.chunk_size)}, spec.consistency);
}

}  // namespace

SyntheticDataset MakeSyntheticDataset(net::Session& s, const std::string& ks, const SyntheticSpec& spec) {
  SyntheticDataset out;
  const std::string& n = spec.name;
  CreateSchema(s, ks, spec);

  auto data = s.Prepare(fmt::format("INSERT INTO {}.d_{} (seg, idx, chunk, size, image_size, checksum, label, data) "
                                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                    ks, n));
  auto meta = s.Prepare(fmt::format("INSERT INTO {}.m_{} (seg, block, idx, path, label, size, image_size, checksum) "
                                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                    ks, n));
  EXPECT_TRUE(data.ok() && meta.ok());
  if (!data.ok() || !meta.ok()) return out;

  // Writes that fail (a write timeout on a loaded 3-node cluster in CI) are
  // written again, one at a time, after the rest: the inserts are
  // idempotent. What still fails after that fails the fixture, named.
  std::atomic<int> pending{0}, failed{0};
  std::mutex again_mu;
  std::vector<net::Statement> again;
  auto submit = [&](net::Statement st) {
    while (pending.load() > 256) std::this_thread::sleep_for(std::chrono::microseconds(100));
    ++pending;
    st.idempotent = true;
    st.consistency = spec.consistency;
    st.timeout = std::chrono::milliseconds(30000);
    net::Statement copy = st;
    s.ExecuteAsync(std::move(st), [&, copy = std::move(copy)](StatusOr<net::ResultSet> r) {
      if (!r.ok()) {
        std::lock_guard<std::mutex> l(again_mu);
        again.push_back(copy);
      }
      --pending;
    });
  };
  auto write_again = [&] {
    while (pending.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::vector<net::Statement> todo;
    {
      std::lock_guard<std::mutex> l(again_mu);
      todo.swap(again);
    }
    for (auto& st : todo) {
      Status last;
      for (int attempt = 0; attempt < 5; ++attempt) {
        if (attempt > 0) std::this_thread::sleep_for(std::chrono::seconds(1));
        auto r = s.Execute(st);
        last = r.status();
        if (r.ok()) break;
      }
      if (!last.ok()) {
        ++failed;
        ADD_FAILURE() << "a synthetic dataset write failed 6 times: " << last.ToString();
      }
    }
  };
  const int per_seg = (spec.samples + spec.segments - 1) / spec.segments;
  int i = 0;
  for (int g = 0; g < spec.segments; ++g) {
    const int32_t seg = g * 3;  // not dense: segment numbers need not be
    int count = 0;
    int64_t bytes = 0, max_size = 0;
    for (int idx = 0; idx < per_seg && i < spec.samples; ++idx, ++i, ++count) {
      const SampleKey key = MakeKey(seg, idx);
      const int64_t size = spec.size(i);
      auto payload = PayloadFor(key, size);
      const int64_t checksum = static_cast<int64_t>(XXH64(payload.data(), payload.size(), 0));
      const int32_t label = i % spec.classes;
      const int chunks = std::max<int>(1, static_cast<int>((size + spec.chunk_size - 1) / spec.chunk_size));
      for (int c = 0; c < chunks; ++c) {
        const size_t lo = static_cast<size_t>(c) * static_cast<size_t>(spec.chunk_size);
        const size_t hi = std::min(payload.size(), lo + static_cast<size_t>(spec.chunk_size));
        std::vector<uint8_t> part(payload.begin() + static_cast<long>(lo), payload.begin() + static_cast<long>(hi));
        submit(net::Statement::Bound(*data, {Value::Int(seg), Value::Int(idx), Value::Int(c), Value::Bigint(size),
                                             Value::Bigint(size), Value::Bigint(checksum), Value::Int(label),
                                             Value::Blob(std::move(part))}));
      }
      const std::string path = fmt::format("class{}/img_{:05d}.bin", label, i);
      submit(net::Statement::Bound(*meta, {Value::Int(seg), Value::Int(idx >> 10), Value::Int(idx), Value::Text(path),
                                           Value::Int(label), Value::Bigint(size), Value::Bigint(size),
                                           Value::Bigint(checksum)}));
      out.payload[key] = std::move(payload);
      out.label[key] = label;
      out.path[key] = path;
      bytes += size;
      max_size = std::max(max_size, size);
    }
    write_again();
    Run(s, fmt::format("INSERT INTO {}.segments (dataset, seg, split, source_id, source, fingerprint, count, bytes, "
                       "max_size, size_hist, next_pos, state) VALUES (?, ?, ?, ?, 'synthetic', 'none', ?, ?, ?, [], ?, "
                       "'sealed')",
                       ks),
        {Value::Text(n), Value::Int(seg), Value::Text(spec.split), Value::Text(fmt::format("src{}", g)),
         Value::Int(count), Value::Bigint(bytes), Value::Bigint(max_size), Value::Bigint(count)},
        spec.consistency);
  }
  EXPECT_EQ(failed.load(), 0);
  out.info.name = n;
  out.info.keyspace = ks;
  return out;
}

Delivered ReadEpoch(Loader& l, const SyntheticDataset& d, int max_batches) {
  Delivered out;
  XXH64_state_t* h = XXH64_createState();
  XXH64_reset(h, 0);
  for (int b = 0; max_batches < 0 || b < max_batches; ++b) {
    auto r = l.Next();
    if (!r.ok()) {
      out.error = r.status().ToString();
      break;
    }
    if (!*r) break;
    const Batch& batch = **r;
    out.batch_sizes.push_back(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      const SampleKey k = batch.keys[i];
      auto it = d.payload.find(k);
      if (it == d.payload.end()) {
        ADD_FAILURE() << "unknown key " << FormatKey(k);
        continue;
      }
      auto s = batch.sample(i);
      if (s.size() != it->second.size() || !std::equal(s.begin(), s.end(), it->second.begin())) {
        ADD_FAILURE() << "wrong bytes for " << FormatKey(k);
      }
      EXPECT_EQ(batch.labels[i], d.label.at(k)) << FormatKey(k);
      out.keys.push_back(k);
      XXH64_update(h, &k, sizeof k);
    }
    XXH64_update(h, batch.data().data(), batch.data().size());
  }
  out.digest = XXH64_digest(h);
  XXH64_freeState(h);
  return out;
}

LoaderOptions TestLoaderOptions(const std::string& dataset, const std::string& split) {
  LoaderOptions o;
  o.connection = TestOptions();
  o.connection.keyspace = TestKeyspace();
  o.dataset = dataset;
  o.split = split;
  return o;
}

std::set<SampleKey> ReadAllRanks(const LoaderOptions& o, int world, const SyntheticDataset& d) {
  std::vector<std::future<Delivered>> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.push_back(std::async(std::launch::async, [&o, &d, r, world] {
      LoaderOptions ro = o;
      ro.rank = r;
      ro.world_size = world;
      auto l = Loader::Open(ro);
      EXPECT_TRUE(l.ok()) << l.status().ToString();
      return l.ok() ? ReadEpoch(**l, d) : Delivered{};
    }));
  }
  std::set<SampleKey> all;
  for (auto& f : ranks) {
    Delivered got = f.get();
    EXPECT_TRUE(got.error.empty()) << got.error;
    for (SampleKey k : got.keys) EXPECT_TRUE(all.insert(k).second) << "two ranks: " << FormatKey(k);
  }
  return all;
}

std::set<SampleKey> ResumeEpoch(const LoaderOptions& o, const std::string& state,
                                const std::vector<SampleKey>& before, const SyntheticDataset& d,
                                LoaderMetrics* metrics) {
  std::set<SampleKey> all(before.begin(), before.end());
  EXPECT_EQ(all.size(), before.size()) << "delivered twice before the checkpoint";
  auto l = Loader::Open(o);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  if (!l.ok()) return all;
  Status restored = (*l)->Restore({state});
  EXPECT_TRUE(restored.ok()) << restored.ToString();
  if (!restored.ok()) return all;
  Delivered rest = ReadEpoch(**l, d);
  EXPECT_TRUE(rest.error.empty()) << rest.error;
  for (SampleKey k : rest.keys) EXPECT_TRUE(all.insert(k).second) << "delivered twice: " << FormatKey(k);
  if (metrics) *metrics = (*l)->Metrics();
  return all;
}

}  // namespace cqlstream::testing
