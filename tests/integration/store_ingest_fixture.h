// Copyright (c) cqlstream authors.
//
// The fixture of the ingest suites (store_test.cc, store_resume_test.cc,
// writer_test.cc):
// StoreFixture's keyspace and session, and what those suites read back of
// an ingest — its report, the committed metadata rows by key, every
// metadata row by segment, the content independent of segment numbers —
// with a small class/file folder maker and the check of a refused ingest.
//
// A suite derives from IngestFixture and names its keyspace prefix, as
// with StoreFixture (store_fixture.h).
//
// Thread-safety: test bodies (one thread); the scans' callbacks, which the
// session may run on several threads, take a lock.
#ifndef CQLSTREAM_TESTS_INTEGRATION_STORE_INGEST_FIXTURE_H_
#define CQLSTREAM_TESTS_INTEGRATION_STORE_INGEST_FIXTURE_H_

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/ingest.h"
#include "store/scan.h"
#include "store/testing_fixtures.h"
#include "store_fixture.h"

namespace cqlstream::testing {

class IngestFixture : public StoreFixture {
 protected:
  // Ingests with `o`: its status and report.
  std::pair<Status, store::IngestReport> Run(const store::IngestOptions& o) {
    store::IngestReport r;
    Status st = store::Ingest(S(), o, &r);
    return {st, r};
  }

  // The committed metadata of a dataset, by key.
  std::map<SampleKey, store::MetaRow> Committed(const DatasetInfo& d) {
    std::map<SampleKey, store::MetaRow> out;
    std::mutex mu;
    Status st = store::ScanMeta(S(), d, d.segments, 4, [&](const store::BlockRef&, std::vector<store::MetaRow>& rows) {
      std::lock_guard<std::mutex> l(mu);
      for (auto& r : rows) out[r.key] = r;
      return Status::OK();
    });
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }

  // Every metadata row in the table, committed or not: seg -> row count.
  std::map<int32_t, int64_t> RawMetaRows(const DatasetInfo& d) {
    std::map<int32_t, int64_t> out;
    std::mutex mu;
    Status st = store::ScanMetaByTokenRanges(S(), d, "seg, idx", 8, 4, [&](const cql::Rows& r) {
      std::lock_guard<std::mutex> l(mu);
      for (int32_t i = 0; i < r.row_count(); ++i) out[r.value(i, 0)->as_int()]++;
      return Status::OK();
    });
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }

  // (split, path, checksum, label) of every committed sample: the content,
  // independent of segment numbers.
  std::multiset<std::string> Content(const DatasetInfo& d) {
    std::map<int32_t, std::string> split_of;
    for (const auto& g : d.segments) split_of[g.seg] = g.split;
    std::multiset<std::string> out;
    for (const auto& [k, m] : Committed(d)) {
      out.insert(fmt::format("{}|{}|{}|{}|{}", split_of[KeySegment(k)], m.path, m.checksum, m.label.value_or(-1),
                             m.size));
    }
    return out;
  }
};

// A refused ingest: an error whose message names `what`.
inline void ExpectRefused(const Status& st, std::string_view what) {
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(what), std::string::npos) << st.ToString();
}

// A class/file folder of n small PNGs over 3 classes.
inline void MakeSmallFolder(const store::testing::TempDir& dir, int n, int first = 0) {
  for (int i = first; i < first + n; ++i) {
    store::testing::WriteFile(dir / fmt::format("c{}/{:03}.png", i % 3, i),
                              store::testing::MakePng(8 + i % 5, 8, static_cast<uint32_t>(i)));
  }
}

}  // namespace cqlstream::testing

#endif  // CQLSTREAM_TESTS_INTEGRATION_STORE_INGEST_FIXTURE_H_
