// Copyright (c) cqlstream authors.
//
// fn.cqlstream.reader: the DALI reader operator (see reader_op.h) and its
// schema (the shared connection arguments are in connection_schema.cc).
#include "reader_op.h"

#include <fmt/format.h>

#include <utility>

#include "cqlstream/dataset.h"
#include "loader/plan.h"
#include "reader_checkpoint.h"
#include "shard_plan.h"

namespace cqlstream::dali_plugin {

using ::dali::OpSpec;

namespace {

// Samples of the split (or selection) the loader reads, as of its Open.
uint64_t EpochSize(const Loader& loader, const LoaderOptions& o, std::string_view where) {
  if (o.selection_path.empty()) return static_cast<uint64_t>(loader.dataset().Count(o.split));
  auto sel = Selection::Load(o.selection_path);
  if (!sel.ok()) Throw(where, sel.status());
  return sel->keys.size();
}

}  // namespace

ReaderOp::ReaderOp(const OpSpec& spec) : ::dali::Operator<::dali::CPUBackend>(spec) {
  where_ = fmt::format("fn.cqlstream.reader(dataset='{}')", spec.GetArgument<std::string>("dataset"));
  LoaderOptions o = LoaderOptionsFromSpec(spec, where_);
  o.selection_path = spec.GetArgument<std::string>("selection");
  o.shuffle = spec.GetArgument<bool>("shuffle");
  o.seed = static_cast<uint64_t>(spec.GetArgument<int64_t>("shuffle_seed"));
  o.ordered = spec.GetArgument<bool>("ordered");
  o.packed = spec.GetArgument<bool>("packed");
  const std::string on_missing = spec.GetArgument<std::string>("on_missing");
  if (on_missing == "raise") {
    o.on_missing = OnMissing::kRaise;
  } else if (on_missing == "skip") {
    o.on_missing = OnMissing::kSkip;
  } else {
    Throw(where_, Status::InvalidArgument(fmt::format("on_missing must be 'raise' or 'skip', not '{}'", on_missing)));
  }
  if (!spec.GetArgument<bool>("pad_last_batch")) {
    Throw(where_, Status::InvalidArgument(
                      "pad_last_batch=False is not supported: it would wrap the last batch of an epoch into the "
                      "next epoch's samples and break exactly-once delivery; the reader always pads (see "
                      "docs/dali.md)"));
  }
  shard_id_ = spec.GetArgument<int>("shard_id");
  num_shards_ = spec.GetArgument<int>("num_shards");
  if (num_shards_ < 1 || shard_id_ < 0 || shard_id_ >= num_shards_) {
    Throw(where_, Status::InvalidArgument(
                      fmt::format("shard_id {} is not in [0, num_shards {})", shard_id_, num_shards_)));
  }
  batch_size_ = max_batch_size_;
  o.world_size = num_shards_;
  o.rank = shard_id_;

  // DALI shard i is loader rank i: both cut at floor(i * n / num_shards)
  // (loader::RankSlice, shard_plan.h).
  auto opened = Loader::Open(o);
  if (!opened.ok()) Throw(where_, opened.status());
  loader_ = std::move(*opened);
  samples_ = EpochSize(*loader_, o, where_);
  if (samples_ < static_cast<uint64_t>(num_shards_)) {
    Throw(where_, Status::InvalidArgument(
                      fmt::format("{} samples cannot be cut into num_shards={} shards", samples_, num_shards_)));
  }
  const uint64_t shard_samples = loader::RankSlice(samples_, shard_id_, num_shards_).size();
  if (static_cast<uint64_t>(loader_->SamplesPerEpoch()) != shard_samples) {
    // The selection file changed between the loader's read and ours.
    Throw(where_, Status::Internal(fmt::format("loader rank {} reads {} samples per epoch, DALI shard {} expects {}",
                                               o.rank, loader_->SamplesPerEpoch(), shard_id_, shard_samples)));
  }
  layout_ = OutputLayoutFromSpec(spec, loader_->dataset(), where_);
  Loader* loader = loader_.get();
  assembler_ = std::make_unique<EpochAssembler>(
      batch_size_, BatchesPerEpoch(samples_, num_shards_, batch_size_), shard_samples,
      [loader] { return loader->Next(); },
      [loader](const std::vector<SampleKey>& keys) { return loader->Fetch(keys); });

  meta_.epoch_size = static_cast<::dali::Index>(samples_);
  meta_.epoch_size_padded = static_cast<::dali::Index>(PaddedShardSize(samples_, num_shards_)) * num_shards_;
  meta_.number_of_shards = num_shards_;
  meta_.shard_id = shard_id_;
  meta_.pad_last_batch = 1;
  meta_.stick_to_shard = 1;
}

ReaderOp::~ReaderOp() {
  current_.clear();
  if (loader_) loader_->Close();
}

bool ReaderOp::SetupImpl(std::vector<::dali::OutputDesc>& output_desc, const ::dali::Workspace& ws) {
  const int requested = ws.GetRequestedBatchSize(0);
  if (requested != batch_size_) {
    Throw(where_, Status::InvalidArgument(fmt::format(
                      "a batch of {} samples was requested; the reader produces batches of the pipeline's "
                      "batch_size ({}) only",
                      requested, batch_size_)));
  }
  if (Status s = assembler_->NextBatch(&current_); !s.ok()) Throw(where_, s);
  npy_ = ParseNpyOutputs(layout_, current_, where_);
  if (layout_.zero_copy) return false;  // RunImpl points the outputs at the loader's memory
  output_desc = DescribeOutputs(layout_, current_, npy_);
  return true;
}

void ReaderOp::RunImpl(::dali::Workspace& ws) {
  FillOutputs(layout_, current_, npy_, ws);
  current_.clear();
  npy_ = {};
}

void ReaderOp::SaveState(::dali::OpCheckpoint& cpt, ::dali::AccessOrder) {
  ReaderCheckpoint c;
  c.shard_id = shard_id_;
  c.num_shards = num_shards_;
  c.batch_size = batch_size_;
  c.samples = samples_;
  assembler_->SaveTo(&c);
  c.loader_state = loader_->State();
  cpt.MutableCheckpointState() = std::move(c);
}

void ReaderOp::RestoreState(const ::dali::OpCheckpoint& cpt) {
  const auto& c = cpt.CheckpointState<ReaderCheckpoint>();
  if (c.shard_id != shard_id_ || c.num_shards != num_shards_ || c.batch_size != batch_size_ ||
      c.samples != samples_) {
    Throw(where_, Status::InvalidArgument(fmt::format(
                      "the checkpoint was taken with shard_id={} num_shards={} batch_size={} over {} samples; this "
                      "reader has shard_id={} num_shards={} batch_size={} over {} samples",
                      c.shard_id, c.num_shards, c.batch_size, c.samples, shard_id_, num_shards_, batch_size_,
                      samples_)));
  }
  if (Status s = loader_->Restore({c.loader_state}); !s.ok()) Throw(where_, s.WithContext("restoring a checkpoint"));
  if (Status s = assembler_->RestoreFrom(c); !s.ok()) Throw(where_, s.WithContext("restoring a checkpoint"));
}

std::string ReaderOp::SerializeCheckpoint(const ::dali::OpCheckpoint& cpt) const {
  return cpt.CheckpointState<ReaderCheckpoint>().Encode();
}

void ReaderOp::DeserializeCheckpoint(::dali::OpCheckpoint& cpt, const std::string& data) const {
  auto c = ReaderCheckpoint::Decode(data);
  if (!c.ok()) Throw(where_, c.status());
  cpt.MutableCheckpointState() = std::move(*c);
}

}  // namespace cqlstream::dali_plugin

// ---------------------------------------------------------------------------
// Schemas. The schema is the documentation: help(fn.cqlstream.reader) shows it.

DALI_REGISTER_OPERATOR(cqlstream__Reader, ::cqlstream::dali_plugin::ReaderOp, ::dali::CPU);

DALI_SCHEMA(cqlstream__Reader)
    .DocStr(R"(Reads the samples of a cqlstream dataset split (or selection) from Cassandra / ScyllaDB.

Outputs, in order: ``data`` (uint8, 1-D: the encoded image bytes), ``labels`` (int32: the class
index as a scalar, -1 without class labels, or a 1-D list for label kind "multilabel"), then
``target`` (uint8, 1-D) when ``output_target=True`` and ``keys`` (int64 scalar) when
``output_keys=True``.

Every epoch is a fresh shuffle of the whole split (keyed by ``shuffle_seed`` and the epoch), cut into
``num_shards`` disjoint shards: each sample is delivered exactly once per epoch across all shards,
through retries, hedged reads and lost connections. Shard ``i`` holds
floor((i+1)*N/num_shards) - floor(i*N/num_shards) samples, as DALI's iterators expect.

Epoch ends follow DALI's ``pad_last_batch=True``: each shard produces
ceil(ceil(N/num_shards)/batch_size) full batches per epoch; after the shard's last sample the
rest of the last batch repeats that sample. Pass ``reader_name`` to DALI's framework iterators with
``last_batch_policy=PARTIAL`` to drop the padding (FILL keeps it, DROP drops the partial batch).
The reader is endless: the iterators cut the epochs.

Checkpointing (``enable_checkpointing=True``) saves the loader's position at the consumed batch;
a pipeline built with that checkpoint continues the epoch with exactly the samples not yet
delivered, on the same ``shard_id``, ``num_shards`` and batch size.

An unreadable sample (after the loader's retries) fails the iteration with an error naming its
key and path (``on_missing="raise"``), or is left out and counted (``"skip"``; the epoch is then
completed with padding).)")
    .NumInput(0)
    .OutputFn([](const ::dali::OpSpec& spec) { return ::cqlstream::dali_plugin::NumOutputsFromSpec(spec); })
    .AddOptionalArg("selection", R"(Path of a selection file (`cqlstream select`) to read instead of
the split.)",
                    "")
    .AddOptionalArg("shuffle", "Shuffle every epoch (a global permutation keyed by seed and epoch).", true)
    .AddOptionalArg("shuffle_seed", R"(Seed of the shuffle. It must be the same in every shard (the default 0
is): the shards cut one permutation. Deliberately not named ``seed``: DALI fills an operator's
``seed`` from each pipeline's own seed, which differs between shards and would make them overlap.)",
                    int64_t{0})
    .AddOptionalArg("packed", R"(Read the split's packed copy (``cqlstream pack``) one pack of up to 100
small samples per request, in the packed order: each epoch reads the packs, and each pack's
members, in a fresh order, but which samples arrive together is fixed when the dataset is packed
(docs/loader.md, "Packed reads"). False: the per-sample global shuffle.)",
                    false)
    .AddOptionalArg("shard_id", "Index of this shard, in [0, num_shards).", 0)
    .AddOptionalArg("num_shards", "Number of shards (e.g. the data-parallel world size).", 1)
    .AddOptionalArg("ordered", R"(Deliver batches in the exact plan order and composition (bit-for-bit
reproducible) instead of in the order samples arrive.)",
                    false)
    .AddOptionalArg("on_missing", R"(What an unreadable sample does: "raise" (an error naming its key
and path) or "skip" (left out and counted).)",
                    "raise")
    .AddOptionalArg("pad_last_batch", R"(Accepted for compatibility with DALI's readers; must be True
(the reader always pads the last batch of an epoch).)",
                    true)
    .AddParent(::cqlstream::dali_plugin::kBaseSchema);
