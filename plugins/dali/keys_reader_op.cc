// Copyright (c) cqlstream authors.
#include "keys_reader_op.h"

#include <fmt/format.h>

#include <utility>

namespace cqlstream::dali_plugin {

using ::dali::CPUBackend;

KeysReaderOp::KeysReaderOp(const ::dali::OpSpec& spec) : ::dali::StatelessOperator<CPUBackend>(spec) {
  where_ = fmt::format("fn.cqlstream.keys_reader(dataset='{}')", spec.GetArgument<std::string>("dataset"));
  loader_ = OpenKeysLoader(spec, where_);
  layout_ = OutputLayoutFromSpec(spec, loader_->dataset(), where_);
}

KeysReaderOp::~KeysReaderOp() {
  current_.clear();
  if (loader_) loader_->Close();
}

bool KeysReaderOp::SetupImpl(std::vector<::dali::OutputDesc>& output_desc, const ::dali::Workspace& ws) {
  const auto& in = ws.Input<CPUBackend>(0);
  const int n = in.num_samples();
  const auto type = in.type();
  if (type != DALI_INT64 && type != DALI_UINT64) {
    Throw(where_, Status::InvalidArgument(fmt::format("keys must be int64 or uint64 (seg << 32 | idx), not {}",
                                                      ::dali::TypeTable::GetTypeInfo(type).name())));
  }
  std::vector<SampleKey> keys;
  keys.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    if (in.shape().tensor_size(i) != 1) {
      Throw(where_, Status::InvalidArgument(fmt::format(
                        "sample {} of the keys input has {} elements; expected one key per sample", i,
                        in.shape().tensor_size(i))));
    }
    keys.push_back(static_cast<SampleKey>(*static_cast<const uint64_t*>(in.raw_tensor(i))));
  }
  current_.clear();
  if (n > 0) {
    auto b = loader_->Fetch(keys);
    if (!b.ok()) Throw(where_, b.status());
    const BatchPtr& batch = *b;
    if (!batch || batch->size() != keys.size()) {
      Throw(where_, Status::Internal(fmt::format("Fetch returned {} of {} samples", batch ? batch->size() : 0,
                                                 keys.size())));
    }
    for (size_t i = 0; i < batch->size(); ++i) current_.push_back(SampleRef{batch, i, false});
  }
  npy_ = ParseNpyOutputs(layout_, current_, where_);
  if (layout_.zero_copy) return false;
  output_desc = DescribeOutputs(layout_, current_, npy_);
  return true;
}

void KeysReaderOp::RunImpl(::dali::Workspace& ws) {
  FillOutputs(layout_, current_, npy_, ws);
  current_.clear();
  npy_ = {};
}

}  // namespace cqlstream::dali_plugin

DALI_REGISTER_OPERATOR(cqlstream__KeysReader, ::cqlstream::dali_plugin::KeysReaderOp, ::dali::CPU);

DALI_SCHEMA(cqlstream__KeysReader)
    .DocStr(R"(Fetches the samples whose keys it is given, on demand (interactive mode, e.g. an
inference server or a Triton DALI backend model fed by an external source of keys).

Input: one key per sample, int64 or uint64 (seg << 32 | idx, as in `cqlstream select` files and
the readers' ``keys`` output). The samples are read now, in the input's order, with the loader's
retries and hedged reads, from any split of the dataset. Outputs as fn.cqlstream.reader:
``data``, ``labels``, then ``target`` / ``keys`` when asked for. A key that cannot be read fails
the iteration with an error naming it. Stateless: it may be used in checkpointing pipelines.)")
    .NumInput(1)
    .InputDox(0, "keys", "TensorList of int64 or uint64 scalars", "One sample key per sample.")
    .OutputFn([](const ::dali::OpSpec& spec) { return ::cqlstream::dali_plugin::NumOutputsFromSpec(spec); })
    .AddParent(::cqlstream::dali_plugin::kBaseSchema);
