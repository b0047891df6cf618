// Copyright (c) cqlstream authors.
//
// What the cqlstream DALI operators share: the connection arguments (one
// parent schema), the translation of an OpSpec into LoaderOptions, the
// description and filling of the outputs from SampleRefs, and the one place
// where a cqlstream Status becomes a C++ exception (DALI's error path).
//
// Outputs, in this order (docs/dali.md):
//   0 data    uint8, 1-D: the encoded image bytes of each sample; with
//             output="npy" (datasets of sample kind "blob") a typed tensor
//             per sample, decoded from its .npy bytes (npy_samples.h)
//   1 labels  int32: a scalar class index per sample (-1 when the dataset has
//             no class labels), or a 1-D list for label kind "multilabel"
//   [target]  uint8, 1-D: the blob target (output_target=True; label kind
//             "target"); a typed tensor with target_output="npy"
//   [keys]    int64 scalar: the sample key (seg << 32 | idx) (output_keys=True)
//
// Zero-copy (zero_copy=True, the default): the data and target outputs are
// views into the loader's batch memory (TensorList::SetSample with a
// shared_ptr that keeps the cqlstream batch alive until DALI releases the
// output); only labels and keys are written into buffers DALI allocates.
// zero_copy=False copies the bytes into DALI-allocated contiguous outputs.
// Decoded .npy outputs are always copied (one memcpy per sample on the
// workspace's thread pool) into buffers DALI allocates: aligned for their
// type and in native byte order.
//
// Thread-safety: free functions; FillOutputs uses the workspace's thread pool.
#ifndef CQLSTREAM_PLUGINS_DALI_OP_COMMON_H_
#define CQLSTREAM_PLUGINS_DALI_OP_COMMON_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cqlstream/loader.h"
#include "dali/pipeline/operator/operator.h"
#include "epoch_assembler.h"
#include "npy_samples.h"

namespace cqlstream::dali_plugin {

// Name of the parent schema that holds the connection and loader arguments.
inline constexpr const char* kBaseSchema = "cqlstreamLoaderBase";

// Raises `s` as a DALI error (std::runtime_error) prefixed with `where`.
// REQUIRES: !s.ok()
[[noreturn]] void Throw(std::string_view where, const Status& s);

// Connection, dataset and loader options from the operator's arguments.
// Defaults, then CQLSTREAM_* environment variables, then the arguments that
// are set explicitly. Throws on invalid values.
LoaderOptions LoaderOptionsFromSpec(const ::dali::OpSpec& spec, std::string_view where);
// The loader of the operators that fetch keys they are given (keys_reader and
// the serving readers): the spec's options on one rank, no shuffling, and a
// missing sample fails its request (on_missing = raise). Throws on errors.
std::unique_ptr<Loader> OpenKeysLoader(const ::dali::OpSpec& spec, std::string_view where);

struct OutputLayout {
  LabelKind label_kind = LabelKind::kNone;
  bool target = false;
  bool keys = false;
  bool zero_copy = true;
  bool npy = false;         // output="npy": data decoded from .npy
  bool npy_target = false;  // target_output="npy": target decoded from .npy
  int count() const { return 2 + (target ? 1 : 0) + (keys ? 1 : 0); }
};

// Number of outputs for the schema's OutputFn.
int NumOutputsFromSpec(const ::dali::OpSpec& spec);
// The outputs the spec asks for, checked against the dataset (its label kind
// for output_target, its sample kind for output="npy"). Throws.
OutputLayout OutputLayoutFromSpec(const ::dali::OpSpec& spec, const DatasetInfo& dataset, std::string_view where);

// The .npy arrays of a batch when the layout decodes any (else empty).
// Throws naming the first sample that is not valid or does not fit (see
// npy_samples.h).
NpySamples ParseNpyOutputs(const OutputLayout& layout, const std::vector<SampleRef>& samples, std::string_view where);

// Shapes and types of the outputs (used when the executor allocates them:
// zero_copy=False, and always for labels and keys). `npy`: ParseNpyOutputs
// of the same samples.
std::vector<::dali::OutputDesc> DescribeOutputs(const OutputLayout& layout, const std::vector<SampleRef>& samples,
                                                const NpySamples& npy);
// Fills the outputs of `ws` with `samples`. With layout.zero_copy the
// operator's SetupImpl returned false and nothing is allocated yet.
void FillOutputs(const OutputLayout& layout, const std::vector<SampleRef>& samples, const NpySamples& npy,
                 ::dali::Workspace& ws);

}  // namespace cqlstream::dali_plugin

#endif  // CQLSTREAM_PLUGINS_DALI_OP_COMMON_H_
