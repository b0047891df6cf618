// Copyright (c) cqlstream authors.
//
// Bindings of a dataset's catalog and metadata (store/catalog, store/scan)
// and of selection files (cqlstream::Selection) for cqlstream.Dataset and
// cqlstream.Selection. Every call that does I/O (connecting, reading the
// catalog, scanning the metadata, reading or writing a file) releases the
// GIL; Python objects are built after it is taken back. Errors become the
// cqlstream.errors exceptions, as in bindings.cc.
//
// Thread-safety: a DatasetHandle holds one session, which is thread-safe;
// the handle's own fields are written only by its constructor.
#include "bind_dataset.h"

#include "status_error.h"

#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cqlstream/dataset.h"
#include "loader/option_kit.h"
#include "net/session.h"
#include "store/catalog.h"
#include "store/scan.h"
#include "util/mutex.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace cqlstream::python {
namespace {

// The dataset to open and the connection options (the option kit's, as
// cqlstream.Loader takes them; its throttle fields are not used here).
struct DatasetArgs : loader::OptionArgs {
  std::string dataset;
};

// One metadata row, as Python sees it.
struct MetaColumns {
  std::vector<uint64_t> keys;
  std::vector<std::string> splits, paths;
  std::vector<std::optional<int32_t>> labels;
  std::vector<std::vector<int32_t>> multilabels;
  std::vector<int64_t> sizes;
  std::vector<std::map<std::string, std::string>> extra;
};

class DatasetHandle {
 public:
  explicit DatasetHandle(const DatasetArgs& a) {
    StatusOr<DatasetInfo> info = Status::Internal("not loaded");
    {
      // The handle is not visible to Python yet: Open may set session_ without the GIL.
      nb::gil_scoped_release release;
      info = Open(a);
    }
    if (!info.ok()) {
      Close();  // a session opened for a dataset that is not there
      Check(info.status());
    }
    info_ = std::move(info).value();
  }
  ~DatasetHandle() { Close(); }

  // session_ is read and written only with the GIL held; I/O runs on a
  // copy of the pointer, so a close() from another thread never frees a
  // session that a scan is using.
  void Close() {
    std::shared_ptr<net::Session> s = std::move(session_);
    session_.reset();
    if (s) {
      nb::gil_scoped_release release;
      s->Close();
    }
  }
  const DatasetInfo& info() const { return info_; }

  // Keys of the committed samples of `split`, ascending (no I/O: from the catalog).
  std::vector<uint64_t> SplitKeys(const std::string& split) const {
    std::vector<uint64_t> out;
    out.reserve(static_cast<size_t>(info_.Count(split)));
    for (const auto& g : info_.SplitSegments(split)) {
      for (int64_t i = 0; i < g.count; ++i) out.push_back(MakeKey(g.seg, static_cast<int32_t>(i)));
    }
    return out;
  }

  // The metadata of `split` (every split when empty), ascending key.
  MetaColumns Metadata(const std::optional<std::string>& split, int concurrency) {
    std::shared_ptr<net::Session> session = session_;
    if (!session) Check(Status::InvalidArgument("this Dataset is closed"));
    if (concurrency < 1 || concurrency > 1024) Check(Status::InvalidArgument("concurrency must be in [1, 1024]"));
    MetaColumns cols;
    Status st;
    {
      nb::gil_scoped_release release;
      st = Scan(*session, split, concurrency, &cols);
    }
    Check(st);
    return cols;
  }

 private:
  StatusOr<DatasetInfo> Open(const DatasetArgs& a) {
    CQLS_RETURN_IF_ERROR(ValidateDatasetName(a.dataset));
    CQLS_ASSIGN_OR_RETURN(const loader::ResolvedOptions kit,
                          loader::ResolveOptions(a, loader::OptionSpelling::kKeyword));
    net::SessionOptions so;
    so.watch_events = false;
    CQLS_ASSIGN_OR_RETURN(session_, net::Session::Connect(kit.connection, so));
    return store::LoadDataset(*session_, kit.connection.keyspace, a.dataset);
  }

  Status Scan(net::Session& session, const std::optional<std::string>& split, int concurrency, MetaColumns* cols) {
    std::vector<SegmentInfo> segs;
    std::map<int32_t, std::string> split_of;
    for (const auto& g : info_.segments) {
      if ((!split || g.split == *split) && g.count > 0) segs.push_back(g);
      split_of[g.seg] = g.split;
    }
    if (split && info_.Count(*split) == 0) {
      bool known = false;
      for (const auto& g : info_.segments) known = known || g.split == *split;
      if (!known) {
        std::string have;
        for (const auto& sp : info_.splits()) have += (have.empty() ? "" : ", ") + sp;
        return Status::NotFound("dataset '" + info_.name + "' has no split '" + *split + "' (splits: " + have + ")");
      }
    }
    std::vector<store::MetaRow> rows;
    Mutex mu;
    CQLS_RETURN_IF_ERROR(store::ScanMeta(session, info_, segs, concurrency,
                                         [&](const store::BlockRef&, std::vector<store::MetaRow>& block) {
                                           MutexLock l(&mu);
                                           for (auto& r : block) rows.push_back(std::move(r));
                                           return Status::OK();
                                         }));
    std::sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) { return x.key < y.key; });
    for (auto& r : rows) {
      cols->keys.push_back(r.key);
      cols->splits.push_back(split_of[KeySegment(r.key)]);
      cols->paths.push_back(std::move(r.path));
      cols->labels.push_back(r.label);
      cols->multilabels.push_back(std::move(r.labels));
      cols->sizes.push_back(r.image_size > 0 ? r.image_size : r.size);
      cols->extra.push_back(std::move(r.extra));
    }
    return Status::OK();
  }

  std::shared_ptr<net::Session> session_;
  DatasetInfo info_;
};

// Writes a selection file (cqlstream::Selection::Save); keys in their order.
void SaveSelection(const std::string& path, const std::string& dataset, const std::string& split,
                   std::vector<uint64_t> keys, const std::string& query, const std::string& created) {
  Selection sel;
  sel.dataset = dataset;
  sel.split = split;
  sel.query = query;
  sel.created = created;
  sel.keys = std::move(keys);
  Status st;
  {
    nb::gil_scoped_release release;
    st = sel.Save(path);
  }
  Check(st);
}

nb::dict LoadSelection(const std::string& path) {
  StatusOr<Selection> sel = Status::Internal("not loaded");
  {
    nb::gil_scoped_release release;
    sel = Selection::Load(path);
  }
  Selection s = Unwrap(std::move(sel));
  nb::dict d;
  d["dataset"] = s.dataset;
  d["split"] = s.split;
  d["query"] = s.query;
  d["created"] = s.created;
  d["layout_version"] = s.layout_version;
  d["ordered"] = !s.SortedUnique();
  d["keys"] = nb::cast(s.keys);
  return d;
}

}  // namespace

void BindDataset(nb::module_& m) {
  nb::class_<DatasetArgs>(m, "DatasetArgs", "What cqlstream.Dataset passes to the core (see cqlstream.Dataset).")
      .def(nb::init<>())
      .def_rw("dataset", &DatasetArgs::dataset)
      .def_rw("hosts", &DatasetArgs::hosts)
      .def_rw("port", &DatasetArgs::port)
      .def_rw("keyspace", &DatasetArgs::keyspace)
      .def_rw("username", &DatasetArgs::username)
      .def_rw("password_file", &DatasetArgs::password_file)
      .def_rw("tls_ca", &DatasetArgs::tls_ca)
      .def_rw("tls_cert", &DatasetArgs::tls_cert)
      .def_rw("tls_key", &DatasetArgs::tls_key)
      .def_rw("tls_server_name", &DatasetArgs::tls_server_name)
      .def_rw("tls_key_passphrase_file", &DatasetArgs::tls_key_passphrase_file)
      .def_rw("tls_insecure_skip_verify", &DatasetArgs::tls_insecure_skip_verify)
      .def_rw("secure_bundle", &DatasetArgs::secure_bundle)
      .def_rw("local_dc", &DatasetArgs::local_dc)
      .def_rw("connections_per_host", &DatasetArgs::connections_per_host)
      .def_rw("io_threads", &DatasetArgs::io_threads)
      .def_rw("connect_timeout_s", &DatasetArgs::connect_timeout_s);

  nb::class_<MetaColumns>(m, "MetaColumns", "Metadata rows as columns (cqlstream.Dataset.metadata).")
      .def_ro("keys", &MetaColumns::keys)
      .def_ro("splits", &MetaColumns::splits)
      .def_ro("paths", &MetaColumns::paths)
      .def_ro("labels", &MetaColumns::labels)
      .def_ro("multilabels", &MetaColumns::multilabels)
      .def_ro("sizes", &MetaColumns::sizes)
      .def_ro("extra", &MetaColumns::extra);

  nb::class_<DatasetHandle>(m, "DatasetHandle", "A connection to one dataset's catalog and metadata.")
      .def(nb::init<const DatasetArgs&>(), "args"_a)
      .def("close", &DatasetHandle::Close)
      .def_prop_ro("name", [](const DatasetHandle& h) { return h.info().name; })
      .def_prop_ro("keyspace", [](const DatasetHandle& h) { return h.info().keyspace; })
      .def_prop_ro("label_kind", [](const DatasetHandle& h) { return std::string(LabelKindName(h.info().label_kind)); })
      .def_prop_ro("class_names", [](const DatasetHandle& h) { return h.info().class_names; })
      .def("splits", [](const DatasetHandle& h) { return h.info().splits(); })
      .def("count", [](const DatasetHandle& h, const std::string& split) { return h.info().Count(split); }, "split"_a)
      .def("split_keys", &DatasetHandle::SplitKeys, "split"_a,
           "Keys of the split's committed samples, ascending (from the catalog, no scan).")
      .def("metadata", &DatasetHandle::Metadata, "split"_a.none(), "concurrency"_a = 16,
           "Scans the metadata of one split (None: all) into columns, ascending key.");

  m.def("save_selection", &SaveSelection, "path"_a, "dataset"_a, "split"_a, "keys"_a, "query"_a, "created"_a,
        "Writes a selection file (docs/schema.md); keys keep their order and repeats.");
  m.def("load_selection", &LoadSelection, "path"_a,
        "Reads a selection file: a dict of dataset, split, query, created, layout_version, ordered, keys.");
}

}  // namespace cqlstream::python
