// Copyright (c) cqlstream authors.
//
// The hostile server's modes (hostile_server.h Mode): each one's name on
// the command line, what a correct client does against it, and the words
// that name its problem.
#include <optional>
#include <string>
#include <vector>

#include "hostile/hostile_server.h"

namespace cqlstream::hostile {
namespace {

// The expectations, in ModeInfo's order: native (toy), connect, attached,
// tiny (coalesced); then the words naming the problem; then, where it is
// not connect's, the one for `info tiny` (class counts).
constexpr Expect kOk = Expect::kCorrect, kErr = Expect::kError, kAny = Expect::kEither;

const std::vector<ModeInfo> kModes = {
    {Mode::kHonest, "honest", kOk, kOk, kOk, kOk, ""},
    {Mode::kRowLargerThanCatalog, "row-larger-than-catalog", kErr, kOk, kOk, kOk, "size|larger|catalog|max"},
    {Mode::kChunksShort, "chunks-short", kErr, kOk, kOk, kOk, "size|chunk|incomplete|short"},
    {Mode::kChunksLong, "chunks-long", kErr, kOk, kOk, kOk, "size|chunk|more|long"},
    {Mode::kWrongKey, "wrong-key", kErr, kOk, kErr, kOk, "0:7"},
    {Mode::kMissingRows, "missing-rows", kErr, kOk, kOk, kOk, "missing|not found|0:9"},
    // Every segment row lies (att's too): every reader of a dataset must
    // refuse its catalog; ping reads none.
    {Mode::kCatalogHugeMaxSize, "catalog-huge-max-size", kErr, kAny, kErr, kErr, "max_size"},
    {Mode::kLocalMissingColumns, "local-missing-columns", kErr, kErr, kErr, kErr, "column|system.local|missing"},
    {Mode::kLocalMistypedColumns, "local-mistyped-columns", kErr, kErr, kErr, kErr, "type|column|system.local"},
    {Mode::kHugeBytesLength, "huge-bytes-length", kErr, kOk, kErr, kErr, "bytes|protocol|expected"},
    {Mode::kFrameAtLimit, "frame-at-limit", kErr, kOk, kErr, kErr, "timed out|timeout|frame"},
    {Mode::kFrameOverLimit, "frame-over-limit", kErr, kOk, kErr, kErr, "frame|large|limit"},
    {Mode::kTrickle, "trickle", kAny, kAny, kAny, kAny, "timed out|timeout"},
    {Mode::kSilent, "silent", kErr, kErr, kErr, kErr, "timed out|timeout|connect"},
    {Mode::kSilentData, "silent-data", kErr, kOk, kErr, kErr, "timed out|timeout"},
    {Mode::kResetMidFrame, "reset-mid-frame", kAny, kOk, kAny, kAny, "reset|lost|closed|connection"},
    {Mode::kTruncatedFrame, "truncated-frame", kAny, kOk, kAny, kAny, ""},
    {Mode::kDuplicateAnswer, "duplicate-answer", kAny, kOk, kAny, kAny, "stream|duplicate"},
    {Mode::kUnknownStream, "unknown-stream", kAny, kOk, kAny, kAny, "stream"},
    {Mode::kWrongOpcode, "wrong-opcode", kErr, kOk, kErr, kErr, "READY|opcode|unexpected|result"},
    {Mode::kWrongVersion, "wrong-version", kErr, kErr, kErr, kErr, "version|protocol"},
    {Mode::kRequestBit, "request-bit", kErr, kErr, kErr, kErr, "response|protocol|version"},
    {Mode::kEventFlood, "event-flood", kOk, kOk, kOk, kOk, ""},
    // info toy prepares nothing; info tiny's class counts do.
    {Mode::kUnpreparedLoop, "unprepared-loop", kErr, kOk, kErr, kErr, "prepare|unprepared", kErr},
    {Mode::kGarbageError, "garbage-error", kErr, kOk, kErr, kErr, "protocol|expected|error"},
    {Mode::kKeyGroupLies, "key-group-lies", kOk, kOk, kOk, kOk, ""},
    {Mode::kForeignRowsLie, "foreign-rows-lie", kOk, kOk, kErr, kOk, "0:9|0:11|row|null"},
    {Mode::kForeignGroupLies, "foreign-group-lies", kOk, kOk, kOk, kOk, ""},
    // Every data read of toy asks for the result metadata (the loader's, at
    // the price of a byte comparison) and must refuse sample 13's answer.
    {Mode::kMisnamedColumns, "misnamed-columns", kErr, kOk, kErr, kOk, "prepared with"},
    // Only verify and export read the metadata table: the test requires their error.
    {Mode::kMetaRowsLie, "meta-rows-lie", kAny, kOk, kOk, kOk, "idx"},
    // ping reads no catalog; info, verify, bench and the Loader must refuse it.
    {Mode::kSegmentsCrossed, "segments-crossed", kErr, kAny, kErr, kErr, "answered a row of dataset"},
    // Only the coalesced reads of tiny lie; their samples are read again alone.
    {Mode::kNativeGroupLies, "native-group-lies", kOk, kOk, kOk, kOk, ""},
    // A session leaves both rows out (ping and the Loader say how many).
    {Mode::kPeersRepeatHosts, "peers-repeat-hosts", kOk, kOk, kOk, kOk, ""},
    // Each lie once a connection: a reader that reads a refused answer
    // again (verify, export, bench, the Loader) gets the honest one, as long
    // as it has fewer connections than attempts (3; the CLI's sessions and
    // the Loader open 2 a host by default, and the window over toy's small
    // samples asks for no more).
    {Mode::kStrayAnswers, "stray-answers", kOk, kOk, kOk, kOk, ""},
    // The lie pages toy's data reads only (tiny's and the attached
    // dataset's reads are left honest): every reader of toy must end with
    // an error that says the pages do not end.
    {Mode::kPagesStandStill, "pages-stand-still", kErr, kOk, kOk, kOk, "does not move on"},
    {Mode::kPagesWithoutEnd, "pages-without-end", kErr, kOk, kOk, kOk,
     "pages in a row held no rows|follows a short chunk"},
    // Every catalog read of toy (info, verify, bench, the Loader, export)
    // must end at the most segments a dataset holds (store/catalog.h
    // kMaxSegments), before its memory runs away; ping reads no catalog.
    {Mode::kSegmentsWithoutEnd, "segments-without-end", kErr, kAny, kOk, kOk, "more than 131072 rows"},
    // Only ls lists every dataset (HostileListing in hostile_test.cc).
    {Mode::kDatasetsListedTwice, "datasets-listed-twice", kOk, kOk, kOk, kOk, ""},
    // Sample 5's first answer stands still mid-cell for 3 s. A reader whose
    // request times out first (the Loader probe's and bench's, after 1 s)
    // reads it again and gets the honest answer; the rest of the first one,
    // which comes after, changed, and must land nowhere (HostileStalledRest
    // in hostile_test.cc). A reader that waits longer gets the changed rest,
    // whose checksum fails.
    {Mode::kStalledRest, "stalled-rest", kAny, kOk, kOk, kOk, "timed out|timeout"},
    // Only info's class counts scan by token range (`info tiny`; the
    // suite's probe gets the first lie, HostileCounts all three).
    {Mode::kMetaScanLies, "meta-scan-lies", kOk, kOk, kOk, kOk,
     "a repeated or foreign page|outside the range|not an idx", kErr},
};

}  // namespace

const std::vector<ModeInfo>& AllModes() { return kModes; }

std::optional<ModeInfo> FindMode(const std::string& name) {
  for (const auto& m : kModes) {
    if (name == m.name) return m;
  }
  return std::nullopt;
}

}  // namespace cqlstream::hostile
