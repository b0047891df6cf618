// Copyright (c) cqlstream authors.
//
// The serving operators (Triton-style; docs/triton.md):
//
//  fn.cqlstream.interactive_reader  one output iteration per request: the
//    samples of exactly the keys requested, in request order.
//  fn.cqlstream.decoupled_reader    one request (a long key list) streams back
//    as iterations of `mini_batch_size` samples, out of order within the
//    request, each key exactly once; Triton's decoupled mode.
//
// Both are DALI input operators (parent schema InputOperatorBase): the keys
// of a request are fed to the operator itself, by name, with
// Pipeline.feed_input (Python), daliSetExternalInput (C API) or Triton's DALI
// backend (the model input named like the operator). Because the requests
// queue inside the operator, it sees the ones fed ahead and fetches them
// while earlier ones are served (RequestPrefetcher, bounded by
// `prefetch_requests`).
//
// How the operator keeps DALI's per-iteration batch sizes right: DALI's
// executor asks a batch size provider for each iteration's size before it
// runs the iteration (NextBatchSize, then Advance), on its own thread. This
// operator answers from the RequestPrefetcher's plan and takes requests out
// of DALI's input queue itself (in order, under one mutex), never through
// DALI's look-ahead pointer; so a request taken early for prefetching still
// gets exactly its iterations.
//
// "depleted" operator trace (what Triton's DALI backend reads in decoupled
// mode): "false" while iterations of the requests taken remain or more
// requests are queued, "true" when the operator needs more input.
//
// Thread-safety: DALI calls Setup/Run from one thread at a time, and
// NextBatchSize/Advance from its scheduling thread, possibly concurrently;
// pop_mu_ orders everything that takes requests out of DALI's queue; the
// prefetcher is thread-safe. Ownership: the operator owns its Loader and
// prefetcher; the destructor closes the loader (ends in-flight fetches)
// before the prefetcher joins its threads.
#ifndef CQLSTREAM_PLUGINS_DALI_SERVING_READER_OP_H_
#define CQLSTREAM_PLUGINS_DALI_SERVING_READER_OP_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cqlstream/loader.h"
#include "dali/pipeline/operator/builtin/input_operator.h"
#include "dali/pipeline/util/thread_pool.h"
#include "epoch_assembler.h"
#include "op_common.h"
#include "request_prefetcher.h"
#include "util/mutex.h"

namespace cqlstream::dali_plugin {

class ServingReaderOp : public ::dali::InputOperator<::dali::CPUBackend> {
 public:
  // decoupled: read mini_batch_size (> 0) and stream; else one iteration per request.
  ServingReaderOp(const ::dali::OpSpec& spec, bool decoupled);
  ~ServingReaderOp() override;

  bool HasContiguousOutputs() const override { return !layout_.zero_copy; }
  int NextBatchSize() override;
  void Advance() override;
  const ::dali::TensorLayout& in_layout() const override { return in_layout_; }
  int in_ndim() const override { return 0; }
  ::dali::DALIDataType in_dtype() const override { return DALI_INT64; }

 protected:
  using ::dali::Operator<::dali::CPUBackend>::RunImpl;
  bool SetupImpl(std::vector<::dali::OutputDesc>& output_desc, const ::dali::Workspace& ws) override;
  void RunImpl(::dali::Workspace& ws) override;

 private:
  // Takes the request at the front of DALI's queue into the prefetcher.
  // Returns false when the queue is empty.
  bool PopRequestLocked() REQUIRES(pop_mu_);
  // Takes queued requests while the prefetcher has room for them.
  void TopUp() EXCLUDES(pop_mu_);
  // The keys of a request, or InvalidArgument (wrong type, or a sample of
  // several keys in interactive mode); such a request fails its own
  // iterations (RequestPrefetcher::AddInvalid).
  StatusOr<std::vector<SampleKey>> KeysOf(const ::dali::TensorList<::dali::CPUBackend>& tl) const;

  const bool decoupled_;
  std::string where_;
  std::string name_;
  std::unique_ptr<Loader> loader_;
  OutputLayout layout_;
  std::unique_ptr<RequestPrefetcher> prefetcher_;
  Mutex pop_mu_;
  ::dali::TensorList<::dali::CPUBackend> popped_ GUARDED_BY(pop_mu_);
  std::unique_ptr<::dali::ThreadPool> pop_pool_;  // for ForwardCurrentData outside an iteration
  std::vector<SampleRef> current_;
  NpySamples npy_;  // output='npy': current_'s arrays (they view its batches)
  bool last_of_request_ = false;
  bool registered_ = false;  // in the serving stats registry (serving_stats.h), under name_
  int max_outstanding_ = 0;
  ::dali::TensorLayout in_layout_;
};

}  // namespace cqlstream::dali_plugin

#endif  // CQLSTREAM_PLUGINS_DALI_SERVING_READER_OP_H_
