// Copyright (c) cqlstream authors.
//
// OpenArgs, Loader, insecure_tls_warning: see bind_loader.h.
#include "bind_loader.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bind_batch.h"
#include "bind_decode.h"
#include "cqlstream/dataset.h"
#include "cqlstream/loader.h"
#include "cqlstream/options.h"
#include "loader/decode_stream.h"
#include "loader/option_kit.h"
#include "bind_options.h"
#include "interruptible.h"
#include "status_error.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace cqlstream::python {
namespace {

using loader::Item;
using loader::Stream;
using loader::StreamOptions;

// The connection and throttle fields (hosts ... retry_budget_s) are the
// option kit's own (loader::OptionArgs), resolved as the CLI and DALI do.
struct OpenArgs : loader::OptionArgs {
  // What to read.
  std::string dataset;
  std::string split = "train";
  std::optional<std::string> selection;
  int batch_size = 256;
  bool shuffle = true;
  uint64_t seed = 0;
  std::optional<int> rank;
  std::optional<int> world_size;
  bool ordered = false;
  bool drop_last = false;
  std::optional<int64_t> epochs = 1;  // None: endless
  std::string on_missing = "raise";
  bool verify_checksums = false;
  // Caps (None: automatic).
  std::optional<int64_t> memory_bytes;
  bool adaptive = true;
  bool hedge = true;
  bool packed = false;  // LoaderOptions::packed
  // Decoding (decode_size None: raw bytes).
  std::optional<std::pair<int, int>> decode_size;
  int decode_channels = 3;
  std::string decode_mode = "crop";
  bool jpeg_scaling = true;
  uint64_t max_decode_pixels = 0;
  int prefetch = 2;
  int decode_threads = 0;
  // .npy decoding (decode='npy'): targets "bytes" or "npy".
  bool npy = false;
  std::string npy_targets = "bytes";
};

StatusOr<std::pair<LoaderOptions, StreamOptions>> Resolve(const OpenArgs& a, const std::atomic<bool>* stop) {
  LoaderOptions lo;
  CQLS_ASSIGN_OR_RETURN(const loader::ResolvedOptions kit,
                        loader::ResolveOptions(a, loader::OptionSpelling::kKeyword, stop));
  kit.ApplyTo(&lo);
  lo.dataset = a.dataset;
  lo.split = a.split;
  if (a.selection) lo.selection_path = *a.selection;
  lo.batch_size = a.batch_size;
  lo.shuffle = a.shuffle;
  lo.seed = a.seed;
  if (a.rank) {
    if (*a.rank < 0) return Status::InvalidArgument("rank must be >= 0");
    lo.rank = *a.rank;
  }
  if (a.world_size) {
    if (*a.world_size < 1) return Status::InvalidArgument("world_size must be >= 1");
    lo.world_size = *a.world_size;
  }
  lo.ordered = a.ordered;
  lo.drop_last = a.drop_last;
  if (a.epochs) {
    if (*a.epochs < 1) return Status::InvalidArgument("epochs must be >= 1 (or None for endless)");
    lo.epochs = *a.epochs;
  } else {
    lo.epochs = 0;
  }
  if (a.on_missing == "raise") {
    lo.on_missing = OnMissing::kRaise;
  } else if (a.on_missing == "skip") {
    lo.on_missing = OnMissing::kSkip;
  } else {
    return Status::InvalidArgument("on_missing must be 'raise' or 'skip', got '" + a.on_missing + "'");
  }
  lo.verify_checksums = a.verify_checksums;
  if (a.memory_bytes) lo.memory_bytes = *a.memory_bytes;
  lo.adaptive = a.adaptive;
  lo.hedge = a.hedge;
  lo.packed = a.packed;

  StreamOptions so;
  if (a.decode_size) {
    CQLS_ASSIGN_OR_RETURN(so.decode, MakeDecode(*a.decode_size, a.decode_channels, a.decode_mode, a.jpeg_scaling,
                                                a.max_decode_pixels));
  }
  so.prefetch = a.prefetch;
  so.decode_threads = a.decode_threads;
  if (a.npy) {
    loader::NpyDecodeOptions n;
    if (a.npy_targets == "npy") {
      n.targets = loader::NpyTargets::kNpy;
    } else if (a.npy_targets != "bytes") {
      return Status::InvalidArgument("decode targets must be 'bytes' or 'npy', got '" + a.npy_targets + "'");
    }
    so.npy = n;
  }
  return std::make_pair(std::move(lo), std::move(so));
}

struct PyLoader {
  std::unique_ptr<Stream> stream;
  Stream& s() {
    if (!stream) throw nb::value_error("the loader is not open");
    return *stream;
  }
};

nb::dict MetricsDict(Stream& s) {
  const LoaderMetrics m = s.loader().Metrics();
  nb::dict d;
  d["images_per_s"] = m.images_per_s;
  d["mb_per_s"] = m.mb_per_s;
  d["images"] = m.images;
  d["bytes"] = m.bytes;
  d["batches"] = m.batches;
  d["in_flight"] = m.in_flight;
  d["window"] = m.window;
  d["connections"] = m.connections;
  d["connections_wanted"] = m.connections_wanted;
  d["ignored_peer_rows"] = m.ignored_peer_rows;
  d["bytes_in_flight"] = m.bytes_in_flight;
  d["memory_bytes"] = m.memory_bytes;
  d["memory_budget"] = m.memory_budget;
  d["memory_peak_bytes"] = m.memory_peak_bytes;
  d["latency_p50_ms"] = m.latency_p50_ms;
  d["latency_p99_ms"] = m.latency_p99_ms;
  d["retries"] = m.retries;
  d["hedges"] = m.hedges;
  d["hedge_wins"] = m.hedge_wins;
  d["timeouts"] = m.timeouts;
  d["duplicates_dropped"] = m.duplicates_dropped;
  d["skipped"] = m.skipped;
  d["dropped"] = m.dropped;
  d["stall_s"] = m.stall_s;
  d["direct_bytes"] = m.direct_bytes;
  d["copied_bytes"] = m.copied_bytes;
  d["columns_decoded"] = m.columns_decoded;
  d["coalesced_requests"] = m.coalesced_requests;
  d["fetches"] = m.fetches;
  d["coalesced_samples"] = m.coalesced_samples;
  d["packed_requests"] = m.packed_requests;
  d["pack_fallbacks"] = m.pack_fallbacks;
  d["group_failures"] = m.group_failures;
  d["key_lookups"] = m.key_lookups;
  d["foreign_keys_cached"] = m.foreign_keys_cached;
  d["decode_skipped"] = s.decode_skipped();
  d["decode_s"] = s.decode_seconds();
  d["wait_s"] = s.wait_seconds();
  return d;
}

nb::dict DatasetDict(const DatasetInfo& ds) {
  nb::dict d;
  d["name"] = ds.name;
  d["keyspace"] = ds.keyspace;
  d["layout_version"] = ds.layout_version;
  d["label_kind"] = std::string(LabelKindName(ds.label_kind));
  d["sample_kind"] = std::string(SampleKindName(ds.sample_kind));
  d["class_names"] = ds.class_names;
  d["chunk_size"] = ds.chunk_size;
  d["description"] = ds.description;
  nb::dict splits;
  for (const auto& sp : ds.splits()) {
    nb::dict x;
    x["samples"] = ds.Count(sp);
    x["bytes"] = ds.Bytes(sp);
    x["max_size"] = ds.MaxSize(sp);
    splits[sp.c_str()] = x;
  }
  d["splits"] = splits;
  return d;
}

std::vector<SampleKey> KeysOf(const std::vector<uint64_t>& keys) { return {keys.begin(), keys.end()}; }

void BindOpenArgs(nb::module_& m) {
  nb::class_<OpenArgs> args(m, "OpenArgs", "Everything cqlstream.Loader passes to the core (see cqlstream.Loader).");
  args.def(nb::init<>())
      .def_rw("dataset", &OpenArgs::dataset)
      .def_rw("split", &OpenArgs::split)
      .def_rw("selection", &OpenArgs::selection)
      .def_rw("batch_size", &OpenArgs::batch_size)
      .def_rw("shuffle", &OpenArgs::shuffle)
      .def_rw("seed", &OpenArgs::seed)
      .def_rw("rank", &OpenArgs::rank)
      .def_rw("world_size", &OpenArgs::world_size)
      .def_rw("ordered", &OpenArgs::ordered)
      .def_rw("drop_last", &OpenArgs::drop_last)
      .def_rw("epochs", &OpenArgs::epochs)
      .def_rw("on_missing", &OpenArgs::on_missing)
      .def_rw("verify_checksums", &OpenArgs::verify_checksums)
      .def_rw("memory_bytes", &OpenArgs::memory_bytes)
      .def_rw("adaptive", &OpenArgs::adaptive)
      .def_rw("hedge", &OpenArgs::hedge)
      .def_rw("packed", &OpenArgs::packed)
      .def_rw("decode_size", &OpenArgs::decode_size)
      .def_rw("decode_channels", &OpenArgs::decode_channels)
      .def_rw("decode_mode", &OpenArgs::decode_mode)
      .def_rw("jpeg_scaling", &OpenArgs::jpeg_scaling)
      .def_rw("max_decode_pixels", &OpenArgs::max_decode_pixels)
      .def_rw("prefetch", &OpenArgs::prefetch)
      .def_rw("decode_threads", &OpenArgs::decode_threads)
      .def_rw("npy", &OpenArgs::npy)
      .def_rw("npy_targets", &OpenArgs::npy_targets);
  DefConnectionOptions(args);
  DefThrottleOptions(args);
}

void BindLoaderClass(nb::module_& m) {
  nb::class_<PyLoader>(m, "Loader", "The compiled loader (see cqlstream.Loader).")
      .def(
          "__init__",
          [](PyLoader* self, const OpenArgs& args) {
            // Off the GIL (resolving may ask a secure bundle's metadata
            // service); Ctrl-C ends the opening at its next wait (connect,
            // catalog and pack reads, prepares).
            StatusOr<std::unique_ptr<Stream>> s = Status::Internal("not opened");
            auto stop = std::make_shared<std::atomic<bool>>(false);
            OpenInterruptibly(
                [&] {
                  StatusOr<std::pair<LoaderOptions, StreamOptions>> r = Resolve(args, stop.get());
                  if (!r.ok()) {
                    s = r.status();
                    return;
                  }
                  r->first.open_stop = stop;
                  s = Stream::Open(std::move(r->first), std::move(r->second));
                },
                [&] { s = Status::Cancelled("interrupted"); }, stop.get());
            new (self) PyLoader{Unwrap(std::move(s))};
          },
          "args"_a)
      .def(
          "next",
          [](PyLoader& l) -> std::optional<PyBatch> {
            Stream& s = l.s();
            // While it waits, Python's signal handlers run before each wait,
            // at least every 50 ms (on the main thread, where they run):
            // Ctrl-C ends the wait with KeyboardInterrupt, no batch taken
            // (the next call returns it).
            bool raised = false;
            const std::function<bool()> interrupted = SignalCheck(&raised);
            StatusOr<Item> next = Status::Internal("no batch read");
            {
              nb::gil_scoped_release release;
              next = s.Next(interrupted);
            }
            if (raised) throw nb::python_error();
            Item it = Unwrap(std::move(next));
            if (it.end_of_epoch()) return std::nullopt;
            return PyBatch{std::move(it), false};
          },
          "The next batch of the current epoch, or None at its end (the call after that starts the next epoch).")
      .def(
          "fetch",
          [](PyLoader& l, const std::vector<uint64_t>& keys) {
            // Ctrl-C ends the wait as in next(); the reads sent end on
            // their own.
            bool raised = false;
            const std::function<bool()> interrupted = SignalCheck(&raised);
            StatusOr<Item> fetched = Status::Internal("nothing fetched");
            {
              nb::gil_scoped_release release;
              fetched = l.s().Fetch(KeysOf(keys), interrupted);
            }
            if (raised) throw nb::python_error();
            return PyBatch{Unwrap(std::move(fetched)), false};
          },
          "keys"_a, "Reads exactly these samples now, in this order.")
      .def(
          "state",
          [](PyLoader& l) {
            std::string s;
            {
              nb::gil_scoped_release release;
              s = l.s().State();
            }
            return nb::bytes(s.data(), s.size());
          },
          "The opaque checkpoint at the consumer's position.")
      .def(
          "restore",
          [](PyLoader& l, const std::vector<nb::bytes>& states) {
            std::vector<std::string> v;
            for (const auto& s : states) v.emplace_back(s.c_str(), s.size());
            nb::gil_scoped_release release;
            Check(l.s().Restore(v));
          },
          "states"_a, "Restores checkpoints (this rank's, or every rank's of a previous run) before the first batch.")
      .def("metrics", [](PyLoader& l) { return MetricsDict(l.s()); })
      .def("dataset_info", [](PyLoader& l) { return DatasetDict(l.s().loader().dataset()); })
      .def(
          "close",
          [](PyLoader& l) {
            if (l.stream) l.stream->Close();
          },
          nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("done", [](PyLoader& l) { return l.s().Done(); })
      .def_prop_ro("decoding", [](PyLoader& l) { return l.s().decoding(); })
      .def_prop_ro("batches_per_epoch", [](PyLoader& l) { return l.s().loader().BatchesPerEpoch(); })
      .def_prop_ro("samples_per_epoch", [](PyLoader& l) { return l.s().loader().SamplesPerEpoch(); })
      .def_prop_ro("rank", [](PyLoader& l) { return l.s().loader().rank(); })
      .def_prop_ro("world_size", [](PyLoader& l) { return l.s().loader().world_size(); });
}

}  // namespace

void BindLoader(nb::module_& m) {
  m.def("insecure_tls_warning", [](const std::string& how) { return InsecureTlsWarning(how); }, "how"_a,
        "The warning text every front end gives when TLS verification is turned off.");
  BindOpenArgs(m);
  BindLoaderClass(m);
}

}  // namespace cqlstream::python
