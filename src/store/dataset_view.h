// Copyright (c) cqlstream authors.
//
// DatasetView: one dataset's catalog entry and metadata for a library user
// that is not the loader (the Python cqlstream.Dataset): it connects, loads
// the catalog row, lists a split's keys, scans the metadata table and packs
// the small samples. The caller needs neither the session nor the layout's
// tables.
//
// Ownership: the view owns its session; Close() (or the destructor) closes
// it. The DatasetInfo is read once by Open and never changes.
//
// Thread-safety: all methods may be called from any thread; Close() while a
// Metadata() or Pack() runs on another thread makes it fail with the
// session's error, it does not free what it uses.
#ifndef CQLSTREAM_STORE_DATASET_VIEW_H_
#define CQLSTREAM_STORE_DATASET_VIEW_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cqlstream/dataset.h"
#include "cqlstream/options.h"
#include "cqlstream/status.h"
#include "store/pack_options.h"
#include "store/scan.h"

namespace cqlstream::net {
class Session;
}  // namespace cqlstream::net

namespace cqlstream::store {

class DatasetView {
 public:
  // One metadata row and the split of its segment.
  struct Row {
    MetaRow meta;
    std::string split;
  };

  // Connects (no event watching) and loads the catalog entry of `dataset`
  // in connection.keyspace; NotFound when there is none. Once *stop is set
  // (null: never), it gives up at its next wait with Cancelled("interrupted")
  // (net::SessionOptions::stop); the view keeps no use of it.
  static StatusOr<std::unique_ptr<DatasetView>> Open(const ConnectionOptions& connection, const std::string& dataset,
                                                     std::shared_ptr<const std::atomic<bool>> stop = nullptr);

  ~DatasetView();
  DatasetView(const DatasetView&) = delete;
  DatasetView& operator=(const DatasetView&) = delete;

  const DatasetInfo& info() const { return info_; }

  // Keys of the committed samples of `split`, ascending (from the catalog, no I/O).
  std::vector<SampleKey> SplitKeys(const std::string& split) const;

  // The metadata rows of `split` (every split when nullopt), ascending key,
  // read `concurrency` blocks at a time. NotFound names the splits when
  // `split` is not one of the dataset's. Once `stop` (optional) is set, the
  // scan ends with Cancelled after the blocks in hand.
  StatusOr<std::vector<Row>> Metadata(const std::optional<std::string>& split, int concurrency,
                                      const std::atomic<bool>* stop = nullptr) const;

  // Writes the packed copy of the dataset's small samples (PackDataset,
  // store/pack.h) with the view's session, from the catalog entry as it is
  // now (read again: segments sealed since the view opened are packed too).
  // *report is filled as far as packing went, also on error; o.stop ends it
  // with Cancelled (store/pack_options.h).
  Status Pack(const PackOptions& o, PackReport* report) const;

  // Closes the session (idempotent).
  void Close();

 private:
  DatasetView(std::shared_ptr<net::Session> session, DatasetInfo info);

  const std::shared_ptr<net::Session> session_;
  const DatasetInfo info_;
};

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_DATASET_VIEW_H_
