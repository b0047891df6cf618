// Copyright (c) cqlstream authors.
//
// Test-only: the truth a hostile server lies about. A one-node cluster
// (system.local, system.peers_v2, system.peers, system_schema.keyspaces) and
// two small datasets laid out as docs/schema.md says, in keyspace "hostile":
// * "toy", native (label kind none, xxh64 checksums, 1 KiB chunks so that
//   some samples span several chunk rows), split "train" in segment 0;
// * "att", attached: split "train" is the foreign table hostile."foreign"
//   (key column "id" int, data column "img" blob), whose key snapshot
//   k_att holds in segment 0 the key of sample idx (ForeignKeyOf), the row
//   holding the payload SamplePayload(idx) (toy's for idx < kSamples);
//   kAttachedSamples of them, enough that a loader reads the rows of the
//   later ones in groups (`"id" IN ?`, after its first 32 reads);
// * "tiny", native like toy but every sample one chunk (TinyPayload, at
//   most kTinyMaxSize bytes), kTinySamples of them: a loader reads them in
//   coalesced groups (`seg = ? AND idx IN ? PER PARTITION LIMIT 2`,
//   loader/coalesce.h). Its label kind is class, kTinyClasses of them
//   (TinyLabel), so that `info tiny` counts its classes with a scan of its
//   metadata table by token range.
//
// Run() answers the SELECTs cqlstream sends (session topology, catalog,
// data, metadata and key-snapshot reads): it parses `SELECT cols FROM
// ks.table [WHERE c = ? AND c IN ? ...]` (identifiers bare or
// double-quoted), projects the named columns (an unknown one is the
// server's "Undefined column name" error) and filters by the bound values
// (an IN marker's value is a list of them). A scan by token range, `WHERE
// token(pk...) > ? AND token(pk...) <= ?`, answers the rows of the
// partitions whose Murmur3 token lies in the range, in token order, as a
// node does.
//
// Thread-safety: immutable after construction; every method is const and
// may be called from any thread.
#ifndef CQLSTREAM_TESTS_HOSTILE_HONEST_WORLD_H_
#define CQLSTREAM_TESTS_HOSTILE_HONEST_WORLD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cqlstream/status.h"
#include "hostile/server_codec.h"

namespace cqlstream::hostile {

inline constexpr const char* kKeyspace = "hostile";
inline constexpr const char* kDataset = "toy";
inline constexpr const char* kSplit = "train";
inline constexpr int32_t kSamples = 24;
inline constexpr int32_t kChunkSize = 1024;
inline constexpr const char* kAttachedDataset = "att";
inline constexpr int32_t kAttachedSamples = 256;
inline constexpr const char* kForeignTable = "foreign";
inline constexpr const char* kTinyDataset = "tiny";
inline constexpr int32_t kTinySamples = 96;
inline constexpr int32_t kTinyMaxSize = 1000;  // below kChunkSize: one row per sample
inline constexpr int32_t kTinyClasses = 3;      // class names "a", "b", "c"
// The label of tiny's sample idx: idx % kTinyClasses.
int32_t TinyLabel(int32_t idx);

// The foreign key (column "id") of attached sample (seg 0, idx i), and of
// any idx (past kAttachedSamples: a key the table does not hold).
int32_t ForeignKeyOf(int32_t idx);
// The idx whose foreign key is `key`, or -1.
int32_t IdxOfForeignKey(int32_t key);

// A version-4 UUID whose bytes are all `b` but its version nibble: the
// honest world's host and schema ids (system.local's host_id is
// UuidOf(kLocalHostIdByte)).
inline constexpr uint8_t kLocalHostIdByte = 0x11;
Value UuidOf(uint8_t b);
// The path of toy's sample idx in its metadata rows ("img/0007.bin").
std::string SamplePath(int32_t idx);

// The payload of sample (seg 0, idx i) of either dataset: deterministic bytes.
std::vector<uint8_t> SamplePayload(int32_t idx);
int64_t SampleChecksum(int32_t idx);  // xxh64(payload), seed 0, as signed
// The payload of sample (seg 0, idx i) of the tiny dataset.
std::vector<uint8_t> TinyPayload(int32_t idx);
// The payload of sample (seg 0, idx) of `dataset` (any of the three), and
// how many samples it holds (0: not a dataset of this world).
std::vector<uint8_t> PayloadOf(const std::string& dataset, int32_t idx);
int32_t SamplesOf(const std::string& dataset);

// What a SELECT asks for, parsed.
struct Select {
  std::vector<std::string> columns;
  std::string keyspace, table;
  std::vector<std::string> where;  // columns compared with '?', in marker order
  std::vector<bool> in;            // per marker: `c IN ?` (a list of values)
  int32_t per_partition_limit = 0;  // `PER PARTITION LIMIT n` (0: none)
  // `token(c, ...) > ?` / `<= ?`: the columns in token(), and the markers'
  // entries in `where` (kTokenAbove, kTokenAtMost; bigint values).
  std::vector<std::string> token_of;
  bool HasIn() const;
};
inline constexpr const char* kTokenAbove = "token >";
inline constexpr const char* kTokenAtMost = "token <=";
std::optional<Select> ParseSelect(const std::string& query);

// An answer: a table, or a server error (code, message).
struct Answer {
  Table table;
  int32_t error_code = 0;  // 0: none
  std::string error;
};

class HonestWorld {
 public:
  // The full table `keyspace.table`, or nullopt when unknown.
  std::optional<Table> FullTable(const std::string& keyspace, const std::string& table) const;
  // Answers `s` with bound values `values`.
  Answer Run(const Select& s, const std::vector<std::optional<cql::Bytes>>& values) const;
  // For PREPARE: the bind markers' columns and the partition-key indexes.
  Answer BindColumns(const Select& s, std::vector<uint16_t>* pk_indexes) const;
};

}  // namespace cqlstream::hostile

#endif  // CQLSTREAM_TESTS_HOSTILE_HONEST_WORLD_H_
