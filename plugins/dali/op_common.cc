// Copyright (c) cqlstream authors.
#include "op_common.h"

#include <fmt/format.h>

#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>

#include "loader/option_kit.h"

namespace cqlstream::dali_plugin {

using ::dali::CPUBackend;
using ::dali::OpSpec;
using ::dali::OutputDesc;
using ::dali::TensorList;
using ::dali::TensorListShape;
using ::dali::TensorShape;

void Throw(std::string_view where, const Status& s) {
  // The only exceptions of cqlstream: DALI turns them into a pipeline error
  // (a RuntimeError in Python) that carries this message.
  throw std::runtime_error(fmt::format("{}: {}", where, s.ToString()));
}

namespace {

std::string StringArg(const OpSpec& spec, const char* name) { return spec.GetArgument<std::string>(name); }

}  // namespace

LoaderOptions LoaderOptionsFromSpec(const OpSpec& spec, std::string_view where) {
  // The resolver shared with the CLI and Python (loader/option_kit.h); only
  // arguments the pipeline sets are passed, so the CQLSTREAM_* variables
  // fill the rest.
  loader::OptionArgs a;
  if (spec.HasArgument("hosts")) a.hosts = spec.GetRepeatedArgument<std::string>("hosts");
  const auto str = [&](const char* name, std::optional<std::string>* out) {
    if (spec.HasArgument(name)) *out = StringArg(spec, name);
  };
  const auto num = [&](const char* name, std::optional<int64_t>* out) {
    if (spec.HasArgument(name)) *out = spec.GetArgument<int64_t>(name);
  };
  num("port", &a.port);
  str("keyspace", &a.keyspace);
  str("username", &a.username);
  str("local_dc", &a.local_dc);
  str("password_file", &a.password_file);
  str("tls_ca", &a.tls_ca);
  str("tls_cert", &a.tls_cert);
  str("tls_key", &a.tls_key);
  str("tls_server_name", &a.tls_server_name);
  str("tls_key_passphrase_file", &a.tls_key_passphrase_file);
  str("secure_bundle", &a.secure_bundle);
  a.tls_insecure_skip_verify = spec.GetArgument<bool>("tls_insecure_skip_verify");
  num("connections_per_host", &a.connections_per_host);
  num("max_shard_connections", &a.max_shard_connections);
  num("io_threads", &a.io_threads);
  // 0 is the schema's "automatic" for these two.
  const auto cap = [&](const char* name, std::optional<int64_t>* out) {
    if (spec.HasArgument(name) && spec.GetArgument<int64_t>(name) != 0) *out = spec.GetArgument<int64_t>(name);
  };
  cap("max_in_flight", &a.max_in_flight);
  cap("max_connections_per_host", &a.max_connections_per_host);
  cap("initial_window", &a.initial_window);
  cap("max_attempts", &a.max_attempts);
  const auto seconds = [&](const char* name, std::optional<double>* out) {
    if (spec.HasArgument(name) && spec.GetArgument<float>(name) != 0.f) *out = spec.GetArgument<float>(name);
  };
  seconds("connect_timeout", &a.connect_timeout_s);
  seconds("request_timeout", &a.request_timeout_s);
  seconds("retry_budget", &a.retry_budget_s);
  num("coalesce", &a.coalesce);  // 0 is automatic here too
  auto r = loader::ResolveOptions(a, loader::OptionSpelling::kKeyword);
  if (!r.ok()) Throw(where, r.status());
  loader::PrintWarnings(r->warnings);
  LoaderOptions o;
  r->ApplyTo(&o);

  o.dataset = StringArg(spec, "dataset");
  o.split = StringArg(spec, "split");
  o.batch_size = spec.GetArgument<int>("max_batch_size");
  o.epochs = 0;  // DALI readers are endless; DALI's iterators cut the epochs
  o.drop_last = false;
  o.verify_checksums = spec.GetArgument<bool>("verify_checksums");
  o.memory_bytes = spec.GetArgument<int64_t>("memory_bytes");
  if (o.memory_bytes < 0) Throw(where, Status::InvalidArgument("memory_bytes must be >= 0"));
  return o;
}

int NumOutputsFromSpec(const OpSpec& spec) {
  return 2 + (spec.GetArgument<bool>("output_target") ? 1 : 0) + (spec.GetArgument<bool>("output_keys") ? 1 : 0);
}

std::unique_ptr<Loader> OpenKeysLoader(const ::dali::OpSpec& spec, std::string_view where) {
  LoaderOptions o = LoaderOptionsFromSpec(spec, where);
  o.shuffle = false;
  o.rank = 0;
  o.world_size = 1;
  o.on_missing = OnMissing::kRaise;  // a request's samples are all there or the request fails
  auto opened = Loader::Open(o);
  if (!opened.ok()) Throw(where, opened.status());
  return std::move(*opened);
}

namespace {

// "bytes" -> false, "npy" -> true; anything else throws naming the argument.
bool NpyArg(const OpSpec& spec, const char* name, std::string_view where) {
  const std::string v = StringArg(spec, name);
  if (v != "bytes" && v != "npy") {
    Throw(where, Status::InvalidArgument(fmt::format("{} must be 'bytes' or 'npy', not '{}'", name, v)));
  }
  return v == "npy";
}

}  // namespace

OutputLayout OutputLayoutFromSpec(const OpSpec& spec, const DatasetInfo& dataset, std::string_view where) {
  const LabelKind kind = dataset.label_kind;
  OutputLayout l;
  l.label_kind = kind;
  l.target = spec.GetArgument<bool>("output_target");
  l.keys = spec.GetArgument<bool>("output_keys");
  l.zero_copy = spec.GetArgument<bool>("zero_copy");
  l.npy = NpyArg(spec, "output", where);
  l.npy_target = NpyArg(spec, "target_output", where);
  if (l.target && kind != LabelKind::kTarget) {
    Throw(where, Status::InvalidArgument(fmt::format(
                     "output_target=True needs a dataset with label kind 'target'; this one has '{}'",
                     LabelKindName(kind))));
  }
  if (l.npy_target && !l.target) {
    Throw(where, Status::InvalidArgument("target_output='npy' decodes the target output: set output_target=True"));
  }
  if (l.npy && dataset.sample_kind != SampleKind::kBlob) {
    Throw(where, Status::InvalidArgument(fmt::format(
                     "output='npy' decodes .npy arrays out of datasets of sample kind 'blob' (cqlstream ingest "
                     "--kind blob); dataset '{}' holds samples of kind '{}' (decode images with fn.decoders.image)",
                     dataset.name, SampleKindName(dataset.sample_kind))));
  }
  return l;
}

NpySamples ParseNpyOutputs(const OutputLayout& l, const std::vector<SampleRef>& samples, std::string_view where) {
  if (!l.npy && !l.npy_target) return {};
  auto parsed = ParseNpySamples(samples, l.npy, l.npy_target);
  if (!parsed.ok()) Throw(where, parsed.status());
  return std::move(*parsed);
}

namespace {

// The image bytes and the target bytes of a sample.
std::span<const uint8_t> ImageBytes(const SampleRef& r) {
  const Batch& b = *r.batch;
  return b.data().subspan(b.offsets[r.index], b.image_sizes[r.index]);
}
std::span<const uint8_t> TargetBytes(const SampleRef& r) {
  const Batch& b = *r.batch;
  return b.data().subspan(b.offsets[r.index] + b.image_sizes[r.index], b.sizes[r.index] - b.image_sizes[r.index]);
}

template <typename Bytes>
TensorListShape<> BytesShape(const std::vector<SampleRef>& samples, Bytes bytes) {
  TensorListShape<> s(static_cast<int>(samples.size()), 1);
  for (size_t i = 0; i < samples.size(); ++i) {
    s.set_tensor_shape(static_cast<int>(i), TensorShape<>{static_cast<int64_t>(bytes(samples[i]).size())});
  }
  return s;
}

TensorListShape<> LabelShape(const OutputLayout& l, const std::vector<SampleRef>& samples) {
  const int n = static_cast<int>(samples.size());
  if (l.label_kind != LabelKind::kMultiLabel) return TensorListShape<>(n, 0);  // scalars
  TensorListShape<> s(n, 1);
  for (int i = 0; i < n; ++i) {
    const auto& r = samples[static_cast<size_t>(i)];
    const auto& ml = r.batch->multilabels;
    s.set_tensor_shape(i, TensorShape<>{static_cast<int64_t>(r.index < ml.size() ? ml[r.index].size() : 0)});
  }
  return s;
}

// Points sample i of `out` at the bytes of samples[i] (no copy); the
// shared_ptr aliases the cqlstream batch, so the bytes stay valid for as
// long as DALI holds the output.
template <typename Bytes>
void ShareBytes(TensorList<CPUBackend>& out, const std::vector<SampleRef>& samples, Bytes bytes) {
  const int n = static_cast<int>(samples.size());
  out.Reset();
  out.set_pinned(false);
  out.set_type(DALI_UINT8);
  out.set_sample_dim(1);
  out.SetSize(n);
  for (int i = 0; i < n; ++i) {
    const SampleRef& r = samples[static_cast<size_t>(i)];
    const std::span<const uint8_t> b = bytes(r);
    // DALI never writes into an operator's inputs; const_cast only adapts
    // to SetSample's signature.
    std::shared_ptr<void> owner(r.batch, const_cast<uint8_t*>(b.data()));
    out.SetSample(i, std::move(owner), b.size(), false, TensorShape<>{static_cast<int64_t>(b.size())},
                  DALI_UINT8, out.device_id(), ::dali::AccessOrder::host());
  }
}

template <typename Bytes>
void CopyBytes(TensorList<CPUBackend>& out, const std::vector<SampleRef>& samples, Bytes bytes,
               ::dali::ThreadPool& pool) {
  for (int i = 0; i < static_cast<int>(samples.size()); ++i) {
    const std::span<const uint8_t> b = bytes(samples[static_cast<size_t>(i)]);
    if (b.empty()) continue;
    pool.AddWork([&out, i, b](int) { std::memcpy(out.raw_mutable_tensor(i), b.data(), b.size()); },
                 static_cast<int64_t>(b.size()));
  }
}

// DALI's type for a .npy dtype (ParseNpySamples refused the complex ones).
::dali::DALIDataType DaliType(loader::NpyDtype d) {
  using loader::NpyDtype;
  switch (d) {
    case NpyDtype::kBool: return DALI_BOOL;
    case NpyDtype::kInt8: return DALI_INT8;
    case NpyDtype::kInt16: return DALI_INT16;
    case NpyDtype::kInt32: return DALI_INT32;
    case NpyDtype::kInt64: return DALI_INT64;
    case NpyDtype::kUInt8: return DALI_UINT8;
    case NpyDtype::kUInt16: return DALI_UINT16;
    case NpyDtype::kUInt32: return DALI_UINT32;
    case NpyDtype::kUInt64: return DALI_UINT64;
    case NpyDtype::kFloat16: return DALI_FLOAT16;
    case NpyDtype::kFloat32: return DALI_FLOAT;
    case NpyDtype::kFloat64: return DALI_FLOAT64;
    case NpyDtype::kComplex64: case NpyDtype::kComplex128: break;
  }
  return DALI_NO_TYPE;
}

// Shapes and type of a decoded .npy output. REQUIRES: !arrays.empty()
OutputDesc NpyDesc(const std::vector<loader::NpyArray>& arrays) {
  const int n = static_cast<int>(arrays.size());
  TensorListShape<> s(n, static_cast<int>(arrays.front().shape.size()));
  for (int i = 0; i < n; ++i) {
    const auto& shape = arrays[static_cast<size_t>(i)].shape;
    s.set_tensor_shape(i, TensorShape<>(std::vector<int64_t>(shape.begin(), shape.end())));
  }
  return {s, DaliType(arrays.front().dtype)};
}

void CopyNpy(TensorList<CPUBackend>& out, const std::vector<loader::NpyArray>& arrays, ::dali::ThreadPool& pool) {
  for (int i = 0; i < static_cast<int>(arrays.size()); ++i) {
    const std::span<const uint8_t> b = arrays[static_cast<size_t>(i)].data();
    if (b.empty()) continue;
    pool.AddWork([&out, i, b](int) { std::memcpy(out.raw_mutable_tensor(i), b.data(), b.size()); },
                 static_cast<int64_t>(b.size()));
  }
}

}  // namespace

std::vector<OutputDesc> DescribeOutputs(const OutputLayout& l, const std::vector<SampleRef>& samples,
                                        const NpySamples& npy) {
  const int n = static_cast<int>(samples.size());
  std::vector<OutputDesc> d;
  d.push_back(l.npy && n > 0 ? NpyDesc(npy.data) : OutputDesc{BytesShape(samples, ImageBytes), DALI_UINT8});
  d.push_back({LabelShape(l, samples), DALI_INT32});
  if (l.target) {
    d.push_back(l.npy_target && n > 0 ? NpyDesc(npy.target) : OutputDesc{BytesShape(samples, TargetBytes), DALI_UINT8});
  }
  if (l.keys) d.push_back({TensorListShape<>(n, 0), DALI_INT64});
  return d;
}

void FillOutputs(const OutputLayout& l, const std::vector<SampleRef>& samples, const NpySamples& npy,
                 ::dali::Workspace& ws) {
  const int n = static_cast<int>(samples.size());
  int o = 0;
  auto& data = ws.Output<CPUBackend>(o++);
  auto& labels = ws.Output<CPUBackend>(o++);
  TensorList<CPUBackend>* target = l.target ? &ws.Output<CPUBackend>(o++) : nullptr;
  TensorList<CPUBackend>* keys = l.keys ? &ws.Output<CPUBackend>(o++) : nullptr;

  auto& pool = ws.GetThreadPool();
  const bool npy_data = l.npy && n > 0, npy_target = target && l.npy_target && n > 0;
  if (l.zero_copy) {
    // Decoded .npy outputs and the small ones are allocated here (the
    // executor allocated nothing); the bytes outputs are shared.
    if (npy_data) {
      const OutputDesc d = NpyDesc(npy.data);
      data.Resize(d.shape, d.type);
    } else {
      ShareBytes(data, samples, ImageBytes);
    }
    if (npy_target) {
      const OutputDesc d = NpyDesc(npy.target);
      target->Resize(d.shape, d.type);
    } else if (target) {
      ShareBytes(*target, samples, TargetBytes);
    }
    labels.Resize(LabelShape(l, samples), DALI_INT32);
    if (keys) keys->Resize(TensorListShape<>(n, 0), DALI_INT64);
  } else {
    if (!npy_data) CopyBytes(data, samples, ImageBytes, pool);
    if (target && !npy_target) CopyBytes(*target, samples, TargetBytes, pool);
  }
  if (npy_data) CopyNpy(data, npy.data, pool);
  if (npy_target) CopyNpy(*target, npy.target, pool);
  pool.RunAll();
  for (int i = 0; i < n; ++i) {
    const SampleRef& r = samples[static_cast<size_t>(i)];
    const Batch& b = *r.batch;
    if (l.label_kind == LabelKind::kMultiLabel) {
      if (r.index < b.multilabels.size()) {
        const auto& ml = b.multilabels[r.index];
        if (!ml.empty()) std::memcpy(labels.mutable_tensor<int32_t>(i), ml.data(), ml.size() * sizeof(int32_t));
      }
    } else {
      *labels.mutable_tensor<int32_t>(i) = b.labels[r.index];
    }
    if (keys) *keys->mutable_tensor<int64_t>(i) = static_cast<int64_t>(b.keys[r.index]);
  }
}

}  // namespace cqlstream::dali_plugin
