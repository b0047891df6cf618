// Copyright (c) cqlstream authors.
#include "net/routing/token_ring.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <unordered_map>
#include <utility>

namespace cqlstream::routing {

// ---------------------------------------------------------------------------
// Token ranges

StatusOr<std::vector<TokenRange>> SplitTokenRange(TokenRange range, int n) {
  if (n < 1) {
    return Status::InvalidArgument("cannot split a token range into " + std::to_string(n) +
                                   " parts");
  }
  if (range.start >= range.end) {
    return Status::InvalidArgument("token range (" + std::to_string(range.start) + ", " +
                                   std::to_string(range.end) + "] is empty or wraps");
  }
  // Width in tokens (1 .. 2^64 - 1) and the boundaries start + floor(k * width / parts),
  // computed as k * q + floor(k * r / parts) with width = q * parts + r: no
  // overflow, as k, r < parts <= 2^31.
  const uint64_t width = static_cast<uint64_t>(range.end) - static_cast<uint64_t>(range.start);
  const uint64_t parts = std::min<uint64_t>(static_cast<uint64_t>(n), width);
  const uint64_t q = width / parts;
  const uint64_t r = width % parts;
  std::vector<TokenRange> out;
  out.reserve(static_cast<size_t>(parts));
  uint64_t prev = 0;
  for (uint64_t k = 1; k <= parts; ++k) {
    const uint64_t offset = k * q + k * r / parts;
    out.push_back({static_cast<int64_t>(static_cast<uint64_t>(range.start) + prev),
                   static_cast<int64_t>(static_cast<uint64_t>(range.start) + offset)});
    prev = offset;
  }
  return out;
}

StatusOr<std::vector<TokenRange>> SplitTokenRange(int n) { return SplitTokenRange(kFullRing, n); }

StatusOr<int64_t> ParseToken(std::string_view text) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end) {
    return Status::InvalidArgument("token '" + std::string(text) +
                                   "' is not a base-10 64-bit integer (Murmur3Partitioner)");
  }
  return v;
}

StatusOr<std::vector<int64_t>> ParseTokens(const std::vector<std::string>& texts) {
  std::vector<int64_t> out;
  out.reserve(texts.size());
  for (const std::string& t : texts) {
    CQLS_ASSIGN_OR_RETURN(int64_t v, ParseToken(t));
    out.push_back(v);
  }
  return out;
}

// ---------------------------------------------------------------------------
// TokenRing

struct TokenRing::Data {
  std::vector<RingHost> hosts;
  std::vector<int64_t> tokens;     // sorted, distinct
  std::vector<int> owner;          // per token: position in `hosts`
  std::unordered_map<int, int> position_of_id;
};

namespace {

// The non-wrapping, non-empty pieces of every range of a ring, in increasing
// token order, each with the index of its range. Range 0, (t_{n-1}, t_0],
// wraps: it gives (MIN, t_0] first and (t_{n-1}, MAX] last.
struct Piece {
  TokenRange range;
  size_t index;
};

std::vector<Piece> Pieces(std::span<const int64_t> t) {
  const size_t n = t.size();
  std::vector<Piece> out;
  out.reserve(n + 1);
  if (t[0] > kMinToken) out.push_back({{kMinToken, t[0]}, 0});
  for (size_t i = 1; i < n; ++i) out.push_back({{t[i - 1], t[i]}, i});
  if (t[n - 1] < kMaxToken) out.push_back({{t[n - 1], kMaxToken}, 0});
  return out;
}

void AppendMerged(std::vector<TokenRange>& ranges, TokenRange r) {
  if (!ranges.empty() && ranges.back().end == r.start) {
    ranges.back().end = r.end;
  } else {
    ranges.push_back(r);
  }
}

}  // namespace

StatusOr<TokenRing> TokenRing::Build(std::vector<RingHost> hosts) {
  auto data = std::make_shared<Data>();
  std::vector<std::pair<int64_t, int>> owned;  // (token, host position)
  for (size_t pos = 0; pos < hosts.size(); ++pos) {
    const RingHost& h = hosts[pos];
    if (!data->position_of_id.emplace(h.id, static_cast<int>(pos)).second) {
      return Status::InvalidArgument("token ring: two hosts have the id " + std::to_string(h.id));
    }
    for (int64_t t : h.tokens) owned.emplace_back(t, static_cast<int>(pos));
  }
  if (owned.empty()) {
    return Status::InvalidArgument("token ring: none of the " + std::to_string(hosts.size()) +
                                   " hosts has a token");
  }
  std::sort(owned.begin(), owned.end());
  // A host may list a token twice; two hosts may not.
  owned.erase(std::unique(owned.begin(), owned.end()), owned.end());
  for (size_t i = 1; i < owned.size(); ++i) {
    if (owned[i].first == owned[i - 1].first) {
      return Status::InvalidArgument(
          "token ring: token " + std::to_string(owned[i].first) + " is listed by host " +
          std::to_string(hosts[owned[i - 1].second].id) + " and by host " +
          std::to_string(hosts[owned[i].second].id));
    }
  }
  data->tokens.reserve(owned.size());
  data->owner.reserve(owned.size());
  for (const auto& [token, pos] : owned) {
    data->tokens.push_back(token);
    data->owner.push_back(pos);
  }
  data->hosts = std::move(hosts);
  return TokenRing(std::move(data));
}

size_t TokenRing::size() const { return data_->tokens.size(); }

std::span<const int64_t> TokenRing::tokens() const& { return data_->tokens; }

size_t TokenRing::RangeIndexOf(int64_t token) const {
  const auto& t = data_->tokens;
  auto it = std::lower_bound(t.begin(), t.end(), token);
  return it == t.end() ? 0 : static_cast<size_t>(it - t.begin());
}

int TokenRing::OwnerOfRange(size_t i) const {
  assert(i < size());
  return data_->hosts[static_cast<size_t>(data_->owner[i])].id;
}

const std::vector<RingHost>& TokenRing::hosts() const& { return data_->hosts; }

std::vector<TokenRange> TokenRing::PrimaryRanges(int host_id) const {
  std::vector<TokenRange> out;
  auto it = data_->position_of_id.find(host_id);
  if (it == data_->position_of_id.end()) return out;
  for (const Piece& p : Pieces(data_->tokens)) {
    if (data_->owner[p.index] == it->second) AppendMerged(out, p.range);
  }
  return out;
}

std::map<int, std::vector<TokenRange>> TokenRing::PrimaryRangesByHost() const {
  std::map<int, std::vector<TokenRange>> out;
  for (const Piece& p : Pieces(data_->tokens)) {
    AppendMerged(out[OwnerOfRange(p.index)], p.range);
  }
  return out;
}

// ---------------------------------------------------------------------------
// ReplicationStrategy

namespace {

// "N" or "N/T" (N replicas, T of them transient): the full count N.
StatusOr<int> ParseFactor(const std::string& key, const std::string& text) {
  auto bad = [&](const char* why) {
    return Status::InvalidArgument("replication factor '" + key + "': '" + text + "' " + why);
  };
  auto number = [](std::string_view s, int* v) {
    const char* end = s.data() + s.size();
    auto [ptr, ec] = std::from_chars(s.data(), end, *v);
    return !s.empty() && s.front() != '-' && ec == std::errc() && ptr == end;
  };
  const size_t slash = text.find('/');
  int all = 0;
  if (!number(std::string_view(text).substr(0, slash), &all)) {
    return bad("is not a replica count (N, or N/T with T transient)");
  }
  if (slash != std::string::npos) {
    int transient = 0;
    if (!number(std::string_view(text).substr(slash + 1), &transient)) {
      return bad("has a bad transient count (expected N/T)");
    }
    if (transient > 0 && transient >= all) {
      return bad("has no full replica (T must be less than N)");
    }
  }
  return all;
}

std::string_view ShortClassName(std::string_view name) {
  const size_t dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

}  // namespace

StatusOr<ReplicationStrategy> ReplicationStrategy::Parse(
    const std::map<std::string, std::string>& replication) {
  auto cls = replication.find("class");
  if (cls == replication.end()) {
    return Status::InvalidArgument("replication map has no 'class'");
  }
  const std::string_view name = ShortClassName(cls->second);
  ReplicationStrategy s;
  if (name == "SimpleStrategy") {
    s.kind = Kind::kSimple;
    auto rf = replication.find("replication_factor");
    if (rf == replication.end()) {
      return Status::InvalidArgument("SimpleStrategy replication map has no 'replication_factor'");
    }
    CQLS_ASSIGN_OR_RETURN(s.replication_factor, ParseFactor(rf->first, rf->second));
    return s;
  }
  if (name == "NetworkTopologyStrategy") {
    s.kind = Kind::kNetworkTopology;
    for (const auto& [key, value] : replication) {
      if (key == "class") continue;
      if (key == "replication_factor") {
        return Status::InvalidArgument(
            "NetworkTopologyStrategy replication map has 'replication_factor' (servers store "
            "one factor per datacenter)");
      }
      if (key == "initial_tablets") {
        return Status::Unsupported(
            "tablets keyspace ('initial_tablets'): replicas are placed per tablet, not by the "
            "token ring");
      }
      CQLS_ASSIGN_OR_RETURN(int rf, ParseFactor(key, value));
      s.dc_factors.emplace(key, rf);
    }
    return s;
  }
  if (name == "LocalStrategy") {
    s.kind = Kind::kLocal;
    return s;
  }
  if (name == "EverywhereStrategy") {
    s.kind = Kind::kEverywhere;
    return s;
  }
  return Status::Unsupported("replication strategy '" + cls->second +
                             "' (known: SimpleStrategy, NetworkTopologyStrategy, LocalStrategy, "
                             "EverywhereStrategy)");
}

// ---------------------------------------------------------------------------
// ReplicaMap

namespace {

// The replica list of every range: range i's list is
// replicas[begin[i], begin[i] + count[i]). Lists may overlap.
struct ReplicaLists {
  std::vector<size_t> begin;
  std::vector<size_t> count;
  std::vector<int> replicas;  // host ids

  void Open() { begin.push_back(replicas.size()); }
  void Close() { count.push_back(replicas.size() - begin.back()); }
};

}  // namespace

struct ReplicaMap::Data {
  ReplicationStrategy strategy;
  std::vector<size_t> begin;
  std::vector<size_t> count;
  std::vector<int> replicas;
};

namespace {

// What the replica computations read of a ring.
struct RingParts {
  const std::vector<RingHost>& hosts;
  const std::vector<int64_t>& tokens;
  const std::vector<int>& owner;  // per token: position in `hosts`
};

// SimpleStrategy: walks the ring from each range and takes distinct hosts
// until `target`.
void BuildRingWalk(const RingParts& ring, size_t target, ReplicaLists& out) {
  const size_t n = ring.tokens.size();
  std::vector<size_t> taken_at(ring.hosts.size(), SIZE_MAX);  // range whose list holds the host
  for (size_t i = 0; i < n; ++i) {
    out.Open();
    size_t taken = 0;
    for (size_t k = 0; k < n && taken < target; ++k) {
      const int pos = ring.owner[(i + k) % n];
      if (taken_at[static_cast<size_t>(pos)] == i) continue;
      taken_at[static_cast<size_t>(pos)] = i;
      out.replicas.push_back(ring.hosts[static_cast<size_t>(pos)].id);
      ++taken;
    }
    out.Close();
  }
}

// EverywhereStrategy: all H hosts, the range's primary owner first. One list
// L of the hosts (in the order a walk from the first token meets them) is
// stored twice, and range i's list is the H entries of L+L starting at its
// owner: O(n + H) memory instead of O(n * H).
void BuildEverywhere(const RingParts& ring, ReplicaLists& out) {
  std::vector<size_t> index_in_list(ring.hosts.size(), SIZE_MAX);
  std::vector<int> list;
  for (int pos : ring.owner) {
    if (index_in_list[static_cast<size_t>(pos)] != SIZE_MAX) continue;
    index_in_list[static_cast<size_t>(pos)] = list.size();
    list.push_back(ring.hosts[static_cast<size_t>(pos)].id);
  }
  out.replicas = list;
  out.replicas.insert(out.replicas.end(), list.begin(), list.end());
  for (int pos : ring.owner) {
    out.begin.push_back(index_in_list[static_cast<size_t>(pos)]);
    out.count.push_back(list.size());
  }
}

// One datacenter of a NetworkTopologyStrategy keyspace: its part of the ring.
struct DcRing {
  int rf = 0;
  int node_count = 0;             // hosts of the DC with tokens
  int rack_count = 0;             // their distinct racks
  std::vector<size_t> ring_index;  // the ring indexes of the DC's tokens, increasing
  std::vector<int> rack_of_token;  // per entry of ring_index: the owner's rack, 0..rack_count-1
};

// The hosts with tokens, per DC: their racks (numbered per DC) and count.
struct DcHosts {
  std::map<std::string, std::map<std::string, int>> racks;  // dc -> rack -> index
  std::map<std::string, int> nodes;                        // dc -> host count
};

DcHosts HostsPerDc(const RingParts& ring) {
  DcHosts out;
  std::vector<bool> has_token(ring.hosts.size(), false);
  for (int pos : ring.owner) has_token[static_cast<size_t>(pos)] = true;
  for (size_t pos = 0; pos < ring.hosts.size(); ++pos) {
    if (!has_token[pos]) continue;
    const RingHost& h = ring.hosts[pos];
    auto& dc_racks = out.racks[h.datacenter];
    dc_racks.emplace(h.rack, static_cast<int>(dc_racks.size()));
    ++out.nodes[h.datacenter];
  }
  return out;
}

// The sub-rings of the keyspace's DCs that have hosts; NotFound when it
// wants replicas and none of its DCs has a host.
StatusOr<std::vector<DcRing>> MakeDcRings(const RingParts& ring, const ReplicationStrategy& strategy,
                                          DcHosts& hosts) {
  std::vector<DcRing> dcs;
  std::map<std::string, size_t> dc_index;
  int wanted = 0;
  for (const auto& [dc, rf] : strategy.dc_factors) {
    wanted += rf > 0 ? 1 : 0;
    auto it = hosts.nodes.find(dc);
    if (rf <= 0 || it == hosts.nodes.end()) continue;
    dc_index[dc] = dcs.size();
    DcRing d;
    d.rf = rf;
    d.node_count = it->second;
    d.rack_count = static_cast<int>(hosts.racks[dc].size());
    dcs.push_back(std::move(d));
  }
  if (wanted > 0 && dcs.empty()) {
    std::string want, have;
    for (const auto& [dc, rf] : strategy.dc_factors) {
      if (rf > 0) want += (want.empty() ? "" : ", ") + dc;
    }
    for (const auto& [dc, count] : hosts.nodes) have += (have.empty() ? "" : ", ") + dc;
    return Status::NotFound("NetworkTopologyStrategy: no host in the keyspace's datacenters {" +
                            want + "}; the ring's hosts are in {" + have + "}");
  }
  for (size_t i = 0; i < ring.tokens.size(); ++i) {
    const RingHost& h = ring.hosts[static_cast<size_t>(ring.owner[i])];
    auto it = dc_index.find(h.datacenter);
    if (it == dc_index.end()) continue;
    DcRing& d = dcs[it->second];
    d.ring_index.push_back(i);
    d.rack_of_token.push_back(hosts.racks[h.datacenter][h.rack]);
  }
  return dcs;
}

// Scratch "seen" marks of the walks, stamped with a walk number instead of
// cleared.
struct WalkMarks {
  std::vector<size_t> host_stamp;
  std::vector<size_t> rack_stamp;
  size_t walk = 0;
};

// One DC's replicas for ring index i, walking its sub-ring from entry
// `start`: (distance along the full walk, host id) appended to `found`.
void WalkDc(const RingParts& ring, const DcRing& d, size_t i, size_t start, WalkMarks& marks,
            std::vector<std::pair<size_t, int>>& found) {
  const size_t n = ring.tokens.size();
  const size_t m = d.ring_index.size();
  const size_t walk = ++marks.walk;
  marks.rack_stamp.assign(static_cast<size_t>(d.rack_count), SIZE_MAX);
  int rf_left = std::min(d.rf, d.node_count);
  int repeats_left = d.rf - d.rack_count;  // rack repeats allowed while racks are too few
  for (size_t k = 0; k < m && rf_left > 0; ++k) {
    const size_t e = (start + k) % m;
    const size_t ring_i = d.ring_index[e];
    const size_t pos = static_cast<size_t>(ring.owner[ring_i]);
    const size_t rack = static_cast<size_t>(d.rack_of_token[e]);
    if (marks.rack_stamp[rack] != walk) {
      // A rack not used yet in this DC: its first host is a replica.
      marks.rack_stamp[rack] = walk;
      marks.host_stamp[pos] = walk;
    } else {
      if (repeats_left <= 0 || marks.host_stamp[pos] == walk) continue;
      marks.host_stamp[pos] = walk;
      --repeats_left;
    }
    --rf_left;
    found.emplace_back((ring_i + n - i) % n, ring.hosts[pos].id);
  }
}

// Cassandra's NetworkTopologyStrategy, one DC at a time. A DC's choices depend
// only on the sequence of its own hosts along the walk (racks are per DC, a
// host is in one DC), so each DC walks its own sub-ring; the replicas of all
// DCs are then ordered by where the full walk meets them.
Status BuildNetworkTopology(const RingParts& ring, const ReplicationStrategy& strategy,
                            ReplicaLists& out) {
  const size_t n = ring.tokens.size();
  DcHosts hosts = HostsPerDc(ring);
  CQLS_ASSIGN_OR_RETURN(const std::vector<DcRing> dcs, MakeDcRings(ring, strategy, hosts));
  WalkMarks marks;
  marks.host_stamp.assign(ring.hosts.size(), SIZE_MAX);
  std::vector<size_t> cursor(dcs.size(), 0);  // per DC: first entry with ring_index >= i
  std::vector<std::pair<size_t, int>> found;  // (distance along the walk, host id)
  for (size_t i = 0; i < n; ++i) {
    out.Open();
    found.clear();
    for (size_t di = 0; di < dcs.size(); ++di) {
      const DcRing& d = dcs[di];
      const size_t m = d.ring_index.size();
      while (cursor[di] < m && d.ring_index[cursor[di]] < i) ++cursor[di];
      WalkDc(ring, d, i, cursor[di] == m ? 0 : cursor[di], marks, found);
    }
    std::sort(found.begin(), found.end());
    for (const auto& [distance, id] : found) out.replicas.push_back(id);
    out.Close();
  }
  return Status::OK();
}

}  // namespace

StatusOr<ReplicaMap> ReplicaMap::Build(const TokenRing& ring,
                                       const ReplicationStrategy& strategy) {
  auto data = std::make_shared<Data>();
  data->strategy = strategy;
  const RingParts r{ring.data_->hosts, ring.data_->tokens, ring.data_->owner};
  const size_t n = r.tokens.size();
  ReplicaLists lists;
  lists.begin.reserve(n);
  lists.count.reserve(n);

  size_t hosts_with_tokens = 0;
  {
    std::vector<bool> seen(r.hosts.size(), false);
    for (int pos : r.owner) {
      if (!seen[static_cast<size_t>(pos)]) {
        seen[static_cast<size_t>(pos)] = true;
        ++hosts_with_tokens;
      }
    }
  }

  switch (strategy.kind) {
    case ReplicationStrategy::Kind::kSimple: {
      const size_t rf = static_cast<size_t>(std::max(strategy.replication_factor, 0));
      BuildRingWalk(r, std::min(rf, hosts_with_tokens), lists);
      break;
    }
    case ReplicationStrategy::Kind::kEverywhere:
      BuildEverywhere(r, lists);
      break;
    case ReplicationStrategy::Kind::kNetworkTopology:
      CQLS_RETURN_IF_ERROR(BuildNetworkTopology(r, strategy, lists));
      break;
    case ReplicationStrategy::Kind::kLocal:
      lists.begin.assign(n, 0);
      lists.count.assign(n, 0);
      break;
  }
  assert(lists.begin.size() == n && lists.count.size() == n);
  data->begin = std::move(lists.begin);
  data->count = std::move(lists.count);
  data->replicas = std::move(lists.replicas);
  return ReplicaMap(ring, std::move(data));
}

StatusOr<ReplicaMap> ReplicaMap::Build(const TokenRing& ring,
                                       const std::map<std::string, std::string>& replication) {
  CQLS_ASSIGN_OR_RETURN(ReplicationStrategy strategy, ReplicationStrategy::Parse(replication));
  return Build(ring, strategy);
}

std::span<const int> ReplicaMap::ReplicasOfRange(size_t i) const& {
  assert(i < data_->begin.size());
  return std::span<const int>(data_->replicas).subspan(data_->begin[i], data_->count[i]);
}

std::span<const int> ReplicaMap::Replicas(int64_t token) const& {
  return ReplicasOfRange(ring_.RangeIndexOf(token));
}

const ReplicationStrategy& ReplicaMap::strategy() const { return data_->strategy; }

std::vector<ReplicaMap::ReplicatedRange> ReplicaMap::Ranges() const& {
  std::vector<ReplicatedRange> out;
  for (const Piece& p : Pieces(ring_.tokens())) out.push_back({p.range, ReplicasOfRange(p.index)});
  return out;
}

}  // namespace cqlstream::routing
