// Copyright (c) cqlstream authors.
//
// The DALI reader's checkpoint (what DALI's Pipeline.checkpoint() stores for
// fn.cqlstream.reader): the loader's own State() bytes plus the reader's
// position within the DALI epoch. Grammar in docs/dali.md ("Checkpoints").
// The text form is base64, so the checkpoint survives any string handling
// of DALI's Python API.
//
// Thread-safety: a value type.
#ifndef CQLSTREAM_PLUGINS_DALI_READER_CHECKPOINT_H_
#define CQLSTREAM_PLUGINS_DALI_READER_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cqlstream/dataset.h"
#include "cqlstream/status.h"

namespace cqlstream::dali_plugin {

struct ReaderCheckpoint {
  // Identity: a checkpoint restores only into the same sharding and batching.
  int32_t shard_id = 0;
  int32_t num_shards = 1;
  int32_t batch_size = 1;
  uint64_t samples = 0;  // epoch_size of the split or selection
  // Position within the current DALI epoch.
  uint64_t slot = 0;         // samples emitted (real and padding)
  uint64_t real = 0;         // of which real samples
  bool loader_ended = false;  // the loader has ended the epoch these samples belong to
  bool has_last = false;      // last_key is set
  SampleKey last_key = 0;     // the last real sample emitted (what padding repeats)
  // Samples the loader handed out that the reader has not emitted yet
  // (Loader::State() counts them as delivered); re-read with Fetch on restore.
  std::vector<SampleKey> pending;
  std::string loader_state;  // Loader::State()

  std::string Encode() const;  // base64 text
  static StatusOr<ReaderCheckpoint> Decode(std::string_view text);
};

std::string Base64Encode(std::string_view bytes);
StatusOr<std::string> Base64Decode(std::string_view text);

}  // namespace cqlstream::dali_plugin

#endif  // CQLSTREAM_PLUGINS_DALI_READER_CHECKPOINT_H_
