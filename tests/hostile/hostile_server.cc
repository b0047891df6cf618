// Copyright (c) cqlstream authors.
#include "hostile/hostile_server.h"

#include "hostile/answer_lies.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <set>

namespace cqlstream::hostile {
namespace {

using cql::Opcode;

bool ReadFull(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool WriteFull(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t r = ::send(fd, p, n, MSG_NOSIGNAL);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

cql::Bytes IntCell(int32_t v) {
  cql::Bytes b(4);
  cql::StoreU32(b.data(), static_cast<uint32_t>(v));
  return b;
}

// A list of one int: the value of an `IN ?` marker.
cql::Bytes IntListCell(int32_t v) {
  cql::Bytes b(12);
  cql::StoreU32(b.data(), 1);
  cql::StoreU32(b.data() + 4, 4);
  cql::StoreU32(b.data() + 8, static_cast<uint32_t>(v));
  return b;
}

}  // namespace

// One connection: reads requests and answers them as the mode says.
struct HostileServer::Conn {
  HostileServer* s;
  int fd;
  bool stalled = false;  // after a frame that never ends: read and drop
  std::set<int32_t> strayed;  // stray-answers: toy's samples whose first read alone here was answered as a stray

  Mode mode() const { return s->mode_; }

  // pages-stand-still, pages-without-end: a paging state not handed out
  // before by this server (a next page may come on another connection; 8
  // bytes: never one of the honest 4-byte row offsets).
  cql::Bytes PageState() {
    cql::Bytes b(8);
    cql::StoreU32(b.data(), 0x50414745u);  // "PAGE"
    cql::StoreU32(b.data() + 4, static_cast<uint32_t>(s->pages_.fetch_add(1) + 1));
    return b;
  }

  bool Out(const cql::Bytes& b) {
    if (mode() != Mode::kTrickle) return WriteFull(fd, b.data(), b.size());
    for (uint8_t c : b) {
      if (s->stopping_ || !WriteFull(fd, &c, 1)) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }

  bool Send(Opcode op, int16_t stream, const cql::Bytes& body) {
    if (mode() == Mode::kEventFlood) {
      for (int i = 0; i < 200; ++i) {
        const std::vector<uint8_t> addr = {10, 9, static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i)};
        if (!Out(Frame(Opcode::kEvent, cql::kEventStream, StatusEventBody(i % 2 ? "UP" : "DOWN", addr, 9042)))) {
          return false;
        }
      }
    }
    uint8_t version = cql::kProtocolVersion | cql::kResponseBit;
    if (mode() == Mode::kWrongVersion) version = 0x85;
    if (mode() == Mode::kRequestBit) version = cql::kProtocolVersion;
    return Out(Frame(op, stream, body, version));
  }

  bool SendAnswer(int16_t stream, const Answer& a, const RequestParams& p) {
    if (a.error_code != 0) return Send(Opcode::kError, stream, ErrorBody(a.error_code, a.error));
    return Send(Opcode::kResult, stream, RowsBodyForRequest(a.table, p));
  }

  // Data-read lies that change the rows; returns false to send nothing.
  void LieAboutRows(int32_t idx, const Select& sel, RequestParams* p, Answer* a) {
    Table& t = a->table;
    if (sel.table != std::string("d_") + kDataset) return;  // toy's samples only
    if (mode() == Mode::kWrongKey && idx == 7) {
      p->values[1] = IntCell(8);
      *a = s->world_.Run(sel, p->values);
    } else if (mode() == Mode::kStrayAnswers && strayed.insert(idx).second) {
      s->lies_told_.fetch_add(1);
      if (idx % 2 == 0 || p->skip_metadata()) {
        p->values[1] = IntCell((idx + 1) % kSamples);
        *a = s->world_.Run(sel, p->values);
      } else {
        t.name = std::string("d_") + kTinyDataset;  // the honest rows, their columns named as tiny's
      }
    } else if (mode() == Mode::kMissingRows && idx == 9) {
      t.rows.clear();
    } else if (mode() == Mode::kChunksShort && idx == 3 && t.rows.size() > 1) {
      t.rows.pop_back();
    } else if (mode() == Mode::kChunksLong && idx == 3 && !t.rows.empty()) {
      t.rows.push_back(t.rows.back());
    } else if (mode() == Mode::kRowLargerThanCatalog && idx == 5 && !t.rows.empty()) {
      std::vector<uint8_t> big(size_t{4} << 20, 0x5a);
      const auto sum = static_cast<int64_t>(XXH64(big.data(), big.size(), 0));
      t.rows.resize(1);
      SetCell(&t, 0, "size", Value::Bigint(static_cast<int64_t>(big.size())));
      SetCell(&t, 0, "image_size", Value::Bigint(static_cast<int64_t>(big.size())));
      SetCell(&t, 0, "checksum", Value::Bigint(sum));
      SetCell(&t, 0, "data", Value::Blob(std::move(big)));
    }
  }

  // stalled-rest: `body` (toy's rows, the data cell last) up to the middle
  // of its last data cell; 3 s later (a Loader probe's requests time out
  // after 1 s) the rest, each byte inverted.
  bool SendStalledRest(int16_t stream, const Answer& a, const cql::Bytes& body) {
    const int dc = ColumnOf(a.table, "data");
    const Value* last = a.table.rows.empty() || dc < 0 ? nullptr : &a.table.rows.back()[static_cast<size_t>(dc)];
    const size_t n = last != nullptr && last->kind() == Value::Kind::kBlob ? last->as_blob().size() : 0;
    cql::Bytes f = Frame(Opcode::kResult, stream, body);
    if (dc != static_cast<int>(a.table.columns.size()) - 1 || n < 2) return Out(f);
    s->lies_told_.fetch_add(1);
    const auto cut = static_cast<std::ptrdiff_t>(f.size() - n / 2);
    if (!Out(cql::Bytes(f.begin(), f.begin() + cut))) return false;
    for (int i = 0; i < 300 && !s->stopping_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    cql::Bytes rest(f.begin() + cut, f.end());
    for (uint8_t& c : rest) c = static_cast<uint8_t>(~c);
    return Out(rest);
  }

  // Answers a read of sample `idx`'s bytes: the native data table's rows
  // (native: the loader's and verify's read, bound seg, idx) or the attached
  // dataset's foreign row (bound with its key).
  bool DataRead(int16_t stream, const Select& sel, RequestParams p, int32_t idx, bool native) {
    Answer a = s->world_.Run(sel, p.values);
    if (a.error_code != 0) return SendAnswer(stream, a, p);
    if (native) {
      LieAboutRows(idx, sel, &p, &a);
    } else if (mode() == Mode::kWrongKey && idx == 7) {
      p.values[0] = IntCell(ForeignKeyOf(8));
      a = s->world_.Run(sel, p.values);
    } else if (mode() == Mode::kForeignRowsLie && !a.table.rows.empty()) {
      const int dc = ColumnOf(a.table, "img");
      if (idx == 9) a.table.rows.push_back(a.table.rows.front());
      if (idx == 11 && dc >= 0) a.table.rows.front()[static_cast<size_t>(dc)] = Value::Null();
    }
    return SendData(stream, sel, p, a, idx, native);
  }

  // Answers a grouped read of attached rows (`"id" IN ?`, one key per
  // sample): the rows of the keys asked for, in the table's order, which a
  // mode may change as it changes single foreign reads (wrong-key: sample
  // 7's row is sample 8's; foreign-rows-lie: the rows of samples 9 and 11)
  // or, for groups alone, one lie of each kind in turn (foreign-group-lies).
  bool ForeignGroupRead(int16_t stream, const Select& sel, RequestParams p) {
    s->grouped_reads_.fetch_add(1);
    Answer a = s->world_.Run(sel, p.values);
    if (a.error_code != 0 || a.table.rows.empty()) return SendAnswer(stream, a, p);
    Table& t = a.table;
    const int kc = ColumnOf(t, "id");
    if (kc != 0) return SendAnswer(stream, a, p);  // DataReadManyCql names the key first
    const int32_t first = IdxOfForeignKey(t.rows.front()[0].as_int());
    if (mode() == Mode::kWrongKey) {
      const int dc = ColumnOf(t, "img");
      for (auto& r : t.rows) {
        if (IdxOfForeignKey(r[0].as_int()) != 7 || dc < 0) continue;
        r[0] = Value::Int(ForeignKeyOf(8));
        r[static_cast<size_t>(dc)] = Value::Blob(SamplePayload(8));
      }
    } else if (mode() == Mode::kForeignRowsLie) {
      const size_t n = t.rows.size();
      const int dc = ColumnOf(t, "img");
      for (size_t i = 0; i < n; ++i) {
        const int32_t idx = IdxOfForeignKey(t.rows[i][0].as_int());
        if (idx == 9) t.rows.push_back(t.rows[i]);
        if (idx == 11 && dc >= 0) t.rows[i][static_cast<size_t>(dc)] = Value::Null();
      }
    } else if (mode() == Mode::kForeignGroupLies) {
      LieAboutForeignGroup(&t, s->lies_told_.fetch_add(1));
    }
    return SendData(stream, sel, p, a, first, /*native=*/false);
  }

  // Answers a coalesced read of tiny's samples (`seg = ? AND idx IN ?`, the
  // columns seg and idx first): the rows asked for, or in native-group-lies
  // one lie of each kind in turn.
  bool NativeGroupRead(int16_t stream, const Select& sel, RequestParams p) {
    s->coalesced_reads_.fetch_add(1);
    Answer a = s->world_.Run(sel, p.values);
    if (a.error_code != 0 || a.table.rows.empty()) return SendAnswer(stream, a, p);
    Table& t = a.table;
    if (ColumnOf(t, "seg") != 0 || ColumnOf(t, "idx") != 1) return SendAnswer(stream, a, p);
    const int32_t first = t.rows.front()[1].as_int();
    if (mode() == Mode::kNativeGroupLies) LieAboutGroupedRows(&t, kTinySamples + 7, s->lies_told_.fetch_add(1));
    return SendData(stream, sel, p, a, first, /*native=*/true);
  }

  // misnamed-columns: an answer holding the key-snapshot row of attached
  // sample 13, the foreign row of sample 14, or a data row of toy's sample
  // 13 names another table in its result metadata (rows unchanged). Only an
  // answer that carries metadata (the client did not ask to skip it) can
  // tell the lie.
  void MisnameColumns(const RequestParams& p, Answer* a) {
    if (mode() != Mode::kMisnamedColumns || p.skip_metadata() || a->error_code != 0) return;
    Table& t = a->table;
    const std::string lookups = std::string("k_") + kAttachedDataset;
    const std::string toy = std::string("d_") + kDataset;
    const int ic = t.name == lookups || t.name == toy ? ColumnOf(t, "idx")
                   : t.name == kForeignTable         ? ColumnOf(t, "id")
                                                     : -1;
    if (ic < 0) return;
    const Value want = t.name == kForeignTable ? Value::Int(ForeignKeyOf(14)) : Value::Int(13);
    for (const auto& r : t.rows) {
      if (static_cast<size_t>(ic) >= r.size() || !(r[static_cast<size_t>(ic)] == want)) continue;
      t.name = t.name == lookups ? std::string(kForeignTable)
               : t.name == toy   ? std::string("d_") + kTinyDataset
                                 : lookups;
      s->lies_told_.fetch_add(1);
      return;
    }
  }

  // segments-without-end: toy's segment rows, then pages of 1,000 new
  // segments each (no samples), each promising more; the paging state names
  // the next page's first segment.
  bool SegmentsWithoutEnd(int16_t stream, const Select& sel, const RequestParams& p) {
    Answer a = s->world_.Run(sel, p.values);
    if (a.error_code != 0 || a.table.rows.empty()) return SendAnswer(stream, a, p);
    s->lies_told_.fetch_add(1);
    const int sc = ColumnOf(a.table, "seg");
    int32_t first = 0;
    for (const auto& r : a.table.rows) first = std::max(first, r[static_cast<size_t>(sc)].as_int() + 1);
    if (p.paging_state && p.paging_state->size() == 8 && cql::LoadU32(p.paging_state->data()) == 0x53454753u) {
      first = static_cast<int32_t>(cql::LoadU32(p.paging_state->data() + 4));
      Table t = a.table;
      t.rows.assign(1000, a.table.rows.front());
      for (size_t i = 0; i < t.rows.size(); ++i) {
        SetCell(&t, i, "seg", Value::Int(first + static_cast<int32_t>(i)));
        for (const char* c : {"source_id", "source", "fingerprint", "size_hist"}) SetCell(&t, i, c, Value::Null());
        SetCell(&t, i, "count", Value::Int(0));
        for (const char* c : {"bytes", "max_size", "next_pos"}) SetCell(&t, i, c, Value::Bigint(0));
      }
      first += static_cast<int32_t>(t.rows.size());
      a.table = std::move(t);
    }
    cql::Bytes next(8);
    cql::StoreU32(next.data(), 0x53454753u);  // "SEGS"
    cql::StoreU32(next.data() + 4, static_cast<uint32_t>(first));
    return Send(Opcode::kResult, stream, RowsBody(a.table, 0, a.table.rows.size(), p.skip_metadata(), &next));
  }

  // Sends a data read's answer `a` (to the request `p` for `sel`, about
  // sample `idx`), with the mode's transport lies.
  bool SendData(int16_t stream, const Select& sel, const RequestParams& p, const Answer& honest, int32_t idx,
                bool native) {
    Answer a = honest;
    MisnameColumns(p, &a);
    cql::Bytes body = RowsBodyForRequest(a.table, p);
    if ((mode() == Mode::kPagesStandStill || mode() == Mode::kPagesWithoutEnd) && native && p.page_size > 0 &&
        sel.table == std::string("d_") + kDataset) {
      s->lies_told_.fetch_add(1);
      if (!p.paging_state) {
        const cql::Bytes first = PageState();
        body = RowsBody(a.table, 0, a.table.rows.size(), p.skip_metadata(), &first);
      } else {
        const cql::Bytes next = mode() == Mode::kPagesStandStill ? *p.paging_state : PageState();
        if (mode() == Mode::kPagesWithoutEnd && idx % 2 == 1 && !a.table.rows.empty()) {
          // One row of the sample's key and statics, its data cell null.
          Table t = a.table;
          t.rows.resize(1);
          SetCell(&t, 0, "data", Value::Null());
          body = RowsBody(t, 0, 1, p.skip_metadata(), &next);
        } else {
          body = RowsBody(a.table, a.table.rows.size(), 0, p.skip_metadata(), &next);
        }
      }
    }
    switch (mode()) {
      case Mode::kSilentData:
        s->lies_told_.fetch_add(1);  // a data read swallowed
        return true;
      case Mode::kStalledRest:
        if (native && idx == 5 && sel.table == std::string("d_") + kDataset && !s->stalled_rest_.exchange(true)) {
          return SendStalledRest(stream, a, body);
        }
        return Send(Opcode::kResult, stream, body);
      case Mode::kWrongOpcode:
        return Send(Opcode::kReady, stream, {});
      case Mode::kGarbageError: {
        cql::Bytes e = {0, 0, 0, 0, 0xea, 0x60, 'a', 'b', 'c'};  // message of 60000 bytes, 3 present
        return Send(Opcode::kError, stream, e);
      }
      case Mode::kHugeBytesLength: {
        const int dc = ColumnOf(a.table, native ? "data" : "img");
        if (dc == static_cast<int>(a.table.columns.size()) - 1 && !a.table.rows.empty()) {
          const auto& last = a.table.rows.back()[static_cast<size_t>(dc)];
          const size_t n = last.kind() == Value::Kind::kBlob ? last.as_blob().size() : 0;
          cql::StoreU32(body.data() + body.size() - n - 4, 0x7ffffff0u);
        }
        return Send(Opcode::kResult, stream, body);
      }
      case Mode::kFrameAtLimit:
      case Mode::kFrameOverLimit: {
        cql::Bytes f = Frame(Opcode::kResult, stream, {});
        cql::StoreU32(f.data() + 5, mode() == Mode::kFrameAtLimit ? cql::kMaxBodySize - 1 : cql::kMaxBodySize + 1);
        if (mode() == Mode::kFrameAtLimit) f.resize(f.size() + 1024, 0);
        stalled = true;
        return Out(f);
      }
      case Mode::kResetMidFrame: {
        cql::Bytes f = Frame(Opcode::kResult, stream, body);
        Out(cql::Bytes(f.begin(), f.begin() + static_cast<std::ptrdiff_t>(f.size() / 2)));
        linger l{1, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        return false;  // the caller closes: a reset
      }
      case Mode::kTruncatedFrame: {
        cql::Bytes f = Frame(Opcode::kResult, stream, body);
        cql::StoreU32(f.data() + 5, static_cast<uint32_t>(body.size() + 100));
        return Out(f);
      }
      case Mode::kDuplicateAnswer:
        return Send(Opcode::kResult, stream, body) && Send(Opcode::kResult, stream, body);
      case Mode::kUnknownStream: {
        RequestParams other = p;
        const int32_t next = (std::max(idx, 0) + 1) % kSamples;
        const size_t v = native ? 1 : 0;
        const int32_t key = native ? next : ForeignKeyOf(next);
        other.values[v] = v < sel.in.size() && sel.in[v] ? IntListCell(key) : IntCell(key);
        Answer o = s->world_.Run(sel, other.values);
        return Send(Opcode::kResult, 32000, RowsBodyForRequest(o.table, other)) &&
               Send(Opcode::kResult, stream, body);
      }
      default:
        return Send(Opcode::kResult, stream, body);
    }
  }

  bool Prepare(int16_t stream, const RequestParams& p) {
    auto sel = ParseSelect(p.query);
    if (!sel) return Send(Opcode::kError, stream, ErrorBody(0x2000, "hostile server: only SELECT is served"));
    std::vector<uint16_t> pk;
    Answer binds = s->world_.BindColumns(*sel, &pk);
    if (binds.error_code != 0) return Send(Opcode::kError, stream, ErrorBody(binds.error_code, binds.error));
    Answer result = s->world_.Run(*sel, std::vector<std::optional<cql::Bytes>>(sel->where.size()));
    if (result.error_code != 0) return Send(Opcode::kError, stream, ErrorBody(result.error_code, result.error));
    cql::Bytes id(4);
    {
      MutexLock l(&s->mu_);
      cql::StoreU32(id.data(), static_cast<uint32_t>(s->prepared_.size()));
      s->prepared_.push_back(p.query);
    }
    return Send(Opcode::kResult, stream, PreparedBody(id, binds.table, pk, result.table));
  }

  bool Execute(int16_t stream, RequestParams p) {
    if (mode() == Mode::kUnpreparedLoop) {
      return Send(Opcode::kError, stream, ErrorBody(0x2500, "Prepared query with ID not found", p.prepared_id));
    }
    if (p.prepared_id.size() == 4) {
      const uint32_t id = cql::LoadU32(p.prepared_id.data());
      MutexLock l(&s->mu_);
      if (id < s->prepared_.size()) p.query = s->prepared_[id];
    }
    if (p.query.empty()) {
      return Send(Opcode::kError, stream, ErrorBody(0x2500, "Prepared query with ID not found", p.prepared_id));
    }
    return Query(stream, std::move(p));
  }

  bool Query(int16_t stream, RequestParams p) {
    auto sel = ParseSelect(p.query);
    if (!sel) return Send(Opcode::kError, stream, ErrorBody(0x2000, "hostile server: only SELECT is served"));
    const bool native_data = sel->keyspace == kKeyspace && (sel->table == std::string("d_") + kDataset ||
                                                            sel->table == std::string("d_") + kTinyDataset);
    if (native_data && sel->HasIn()) return NativeGroupRead(stream, *sel, std::move(p));
    if (native_data) {
      if (p.values.size() < 2 || !p.values[1] || p.values[1]->size() != 4) {
        return Send(Opcode::kError, stream, ErrorBody(0x2200, "bad data read"));
      }
      const auto idx = static_cast<int32_t>(cql::LoadU32(p.values[1]->data()));
      return DataRead(stream, *sel, std::move(p), idx, /*native=*/true);
    }
    if (sel->keyspace == kKeyspace && sel->table == kForeignTable && sel->HasIn()) {
      return ForeignGroupRead(stream, *sel, std::move(p));
    }
    if (sel->keyspace == kKeyspace && sel->table == kForeignTable) {
      if (p.values.size() != 1 || !p.values[0] || p.values[0]->size() != 4) {
        return Send(Opcode::kError, stream, ErrorBody(0x2200, "bad foreign read"));
      }
      const int32_t idx = IdxOfForeignKey(static_cast<int32_t>(cql::LoadU32(p.values[0]->data())));
      return DataRead(stream, *sel, std::move(p), idx, /*native=*/false);
    }
    if (mode() == Mode::kKeyGroupLies && sel->keyspace == kKeyspace &&
        sel->table == std::string("k_") + kAttachedDataset && sel->HasIn()) {
      Answer a = s->world_.Run(*sel, p.values);
      if (a.error_code == 0 && !a.table.rows.empty() && a.table.columns.size() == 3) {
        LieAboutGroupedRows(&a.table, kAttachedSamples + 7, s->lies_told_.fetch_add(1));
      }
      return SendAnswer(stream, a, p);
    }
    if (mode() == Mode::kDatasetsListedTwice && sel->keyspace == kKeyspace && sel->table == "datasets" &&
        sel->where.empty()) {
      Answer a = s->world_.Run(*sel, p.values);
      if (a.error_code == 0 && !a.table.rows.empty()) {
        a.table.rows.push_back(a.table.rows.front());  // toy's, first in the honest world
        s->lies_told_.fetch_add(1);
      }
      return SendAnswer(stream, a, p);
    }
    if (mode() == Mode::kSegmentsWithoutEnd && sel->keyspace == kKeyspace && sel->table == "segments" &&
        p.values.size() == 1 && p.values[0] &&
        std::string(p.values[0]->begin(), p.values[0]->end()) == kDataset) {
      return SegmentsWithoutEnd(stream, *sel, p);
    }
    if (mode() == Mode::kSegmentsCrossed && sel->keyspace == kKeyspace && sel->table == "segments" &&
        p.values.size() == 1 && p.values[0]) {
      const std::string asked(p.values[0]->begin(), p.values[0]->end());
      const std::string other = asked == kDataset ? kAttachedDataset : kDataset;  // tiny's too: toy's
      p.values[0] = cql::Bytes(other.begin(), other.end());
      s->lies_told_.fetch_add(1);
    }
    Answer a = s->world_.Run(*sel, p.values);
    LieAboutSystem(mode(), *sel, &a);
    if (LieAboutPeers(mode(), *sel, &a)) s->lies_told_.fetch_add(1);
    LieAboutCatalog(mode(), *sel, &a);
    if (mode() == Mode::kMetaScanLies && !sel->token_of.empty()) {
      int64_t above = INT64_MIN, at_most = INT64_MAX;
      for (size_t k = 0; k < sel->where.size() && k < p.values.size(); ++k) {
        if (!p.values[k] || p.values[k]->size() != 8) continue;
        const auto v = static_cast<int64_t>(cql::LoadU64(p.values[k]->data()));
        if (sel->where[k] == kTokenAbove) above = v;
        if (sel->where[k] == kTokenAtMost) at_most = v;
      }
      if (LieAboutMetaScan(mode(), *sel, above, at_most, &a, s->lies_told_.load())) s->lies_told_.fetch_add(1);
    }
    MisnameColumns(p, &a);
    if (mode() == Mode::kMetaRowsLie && sel->table == std::string("m_") + kDataset && a.error_code == 0 &&
        !a.table.rows.empty()) {
      a.table.rows.push_back(a.table.rows.front());
      s->lies_told_.fetch_add(1);
    }
    if (mode() == Mode::kDuplicateAnswer && sel->table == std::string("k_") + kAttachedDataset) {
      // Key lookups too: a second answer lands on whatever request reuses
      // the stream id next.
      if (!SendAnswer(stream, a, p)) return false;
    }
    return SendAnswer(stream, a, p);
  }

  bool Handle(const RequestFrame& f) {
    const int16_t stream = f.header.stream;
    if (mode() == Mode::kSilent) {
      s->lies_told_.fetch_add(1);  // a request swallowed: the client waits on it
      return true;
    }
    if (stalled) return true;
    switch (f.header.opcode) {
      case Opcode::kOptions:
        return Send(Opcode::kSupported, stream, SupportedBody({{"CQL_VERSION", {"3.4.7"}}, {"COMPRESSION", {}}}));
      case Opcode::kStartup:
      case Opcode::kRegister:
        return Send(Opcode::kReady, stream, {});
      case Opcode::kQuery:
      case Opcode::kPrepare:
      case Opcode::kExecute: {
        auto p = DecodeRequest(f);
        if (!p.ok()) return Send(Opcode::kError, stream, ErrorBody(0x000A, p.status().ToString()));
        if (f.header.opcode == Opcode::kPrepare) return Prepare(stream, *p);
        if (f.header.opcode == Opcode::kExecute) return Execute(stream, std::move(*p));
        return Query(stream, std::move(*p));
      }
      default:
        return Send(Opcode::kError, stream, ErrorBody(0x000A, "hostile server: opcode not served"));
    }
  }

  void Run() {
    for (;;) {
      uint8_t h[cql::kHeaderSize];
      if (!ReadFull(fd, h, sizeof h)) return;
      RequestFrame f;
      f.header.version = h[0];
      f.header.flags = h[1];
      f.header.stream = static_cast<int16_t>(cql::LoadU16(h + 2));
      f.header.opcode = static_cast<Opcode>(h[4]);
      f.header.length = cql::LoadU32(h + 5);
      if (f.header.length > (64u << 20)) return;
      f.body.resize(f.header.length);
      if (!ReadFull(fd, f.body.data(), f.body.size())) return;
      if (!Handle(f)) return;
    }
  }
};

StatusOr<std::unique_ptr<HostileServer>> HostileServer::Start(Mode mode, const std::string& host, uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IOError(fmt::format("socket: {}", std::strerror(errno)));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    ::close(fd);
    return Status::InvalidArgument(fmt::format("not an IPv4 address: '{}'", host));
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 128) != 0) {
    const std::string e = std::strerror(errno);
    ::close(fd);
    return Status::IOError(fmt::format("listen on {}:{}: {}", host, port, e));
  }
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  std::unique_ptr<HostileServer> s(new HostileServer(mode, fd, ntohs(a.sin_port)));
  s->acceptor_ = std::thread([p = s.get()] { p->AcceptLoop(); });
  return s;
}

HostileServer::HostileServer(Mode mode, int listen_fd, uint16_t port)
    : mode_(mode), listen_fd_(listen_fd), port_(port) {}

HostileServer::~HostileServer() { Stop(); }

void HostileServer::AcceptLoop() {
  for (;;) {
    const int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) {
      if (stopping_ || (errno != EINTR && errno != ECONNABORTED)) return;
      continue;
    }
    const int one = 1;
    ::setsockopt(c, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one, sizeof one);
    MutexLock l(&mu_);
    if (stopping_) {
      ::close(c);
      return;
    }
    fds_.push_back(c);
    threads_.emplace_back([this, c] { Serve(c); });
  }
}

void HostileServer::Serve(int fd) {
  Conn conn{this, fd};
  conn.Run();
  // Closed here (a reset where the mode set SO_LINGER 0) unless Stop() has
  // taken the descriptor over: it closes it after joining this thread.
  MutexLock l(&mu_);
  for (auto it = fds_.begin(); it != fds_.end(); ++it) {
    if (*it == fd) {
      fds_.erase(it);
      ::close(fd);
      break;
    }
  }
}

void HostileServer::Stop() {
  if (stopping_.exchange(true)) return;
  ::shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  ::close(listen_fd_);
  std::vector<std::thread> threads;
  std::vector<int> fds;
  {
    MutexLock l(&mu_);
    threads.swap(threads_);
    fds.swap(fds_);
    for (int fd : fds) ::shutdown(fd, SHUT_RDWR);
  }
  for (auto& t : threads) t.join();
  for (int fd : fds) ::close(fd);
}

}  // namespace cqlstream::hostile
