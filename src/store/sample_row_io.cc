// Copyright (c) cqlstream authors.
//
// The statements of the data row and the path lookup (store/sample_row.h):
// the part of the data row's home that talks to a Session, kept apart from
// sample_row.cc so that the parsing stays socket-free (and its fuzzer links
// without the network layer).
#include <fmt/format.h>

#include "store/read_again.h"
#include "store/sample_row.h"
#include "store/scan.h"

namespace cqlstream::store {

std::string DataReadQuery(const DatasetInfo& d) {
  return fmt::format(
      "SELECT seg, idx, size, image_size, checksum, label, labels, data FROM {}.{} WHERE seg = ? AND idx = ?",
      d.keyspace, d.data_table());
}

// PER PARTITION LIMIT 2: the samples read this way are one row each (see
// loader/coalesce.h); a second row is enough to show that a partition holds
// more (its sample's own check then finds chunks past its size), and the
// limit bounds the answer to two rows per key, which lets the loader send
// the read unpaged.
std::string DataReadManyQuery(const DatasetInfo& d) {
  return fmt::format(
      "SELECT seg, idx, size, image_size, checksum, label, labels, data FROM {}.{} WHERE seg = ? AND idx IN ? "
      "PER PARTITION LIMIT 2",
      d.keyspace, d.data_table());
}

std::string DataInsertQuery(const DatasetInfo& d) {
  return fmt::format("INSERT INTO {}.{} (seg, idx, chunk, data, size, image_size, checksum, label, labels) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     d.keyspace, d.data_table());
}

std::string DataChunkInsertQuery(const DatasetInfo& d) {
  return fmt::format("INSERT INTO {}.{} (seg, idx, chunk, data) VALUES (?, ?, ?, ?)", d.keyspace, d.data_table());
}

Status ReadSampleRows(net::Session& s, const net::PreparedPtr& data_read, SampleKey key, int page_size,
                      SampleRowDecoder* dec, const std::atomic<bool>* stop) {
  bool cut = false;  // the read ended at `stop`
  const auto interrupted = [stop, &cut] { return cut = stop != nullptr && stop->load(std::memory_order_relaxed); };
  net::Statement q = net::Statement::Bound(data_read, {Value::Int(KeySegment(key)), Value::Int(KeyIndex(key))});
  q.check_result_columns = true;
  q.idempotent = true;
  q.consistency = cql::Consistency::kLocalQuorum;
  q.page_size = page_size;
  int reads = 0;
  bool refused = false;  // the last answer was meant for another request
  const Status st = ReadAgainWhile(
      kReadAttempts,
      [&] {
        if (reads++ > 0) {
          if (interrupted()) return Status::Cancelled("interrupted");
          dec->Reset();
        }
        // Once the decoder holds a problem, the rest of the answer cannot
        // change it (it keeps the first), so the pages stop there: a server
        // could page rows on without end.
        bool stopped = false;
        net::Session::ReadBudget unbounded = net::Session::Unbounded();
        // Each page's wait ends at `stop` too: a server may hold a page up to
        // the request timeout.
        const Status read = s.ForEachPage(
            q,
            [dec, &stopped, &interrupted](const cql::Rows& r) {
              dec->AddPage(r);
              if (interrupted()) return Status::Cancelled("interrupted");
              if (!dec->failed()) return Status::OK();
              stopped = true;
              return Status::Cancelled("the sample's rows hold a problem: no more pages");
            },
            &unbounded, stop);
        if (!read.ok() && interrupted()) return Status::Cancelled("interrupted");
        return stopped ? Status::OK() : read;
      },
      [&](const Status& r) {
        refused = r.code() == Status::Code::kCorruption || (r.ok() && dec->answered_another_key());
        return refused;
      });
  if (cut) return Status::Cancelled("interrupted");
  if (reads == 1 || st.ok()) return st;
  return st.WithContext(refused ? fmt::format("{} answers refused, the last", reads)
                                : fmt::format("after {} answers refused", reads - 1));
}

std::string SamplePathQuery(const DatasetInfo& d) {
  return fmt::format("SELECT path FROM {}.{} WHERE seg = ? AND block = ? AND idx = ?", d.keyspace, d.meta_table());
}

std::string DescribeSample(net::Session& s, const net::PreparedPtr& path_query, SampleKey k) {
  if (!path_query) return fmt::format("{} (path unknown)", FormatKey(k));
  const int32_t idx = KeyIndex(k);
  net::Statement st = net::Statement::Bound(
      path_query, {Value::Int(KeySegment(k)), Value::Int(idx >> kBlockShift), Value::Int(idx)});
  st.idempotent = true;
  st.timeout = std::chrono::milliseconds(2000);
  auto r = s.Execute(st);
  if (r.ok() && r->rows() && r->rows()->row_count() == 1) {
    auto v = r->rows()->value(0, 0);
    if (v.ok() && v->kind() == Value::Kind::kText) return fmt::format("{} (path '{}')", FormatKey(k), v->as_text());
  }
  return fmt::format("{} (path unknown)", FormatKey(k));
}

}  // namespace cqlstream::store
