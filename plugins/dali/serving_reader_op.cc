// Copyright (c) cqlstream authors.
#include "serving_reader_op.h"

#include <fmt/format.h>

#include <exception>
#include <utility>

#include "dali_compat.h"  // DaliThreadPool: DALI 1.x and 2.x
#include "serving_stats.h"

namespace cqlstream::dali_plugin {

using ::dali::CPUBackend;

namespace {

int IntArg(const ::dali::OpSpec& spec, const char* name) { return spec.GetArgument<int>(name); }

}  // namespace

ServingReaderOp::ServingReaderOp(const ::dali::OpSpec& spec, bool decoupled)
    : ::dali::InputOperator<CPUBackend>(spec), decoupled_(decoupled) {
  const char* op = decoupled ? "decoupled_reader" : "interactive_reader";
  where_ = fmt::format("fn.cqlstream.{}(dataset='{}')", op, spec.GetArgument<std::string>("dataset"));
  PrefetcherOptions po;
  po.max_chunk_keys = spec.GetArgument<int>("max_batch_size");
  po.max_outstanding = IntArg(spec, "prefetch_requests");
  if (po.max_outstanding < 1 || po.max_outstanding > 1024) {
    Throw(where_, Status::InvalidArgument(
                      fmt::format("prefetch_requests must be in [1, 1024], not {}", po.max_outstanding)));
  }
  if (decoupled) {
    po.mini_batch_size = IntArg(spec, "mini_batch_size");
    if (po.mini_batch_size <= 0) po.mini_batch_size = po.max_chunk_keys;
    if (po.mini_batch_size > po.max_chunk_keys) {
      Throw(where_, Status::InvalidArgument(fmt::format("mini_batch_size ({}) must be at most the pipeline's "
                                                        "batch_size ({})",
                                                        po.mini_batch_size, po.max_chunk_keys)));
    }
  }
  loader_ = OpenKeysLoader(spec, where_);
  layout_ = OutputLayoutFromSpec(spec, loader_->dataset(), where_);
  Loader* loader = loader_.get();
  prefetcher_ = std::make_unique<RequestPrefetcher>(
      po, [loader](const std::vector<SampleKey>& keys) { return loader->Fetch(keys); });
  pop_pool_ = std::make_unique<DaliThreadPool>(1, kCpuOnlyDeviceId, false, "cqlstream serving");
  max_outstanding_ = po.max_outstanding;
}

ServingReaderOp::~ServingReaderOp() {
  if (!name_.empty()) UnregisterServingStats(name_, prefetcher_.get());
  current_.clear();
  if (loader_) loader_->Close();  // in-flight fetches return (cancelled)
  prefetcher_.reset();            // joins the workers
}

StatusOr<std::vector<SampleKey>> ServingReaderOp::KeysOf(const ::dali::TensorList<CPUBackend>& tl) const {
  const auto type = tl.type();
  if (type != DALI_INT64 && type != DALI_UINT64) {
    return Status::InvalidArgument(fmt::format("keys must be int64 or uint64 (seg << 32 | idx), not {}",
                                               ::dali::TypeTable::GetTypeInfo(type).name()));
  }
  std::vector<SampleKey> keys;
  keys.reserve(static_cast<size_t>(tl.num_samples()));
  for (int i = 0; i < tl.num_samples(); ++i) {
    const int64_t n = tl.shape().tensor_size(i);
    // Decoupled: a request may also arrive as samples holding several keys
    // each (e.g. one [N] tensor); they are read in order.
    if (n != 1 && !decoupled_) {
      return Status::InvalidArgument(fmt::format(
          "sample {} of the request has {} elements; expected one key per sample (shape [N] or [N, 1])", i, n));
    }
    const auto* p = static_cast<const uint64_t*>(tl.raw_tensor(i));
    for (int64_t j = 0; j < n; ++j) keys.push_back(static_cast<SampleKey>(p[j]));
  }
  return keys;
}

bool ServingReaderOp::PopRequestLocked() {
  if (!HasDataInQueue()) return false;
  std::optional<std::string> data_id;
  popped_.Reset();
  popped_.set_pinned(false);
  ForwardCurrentData(popped_, data_id, *pop_pool_);
  auto keys = KeysOf(popped_);
  if (keys.ok()) {
    prefetcher_->Add(std::move(*keys));
  } else {
    // Never thrown from here: the request is out of DALI's queue, and the
    // iterations scheduled for it must fail in its place, not take the
    // samples of the requests behind it. Planned as a request of as many
    // keys: one iteration (interactive), or one per mini-batch of its
    // elements (decoupled), as the client counts them.
    const int64_t n = decoupled_ ? popped_.shape().num_elements() : popped_.num_samples();
    prefetcher_->AddInvalid(keys.status(), n);
  }
  return true;
}

void ServingReaderOp::TopUp() {
  MutexLock l(&pop_mu_);
  while (prefetcher_->WantsRequest() && PopRequestLocked()) {
  }
}

int ServingReaderOp::NextBatchSize() {
  for (;;) {
    {
      MutexLock l(&pop_mu_);
      if (auto n = prefetcher_->NextIterationSize()) return *n;
      if (PopRequestLocked()) continue;
      if (!blocking_) {
        Throw(where_, Status::InvalidArgument(
                          "no request was fed: feed the keys with Pipeline.feed_input(name, keys) (or set "
                          "blocking=True) before running an iteration"));
      }
    }
    // Blocks until DALI's queue has data (or the pipeline shuts down, when
    // DALI's own look-ahead throws).
    (void)::dali::InputOperator<CPUBackend>::NextBatchSize();
  }
}

void ServingReaderOp::Advance() {
  // Not DALI's look-ahead: this operator takes requests out of the queue itself.
  prefetcher_->AssignIteration();
}

bool ServingReaderOp::SetupImpl(std::vector<::dali::OutputDesc>& output_desc, const ::dali::Workspace& ws) {
  if (!registered_) {
    // The instance name (the one requests are fed to) is known to the
    // workspace, not to the OpSpec.
    registered_ = true;
    name_ = ws.GetOperatorInstanceName();
    if (!name_.empty()) RegisterServingStats(name_, prefetcher_.get(), max_outstanding_);
  }
  // The assigned iteration is taken whatever happens around it: an error
  // while taking more requests (from DALI's queue itself) must not leave it
  // behind for the next iteration, which would then get this one's samples.
  std::exception_ptr topup_error;
  auto top_up = [&] {
    try {
      TopUp();
    } catch (...) {
      if (!topup_error) topup_error = std::current_exception();
    }
  };
  top_up();  // requests queued behind are fetched while this one is awaited
  current_.clear();
  auto it = prefetcher_->TakeIteration();
  top_up();  // a slot may have freed
  if (topup_error) std::rethrow_exception(topup_error);
  if (!it.ok()) Throw(where_, it.status());
  current_ = std::move(it->samples);
  last_of_request_ = it->last_of_request;
  const int want = ws.GetRequestedBatchSize(0);
  if (static_cast<int>(current_.size()) != want) {
    Throw(where_, Status::Internal(fmt::format("iteration of {} samples where DALI planned {}", current_.size(), want)));
  }
  npy_ = ParseNpyOutputs(layout_, current_, where_);
  if (layout_.zero_copy) return false;
  output_desc = DescribeOutputs(layout_, current_, npy_);
  return true;
}

void ServingReaderOp::RunImpl(::dali::Workspace& ws) {
  FillOutputs(layout_, current_, npy_, ws);
  current_.clear();
  npy_ = {};
  SetDepletedOperatorTrace(ws, prefetcher_->PendingIterations() == 0 && !HasDataInQueue());
}

// The two operators differ only in how a request is cut into iterations.
class InteractiveReaderOp : public ServingReaderOp {
 public:
  explicit InteractiveReaderOp(const ::dali::OpSpec& spec) : ServingReaderOp(spec, false) {}
};
class DecoupledReaderOp : public ServingReaderOp {
 public:
  explicit DecoupledReaderOp(const ::dali::OpSpec& spec) : ServingReaderOp(spec, true) {}
};

}  // namespace cqlstream::dali_plugin

DALI_REGISTER_OPERATOR(cqlstream__InteractiveReader, ::cqlstream::dali_plugin::InteractiveReaderOp, ::dali::CPU);
DALI_REGISTER_OPERATOR(cqlstream__DecoupledReader, ::cqlstream::dali_plugin::DecoupledReaderOp, ::dali::CPU);

DALI_SCHEMA(cqlstream__InteractiveReader)
    .DocStr(R"(Serving, interactive mode (e.g. a Triton DALI backend model): fetches the samples
of exactly the keys of each request, in request order, one output iteration per request.

An input operator: feed each request's keys to it by name (``Pipeline.feed_input(name, keys)``,
or the Triton model input of that name), one key per sample (int64 or uint64, seg << 32 | idx,
shape [N] or [N, 1]); each request may have a different number of keys, up to the pipeline's
batch_size. Requests fed ahead queue inside the operator, which fetches up to
``prefetch_requests`` of them concurrently (the request being served included), so back-to-back
requests overlap their network round trips. A request whose keys cannot be read fails its own
iteration with an error naming the key; the following requests are served normally.
Outputs as fn.cqlstream.reader: ``data``, ``labels``, then ``target`` / ``keys`` when asked for.
docs/triton.md describes both serving modes.)")
    .NumInput(0)
    .OutputFn([](const ::dali::OpSpec& spec) { return ::cqlstream::dali_plugin::NumOutputsFromSpec(spec); })
    .AddOptionalArg("prefetch_requests", R"(Requests fetched at once, the one being served included
(the bound: at most this many Fetch calls in flight and this many fetched requests waiting). 1
serves one request at a time.)",
                    8)
    .AddParent(::cqlstream::dali_plugin::kBaseSchema)
    .AddParent("InputOperatorBase");

DALI_SCHEMA(cqlstream__DecoupledReader)
    .DocStr(R"(Serving, decoupled / streaming mode (Triton's decoupled transaction policy): one
request carries a long key list; the operator streams it back as successive iterations of
``mini_batch_size`` samples (the last one shorter), until the request is drained.

Feed the keys like fn.cqlstream.interactive_reader (a request may be longer than the pipeline's
batch_size). The request is cut into mini-batches that are fetched concurrently, at most
``prefetch_requests`` at once; an iteration takes samples of the mini-batches that have arrived, so the order
within a request is not kept, and each key is delivered exactly once (use ``output_keys=True`` to
know which). The "depleted" operator trace is "false" while the request has iterations left,
which is how Triton's DALI backend knows when to stop running the pipeline for it.)")
    .NumInput(0)
    .OutputFn([](const ::dali::OpSpec& spec) { return ::cqlstream::dali_plugin::NumOutputsFromSpec(spec); })
    .AddOptionalArg("mini_batch_size", "Samples per streamed iteration (<= 0: the pipeline's batch_size).", -1)
    .AddOptionalArg("prefetch_requests", R"(Mini-batches fetched at once (the bound: at most this
many Fetch calls in flight and this many fetched mini-batches waiting).)",
                    4)
    .AddParent(::cqlstream::dali_plugin::kBaseSchema)
    .AddParent("InputOperatorBase");
