// Copyright (c) cqlstream authors.
//
// Bindings of a dataset's catalog and metadata (store::DatasetView) and of
// selection files (cqlstream::Selection) for cqlstream.Dataset and
// cqlstream.Selection. Every call that does I/O (connecting, reading the
// catalog, scanning the metadata, packing, reading or writing a file) releases the
// GIL; Python objects are built after it is taken back. Errors become the
// cqlstream.errors exceptions, as in bindings.cc.
//
// Thread-safety: a DatasetHandle holds one DatasetView, which is
// thread-safe; the handle's pointer to it is read and written with the GIL
// held.
#include "bind_dataset.h"

#include "bind_options.h"
#include "interruptible.h"
#include "status_error.h"

#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cqlstream/dataset.h"
#include "loader/option_kit.h"
#include "store/dataset_view.h"
#include "store/pack_options.h"

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
  std::vector<std::optional<int64_t>> sizes;  // nullopt: not known (attached datasets)
  std::vector<std::map<std::string, std::string>> extra;
};

class DatasetHandle {
 public:
  explicit DatasetHandle(const DatasetArgs& a) {
    StatusOr<std::unique_ptr<store::DatasetView>> view = Status::Internal("not opened");
    // Ctrl-C: the opening ends at its next wait (connect, catalog read).
    auto stop = std::make_shared<std::atomic<bool>>(false);
    OpenInterruptibly([&] { view = Open(a, stop); }, [&] { view = Status::Cancelled("interrupted"); },
                      stop.get());
    view_ = Unwrap(std::move(view));
  }
  ~DatasetHandle() { Close(); }

  // closed_ is read and written only with the GIL held. The view lives as
  // long as the handle, so a close() from another thread never frees what a
  // scan uses (the scan fails with the closed session's error).
  void Close() {
    if (closed_ || !view_) return;
    closed_ = true;
    nb::gil_scoped_release release;
    view_->Close();
  }
  const DatasetInfo& info() const { return view_->info(); }

  std::vector<uint64_t> SplitKeys(const std::string& split) const {
    std::vector<SampleKey> keys = view_->SplitKeys(split);
    return {keys.begin(), keys.end()};
  }

  // The metadata of `split` (every split when empty), ascending key.
  MetaColumns Metadata(const std::optional<std::string>& split, int concurrency) {
    if (closed_) Check(Status::InvalidArgument("this Dataset is closed"));
    StatusOr<std::vector<store::DatasetView::Row>> rows = Status::Internal("not scanned");
    std::atomic<bool> stop{false};  // Ctrl-C: the scan ends after the blocks in hand
    Check(RunInterruptibly(
        [&] {
          rows = view_->Metadata(split, concurrency, &stop);
          return Status::OK();
        },
        &stop));
    MetaColumns cols;
    const bool attached = info().attached();
    for (auto& r : Unwrap(std::move(rows))) {
      cols.keys.push_back(r.meta.key);
      cols.splits.push_back(std::move(r.split));
      cols.paths.push_back(std::move(r.meta.path));
      cols.labels.push_back(r.meta.label);
      cols.multilabels.push_back(std::move(r.meta.labels));
      if (attached) {
        cols.sizes.push_back(std::nullopt);  // no blob length without reading the bytes (docs/schema.md)
      } else {
        cols.sizes.push_back(r.meta.image_size > 0 ? r.meta.image_size : r.meta.size);
      }
      cols.extra.push_back(std::move(r.meta.extra));
    }
    return cols;
  }

  // Packs the small samples (store::PackDataset); the report as a dict.
  // Raises after packing what it could when packing failed part-way.
  nb::dict Pack(const std::optional<std::string>& split, int pack_size, int concurrency, bool force) {
    if (closed_) Check(Status::InvalidArgument("this Dataset is closed"));
    store::PackOptions o;
    o.split = split.value_or("");
    o.pack_size = pack_size;
    o.concurrency = concurrency;
    o.force = force;
    store::PackReport r;
    std::atomic<bool> stop{false};  // Ctrl-C: packing ends within the sample read in progress
    o.stop = &stop;
    Check(RunInterruptibly([&] { return view_->Pack(o, &r); }, &stop));
    nb::list segments;
    for (const auto& g : r.segments) {
      nb::dict e;
      e["seg"] = g.seg;
      e["split"] = g.split;
      e["outcome"] = g.outcome;
      e["pack_size"] = g.info.pack_size;
      e["packs"] = g.info.pack_size > 0 ? g.info.count / g.info.pack_size : 0;
      e["packed"] = g.info.packed;
      e["left_out"] = g.info.left_out;
      segments.append(e);
    }
    nb::dict d;
    d["segments"] = segments;
    d["packs_written"] = r.packs_written;
    d["samples_packed"] = r.samples_packed;
    d["left_out"] = r.left_out;
    d["seconds"] = r.seconds;
    return d;
  }

 private:
  static StatusOr<std::unique_ptr<store::DatasetView>> Open(const DatasetArgs& a,
                                                           std::shared_ptr<const std::atomic<bool>> stop) {
    CQLS_RETURN_IF_ERROR(ValidateDatasetName(a.dataset));
    CQLS_ASSIGN_OR_RETURN(const loader::ResolvedOptions kit,
                          loader::ResolveOptions(a, loader::OptionSpelling::kKeyword, stop.get()));
    return store::DatasetView::Open(kit.connection, a.dataset, std::move(stop));
  }

  std::unique_ptr<store::DatasetView> view_;  // set by the constructor, never reset
  bool closed_ = false;
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
  nb::class_<DatasetArgs> args(m, "DatasetArgs", "What cqlstream.Dataset passes to the core (see cqlstream.Dataset).");
  args.def(nb::init<>())
      .def_rw("dataset", &DatasetArgs::dataset);
  DefConnectionOptions(args);

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
      .def_prop_ro("attached", [](const DatasetHandle& h) { return h.info().attached(); })
      .def("splits", [](const DatasetHandle& h) { return h.info().splits(); })
      .def("count", [](const DatasetHandle& h, const std::string& split) { return h.info().Count(split); }, "split"_a)
      .def("split_keys", &DatasetHandle::SplitKeys, "split"_a,
           "Keys of the split's committed samples, ascending (from the catalog, no scan).")
      .def("metadata", &DatasetHandle::Metadata, "split"_a.none(), "concurrency"_a = 16,
           "Scans the metadata of one split (None: all) into columns, ascending key.")
      .def("pack", &DatasetHandle::Pack, "split"_a.none(), "pack_size"_a, "concurrency"_a, "force"_a,
           "Writes the packed copy of the small samples (cqlstream.Dataset.pack); the report as a dict.");

  m.attr("PACK_SIZE_DEFAULT") = store::kDefaultPackSize;
  m.attr("PACK_SIZE_MIN") = store::kMinPackSize;
  m.attr("PACK_SIZE_MAX") = store::kMaxPackSize;
  m.attr("PACK_CONCURRENCY_MAX") = store::kMaxPackConcurrency;

  m.def("save_selection", &SaveSelection, "path"_a, "dataset"_a, "split"_a, "keys"_a, "query"_a, "created"_a,
        "Writes a selection file (docs/schema.md); keys keep their order and repeats.");
  m.def("load_selection", &LoadSelection, "path"_a,
        "Reads a selection file: a dict of dataset, split, query, created, layout_version, ordered, keys.");
}

}  // namespace cqlstream::python
