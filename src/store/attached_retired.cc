// Copyright (c) cqlstream authors.
#include "store/attached_retired.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "store/attached.h"
#include "store/scan.h"

namespace cqlstream::store {
namespace {

constexpr size_t kEntryBytes = 12;

void PutBe(std::string* out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetBe(std::span<const uint8_t> b) {
  uint64_t v = 0;
  for (uint8_t c : b) v = (v << 8) | c;
  return v;
}

}  // namespace

int32_t RetiredIdx(const std::string& split) {
  uint32_t h = 2166136261u;  // FNV-1a
  for (char c : split) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  return static_cast<int32_t>(h & 0x7fffffffu);
}

std::string EncodeRetired(const std::string& split, const std::vector<RetiredSegment>& segs) {
  std::string out;
  out.push_back(static_cast<char>(split.size()));
  out += split;
  for (const auto& g : segs) {
    PutBe(&out, static_cast<uint32_t>(g.seg), 4);
    PutBe(&out, static_cast<uint64_t>(g.count), 8);
  }
  return out;
}

StatusOr<std::vector<RetiredSegment>> DecodeRetired(const std::string& split, std::span<const uint8_t> bytes) {
  if (bytes.empty() || bytes.size() < 1u + bytes[0]) {
    return Status::Corruption(fmt::format("retired-generation row of split '{}': {} bytes, shorter than its split name",
                                          split, bytes.size()));
  }
  const std::string_view name(reinterpret_cast<const char*>(bytes.data()) + 1, bytes[0]);
  if (name != split) return Status::NotFound("the retired-generation row of another split");
  const auto rest = bytes.subspan(1u + bytes[0]);
  if (rest.size() % kEntryBytes != 0 || rest.size() / kEntryBytes > kMaxRetiredSegments) {
    return Status::Corruption(fmt::format("retired-generation row of split '{}': {} entry bytes, not a multiple of {} "
                                          "up to {} entries",
                                          split, rest.size(), kEntryBytes, kMaxRetiredSegments));
  }
  std::vector<RetiredSegment> out;
  for (size_t i = 0; i < rest.size(); i += kEntryBytes) {
    const auto seg = static_cast<int64_t>(static_cast<int32_t>(GetBe(rest.subspan(i, 4))));
    const auto count = static_cast<int64_t>(GetBe(rest.subspan(i + 4, 8)));
    if (seg < 0 || count < 1 || count > (int64_t{1} << 31) - 1) {
      return Status::Corruption(
          fmt::format("retired-generation row of split '{}': segment {} with {} keys is out of range", split, seg,
                      count));
    }
    out.push_back({static_cast<int32_t>(seg), count});
  }
  return out;
}

StatusOr<RetireReport> RetireGeneration(net::Session& s, const std::string& keyspace, const std::string& dataset,
                                        const std::string& split, const std::vector<RetiredSegment>& replaced,
                                        int concurrency) {
  if (split.size() > 255 || replaced.size() > kMaxRetiredSegments) {
    return Status::InvalidArgument("too many segments or too long a split name to retire");
  }
  const std::string table = fmt::format("{}.{}", keyspace, KeyTableName(dataset));
  const Value marker_seg = Value::Int(kRetiredSeg), marker_idx = Value::Int(RetiredIdx(split));
  net::Statement get = net::Statement::Query(fmt::format("SELECT key FROM {} WHERE seg = ? AND idx = ?", table),
                                             {marker_seg, marker_idx});
  get.idempotent = true;
  get.consistency = cql::Consistency::kLocalQuorum;
  CQLS_ASSIGN_OR_RETURN(auto r, s.Execute(get));
  std::vector<RetiredSegment> older;
  const cql::Rows* rows = r.rows();
  if (rows != nullptr && rows->row_count() > 0 && rows->cell(0, 0)) {
    auto listed = DecodeRetired(split, *rows->cell(0, 0));
    if (!listed.ok() && !listed.status().IsNotFound()) return listed.status().WithContext(table);
    if (listed.ok()) older = std::move(listed).value();
  }
  std::vector<std::pair<int32_t, int32_t>> chunks;  // (seg, first idx)
  RetireReport report;
  for (const auto& g : older) {
    if (std::any_of(replaced.begin(), replaced.end(), [&](const RetiredSegment& x) { return x.seg == g.seg; }))
      continue;  // still the kept generation's (never normally)
    for (int64_t i = 0; i < g.count; i += kRetiredDeleteChunk) chunks.emplace_back(g.seg, static_cast<int32_t>(i));
    report.deleted_rows += g.count;
  }
  const std::map<int32_t, int64_t> counts = [&] {
    std::map<int32_t, int64_t> m;
    for (const auto& g : older) m[g.seg] = g.count;
    return m;
  }();
  CQLS_ASSIGN_OR_RETURN(auto del, s.Prepare(fmt::format("DELETE FROM {} WHERE seg = ? AND idx IN ?", table)));
  CQLS_RETURN_IF_ERROR(ParallelFor(chunks.size(), std::max(1, concurrency), [&](size_t i) -> Status {
    const auto [seg, first] = chunks[i];
    const auto end = static_cast<int32_t>(std::min<int64_t>(counts.at(seg), int64_t{first} + kRetiredDeleteChunk));
    std::vector<Value> idx;
    for (int32_t j = first; j < end; ++j) idx.push_back(Value::Int(j));
    net::Statement st = net::Statement::Bound(del, {Value::Int(seg), Value::List(std::move(idx))});
    st.idempotent = true;
    st.consistency = cql::Consistency::kLocalQuorum;
    auto d = s.Execute(st);
    return d.ok() ? Status::OK() : d.status().WithContext(fmt::format("deleting old k_ rows of segment {}", seg));
  }));
  net::Statement put = net::Statement::Query(
      fmt::format("INSERT INTO {} (seg, idx, key) VALUES (?, ?, ?)", table),
      {marker_seg, marker_idx, Value::Blob(EncodeRetired(split, replaced))});
  put.idempotent = true;
  put.consistency = cql::Consistency::kLocalQuorum;
  CQLS_ASSIGN_OR_RETURN(auto w, s.Execute(put));
  (void)w;
  return report;
}

}  // namespace cqlstream::store
