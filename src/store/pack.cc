// Copyright (c) cqlstream authors.
#include "store/pack.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "store/catalog.h"
#include "store/sample_row.h"
#include "store/scan.h"
#include "store/schema.h"
#include "store/segments_table.h"
#include "util/measure.h"
#include "util/mutex.h"

namespace cqlstream::store {

PackMembership::PackMembership(int64_t count, int32_t pack_size, int64_t seed, int32_t seg)
    : count_(std::max<int64_t>(count, 0)),
      pack_size_(std::max(pack_size, 1)),
      packs_(count_ / pack_size_),
      seed_(seed),
      rho_(static_cast<uint64_t>(count_), static_cast<uint64_t>(seed), static_cast<uint64_t>(static_cast<uint32_t>(seg)),
           true) {}

int32_t PackMembership::Member(int64_t j, int32_t m) const {
  return static_cast<int32_t>(rho_(static_cast<uint64_t>(j * pack_size_ + m)));
}

int32_t PackMembership::Leftover(int64_t t) const {
  return static_cast<int32_t>(rho_(static_cast<uint64_t>(packs_ * pack_size_ + t)));
}

int32_t PackSizeFor(int64_t max_size, int32_t chunk_size, int32_t wanted) {
  if (max_size <= 0 || chunk_size <= 0 || max_size > chunk_size || max_size > kMaxPackSampleBytes) return 0;
  const int64_t by_bytes = kMaxPackBytes / max_size;
  const int64_t p = std::min<int64_t>({wanted, by_bytes, kMaxPackSize});
  return p >= kMinPackSize ? static_cast<int32_t>(p) : 0;
}

Status ValidatePack(const PackInfo& p, const SegmentInfo* g, const DatasetInfo& d) {
  auto bad = [&](std::string what) {
    return Status::Corruption(fmt::format("packs row of dataset '{}' segment {}: {}", d.name, p.seg, what));
  };
  if (g == nullptr) return bad("the dataset has no such segment");
  if (p.pack_size < kMinPackSize || p.pack_size > kMaxPackSize) {
    return bad(fmt::format("pack size {} is outside [{}, {}]", p.pack_size, kMinPackSize, kMaxPackSize));
  }
  if (p.count != g->count) {
    return bad(fmt::format("packed for {} samples, but the segment holds {} (run `cqlstream pack {} --force`)", p.count,
                           g->count, d.name));
  }
  const int64_t full = p.count / p.pack_size * p.pack_size;
  if (p.packed < 0 || p.left_out < 0 || p.packed + p.left_out != full) {
    return bad(fmt::format("{} samples packed and {} left out do not add up to the {} of its full packs", p.packed,
                           p.left_out, full));
  }
  if (PackSizeFor(g->max_size, d.chunk_size, p.pack_size) != p.pack_size) {
    return bad(fmt::format("pack size {} does not fit samples of up to {} bytes", p.pack_size, g->max_size));
  }
  return Status::OK();
}

std::string PacksTableCql(const std::string& keyspace) {
  return fmt::format(
      "CREATE TABLE IF NOT EXISTS {}.packs (dataset text, seg int, count int, pack_size int, seed bigint, "
      "packed int, left_out int, created timestamp, PRIMARY KEY ((dataset), seg))",
      keyspace);
}

std::string PackTableCql(const DatasetInfo& d) {
  return fmt::format(
      "CREATE TABLE IF NOT EXISTS {}.{} (seg int, pack int, idx int, size bigint, image_size bigint, "
      "checksum bigint, label int, labels list<int>, data blob, PRIMARY KEY ((seg, pack), idx)) "
      "WITH compression = {{'enabled': 'false'}}",
      d.keyspace, d.pack_table());
}

std::string PackReadQuery(const DatasetInfo& d) {
  return fmt::format(
      "SELECT seg, idx, size, image_size, checksum, label, labels, data FROM {}.{} WHERE seg = ? AND pack = ? AND "
      "idx IN ?",
      d.keyspace, d.pack_table());
}

std::string PackInsertQuery(const DatasetInfo& d) {
  return fmt::format(
      "INSERT INTO {}.{} (seg, pack, idx, size, image_size, checksum, label, labels, data) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?",
      d.keyspace, d.pack_table());
}

std::string PackClearQuery(const DatasetInfo& d) {
  return fmt::format("DELETE FROM {}.{} USING TIMESTAMP ? WHERE seg = ? AND pack = ?", d.keyspace, d.pack_table());
}

StatusOr<PackInfo> DecodePackRow(const cql::Rows& r, int32_t row) {
  PackInfo p;
  CQLS_ASSIGN_OR_RETURN(p.seg, r.Get<int32_t>(row, "seg"));
  CQLS_ASSIGN_OR_RETURN(std::optional<int32_t> count, r.GetOptional<int32_t>(row, "count"));
  CQLS_ASSIGN_OR_RETURN(std::optional<int32_t> size, r.GetOptional<int32_t>(row, "pack_size"));
  CQLS_ASSIGN_OR_RETURN(std::optional<int64_t> seed, r.GetOptional<int64_t>(row, "seed"));
  CQLS_ASSIGN_OR_RETURN(std::optional<int32_t> packed, r.GetOptional<int32_t>(row, "packed"));
  CQLS_ASSIGN_OR_RETURN(std::optional<int32_t> left_out, r.GetOptional<int32_t>(row, "left_out"));
  p.count = count.value_or(0);
  p.pack_size = size.value_or(0);
  p.seed = seed.value_or(0);
  p.packed = packed.value_or(0);
  p.left_out = left_out.value_or(0);
  return p;
}

namespace {

net::Statement Read(std::string cql, std::vector<Value> values) {
  net::Statement st = net::Statement::Query(std::move(cql), std::move(values));
  st.consistency = cql::Consistency::kLocalQuorum;
  st.idempotent = true;
  return st;
}

StatusOr<bool> HasPacksTable(net::Session& s, const std::string& keyspace) {
  bool found = false;
  net::Session::ReadBudget budget = SchemaReadBudget(fmt::format("the packs table read of keyspace '{}'", keyspace));
  CQLS_RETURN_IF_ERROR(s.ForEachPage(
      Read("SELECT table_name FROM system_schema.tables WHERE keyspace_name = ? AND table_name = 'packs'",
           {Value::Text(keyspace)}),
      [&](const cql::Rows& r) {
        found = found || r.row_count() > 0;
        return Status::OK();
      },
      &budget));
  return found;
}

// The pack seed of a segment: fixed by the dataset's name and creation
// time (a re-run writes the same packs; a dataset dropped and made again
// under the same name gets other ones). The membership permutation is also
// keyed by the segment.
int64_t SeedFor(const DatasetInfo& d) {
  const uint64_t name = XXH64(d.name.data(), d.name.size(), 0x7061636b);  // "pack"
  return static_cast<int64_t>(XXH64(&d.created_ms, sizeof(d.created_ms), name));
}

// Reads and checks one sample for its pack: the insert of its row, or
// nullopt when the sample fails its check (left out of the pack).
StatusOr<std::optional<net::Statement>> PackRow(net::Session& s, const net::PreparedPtr& read,
                                                const net::PreparedPtr& insert, SampleKey key, int32_t pack,
                                                const SampleHints& hints, int64_t timestamp_us,
                                                const std::atomic<bool>* stop) {
  SampleRowDecoder dec(key, hints, /*keep_bytes=*/true);
  const Status rs = ReadSampleRows(s, read, key, /*page_size=*/4, &dec, stop);  // one row expected
  if (rs.code() == Status::Code::kCancelled) return rs;  // interrupted: not the sample's problem
  if (!rs.ok()) return rs.WithContext(fmt::format("reading sample {}", FormatKey(key)));
  const SampleStatics& st = dec.statics();
  if (!dec.Finish().ok() || dec.rows() != 1 || !st.present || dec.data_bytes() != st.size || !st.checksum_present ||
      static_cast<int64_t>(dec.xxh64()) != st.checksum) {
    return std::optional<net::Statement>();
  }
  const auto bytes = dec.bytes();
  net::Statement ins = net::Statement::Bound(
      insert, {Value::Int(KeySegment(key)), Value::Int(pack), Value::Int(KeyIndex(key)), Value::Bigint(st.size),
               st.image_size >= 0 ? Value::Bigint(st.image_size) : Value::Unset(), Value::Bigint(st.checksum),
               st.label >= 0 ? Value::Int(st.label) : Value::Unset(),
               st.labels.empty() ? Value::Unset() : [&] {
                 ValueList l;
                 for (int32_t x : st.labels) l.push_back(Value::Int(x));
                 return Value::List(std::move(l));
               }(),
               Value::Blob(std::vector<uint8_t>(bytes.begin(), bytes.end())), Value::Bigint(timestamp_us)});
  return std::optional<net::Statement>(std::move(ins));
}

// Deletes the partitions of an earlier packing of segment `old.seg` (another
// pack size or seed) that the new packing does not overwrite (each pack it
// writes clears its own partition first: PackClearQuery).
Status DeleteOldPacks(net::Session& s, const DatasetInfo& d, const PackInfo& old) {
  if (old.pack_size <= 0) return Status::OK();
  const int64_t packs = std::max<int64_t>(old.count, 0) / old.pack_size;
  CQLS_ASSIGN_OR_RETURN(net::PreparedPtr del, s.Prepare(fmt::format("DELETE FROM {}.{} WHERE seg = ? AND pack = ?",
                                                                    d.keyspace, d.pack_table())));
  for (int64_t j = 0; j < packs; ++j) {
    net::Statement st = net::Statement::Bound(del, {Value::Int(old.seg), Value::Int(static_cast<int32_t>(j))});
    st.idempotent = true;
    st.consistency = cql::Consistency::kLocalQuorum;
    CQLS_RETURN_IF_ERROR(s.Execute(st).status());
  }
  return Status::OK();
}

}  // namespace

StatusOr<std::vector<PackInfo>> ReadPacks(net::Session& s, const std::string& keyspace, const std::string& dataset) {
  std::vector<PackInfo> out;
  CQLS_ASSIGN_OR_RETURN(bool exists, HasPacksTable(s, keyspace));
  if (!exists) return out;
  net::Session::ReadBudget budget = SegmentsReadBudget(keyspace, dataset);
  budget.what = fmt::format("the packs read of dataset '{}' in keyspace '{}'", dataset, keyspace);
  CQLS_RETURN_IF_ERROR(s.ForEachPage(
      Read(fmt::format("SELECT seg, count, pack_size, seed, packed, left_out FROM {}.packs WHERE dataset = ?", keyspace),
           {Value::Text(dataset)}),
      [&](const cql::Rows& r) {
        for (int32_t i = 0; i < r.row_count(); ++i) {
          auto p = DecodePackRow(r, i);
          if (!p.ok()) return p.status().WithContext(fmt::format("packs row of dataset '{}'", dataset));
          // One row a segment, in segment order (the clustering order).
          if (!out.empty() && p->seg <= out.back().seg) {
            return Status::Corruption(fmt::format("the packs read of dataset '{}' answered segment {} after segment {}",
                                                  dataset, p->seg, out.back().seg));
          }
          out.push_back(*p);
        }
        return Status::OK();
      },
      &budget));
  return out;  // in seg order: the read refused any other
}

Status PackDataset(net::Session& s, const DatasetInfo& d, const PackOptions& o, PackReport* report) {
  const auto t0 = std::chrono::steady_clock::now();
  *report = PackReport();
  if (d.attached()) {
    return Status::Unsupported(fmt::format(
        "dataset '{}' is attached (its samples live in another table); only native datasets are packed", d.name));
  }
  if (o.pack_size < kMinPackSize || o.pack_size > kMaxPackSize) {
    return Status::InvalidArgument(
        fmt::format("pack size must be in [{}, {}], got {}", kMinPackSize, kMaxPackSize, o.pack_size));
  }
  if (o.concurrency < 1 || o.concurrency > kMaxPackConcurrency) {
    return Status::InvalidArgument(
        fmt::format("pack concurrency must be in [1, {}], got {}", kMaxPackConcurrency, o.concurrency));
  }
  std::vector<SegmentInfo> segs;
  for (const auto& g : d.segments) {
    if (o.split.empty() || g.split == o.split) segs.push_back(g);
  }
  if (!o.split.empty() && segs.empty()) {
    return Status::NotFound(fmt::format("dataset '{}' has no split '{}'", d.name, o.split));
  }
  CQLS_RETURN_IF_ERROR(RunDdl(s, PacksTableCql(d.keyspace)));
  CQLS_RETURN_IF_ERROR(RunDdl(s, PackTableCql(d)));
  CQLS_ASSIGN_OR_RETURN(std::vector<PackInfo> before, ReadPacks(s, d.keyspace, d.name));
  std::map<int32_t, PackInfo> old;
  for (const auto& p : before) old[p.seg] = p;

  // What to pack.
  struct Work {
    const SegmentInfo* g;
    PackMembership members;
    size_t report_index;
  };
  std::vector<Work> work;
  int64_t to_pack = 0;
  const int64_t seed = SeedFor(d);
  // One pack size per split (the loader's packed order takes one): that of
  // its segments packed before (unless --force), else the largest at most
  // o.pack_size that every packable segment of the split allows.
  std::map<std::string, int32_t> split_p;
  if (!o.force) {
    for (const auto& g : d.segments) {  // ascending seg: the loader's "first packed segment"
      auto it = old.find(g.seg);
      if (it != old.end() && ValidatePack(it->second, &g, d).ok()) split_p.try_emplace(g.split, it->second.pack_size);
    }
  }
  std::map<std::string, int32_t> fits_all;  // splits without packs: the largest size all segments allow
  for (const auto& g : segs) {
    const int32_t own = PackSizeFor(g.max_size, d.chunk_size, o.pack_size);
    if (g.state != "sealed" || own == 0 || split_p.count(g.split)) continue;
    auto [it, fresh] = fits_all.try_emplace(g.split, own);
    if (!fresh) it->second = std::min(it->second, own);
  }
  split_p.insert(fits_all.begin(), fits_all.end());
  for (const auto& g : segs) {
    PackedSegment ps{g.seg, g.split, "", {}};
    const int32_t own = PackSizeFor(g.max_size, d.chunk_size, o.pack_size);
    const int32_t p = split_p.count(g.split) ? split_p.at(g.split) : own;
    auto it = old.find(g.seg);
    if (g.state != "sealed") {
      ps.outcome = "not packed: open (an ingest may still add samples)";
    } else if (own == 0) {
      ps.outcome = fmt::format("not packed: samples of up to {} bytes (packs hold one-row samples of at most {})",
                               g.max_size, kMaxPackSampleBytes);
    } else if (PackSizeFor(g.max_size, d.chunk_size, p) != p) {
      ps.outcome = fmt::format(
          "not packed: samples of up to {} bytes do not fit the split's packs of {} (`--force` packs the split "
          "again with a smaller size)",
          g.max_size, p);
    } else if (g.count < p) {
      ps.outcome = fmt::format("not packed: {} samples, fewer than a pack of {}", g.count, p);
    } else if (!o.force && it != old.end() && it->second.pack_size == p && it->second.count == g.count &&
               it->second.seed == seed && ValidatePack(it->second, &g, d).ok()) {
      ps.outcome = "already packed";
      ps.info = it->second;
    } else {
      work.push_back(Work{&g, PackMembership(g.count, p, seed, g.seg), report->segments.size()});
      to_pack += work.back().members.packs() * p;
    }
    report->segments.push_back(std::move(ps));
  }
  if (work.empty()) {
    report->seconds = SecondsSince(t0);
    return Status::OK();
  }
  CQLS_ASSIGN_OR_RETURN(net::PreparedPtr read, s.Prepare(DataReadQuery(d)));
  CQLS_ASSIGN_OR_RETURN(net::PreparedPtr insert, s.Prepare(PackInsertQuery(d)));
  CQLS_ASSIGN_OR_RETURN(net::PreparedPtr clear, s.Prepare(PackClearQuery(d)));
  CQLS_ASSIGN_OR_RETURN(net::PreparedPtr mark,
                        s.Prepare(fmt::format("INSERT INTO {}.packs (dataset, seg, count, pack_size, seed, packed, "
                                              "left_out, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?",
                                              d.keyspace)));
  CQLS_ASSIGN_OR_RETURN(net::PreparedPtr unmark,
                        s.Prepare(fmt::format("DELETE FROM {}.packs USING TIMESTAMP ? WHERE dataset = ? AND seg = ?",
                                              d.keyspace)));
  // Client timestamps for the packs rows, so that a segment's unmarking and
  // marking are ordered whichever coordinators apply them.
  int64_t last_ts = 0;
  auto next_ts = [&last_ts] { return last_ts = std::max(NowMicros(), last_ts + 1); };
  Mutex mu;  // guards report and the progress call
  int64_t done = 0;
  for (const Work& w : work) {
    const SegmentInfo& g = *w.g;
    const SampleHints hints = HintsFor(d, g.max_size);
    // The segment is not packed while its packs are rewritten.
    if (auto it = old.find(g.seg); it != old.end()) {
      net::Statement del =
          net::Statement::Bound(unmark, {Value::Bigint(next_ts()), Value::Text(d.name), Value::Int(g.seg)});
      del.consistency = cql::Consistency::kLocalQuorum;
      del.idempotent = true;
      CQLS_RETURN_IF_ERROR(s.Execute(del).status());
      CQLS_RETURN_IF_ERROR(DeleteOldPacks(s, d, it->second));
    }
    int64_t packed = 0, left_out = 0;
    const int32_t p = w.members.pack_size();
    CQLS_RETURN_IF_ERROR(ParallelFor(
        static_cast<size_t>(w.members.packs()), o.concurrency,
        [&](size_t j) -> Status {
          // The partition is cleared just below the rows' timestamp in the
          // same batch: it holds exactly the rows written now.
          const int64_t ts = NowMicros();
          std::vector<net::Statement> rows;
          rows.push_back(net::Statement::Bound(
              clear, {Value::Bigint(ts - 1), Value::Int(g.seg), Value::Int(static_cast<int32_t>(j))}));
          int64_t bad = 0;
          for (int32_t m = 0; m < p; ++m) {
            const SampleKey key = MakeKey(g.seg, w.members.Member(static_cast<int64_t>(j), m));
            CQLS_ASSIGN_OR_RETURN(auto row, PackRow(s, read, insert, key, static_cast<int32_t>(j), hints, ts, o.stop));
            if (row) {
              rows.push_back(std::move(*row));
            } else {
              bad++;
            }
          }
          {
            // One partition: one mutation, applied at once.
            auto r = s.ExecuteBatch(cql::BatchType::kUnlogged, rows, cql::Consistency::kLocalQuorum,
                                    std::chrono::milliseconds(30000));
            if (!r.ok()) return r.status().WithContext(fmt::format("writing pack {} of segment {}", j, g.seg));
          }
          MutexLock l(&mu);
          packed += static_cast<int64_t>(rows.size()) - 1;  // (less the clearing delete)
          left_out += bad;
          report->packs_written++;
          done += p;
          if (o.on_progress) o.on_progress(done, to_pack);
          return Status::OK();
        },
        o.stop));
    PackInfo info{g.seg, g.count, p, seed, packed, left_out};
    const int64_t now_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    net::Statement st = net::Statement::Bound(
        mark, {Value::Text(d.name), Value::Int(g.seg), Value::Int(static_cast<int32_t>(g.count)), Value::Int(p),
               Value::Bigint(seed), Value::Int(static_cast<int32_t>(packed)), Value::Int(static_cast<int32_t>(left_out)),
               Value::FromTimestamp(Timestamp{now_ms}), Value::Bigint(next_ts())});
    st.consistency = cql::Consistency::kLocalQuorum;
    st.idempotent = true;
    CQLS_RETURN_IF_ERROR(s.Execute(st).status());
    PackedSegment& ps = report->segments[w.report_index];
    ps.outcome = "packed";
    ps.info = info;
    report->samples_packed += packed;
    report->left_out += left_out;
  }
  report->seconds = SecondsSince(t0);
  return Status::OK();
}

}  // namespace cqlstream::store
