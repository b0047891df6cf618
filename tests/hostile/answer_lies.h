// Copyright (c) cqlstream authors.
//
// Test-only: lies of the hostile server that only rewrite the rows (or the
// column types) of an honest answer, given the mode and the answer: those
// about system tables, the catalog, grouped reads and metadata scans. The
// lies that need the server's state or the request (a data read's rows for
// one sample, pages, the transport, which request is answered) stay in
// hostile_server.cc. Those told in turn take `lie`, the count of lies told
// so far, and pick their kind by it; those that return bool say whether
// they lied (the server counts the lies).
//
// Thread-safety: free functions on the caller's values.
#ifndef CQLSTREAM_TESTS_HOSTILE_ANSWER_LIES_H_
#define CQLSTREAM_TESTS_HOSTILE_ANSWER_LIES_H_

#include <cstddef>
#include <cstdint>

#include "hostile/honest_world.h"
#include "hostile/hostile_server.h"

namespace cqlstream::hostile {

// The index of column `name` in `t`, or -1.
int ColumnOf(const Table& t, const char* name);
// Sets row `row`'s cell of column `col`, where `t` has that column.
void SetCell(Table* t, size_t row, const char* col, Value v);

// local-missing-columns, local-mistyped-columns: system.local's answer.
void LieAboutSystem(Mode mode, const Select& sel, Answer* a);
// peers-repeat-hosts: two rows that name the node itself (the honest
// world's peers tables are empty: one node), each by one of the marks a
// session tells a listed host by — its endpoint (the address the client
// reached, another host id; the port, unset, is the client's) and its
// host id (the node's, at an address of no host).
bool LieAboutPeers(Mode mode, const Select& sel, Answer* a);
// catalog-huge-max-size: every segment row's max_size and bytes 2^62.
void LieAboutCatalog(Mode mode, const Select& sel, Answer* a);
// A grouped answer whose rows name their sample by (seg, idx) in their
// first two cells (a grouped key lookup: seg, idx, key; a coalesced data
// read: seg, idx, ...), changed by a lie of each kind in turn: a sample
// not asked for (`past_end`, past the split's end), one sample twice, a
// row of another segment, idx cells of 8 bytes.
void LieAboutGroupedRows(Table* t, int32_t past_end, int64_t lie);
// A grouped foreign read's answer (columns id, img) changed by a lie of
// each kind in turn: a row whose key was not asked for, a row twice, a
// row left out, a row whose key cell is null.
void LieAboutForeignGroup(Table* t, int64_t lie);
// meta-scan-lies: a scan of tiny's metadata table by token range (`sel`
// has token_of; the columns seg, block, idx first) that answered rows,
// changed by a lie of each kind in turn: its first row again at the end,
// a row of a partition whose token lies outside the range asked (bounds
// `above`, `at_most`), an idx outside its block. Returns whether it lied.
bool LieAboutMetaScan(Mode mode, const Select& sel, int64_t above, int64_t at_most, Answer* a, int64_t lie);

}  // namespace cqlstream::hostile

#endif  // CQLSTREAM_TESTS_HOSTILE_ANSWER_LIES_H_
