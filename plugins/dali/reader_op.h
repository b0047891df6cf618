// Copyright (c) cqlstream authors.
//
// fn.cqlstream.reader: a DALI CPU reader over a cqlstream dataset split (or
// selection), with DALI reader semantics: shard_id / num_shards, reader
// metadata for the framework iterators (reader_name=...), pad_last_batch
// padding at the end of each epoch, and checkpointing (enable_checkpointing)
// that resumes mid-epoch with each sample delivered exactly once.
// Full description: the schema in reader_op.cc and docs/dali.md.
//
// Thread-safety: DALI calls an operator from one thread at a time
// (construction, SetupImpl/RunImpl per iteration in order, Save/RestoreState);
// GetReaderMeta() may be called from any thread and reads constants only.
// Ownership: the operator owns its Loader; output samples keep their loader
// batches alive (see op_common.h), so batches may outlive the operator.
#ifndef CQLSTREAM_PLUGINS_DALI_READER_OP_H_
#define CQLSTREAM_PLUGINS_DALI_READER_OP_H_

#include <memory>
#include <string>
#include <vector>

#include "cqlstream/loader.h"
#include "dali/pipeline/operator/checkpointing/op_checkpoint.h"
#include "dali/pipeline/operator/operator.h"
#include "epoch_assembler.h"
#include "op_common.h"

namespace cqlstream::dali_plugin {

class ReaderOp : public ::dali::Operator<::dali::CPUBackend> {
 public:
  explicit ReaderOp(const ::dali::OpSpec& spec);
  ~ReaderOp() override;

  ::dali::ReaderMeta GetReaderMeta() const override { return meta_; }
  bool HasContiguousOutputs() const override { return !layout_.zero_copy; }

  void SaveState(::dali::OpCheckpoint& cpt, ::dali::AccessOrder order) override;
  void RestoreState(const ::dali::OpCheckpoint& cpt) override;
  std::string SerializeCheckpoint(const ::dali::OpCheckpoint& cpt) const override;
  void DeserializeCheckpoint(::dali::OpCheckpoint& cpt, const std::string& data) const override;

 protected:
  using ::dali::Operator<::dali::CPUBackend>::RunImpl;
  bool SetupImpl(std::vector<::dali::OutputDesc>& output_desc, const ::dali::Workspace& ws) override;
  void RunImpl(::dali::Workspace& ws) override;

 private:
  std::string where_;  // "fn.cqlstream.reader(dataset='...')" for messages
  int shard_id_ = 0, num_shards_ = 1, batch_size_ = 1;
  uint64_t samples_ = 0;  // epoch_size: samples of the split or selection
  std::unique_ptr<Loader> loader_;
  std::unique_ptr<EpochAssembler> assembler_;
  OutputLayout layout_;
  ::dali::ReaderMeta meta_;
  std::vector<SampleRef> current_;  // the batch between SetupImpl and RunImpl
  NpySamples npy_;  // output='npy': current_'s arrays (they view its batches)
};

}  // namespace cqlstream::dali_plugin

#endif  // CQLSTREAM_PLUGINS_DALI_READER_OP_H_
