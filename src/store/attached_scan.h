// Copyright (c) cqlstream authors.
//
// Reading an attached dataset's samples (store/attached.h) for the
// management commands (verify, export, select, split), one synchronous
// request at a time per caller thread:
//
//   * ForeignKey: the key snapshot's row of (seg, idx) (KeyLookupCql),
//     decoded as the key column's type (store/attached_row.h SnapshotKey);
//   * ReadMeta: the foreign key and the label only
//     (SELECT "<label>" FROM <table> WHERE "<key>" = ?; no read at all of
//     the foreign table when the dataset has no label), as a MetaRow whose
//     path is the key's text (KeyPath) — what select, split and export's
//     names need without reading any sample bytes; the label cell is
//     decoded by store::AttachedRow, the loader's own checks, so these
//     commands and the loader agree on every label;
//   * ReadData: the data read (AttachedTable::DataReadCql) decoded by
//     store::AttachedRow, the loader's own checks (one row, a non-null data
//     blob, a label of the column's type, text labels among the class names).
//
// The label and data reads go to the table the sample's segment was
// snapshot from (SegmentInfo::source, AttachedSegmentTable), as the loader's
// do, not to the catalog's current table of the split: keys of an old
// snapshot are never looked up in another table.
//
// With `with_extra` (Dataset.metadata()), ReadMeta also reads the split's
// metadata table (`attach --metadata-table`), when it has one, into
// MetaRow::extra (store/attached_extra.h: every column but the key, as
// bounded text); a key without a metadata row has an empty extra.
//
// A sample whose snapshot row or foreign row is missing or malformed is a
// per-sample problem (NotFound / Corruption naming the sample and the
// table), returned in the result, never an error of the whole call; an error
// of the call is a failed request (connection, time-out).
//
// Thread-safety: an AttachedSamples is immutable after Open and may be used
// from several threads at once (the Session is thread-safe).
#ifndef CQLSTREAM_STORE_ATTACHED_SCAN_H_
#define CQLSTREAM_STORE_ATTACHED_SCAN_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cqlstream/dataset.h"
#include "cqlstream/status.h"
#include "net/session.h"
#include "store/attached.h"
#include "store/attached_row.h"
#include "store/scan.h"

namespace cqlstream::store {

// The text a sample's foreign key is named by in exports and messages: a
// text key as it is, a uuid as 8-4-4-4-12, a number in decimal, a blob in hex.
std::string KeyPath(const Value& key);

class AttachedSamples {
 public:
  // Prepares the key lookup and each split's reads. REQUIRES: d.attached().
  // Each read's wait ends once *stop is set (Cancelled("interrupted"); see
  // net::Session::Execute); `stop` (may be null) outlives the reader.
  static StatusOr<std::unique_ptr<AttachedSamples>> Open(net::Session& s, const DatasetInfo& d,
                                                         bool with_extra = false,
                                                         const std::atomic<bool>* stop = nullptr);

  // The sample's foreign key; *problem set (and nullopt returned) for a
  // per-sample problem.
  StatusOr<std::optional<Value>> ForeignKey(SampleKey k, Status* problem) const;
  // The sample's MetaRow (key, path = KeyPath, label / labels; size 0: not
  // known without reading the data); *problem set for a per-sample problem.
  StatusOr<MetaRow> ReadMeta(const std::string& split, SampleKey k, Status* problem) const;
  // The data read into `row` (made with Options(split)); *problem as above
  // (also row->Finish()'s problem).
  Status ReadData(const std::string& split, SampleKey k, AttachedRow* row, std::string* key_path,
                  Status* problem) const;
  // The AttachedRow options of `split`'s reads (keep_data / keep_target set
  // as asked).
  AttachedRowOptions Options(const std::string& split, bool keep) const;

  const AttachedTable& table() const { return a_; }

 private:
  AttachedSamples(net::Session& s, const DatasetInfo& d, const std::atomic<bool>* stop)
      : s_(s), d_(d), stop_(stop) {}
  // One read for sample `k`. An answer refused as another request's (a
  // Corruption: columns of another statement) is read again, up to 3 times
  // in all; then it is `k`'s problem (nullopt), not an error of the scan.
  StatusOr<std::optional<net::ResultSet>> Run(const net::PreparedPtr& q, std::vector<Value> v, int32_t page,
                                              SampleKey k, Status* problem) const;
  Status PrepareTable(const std::string& table);
  Status PrepareExtra(const std::string& split, const std::string& table);
  // The table sample `k` is read from: its segment's (d_.segments), else the
  // catalog's of `split`.
  const std::string& TableOf(const std::string& split, SampleKey k) const;

  net::Session& s_;
  const DatasetInfo& d_;
  const std::atomic<bool>* const stop_;
  AttachedTable a_;
  DataType key_type_;
  AttachedLabelType label_type_ = AttachedLabelType::kNone;
  std::string snapshot_table_;
  std::shared_ptr<const ClassNameIndex> class_index_;  // d_.class_names, built once
  net::PreparedPtr lookup_;
  std::map<std::string, net::PreparedPtr> label_reads_, data_reads_;  // by "ks.table"
  std::map<int32_t, std::string> seg_tables_;                          // committed seg -> "ks.table"
  std::map<std::string, std::string> split_tables_;                    // split -> its segments' common table
  std::map<std::string, net::PreparedPtr> extra_reads_;                // by split (with_extra)
};

// ScanMeta for an attached dataset: the committed samples of `segs`, block
// by block (1024 indices of one segment), `concurrency` samples at a time,
// each read with ReadMeta; on_block gets the rows of the samples that could
// be read (ascending idx); on_problem (may be empty) the others, from worker
// threads, one at a time.
Status ScanAttachedMeta(net::Session& s, const DatasetInfo& d, const std::vector<SegmentInfo>& segs, int concurrency,
                        const std::function<Status(const BlockRef&, std::vector<MetaRow>&)>& on_block,
                        const std::function<void(SampleKey, const Status&)>& on_problem,
                        const std::atomic<bool>* stop = nullptr, bool with_extra = false);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_ATTACHED_SCAN_H_
