// Copyright (c) cqlstream authors.
//
// cqlstream._core: the private nanobind module under the `cqlstream`
// package. This is the only place where cqlstream's Status values become
// Python exceptions (see StatusError and the translator below; the classes
// live in cqlstream/errors.py).
//
// Zero-copy: every array handed to Python points into C++ memory and owns a
// capsule holding a shared_ptr to that memory (the loader's batch, or a
// decoded batch), so the memory stays valid while any array, tensor or Batch
// object refers to it, also after the Loader is closed and gone.
//
// The GIL is released wherever C++ may block: opening a loader (connecting),
// next() (waiting for data), fetch(), close(), restore() and decoding.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cqlstream/dataset.h"
#include "cqlstream/loader.h"
#include "cqlstream/options.h"
#include "loader/checkpoint.h"
#include "loader/decode.h"
#include "loader/option_kit.h"
#include "loader/decode_stream.h"
#include "bind_dataset.h"
#include "bind_npy.h"
#include "status_error.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace cqlstream::python {
namespace {

using loader::DecodedBatch;
using loader::Item;
using loader::Stream;
using loader::StreamOptions;

// ---------------------------------------------------------------------------
// Errors

[[noreturn]] void Released() {
  throw nb::value_error(
      "this Batch was released (Batch.release()); arrays and tensors taken from it before stay valid");
}

// ---------------------------------------------------------------------------
// Batches

const uint8_t kEmpty[1] = {0};
alignas(16) const uint64_t kZero[2] = {0, 0};

template <typename T>
nb::capsule Keep(const std::shared_ptr<const T>& p) {
  return nb::capsule(new std::shared_ptr<const T>(p),
                     [](void* v) noexcept { delete static_cast<std::shared_ptr<const T>*>(v); });
}

template <typename T>
using Vec = nb::ndarray<nb::numpy, const T, nb::ndim<1>, nb::c_contig>;

template <typename T>
Vec<T> VecOf(const std::vector<T>& v, size_t n, nb::capsule owner) {
  const T* p = v.empty() ? reinterpret_cast<const T*>(&kZero) : v.data();
  return Vec<T>(p, {std::min(n, v.size())}, owner);
}

struct PyBatch {
  Item item;
  bool released = false;

  void CheckLive() const {
    if (released) Released();
  }
  const Batch& Raw(const char* what) const {
    CheckLive();
    if (!item.raw) {
      throw nb::value_error((std::string(what) +
                             " is not available on a decoded batch (the loader was opened with decode=...); "
                             "use .images")
                                .c_str());
    }
    return *item.raw;
  }
  const DecodedBatch& Decoded() const {
    CheckLive();
    if (!item.decoded) {
      throw nb::value_error(
          "images are only available when the loader decodes (decode=(H, W)); this batch holds raw bytes: .data");
    }
    return *item.decoded;
  }
  nb::capsule Owner() const {
    return item.raw ? Keep<Batch>(item.raw) : Keep<DecodedBatch>(item.decoded);
  }
  size_t size() const {
    CheckLive();
    return item.raw ? item.raw->size() : item.decoded->size();
  }
  const uint8_t* DataPtr() const {
    const auto d = Raw("data").data();
    return d.data() != nullptr ? d.data() : kEmpty;
  }
};

using Images = nb::ndarray<nb::numpy, uint8_t, nb::ndim<4>, nb::c_contig>;

Images ImagesOf(const PyBatch& b) {
  const DecodedBatch& d = b.Decoded();
  const size_t shape[4] = {d.size(), static_cast<size_t>(d.height), static_cast<size_t>(d.width),
                           static_cast<size_t>(d.channels)};
  return Images(d.pixels, 4, shape, b.Owner());
}

nb::object TorchOf(const PyBatch& b, const std::string& layout) {
  if (layout != "NHWC" && layout != "NCHW") throw nb::value_error("layout must be 'NHWC' or 'NCHW'");
  if (b.item.raw || b.released) {
    if (layout != "NHWC") b.Decoded();  // raises the explanation
    const auto& raw = b.Raw("torch()");
    const size_t shape[1] = {raw.data().size()};
    return nb::cast(nb::ndarray<nb::pytorch, const uint8_t, nb::ndim<1>>(b.DataPtr(), 1, shape, b.Owner()));
  }
  const DecodedBatch& d = b.Decoded();
  const size_t n = d.size(), h = static_cast<size_t>(d.height), w = static_cast<size_t>(d.width),
               c = static_cast<size_t>(d.channels);
  if (layout == "NHWC") {
    const size_t shape[4] = {n, h, w, c};
    return nb::cast(nb::ndarray<nb::pytorch, uint8_t>(d.pixels, 4, shape, b.Owner()));
  }
  // NCHW as a strided view of the same memory.
  const size_t shape[4] = {n, c, h, w};
  const int64_t strides[4] = {static_cast<int64_t>(h * w * c), 1, static_cast<int64_t>(w * c),
                              static_cast<int64_t>(c)};
  return nb::cast(nb::ndarray<nb::pytorch, uint8_t>(d.pixels, 4, shape, b.Owner(), strides));
}

// ---------------------------------------------------------------------------
// Opening a loader

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
  // Decoding (decode_size None: raw bytes).
  std::optional<std::pair<int, int>> decode_size;
  int decode_channels = 3;
  std::string decode_mode = "crop";
  bool jpeg_scaling = true;
  uint64_t max_decode_pixels = 0;
  int prefetch = 2;
  int decode_threads = 0;
};

StatusOr<loader::ResizeMode> ParseMode(const std::string& m) {
  if (m == "crop") return loader::ResizeMode::kCrop;
  if (m == "stretch") return loader::ResizeMode::kStretch;
  return Status::InvalidArgument("decode mode must be 'crop' or 'stretch', got '" + m + "'");
}

StatusOr<std::pair<LoaderOptions, StreamOptions>> Resolve(const OpenArgs& a) {
  LoaderOptions lo;
  CQLS_ASSIGN_OR_RETURN(const loader::ResolvedOptions kit,
                        loader::ResolveOptions(a, loader::OptionSpelling::kKeyword));
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

  StreamOptions so;
  if (a.decode_size) {
    loader::DecodeOptions d;
    d.height = a.decode_size->first;
    d.width = a.decode_size->second;
    d.channels = a.decode_channels;
    CQLS_ASSIGN_OR_RETURN(d.mode, ParseMode(a.decode_mode));
    d.jpeg_scaling = a.jpeg_scaling;
    d.max_decode_pixels = a.max_decode_pixels;
    CQLS_RETURN_IF_ERROR(d.Validate());
    so.decode = d;
  }
  so.prefetch = a.prefetch;
  so.decode_threads = a.decode_threads;
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
  d["bytes_in_flight"] = m.bytes_in_flight;
  d["memory_bytes"] = m.memory_bytes;
  d["memory_budget"] = m.memory_budget;
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

nb::dict DescribeState(const nb::bytes& state) {
  auto cp = Unwrap(loader::Checkpoint::Decode(std::string_view(state.c_str(), state.size())));
  nb::dict d;
  d["epoch"] = cp.epoch;
  d["rank"] = cp.rank;
  d["world_size"] = cp.world;
  d["batch_size"] = cp.batch_size;
  d["seed"] = cp.seed;
  d["shuffle"] = cp.shuffle;
  d["drop_last"] = cp.drop_last;
  d["samples"] = cp.n;
  d["batches_delivered"] = cp.batches_delivered;
  const uint64_t assigned = loader::CountPositions(cp.assigned);
  const auto left = loader::Subtract(cp.assigned, loader::Normalize(cp.done));
  d["samples_assigned"] = assigned;
  d["samples_remaining"] = loader::CountPositions(left);
  return d;
}

StatusOr<loader::DecodeOptions> MakeDecode(std::pair<int, int> size, int channels, const std::string& mode,
                                           bool jpeg_scaling) {
  loader::DecodeOptions d;
  d.height = size.first;
  d.width = size.second;
  d.channels = channels;
  CQLS_ASSIGN_OR_RETURN(d.mode, ParseMode(mode));
  d.jpeg_scaling = jpeg_scaling;
  CQLS_RETURN_IF_ERROR(d.Validate());
  return d;
}

// A batch over bytes owned by Python-side copies (decode_images).
struct CopiedBatch final : Batch {
  std::vector<uint8_t> bytes;
  std::span<const uint8_t> data() const override { return bytes; }
};

using Frames = nb::ndarray<nb::numpy, uint8_t, nb::ndim<4>, nb::c_contig>;

Frames DecodeImages(const std::vector<nb::bytes>& blobs, std::pair<int, int> size, int channels,
                    const std::string& mode, bool jpeg_scaling, int threads) {
  const auto o = Unwrap(MakeDecode(size, channels, mode, jpeg_scaling));
  auto batch = std::make_shared<CopiedBatch>();
  for (size_t i = 0; i < blobs.size(); ++i) {
    const auto* p = reinterpret_cast<const uint8_t*>(blobs[i].c_str());
    batch->offsets.push_back(batch->bytes.size());
    batch->sizes.push_back(blobs[i].size());
    batch->image_sizes.push_back(blobs[i].size());
    batch->labels.push_back(-1);
    batch->keys.push_back(i);
    batch->bytes.insert(batch->bytes.end(), p, p + blobs[i].size());
  }
  auto out = std::make_shared<std::vector<uint8_t>>(std::max<size_t>(1, blobs.size() * o.frame_bytes()));
  {
    nb::gil_scoped_release release;
    loader::DecodePool pool(threads);
    Check(loader::DecodeBatch(pool, *batch, o, *out));
  }
  const size_t shape[4] = {blobs.size(), static_cast<size_t>(o.height), static_cast<size_t>(o.width),
                           static_cast<size_t>(o.channels)};
  nb::capsule owner(new std::shared_ptr<std::vector<uint8_t>>(out),
                    [](void* v) noexcept { delete static_cast<std::shared_ptr<std::vector<uint8_t>>*>(v); });
  return Frames(out->data(), 4, shape, owner);
}

std::vector<SampleKey> KeysOf(const std::vector<uint64_t>& keys) { return {keys.begin(), keys.end()}; }

}  // namespace
}  // namespace cqlstream::python

using namespace cqlstream;
using namespace cqlstream::python;

NB_MODULE(_core, m) {
  m.doc() = "cqlstream's compiled core (private: use the cqlstream package)";
  RegisterStatusTranslator();
  BindDataset(m);
  BindNpy(m);

  m.def("format_key", [](uint64_t k) { return FormatKey(k); }, "key"_a, "A sample key as 'seg:idx'.");
  m.def("make_key", [](int32_t seg, int32_t idx) { return MakeKey(seg, idx); }, "seg"_a, "idx"_a,
        "The 64-bit key of sample (seg, idx): (seg << 32) | idx.");
  m.def("insecure_tls_warning", [](const std::string& how) { return InsecureTlsWarning(how); }, "how"_a,
        "The warning text every front end gives when TLS verification is turned off.");
  m.def("describe_state", &DescribeState, "state"_a,
        "The human-readable fields of a loader checkpoint (epoch, rank, world_size, progress).");

  m.def(
      "decode_image",
      [](const nb::bytes& data, std::pair<int, int> size, int channels, const std::string& mode, bool jpeg_scaling) {
        return DecodeImages({data}, size, channels, mode, jpeg_scaling, 1);
      },
      "data"_a, "size"_a, "channels"_a = 3, "mode"_a = "crop", "jpeg_scaling"_a = true,
      "Decodes one JPEG or PNG to a (1, H, W, C) uint8 array, as the loader's decode= does.");
  m.def("decode_images", &DecodeImages, "blobs"_a, "size"_a, "channels"_a = 3, "mode"_a = "crop",
        "jpeg_scaling"_a = true, "threads"_a = 0,
        "Decodes JPEG/PNG blobs in parallel into one (N, H, W, C) uint8 array.");

  nb::class_<OpenArgs>(m, "OpenArgs", "Everything cqlstream.Loader passes to the core (see cqlstream.Loader).")
      .def(nb::init<>())
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
      .def_rw("max_in_flight", &OpenArgs::max_in_flight)
      .def_rw("initial_window", &OpenArgs::initial_window)
      .def_rw("adaptive", &OpenArgs::adaptive)
      .def_rw("max_connections_per_host", &OpenArgs::max_connections_per_host)
      .def_rw("request_timeout_s", &OpenArgs::request_timeout_s)
      .def_rw("max_attempts", &OpenArgs::max_attempts)
      .def_rw("retry_budget_s", &OpenArgs::retry_budget_s)
      .def_rw("hedge", &OpenArgs::hedge)
      .def_rw("hosts", &OpenArgs::hosts)
      .def_rw("port", &OpenArgs::port)
      .def_rw("keyspace", &OpenArgs::keyspace)
      .def_rw("username", &OpenArgs::username)
      .def_rw("password_file", &OpenArgs::password_file)
      .def_rw("tls_ca", &OpenArgs::tls_ca)
      .def_rw("tls_cert", &OpenArgs::tls_cert)
      .def_rw("tls_key", &OpenArgs::tls_key)
      .def_rw("tls_server_name", &OpenArgs::tls_server_name)
      .def_rw("tls_key_passphrase_file", &OpenArgs::tls_key_passphrase_file)
      .def_rw("tls_insecure_skip_verify", &OpenArgs::tls_insecure_skip_verify)
      .def_rw("secure_bundle", &OpenArgs::secure_bundle)
      .def_rw("local_dc", &OpenArgs::local_dc)
      .def_rw("connections_per_host", &OpenArgs::connections_per_host)
      .def_rw("io_threads", &OpenArgs::io_threads)
      .def_rw("connect_timeout_s", &OpenArgs::connect_timeout_s)
      .def_rw("decode_size", &OpenArgs::decode_size)
      .def_rw("decode_channels", &OpenArgs::decode_channels)
      .def_rw("decode_mode", &OpenArgs::decode_mode)
      .def_rw("jpeg_scaling", &OpenArgs::jpeg_scaling)
      .def_rw("max_decode_pixels", &OpenArgs::max_decode_pixels)
      .def_rw("prefetch", &OpenArgs::prefetch)
      .def_rw("decode_threads", &OpenArgs::decode_threads);

  nb::class_<PyBatch>(m, "Batch",
                      "One batch. Arrays are zero-copy views that keep the batch memory alive on their own.")
      .def("__len__", &PyBatch::size)
      .def_prop_ro("epoch", [](const PyBatch& b) {
        b.CheckLive();
        return b.item.raw ? b.item.raw->epoch : b.item.decoded->epoch;
      })
      .def_prop_ro("index", [](const PyBatch& b) {
        b.CheckLive();
        return b.item.raw ? b.item.raw->index : b.item.decoded->index;
      })
      .def_prop_ro("decoded", [](const PyBatch& b) {
        b.CheckLive();
        return static_cast<bool>(b.item.decoded);
      })
      .def_prop_ro("released", [](const PyBatch& b) { return b.released; })
      .def_prop_ro(
          "data",
          [](const PyBatch& b) {
            const Batch& r = b.Raw("data");
            return Vec<uint8_t>(b.DataPtr(), {r.data().size()}, b.Owner());
          },
          nb::rv_policy::automatic,
          "All samples' bytes: one read-only uint8 array over the batch buffer (raw mode).")
      .def_prop_ro(
          "address", [](const PyBatch& b) { return reinterpret_cast<uintptr_t>(b.item.raw ? b.DataPtr() : b.Decoded().pixels); },
          "Address of the batch memory (raw bytes or decoded frames), for zero-copy checks.")
      .def_prop_ro("offsets", [](const PyBatch& b) {
        const Batch& r = b.Raw("offsets");
        return VecOf<uint64_t>(r.offsets, r.size(), b.Owner());
      }, nb::rv_policy::automatic)
      .def_prop_ro("sizes", [](const PyBatch& b) {
        const Batch& r = b.Raw("sizes");
        return VecOf<uint64_t>(r.sizes, r.size(), b.Owner());
      }, nb::rv_policy::automatic)
      .def_prop_ro("image_sizes", [](const PyBatch& b) {
        const Batch& r = b.Raw("image_sizes");
        return VecOf<uint64_t>(r.image_sizes, r.size(), b.Owner());
      }, nb::rv_policy::automatic)
      .def_prop_ro("labels", [](const PyBatch& b) {
        b.CheckLive();
        const auto& v = b.item.raw ? b.item.raw->labels : b.item.decoded->labels;
        return VecOf<int32_t>(v, b.size(), b.Owner());
      }, nb::rv_policy::automatic, "Class labels (int32; -1 where a sample has none).")
      .def_prop_ro("keys", [](const PyBatch& b) {
        b.CheckLive();
        const auto& v = b.item.raw ? b.item.raw->keys : b.item.decoded->keys;
        return VecOf<uint64_t>(v, b.size(), b.Owner());
      }, nb::rv_policy::automatic, "Sample keys (uint64, (seg << 32) | idx).")
      .def_prop_ro("multilabels", [](const PyBatch& b) {
        b.CheckLive();
        return b.item.raw ? b.item.raw->multilabels : b.item.decoded->multilabels;
      }, "Label lists (multilabel datasets; empty otherwise).")
      .def_prop_ro("images", &ImagesOf, nb::rv_policy::automatic, "Decoded frames, (N, H, W, C) uint8 (decode mode).")
      .def(
          "__getitem__",
          [](const PyBatch& b, int64_t i) -> nb::object {
            const int64_t n = static_cast<int64_t>(b.size());
            if (i < 0) i += n;
            if (i < 0 || i >= n) throw nb::index_error("sample index out of range");
            const size_t k = static_cast<size_t>(i);
            if (b.item.raw) {
              const Batch& r = *b.item.raw;
              return nb::cast(Vec<uint8_t>(b.DataPtr() + r.offsets[k], {static_cast<size_t>(r.sizes[k])}, b.Owner()));
            }
            const DecodedBatch& d = *b.item.decoded;
            const size_t shape[3] = {static_cast<size_t>(d.height), static_cast<size_t>(d.width),
                                     static_cast<size_t>(d.channels)};
            return nb::cast(nb::ndarray<nb::numpy, uint8_t, nb::ndim<3>, nb::c_contig>(
                d.pixels + k * d.frame_bytes(), 3, shape, b.Owner()));
          },
          "i"_a, "Sample i: its payload bytes (raw mode) or its (H, W, C) frame (decode mode), zero-copy.")
      .def("torch", &TorchOf, "layout"_a = "NHWC",
           "A torch tensor over the same memory: the uint8 bytes (raw mode) or the frames as NHWC, or NCHW as a "
           "strided view (decode mode).")
      .def(
          "release", [](PyBatch& b) {
            b.item = Item{};
            b.released = true;
          },
          "Drops this object's reference to the batch memory. Arrays taken before keep theirs; any later use of "
          "this object raises ValueError.");

  nb::class_<PyLoader>(m, "Loader", "The compiled loader (see cqlstream.Loader).")
      .def(
          "__init__",
          [](PyLoader* self, const OpenArgs& args) {
            std::unique_ptr<Stream> s;
            {
              // Resolving may ask a secure bundle's metadata service (network): no GIL held.
              nb::gil_scoped_release release;
              auto [lo, so] = Unwrap(Resolve(args));
              s = Unwrap(Stream::Open(std::move(lo), std::move(so)));
            }
            new (self) PyLoader{std::move(s)};
          },
          "args"_a)
      .def(
          "next",
          [](PyLoader& l) -> std::optional<PyBatch> {
            Item it = Unwrap(l.s().Next());
            if (it.end_of_epoch()) return std::nullopt;
            return PyBatch{std::move(it), false};
          },
          nb::call_guard<nb::gil_scoped_release>(),
          "The next batch of the current epoch, or None at its end (the call after that starts the next epoch).")
      .def(
          "fetch",
          [](PyLoader& l, const std::vector<uint64_t>& keys) {
            Item it = Unwrap(l.s().Fetch(KeysOf(keys)));
            return PyBatch{std::move(it), false};
          },
          nb::call_guard<nb::gil_scoped_release>(), "keys"_a, "Reads exactly these samples now, in this order.")
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
