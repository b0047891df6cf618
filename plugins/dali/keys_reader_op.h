// Copyright (c) cqlstream authors.
//
// fn.cqlstream.keys_reader: interactive mode (e.g. an inference server or a
// Triton DALI backend model). Its input is a batch of sample keys (int64 or
// uint64, one per sample: seg << 32 | idx); it fetches exactly those samples
// now, in that order, through Loader::Fetch (the loader's retries, hedging
// and zero-copy placement) and outputs them like fn.cqlstream.reader. No
// epochs, no shuffling, no state: checkpointing saves nothing.
//
// Thread-safety: DALI calls an operator from one thread at a time;
// Loader::Fetch is itself thread-safe. Ownership: the operator owns its
// Loader (opened on `split`, which never starts an epoch stream); output
// samples keep their fetched batches alive.
#ifndef CQLSTREAM_PLUGINS_DALI_KEYS_READER_OP_H_
#define CQLSTREAM_PLUGINS_DALI_KEYS_READER_OP_H_

#include <memory>
#include <string>
#include <vector>

#include "cqlstream/loader.h"
#include "dali/pipeline/operator/checkpointing/stateless_operator.h"
#include "dali/pipeline/operator/operator.h"
#include "epoch_assembler.h"
#include "op_common.h"

namespace cqlstream::dali_plugin {

class KeysReaderOp : public ::dali::StatelessOperator<::dali::CPUBackend> {
 public:
  explicit KeysReaderOp(const ::dali::OpSpec& spec);
  ~KeysReaderOp() override;

  bool HasContiguousOutputs() const override { return !layout_.zero_copy; }

 protected:
  using ::dali::Operator<::dali::CPUBackend>::RunImpl;
  bool SetupImpl(std::vector<::dali::OutputDesc>& output_desc, const ::dali::Workspace& ws) override;
  void RunImpl(::dali::Workspace& ws) override;

 private:
  std::string where_;
  std::unique_ptr<Loader> loader_;
  OutputLayout layout_;
  std::vector<SampleRef> current_;
  NpySamples npy_;  // output='npy': current_'s arrays (they view its batches)
};

}  // namespace cqlstream::dali_plugin

#endif  // CQLSTREAM_PLUGINS_DALI_KEYS_READER_OP_H_
