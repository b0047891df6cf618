// Copyright (c) cqlstream authors.
//
// Datasets as stored by cqlstream (layout version 1, see docs/schema.md):
// the catalog entry, its segments, sample keys, and selection files.
//
// Thread-safety: value types. Ownership: plain values.
#ifndef CQLSTREAM_DATASET_H_
#define CQLSTREAM_DATASET_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cqlstream/status.h"

namespace cqlstream {

inline constexpr int kLayoutVersion = 1;
inline constexpr int32_t kDefaultChunkSize = 1 << 20;

enum class LabelKind { kNone, kClass, kMultiLabel, kTarget };
std::string_view LabelKindName(LabelKind k);  // "none", "class", "multilabel", "target"
StatusOr<LabelKind> ParseLabelKind(std::string_view s);

// What a sample's bytes are: an image (validated at ingest, decodable by the
// loader's image decoders) or any bytes (`--kind blob`: .npy arrays, TIFF,
// audio, token shards; stored without image validation).
enum class SampleKind { kImage, kBlob };
std::string_view SampleKindName(SampleKind k);  // "image", "blob"
StatusOr<SampleKind> ParseSampleKind(std::string_view s);

// A sample key: (segment, index) packed as (seg << 32) | idx.
using SampleKey = uint64_t;
constexpr SampleKey MakeKey(int32_t seg, int32_t idx) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(seg)) << 32) | static_cast<uint32_t>(idx);
}
constexpr int32_t KeySegment(SampleKey k) { return static_cast<int32_t>(k >> 32); }
constexpr int32_t KeyIndex(SampleKey k) { return static_cast<int32_t>(k & 0xffffffffu); }
std::string FormatKey(SampleKey k);  // "seg:idx"

struct SegmentInfo {
  int32_t seg = 0;
  std::string split;
  std::string source_id, source, fingerprint, state;
  int64_t count = 0;     // committed samples: indices [0, count)
  int64_t bytes = 0;
  int64_t max_size = 0;
  std::vector<int64_t> size_hist;  // bucket b: sizes in [2^b, 2^(b+1))
};

struct DatasetInfo {
  std::string keyspace;
  std::string name;
  int layout_version = kLayoutVersion;
  int64_t created_ms = 0;
  LabelKind label_kind = LabelKind::kNone;
  std::vector<std::string> class_names;
  std::string checksum = "xxh64";
  int32_t chunk_size = kDefaultChunkSize;
  std::string description;
  SampleKind sample_kind = SampleKind::kImage;
  // Ingest-time preprocessing applied to every image, as the ingest recorded
  // it (e.g. "resize-shorter=256,center-crop=224,reencode=jpeg:90"); empty
  // when the images are stored as they came.
  std::string preprocess;
  // Where the samples live when the dataset was attached to a table that
  // cqlstream did not write (`cqlstream attach`): the table's description as
  // the attach recorded it (keys such as "table", "key_column"; see
  // store/attached.h). Empty for a native dataset (d_<name>/m_<name>).
  std::map<std::string, std::string> source;
  std::vector<SegmentInfo> segments;  // ascending seg

  bool attached() const { return !source.empty(); }

  std::string data_table() const { return "d_" + name; }
  std::string meta_table() const { return "m_" + name; }
  // The packed copy of small samples (`cqlstream pack`, docs/schema.md).
  std::string pack_table() const { return "p_" + name; }
  std::vector<std::string> splits() const;
  // Segments of one split with at least one committed sample, ascending seg.
  std::vector<SegmentInfo> SplitSegments(std::string_view split) const;
  int64_t Count(std::string_view split) const;
  int64_t Bytes(std::string_view split) const;
  int64_t MaxSize(std::string_view split) const;
};

// A frozen list of samples of one split (cqlstream select / split, or
// cqlstream.Selection in Python). The loader's epoch holds each entry of
// `keys` once: keys may come in any order (a curriculum, read in that order
// when shuffle is off) and may repeat (oversampling: a key listed k times is
// delivered k times per epoch). Selections made by select and split are
// sorted and unique.
struct Selection {
  std::string dataset;
  std::string split;
  int layout_version = kLayoutVersion;
  std::string created;  // ISO-8601
  std::string query;    // how it was made, for humans
  std::vector<SampleKey> keys;

  // Reads a selection file (docs/schema.md). Nothing in it is trusted: a
  // path that is not a regular file of at most kMaxSelectionFileBytes, a bad
  // magic, a header that is not valid JSON with the expected fields, or a
  // body that disagrees with the header is an error naming the file.
  static StatusOr<Selection> Load(const std::string& path);
  // The same checks on the bytes of a selection file; `path` names it in errors.
  static StatusOr<Selection> Parse(std::string_view bytes, const std::string& path);
  // Writes through a mkstemp file in the target's folder renamed over `path`:
  // a CQLSSEL1 file when the keys are sorted and unique (older releases read
  // it), else CQLSSEL2 (order and repeats kept). Keys with a negative segment
  // or index are refused.
  Status Save(const std::string& path) const;
  // The bytes Save writes.
  std::string Encode() const;
  // Whether keys are strictly ascending (sorted, no repeats).
  bool SortedUnique() const;
};
inline constexpr uint64_t kMaxSelectionFileBytes = 1ull << 30;

// Identifier rules (docs/schema.md): keyspaces [a-z][a-z0-9_]{0,31},
// datasets [a-z][a-z0-9_]{0,23}. The error names the rule.
Status ValidateKeyspaceName(std::string_view name);
Status ValidateDatasetName(std::string_view name);

}  // namespace cqlstream

#endif  // CQLSTREAM_DATASET_H_
