// Copyright (c) cqlstream authors.
//
// Ingest sources: what `cqlstream ingest` reads, listed before anything is
// written (docs/ingest.md describes the layouts for users).
//
//  * image folder   ROOT/split/class/file or ROOT/class/file
//  * manifest       a CSV or JSONL file: path, label | labels, target, split,
//                   other columns -> extra; paths relative to its folder
//  * tar shards     WebDataset layout: members grouped by key (the member
//                   name up to the first dot of its base name)
//
// A listing is a sorted list of items (by split, then path, byte order).
// Items that are invalid from the listing alone (a tar key without an image,
// a manifest row without a label, ...) stay in the listing with a skip
// reason, so positions and index assignment do not depend on validation
// timing. Reading an item (ReadItem) gives its payload (image bytes, then
// target bytes) after validating both and applying the ingest-time
// preprocessing (store/preprocess.h), or a skip reason.
//
// The pure helpers below (sharding, source_id, fingerprint, class mapping)
// implement the formulas of docs/schema.md.
//
// Thread-safety: ListSource and the pure helpers are reentrant; ReadItem may
// run on many threads at once. Ownership: value types.
#ifndef CQLSTREAM_STORE_SOURCE_H_
#define CQLSTREAM_STORE_SOURCE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cqlstream/dataset.h"
#include "cqlstream/status.h"
#include "store/preprocess.h"

namespace cqlstream::store {

enum class SourceKind { kFolder, kManifest, kTar };
std::string_view SourceKindName(SourceKind k);

// --labels: where labels come from. kAuto: the source kind's own labels
// (folder: class directories; manifest: its label columns; tar: .cls/.json).
enum class LabelSource { kAuto, kImageFolder, kManifest, kNone };
StatusOr<LabelSource> ParseLabelSource(std::string_view s);  // imagefolder | manifest | none

// Where the bytes of an image or target live.
struct ByteRef {
  std::string file;       // the file (a plain file, or the tar archive)
  uint64_t offset = 0;    // tar member: offset of its data in the archive
  uint64_t size = 0;      // size at listing time
  bool archive_member = false;  // read exactly `size` bytes at `offset`; else the whole file
};

struct SourceItem {
  std::string split;
  std::string path;          // relative path: identity in the split, sort key, m_.path
  ByteRef image;
  std::string target_path;   // relative path of the target ("" when none)
  std::optional<ByteRef> target;
  int64_t mtime_ns = 0;      // of the file (tar members: of the archive)
  std::vector<std::string> label_texts;  // as found: class names or integer text
  std::map<std::string, std::string> extra;
  std::string skip;          // non-empty: invalid from the listing alone (the reason)
  std::string origin;        // where it was listed, for messages ("line 7", "a.tar")
  // Filled by ResolveLabels():
  int32_t label = -1;              // kClass
  std::vector<int32_t> labels;     // kMultiLabel
};

struct SourceListing {
  SourceKind kind = SourceKind::kFolder;
  std::string canonical;     // what source_id hashes (real paths)
  std::string description;   // human-readable origin (segments.source)
  LabelKind label_kind = LabelKind::kNone;  // what the items carry
  // Folder sources: the class directories of every split (empty ones
  // included), which is the class mapping of a new dataset.
  std::vector<std::string> folder_classes;
  // Manifests: the label texts of every row, whatever --split selected (the
  // class mapping of a new dataset covers the whole source, as for folders).
  std::vector<std::string> all_label_texts;
  std::vector<SourceItem> items;  // sorted by (split, path); paths unique per split
  std::vector<std::string> notes; // things ignored, for the user
};

struct ListOptions {
  std::vector<std::string> sources;  // SOURCE arguments (one folder / one manifest / tar files, folders, globs)
  std::string split;                 // see docs/ingest.md: filter or name
  LabelSource labels = LabelSource::kAuto;
  std::optional<LabelKind> label_kind;  // --label-kind (converts class <-> multilabel, none drops labels)
  // Manifests: accept paths that are absolute or lead outside the manifest's
  // folder (`..`, symlinks resolving elsewhere); by default such a path is an
  // InvalidArgument naming the line (--allow-paths-outside).
  bool allow_paths_outside = false;
};

// Lists a source. Errors (InvalidArgument / IOError / Corruption) name the
// file and line or offset: an unreadable manifest, a corrupt tar header, a
// path listed twice ("duplicate path"), a folder with a mixed layout.
StatusOr<SourceListing> ListSource(const ListOptions& options);

// The splits of a listing, sorted.
std::vector<std::string> ListingSplits(const SourceListing& l);
// Positions (into l.items) of one split's items, in listing order.
std::vector<size_t> SplitPositions(const SourceListing& l, std::string_view split);
// --shard i/N: the positions p of a listing of n items with p % N == i.
std::vector<size_t> ShardPositions(size_t n, int shard_index, int shard_count);
// Parses "i/N" (0 <= i < N).
Status ParseShard(std::string_view text, int* index, int* count);

// source_id := hex(xxh64(dataset "\0" split "\0" canonical "\0" i "/" N)), 16 lowercase hex digits.
std::string SourceId(std::string_view dataset, std::string_view split, std::string_view canonical, int shard_index,
                     int shard_count);
// fingerprint := hex(xxh64 over the items in order, each contributing
//   path "\0" size "\0" mtime_ns "\0" target_path "\0" target_size "\0"
//   label_texts joined by ";" "\0" extra as k "=" v ";"... "\0" skip "\0").
std::string Fingerprint(const std::vector<const SourceItem*>& items);

// The class mapping of a new dataset from the label texts seen: when every
// text is a canonical decimal integer (0, 7, 12; at most 999999), the
// mapping is "0", "1", ..., "max" so that label == the integer; otherwise
// the distinct texts sorted (byte order).
std::vector<std::string> BuildClassMapping(const std::vector<std::string>& texts);
// The label texts used by the items (distinct, sorted).
std::vector<std::string> UsedLabelTexts(const SourceListing& l);
// Sets item.label / item.labels from the mapping. Items without a label
// (when the kind needs one) get the skip "no label". Unknown texts are an
// InvalidArgument naming them (up to 20).
Status ResolveLabels(LabelKind kind, const std::vector<std::string>& class_names, SourceListing* l);

// The payload of one item: image bytes followed by target bytes.
struct Payload {
  std::unique_ptr<uint8_t[]> data;
  size_t size = 0;
  size_t image_size = 0;
  // XXH64 (seed 0) of bytes(), when whoever read them computed it while they
  // were in its cache (the ingest readers); else the segment writer does.
  std::optional<uint64_t> xxh64;
  std::span<const uint8_t> bytes() const { return {data.get(), size}; }
};

inline constexpr uint64_t kMaxPayloadBytes = 1ull << 30;

// What ReadItem checks and does to the bytes it read.
//   kind image  image signature and header dimensions (CheckImage), the same
//               for the target; then the preprocessing, when set, and
//               CheckImage of its result;
//   kind blob   any non-empty bytes, target included: no image check, and
//               preprocessing is refused (MakeReadOptions).
// The target is only preprocessed with resize-target (store/preprocess.h):
// otherwise it is stored as it came, since a mask resampled like a photo
// would get label values that are in no class.
struct ReadOptions {
  SampleKind kind = SampleKind::kImage;
  PreprocessSpec preprocess;  // empty(): stored as read
  PreprocessLimits limits;
};

// From an ingest's kind and canonical preprocessing text ("" for none):
// InvalidArgument for text PreprocessSpec::Parse refuses, and for
// preprocessing with kind blob.
StatusOr<ReadOptions> MakeReadOptions(SampleKind kind, std::string_view preprocess);

// Reads and validates an item (readable, non-empty, at most
// kMaxPayloadBytes, then PreparePayload). Returns "" and fills *out, or the
// skip reason ("unreadable (...)", "empty file", "not an image (unknown
// signature)", "corrupt JPEG header", "preprocess: ...", "target: ...",
// ...). An item with a listing skip returns that skip.
std::string ReadItem(const SourceItem& item, const ReadOptions& options, Payload* out);
// Images, no preprocessing.
std::string ReadItem(const SourceItem& item, Payload* out);

// The checks and the preprocessing of ReadItem on a payload already in
// memory (image bytes, then target bytes when has_target; p->image_size
// splits them): for writers of in-memory samples. Returns "" (and *p may
// now hold the preprocessed payload) or the skip reason.
// REQUIRES: p->image_size <= p->size
std::string PreparePayload(const ReadOptions& options, bool has_target, Payload* p);

// Reads a whole small file (manifests, tests). IOError names the file.
StatusOr<std::string> ReadSmallFile(const std::string& path, uint64_t max_bytes = 1ull << 31);

// --- per source kind (source_folder.cc, manifest.cc, tar.cc) ---------------
Status ListFolder(const std::string& root, const ListOptions& o, SourceListing* out);
Status ListManifest(const std::string& file, const ListOptions& o, SourceListing* out);
Status ListTars(const std::vector<std::string>& tar_files, const std::string& canonical, const ListOptions& o,
                SourceListing* out);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_SOURCE_H_
