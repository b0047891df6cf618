// Copyright (c) cqlstream authors.
//
// Schema management for layout version 1 (docs/schema.md): the keyspace with
// the user's replication, the catalog tables (datasets, segments), the
// per-dataset tables (d_<name>, m_<name>), creating a dataset or checking
// that an existing one is compatible, and dropping a dataset.
//
// Every DDL statement is followed by a wait for schema agreement. Names are
// validated (ValidateKeyspaceName / ValidateDatasetName) before they are put
// into CQL text; everything else travels as bound values.
//
// Concurrency: several ingest processes (shards on several machines) may
// create the same dataset at once. Tables are created with IF NOT EXISTS and
// the catalog row with a lightweight transaction (INSERT ... IF NOT EXISTS);
// the loser reads the winner's row and checks it like any existing dataset.
//
// Thread-safety: free functions; thread-safe as the Session is.
#ifndef CQLSTREAM_STORE_SCHEMA_H_
#define CQLSTREAM_STORE_SCHEMA_H_

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cqlstream/dataset.h"
#include "cqlstream/status.h"
#include "net/session.h"

namespace cqlstream::store {

// --replication (docs/schema.md):
//   replication := "simple:" RF | "nts:" DC "=" RF ("," DC "=" RF)*
// RF in [1, 99] (0 allowed for an NTS data center); DC names are
// [A-Za-z0-9_.-]{1,64} and unique.
struct Replication {
  enum class Kind { kSimple, kNetworkTopology };
  Kind kind = Kind::kSimple;
  int replication_factor = 1;                         // kSimple
  std::vector<std::pair<std::string, int>> dc_factors;  // kNetworkTopology, in the order given

  static StatusOr<Replication> Parse(std::string_view text);
  // The CQL map literal: {'class': 'SimpleStrategy', 'replication_factor': '1'}.
  std::string ToCql() const;
  // The --replication spelling ("simple:1", "nts:dc1=3,dc2=2").
  std::string ToString() const;
  // Whether a keyspace's stored replication map (system_schema.keyspaces)
  // is this replication.
  bool Matches(const std::map<std::string, std::string>& stored) const;
};

// DDL text (exposed for tests and docs).
std::string CreateKeyspaceCql(const std::string& keyspace, const Replication& r);
std::vector<std::string> CatalogTablesCql(const std::string& keyspace);
// Catalog columns added after the first release, (name, CQL type):
// EnsureCatalog adds those an older catalog lacks.
std::vector<std::pair<std::string, std::string>> LaterCatalogColumns();
std::vector<std::string> DatasetTablesCql(const std::string& keyspace, const std::string& dataset);

// Creates the keyspace when it does not exist. When it exists, its
// replication is kept; if `replication_given` and it differs, *note gets a
// sentence saying so (nothing is altered).
Status EnsureKeyspace(net::Session& s, const std::string& keyspace, const Replication& r, bool replication_given,
                      std::string* note);
// Creates the catalog tables when missing, and adds the later columns
// (LaterCatalogColumns) to a catalog an older release made.
Status EnsureCatalog(net::Session& s, const std::string& keyspace);

// What an ingest wants the dataset to be.
struct DatasetSpec {
  std::string name;
  LabelKind label_kind = LabelKind::kNone;
  std::vector<std::string> class_names;  // the mapping (label i is class_names[i])
  int32_t chunk_size = kDefaultChunkSize;
  bool chunk_size_given = false;  // --chunk-size was given (else the stored one is used)
  std::string description;
  SampleKind sample_kind = SampleKind::kImage;  // --kind
  std::string preprocess;  // the ingest-time preprocessing, as recorded in the catalog ("" = none)
};

// Checks that an existing dataset can take an ingest of `spec`: same
// label kind; same chunk size when one was given; for class/multilabel
// datasets, spec.class_names must all be in the stored mapping (the error
// names the classes that are not). The messages say what exists and what
// was asked for.
Status CheckCompatible(const DatasetInfo& existing, const DatasetSpec& spec);

// Creates the dataset (tables, then the catalog row) or opens the existing
// one after CheckCompatible(). A dataset row with another layout version is
// refused (Unsupported); a d_/m_ table whose columns are not those of layout
// 1 is refused (AlreadyExists) naming the table. *created tells whether this
// call created the catalog row. Returns the stored catalog entry (segments
// not loaded).
StatusOr<DatasetInfo> CreateOrOpenDataset(net::Session& s, const std::string& keyspace, const DatasetSpec& spec,
                                          bool* created);

// The layout-1 columns of d_<name> / m_<name> as system_schema.columns lists
// them: name -> "kind type" (e.g. "static bigint").
std::map<std::string, std::string> ExpectedDataColumns();
std::map<std::string, std::string> ExpectedMetaColumns();

struct DropReport {
  bool catalog_row = false;  // a datasets row was removed
  int segments = 0;          // segment rows removed (counted up to 8 x kMaxSegments)
  bool segments_at_least = false;  // the count was cut short: at least `segments`
  std::vector<std::string> tables;  // tables dropped
};
// Removes the catalog row (first, so the dataset disappears at once), the
// segment rows and packs rows (store/pack.h), then the tables (d_, m_, k_, p_). Works on half-created or half-dropped
// datasets and on datasets of other layout versions. NotFound when nothing
// of the name exists.
StatusOr<DropReport> DropDataset(net::Session& s, const std::string& keyspace, const std::string& name);

// ValidateKeyspaceName plus the refusal of CQL reserved words (select,
// token, ...; util/cql_keywords.h): names that go unquoted into generated CQL.
Status ValidateGeneratedKeyspace(std::string_view keyspace);

// Sizes the server would reject only after the tables exist (the catalog
// row carries the class list in one mutation, bounded by the node's
// native_transport_max_frame_size and max_mutation_size, 16 MiB by default;
// every data and metadata row carries the sample's labels). Checked before
// any DDL, so a refused ingest leaves no d_/m_ tables behind.
inline constexpr size_t kMaxClasses = size_t{1} << 20;
inline constexpr size_t kMaxClassListBytes = size_t{8} << 20;  // sum of the class names' lengths
inline constexpr size_t kMaxDescriptionBytes = size_t{64} << 10;
inline constexpr size_t kMaxLabelsPerSample = size_t{1} << 16;
Status CheckSpecSizes(const DatasetSpec& spec);

// Tables named d_<x>, m_<x>, k_<x> or p_<x> in `keyspace` whose dataset <x> has no catalog
// row (`known`: the catalog's dataset names), e.g. left by an ingest that
// failed after its DDL or an interrupted drop. Sorted. `cqlstream drop <x>`
// removes them.
StatusOr<std::vector<std::string>> OrphanTables(net::Session& s, const std::string& keyspace,
                                                const std::vector<std::string>& known);

// Runs DDL (with a long timeout) and waits for schema agreement.
Status RunDdl(net::Session& s, const std::string& cql);

}  // namespace cqlstream::store

#endif  // CQLSTREAM_STORE_SCHEMA_H_
