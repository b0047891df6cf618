// Copyright (c) cqlstream authors.
//
// Test-only: a scriptable fake CQL v4 server that serves the honest world of
// honest_world.h and then lies in the way its Mode says: answers that
// contradict the catalog, missing or mistyped system-table columns, oversized
// values and frames, trickling bytes, silence, resets mid-frame, truncated
// frames, duplicated answers and answers for unused stream ids, wrong opcodes
// and protocol versions, event floods, UNPREPARED loops, grouped key-snapshot
// lookups answering rows that were not asked for, foreign rows twice, short
// or keyless, alone or in grouped reads; coalesced native reads answering
// rows that were not asked for; answers whose result metadata names another
// table; metadata blocks that repeat a row; segments rows of another
// dataset; system.peers rows that name the node again; first reads answered
// as if meant for another request; pages without end; an answer that stands
// still mid-cell past its request's timeout and then comes on, changed; metadata scans by
// token range that repeat a row, stray outside their range or answer an idx
// outside its block (answer_lies.h holds the lies that only rewrite an
// answer's rows). The transport lies of data reads (silence, resets, truncation,
// duplicates, oversized frames, ...) hit both native data tables (single
// and coalesced reads) and the attached dataset's foreign table (single and
// grouped reads) alike; the lies about one sample's rows (wrong-key,
// chunks-short, ...) hit toy and the attached dataset only.
//
// A client is judged against it (tests/hostile/hostile_test.cc,
// tests/python/test_hostile.py): the outcome must be a clean error naming the
// problem or a correct result, never a signal, a hang or unbounded memory.
// Each mode's `expect` says which outcomes are correct.
//
// It speaks plain blocking sockets, one thread per connection, so that a
// mode can stall, trickle or reset one connection without touching others.
// The listening and accepted sockets are close-on-exec: a client started as
// a child process does not keep the server's connections open.
//
// Thread-safety: Start/Stop/port may be called from any thread; the server's
// own threads end in Stop() (or the destructor).
#ifndef CQLSTREAM_TESTS_HOSTILE_HOSTILE_SERVER_H_
#define CQLSTREAM_TESTS_HOSTILE_HOSTILE_SERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cqlstream/status.h"
#include "hostile/honest_world.h"
#include "util/mutex.h"

namespace cqlstream::hostile {

enum class Mode {
  kHonest,
  kRowLargerThanCatalog,   // sample 5: one 4 MiB chunk, size 4 MiB; catalog max_size ~3 KB
  kChunksShort,            // sample 3: the last chunk is missing (chunks < size)
  kChunksLong,             // sample 3: one chunk too many (chunks > size)
  kWrongKey,               // the read of sample 7 answers sample 8's rows (native and attached)
  kMissingRows,            // the read of sample 9 answers no rows
  kCatalogHugeMaxSize,     // segments.max_size and bytes near 2^62
  kLocalMissingColumns,    // system.local answers only its `key` column
  kLocalMistypedColumns,   // system.local: every requested column typed int
  kHugeBytesLength,        // a data cell declares 2^31 - 16 bytes
  kFrameAtLimit,           // a data answer's header declares 256 MiB - 1, then 1 KiB and silence
  kFrameOverLimit,         // a data answer's header declares 256 MiB + 1
  kTrickle,                // every byte of every answer alone, 1 ms apart
  kSilent,                 // accepts, reads, never answers
  kSilentData,             // answers everything but data reads
  kResetMidFrame,          // data answers: half a frame, then a TCP reset
  kTruncatedFrame,         // data answers declare 100 bytes more than they hold
  kDuplicateAnswer,        // every data answer (and key-snapshot lookup) twice
  kUnknownStream,          // before each data answer, one for stream 32000 (never used)
  kWrongOpcode,            // data reads answered with READY
  kWrongVersion,           // every answer with version byte 0x85 (v5)
  kRequestBit,             // every answer without the response bit
  kEventFlood,             // 200 STATUS_CHANGE events (stream -1) before each answer
  kUnpreparedLoop,         // every EXECUTE answered UNPREPARED
  kGarbageError,           // data reads answered by an ERROR whose message overruns the body
  kKeyGroupLies,           // every grouped key lookup (k_att ... idx IN ?) answers a row it was not asked for,
                           // a row twice, a row of another segment, or idx cells of 8 bytes, in turn
  kForeignRowsLie,         // attached sample 9's row comes twice, sample 11's with a null data cell (read
                           // alone or in a group)
  kForeignGroupLies,       // every grouped foreign read ("id" IN ?) answers a row it was not asked for, a row
                           // twice, a row short, or a null key cell, in turn; rows read alone are honest
  kMisnamedColumns,        // answers that carry result metadata name another table: every key lookup of
                           // attached sample 13 (its rows are k_att's, named as the foreign table's) and
                           // every foreign read of sample 14 (alone or in a group; named as k_att's),
                           // and every data read of toy's sample 13 (named as tiny's data table)
  kMetaRowsLie,            // every metadata block read of toy (m_toy WHERE seg = ? AND block = ?) answers
                           // its rows and then its first row again
  kSegmentsCrossed,        // the segments read of toy answers att's segment rows, att's and tiny's toy's
  kNativeGroupLies,        // every coalesced native read (d_... idx IN ?; only tiny's samples are read so)
                           // answers a row it was not asked for, a row twice, a row of another segment, or
                           // idx cells of 8 bytes, in turn; rows read alone are honest
  kPeersRepeatHosts,       // system.peers and system.peers_v2 list the node twice more: at its own address
                           // under another host id, and at another address (10.9.9.9) under its own id
  kStrayAnswers,           // on each connection, the first read alone of each of toy's samples is answered as
                           // if meant for another request (a late or repeated frame): even idx with the next
                           // sample's rows, odd idx with its own rows named as tiny's data table (or the next
                           // sample's, when the read skips result metadata); its later reads are honest
  kPagesStandStill,        // every paged data read of toy answers its rows and promises more; the page after
                           // holds no rows and promises more with the paging state it was asked to go on from
  kPagesWithoutEnd,        // as pages-stand-still, but each page after the first promises more with a new
                           // paging state, without end, and holds no rows (even idx) or one row of the
                           // sample's key whose data cell is null (odd idx)
  kSegmentsWithoutEnd,     // the segments read of toy answers its rows and promises more; each page after
                           // holds 1,000 new segment rows (seg numbers on from the last, no samples) and
                           // promises more, without end
  kDatasetsListedTwice,    // a read of every dataset row (ls) answers toy's row twice; reads of one dataset
                           // by name are honest
  kStalledRest,            // the first data read of toy's sample 5 (once a server) is answered up to the middle
                           // of its last data cell; the rest comes 3 s later with its bytes inverted: an
                           // answer that outlives its request's timeout, and changed meanwhile
  kMetaScanLies,           // every scan of tiny's metadata by token range (info's class counts) that
                           // answers rows tells one lie of each kind in turn (answer_lies.h
                           // LieAboutMetaScan): its first row again, a row from outside the range, an
                           // idx outside its block
};

// What a correct client does against a mode.
enum class Expect {
  kCorrect,  // reads the honest dataset, exactly
  kError,    // fails with a clean error (a correct result is impossible)
  kEither,   // a clean error, or the honest dataset exactly
};

struct ModeInfo {
  Mode mode;
  const char* name;       // as on the command line: "chunks-short"
  Expect expect;           // for data reads of the native dataset (bench, verify, Loader)
  Expect expect_connect;   // for ping / info (no data read)
  Expect expect_attached;  // for reads of the attached dataset (bench, Loader)
  Expect expect_tiny;      // for reads of the tiny native dataset, read in coalesced groups (bench, Loader)
  const char* problem;    // words a message naming the problem contains, '|'-separated ("" = any)
  // for `info tiny`, whose class counts scan tiny's metadata by token
  // range; unset: as expect_connect
  std::optional<Expect> expect_counts = std::nullopt;
};
const std::vector<ModeInfo>& AllModes();
std::optional<ModeInfo> FindMode(const std::string& name);

class HostileServer {
 public:
  // Listens on host:port (0: any free port) and serves in background threads.
  static StatusOr<std::unique_ptr<HostileServer>> Start(Mode mode, const std::string& host = "127.0.0.1",
                                                        uint16_t port = 0);
  ~HostileServer();
  HostileServer(const HostileServer&) = delete;
  HostileServer& operator=(const HostileServer&) = delete;

  uint16_t port() const { return port_; }
  // How many answers the mode's lie changed so far (kKeyGroupLies,
  // kForeignGroupLies, kMisnamedColumns, kNativeGroupLies, ...; kSilentData:
  // data reads swallowed; kSilent: requests swallowed; kStalledRest: answers
  // cut), and how many grouped foreign reads and coalesced native reads were
  // answered, so that a test can tell a lie told, or a path taken, from one
  // not.
  int64_t lies_told() const { return lies_told_.load(); }
  int64_t grouped_reads() const { return grouped_reads_.load(); }
  int64_t coalesced_reads() const { return coalesced_reads_.load(); }
  // Closes the listener and every connection; joins the threads.
  void Stop();

 private:
  struct Conn;
  HostileServer(Mode mode, int listen_fd, uint16_t port);
  void AcceptLoop();
  void Serve(int fd);

  const Mode mode_;
  const int listen_fd_;
  const uint16_t port_;
  HonestWorld world_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> lies_told_{0};
  std::atomic<uint64_t> pages_{0};  // pages-stand-still, pages-without-end: paging states handed out
  std::atomic<int64_t> grouped_reads_{0};
  std::atomic<int64_t> coalesced_reads_{0};
  std::atomic<bool> stalled_rest_{false};  // stalled-rest: its one lie was told
  std::thread acceptor_;
  Mutex mu_;
  std::vector<int> fds_ GUARDED_BY(mu_);
  std::vector<std::thread> threads_ GUARDED_BY(mu_);
  std::vector<std::string> prepared_ GUARDED_BY(mu_);  // prepared id i (4 bytes) -> query text
  friend struct Conn;
};

}  // namespace cqlstream::hostile

#endif  // CQLSTREAM_TESTS_HOSTILE_HOSTILE_SERVER_H_
