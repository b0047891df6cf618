// Copyright (c) cqlstream authors.
//
// hostile_tests: the real CLI (ping, info, verify, bench, bench --ordered,
// export) and the C++ Loader (cqlstream-hostile-loader, out of order and
// ordered) against every mode of the hostile server, each as a child process
// under a wall-clock bound (kBound). The outcome must be what the mode's
// Expect says: the honest dataset exactly, or a clean error (exit 1 or 2 with
// a message that names the problem) — never a signal, a hang past the bound,
// or a peak RSS past kRssBoundMb; and an export leaves only whole, honest
// samples in its folder, each in its manifest (JudgeExport).
//
// Paths: the CLI is $CQLSTREAM_CLI or the build's cqlstream; the probe and
// the server are this build's (compile definitions).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "hostile/child_process.h"
#include "hostile/hostile_server.h"

namespace cqlstream::hostile {
namespace {

// The readers run with the same bounded retries as the Loader probe (3
// attempts of at most 1 s, a 5 s budget per sample: bench's --max-attempts,
// --request-timeout-ms, --retry-budget-ms), so a client that retries a lying
// server for its whole budget and then fails cleanly ends well inside this.
constexpr auto kBound = std::chrono::seconds(60);
constexpr long kRssBoundMb = 160;

// Under AddressSanitizer every freed block waits in a quarantine (256 MB by
// default) so that a use after free is caught; the children's peak RSS then
// measures ASan's quarantine (a lying 4 MiB row retried three times by two
// readers is 24 MiB of freed buffers held), not cqlstream. The children get a
// small quarantine, set once before any test spawns one (a gtest environment,
// so no thread reads the environment while it changes), and the same bound
// keeps catching runaway memory in sanitizer builds. GCC defines
// __SANITIZE_ADDRESS__ under -fsanitize=address; clang 14, which builds CI's
// sanitizer tree, says so only through __has_feature. Until both were
// checked, CI's ASan children kept the 256 MB quarantine (a `verify` of
// 12,000 empty pages reached 286 MB there, 66 MB in a quiet local run).
#if defined(__SANITIZE_ADDRESS__)
#define CQLSTREAM_HOSTILE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CQLSTREAM_HOSTILE_ASAN 1
#endif
#endif
class ChildQuarantine : public ::testing::Environment {
 public:
  void SetUp() override {
#ifdef CQLSTREAM_HOSTILE_ASAN
    const char* old = std::getenv("ASAN_OPTIONS");
    std::string opts = old != nullptr ? old : "";
    opts += std::string(opts.empty() ? "" : ":") + "quarantine_size_mb=8:thread_local_quarantine_size_kb=256";
    ::setenv("ASAN_OPTIONS", opts.c_str(), 1);
#endif
  }
};
[[maybe_unused]] ::testing::Environment* const kChildQuarantine =
    ::testing::AddGlobalTestEnvironment(new ChildQuarantine);

std::string Cli() {
  const char* e = std::getenv("CQLSTREAM_CLI");
  return e != nullptr && *e != '\0' ? e : CQLSTREAM_HOSTILE_CLI;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// One of `words` ('|'-separated, "" = any) appears in the output.
bool NamesProblem(const ChildResult& r, const std::string& words) {
  if (words.empty()) return true;
  const std::string all = Lower(r.out + "\n" + r.err);
  for (size_t start = 0; start <= words.size();) {
    size_t bar = words.find('|', start);
    if (bar == std::string::npos) bar = words.size();
    if (all.find(Lower(words.substr(start, bar - start))) != std::string::npos) return true;
    start = bar + 1;
  }
  return false;
}

bool Crashed(const ChildResult& r) {
  return !r.started || r.timed_out || r.signal != 0 || r.err.find("terminate called") != std::string::npos ||
         r.peak_rss_kb / 1024 > kRssBoundMb;
}

// A clean error: exit 1 or 2, a message, the problem named.
bool CleanError(const ChildResult& r, const std::string& words) {
  if (Crashed(r) || (r.exit_code != 1 && r.exit_code != 2)) return false;
  if (r.out.empty() && r.err.empty()) return false;
  return NamesProblem(r, words);
}

// The number after ` <word> ` in a probe's output (the Loader probe's
// "OK n retries r coalesced c group_failures g timeouts t ignored_peer_rows
// p"), or -1.
int64_t Reported(const ChildResult& r, const std::string& word) {
  const size_t at = r.out.find(" " + word + " ");
  if (at == std::string::npos) return -1;
  return std::atoll(r.out.c_str() + at + word.size() + 2);
}

// What a probe reads, and so which of the mode's expectations judges it.
enum class Reads { kNothing, kNative, kAttached, kTiny, kCounts };

struct Probe {
  std::string label;
  std::vector<std::string> args;
  Reads reads;
  // What a correct result looks like in the output, beyond exit 0.
  std::string correct_marker;
  // An export's folder and dataset: what it left there is judged too.
  std::string export_dir, export_dataset;
};

// Where an honest export puts sample `idx` of `dataset` (store/export.h):
// toy's under its metadata path, att's (attached: no paths) named by its
// foreign key; split "train", no collisions to rename.
std::string ExportName(const std::string& dataset, int32_t idx) {
  if (dataset == kAttachedDataset) return std::string(kSplit) + "/" + std::to_string(ForeignKeyOf(idx));
  return std::string(kSplit) + "/" + SamplePath(idx);
}

// What `cqlstream export` left in `dir`, whatever its outcome: "" when every
// file but manifest.csv holds the whole payload of a distinct sample of
// `dataset` under that sample's name (an export never writes a wrong or
// partial file, and leaves no empty one behind), the manifest names exactly
// those files, each once, and, when `complete`, every sample is there; else
// what is wrong.
std::string JudgeExport(const std::string& dir, const std::string& dataset, bool complete) {
  namespace fs = std::filesystem;
  std::map<std::vector<uint8_t>, int32_t> idx_of;
  for (int32_t i = 0; i < SamplesOf(dataset); ++i) idx_of.emplace(PayloadOf(dataset, i), i);
  std::error_code ec;
  if (!fs::exists(dir, ec)) return complete ? "no folder" : "";
  std::vector<std::string> files;
  std::set<int32_t> seen;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    const std::string rel = fs::relative(it->path(), dir).string();
    if (rel == "manifest.csv") continue;
    std::ifstream in(it->path(), std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto found = idx_of.find(bytes);
    if (found == idx_of.end()) return rel + ": " + std::to_string(bytes.size()) + " bytes that are no sample's";
    if (rel != ExportName(dataset, found->second)) {
      return rel + ": the bytes of sample " + std::to_string(found->second) + ", whose file is " +
             ExportName(dataset, found->second);
    }
    if (!seen.insert(found->second).second) return rel + ": a sample written twice";
    files.push_back(rel);
  }
  if (ec) return "cannot list the folder: " + ec.message();
  if (complete && seen.size() != static_cast<size_t>(SamplesOf(dataset))) {
    return std::to_string(seen.size()) + " samples written, not " + std::to_string(SamplesOf(dataset));
  }
  std::ifstream manifest(dir + "/manifest.csv");
  if (!manifest) return files.empty() ? "" : "files without a manifest";
  // The honest paths hold no comma or quote: a row's first field is the
  // path as written.
  std::vector<std::string> listed;
  std::string line;
  for (bool header = true; std::getline(manifest, line); header = false) {
    if (!header) listed.push_back(line.substr(0, line.find(',')));
  }
  std::sort(listed.begin(), listed.end());
  std::sort(files.begin(), files.end());
  return listed == files ? "" : "the manifest lists " + std::to_string(listed.size()) + " rows, the folder holds " +
                                    std::to_string(files.size()) + " files (or other names)";
}

// The CLI's command line for `args` against the server at `port`.
std::vector<std::string> CliCommand(uint16_t port, std::vector<std::string> args) {
  std::vector<std::string> v = {Cli()};
  v.insert(v.end(), args.begin(), args.end());
  for (const std::string& a : {std::string("--hosts"), std::string("127.0.0.1"), std::string("--port"),
                               std::to_string(port), std::string("--keyspace"), std::string(kKeyspace),
                               std::string("--timeout-ms"), std::string("1000")}) {
    v.push_back(a);
  }
  return v;
}

// The lines `info tiny` prints for tiny's classes when its counts are the
// honest ones (cli/cmd_info.cc PrintClasses; counts below 1,000).
std::string TinyClassLines() {
  std::string out;
  for (int32_t c = 0; c < kTinyClasses; ++c) {
    int32_t n = 0;
    for (int32_t i = 0; i < kTinySamples; ++i) n += TinyLabel(i) == c ? 1 : 0;
    out += "  " + std::string(5 - std::to_string(c).size(), ' ') + std::to_string(c) + "  " +
           std::string(1, static_cast<char>('a' + c)) + std::string(23, ' ') + " " +
           std::string(10 - std::to_string(n).size(), ' ') + std::to_string(n) + "\n";
  }
  return out;
}

std::vector<Probe> Probes(uint16_t port, const std::string& export_root) {
  const std::string p = std::to_string(port);
  auto cli = [&](std::vector<std::string> a) { return CliCommand(port, std::move(a)); };
  const std::string n = std::to_string(kSamples), na = std::to_string(kAttachedSamples),
                    nt = std::to_string(kTinySamples);
  const std::vector<std::string> bench = {"--epochs",     "1",    "--warmup", "0",   "--batch-size",
                                          "8",            "--max-attempts", "3", "--request-timeout-ms",
                                          "1000",         "--retry-budget-ms", "5000"};
  auto with = [&](std::vector<std::string> a, const std::vector<std::string>& more) {
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  return {
      {"cqlstream ping", cli({"ping"}), Reads::kNothing, "cluster: hostile"},
      {"cqlstream info", cli({"info", kDataset}), Reads::kNothing, n},
      // tiny has classes: info counts them with a scan of its metadata by token range.
      {"cqlstream info (tiny)", cli({"info", kTinyDataset}), Reads::kCounts, TinyClassLines()},
      {"cqlstream verify", cli({"verify", kDataset}), Reads::kNative, n},
      {"cqlstream bench", cli(with({"bench", kDataset, "--verify"}, bench)), Reads::kNative, n},
      {"cqlstream bench --ordered", cli(with({"bench", kDataset, "--verify", "--ordered"}, bench)), Reads::kNative, n},
      {"Loader", {CQLSTREAM_HOSTILE_LOADER, "--port", p}, Reads::kNative, "OK " + n},
      {"Loader ordered", {CQLSTREAM_HOSTILE_LOADER, "--port", p, "--ordered"}, Reads::kNative, "OK " + n},
      // The attached dataset: no checksums to verify, so the Loader probe,
      // which compares every payload, is the judge of its bytes.
      {"cqlstream bench (attached)", cli(with({"bench", kAttachedDataset}, bench)), Reads::kAttached, na},
      // Two epochs, 32 samples in flight: once the first 32 rows were read,
      // the rows of samples whose keys are known (all of the second
      // epoch's) are read in groups of up to 8.
      {"Loader (attached)",
       {CQLSTREAM_HOSTILE_LOADER, "--port", p, "--dataset", kAttachedDataset, "--epochs", "2", "--fixed-window",
        "32"},
       Reads::kAttached, "OK " + na},
      // tiny: every sample one row, so samples issued together are read in
      // coalesced groups (a quarter of the fixed window: up to 8 a request).
      {"cqlstream bench (tiny)", cli(with({"bench", kTinyDataset, "--verify"}, bench)), Reads::kTiny, nt},
      {"Loader (tiny)", {CQLSTREAM_HOSTILE_LOADER, "--port", p, "--dataset", kTinyDataset, "--fixed-window", "32"},
       Reads::kTiny, "OK " + nt},
      // export writes what it read: its folder is judged too (JudgeExport).
      {"cqlstream export", cli({"export", kDataset, export_root + "/toy"}), Reads::kNative,
       "exported " + n + " of " + n + " samples", export_root + "/toy", kDataset},
      {"cqlstream export (attached)", cli({"export", kAttachedDataset, export_root + "/att"}), Reads::kAttached,
       "exported " + na + " of " + na + " samples", export_root + "/att", kAttachedDataset},
  };
}

// "" when `r` is an outcome `e` allows, else why not.
std::string Judge(const ChildResult& r, Expect e, const Probe& probe, const ModeInfo& m) {
  if (Crashed(r)) return "crash, hang or runaway memory";
  const bool correct = r.exit_code == 0 && r.out.find(probe.correct_marker) != std::string::npos;
  if (r.exit_code == 3) return "a silently wrong result";
  switch (e) {
    case Expect::kCorrect:
      return correct ? "" : "expected the honest result";
    case Expect::kError:
      if (r.exit_code == 0) return "expected an error, got success (a silently wrong result)";
      return CleanError(r, m.problem) ? "" : std::string("expected a clean error naming the problem (") + m.problem + ")";
    case Expect::kEither:
      if (r.exit_code == 0) return correct ? "" : "success without the honest result";
      return CleanError(r, "") ? "" : "expected a clean error or the honest result";
  }
  return "?";
}

class HostileTest : public ::testing::TestWithParam<ModeInfo> {};

TEST_P(HostileTest, CliAndLoaderEndCleanly) {
  const ModeInfo m = GetParam();
  auto server = HostileServer::Start(m.mode);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string export_root = ::testing::TempDir() + "hostile_export_" + std::to_string(::getpid()) + "_" +
                                  std::string(m.name);
  std::error_code ignored;
  std::filesystem::remove_all(export_root, ignored);
  const std::vector<Probe> probes = Probes((*server)->port(), export_root);
  std::vector<ChildSpec> specs;
  for (const auto& p : probes) specs.push_back({p.label, p.args});
  const std::vector<ChildResult> results = RunAll(specs, kBound);
  (*server)->Stop();
  for (size_t i = 0; i < probes.size(); ++i) {
    Expect e = probes[i].reads == Reads::kNothing    ? m.expect_connect
               : probes[i].reads == Reads::kNative   ? m.expect
               : probes[i].reads == Reads::kAttached ? m.expect_attached
               : probes[i].reads == Reads::kCounts   ? m.expect_counts.value_or(m.expect_connect)
                                                     : m.expect_tiny;
    const std::string why = Judge(results[i], e, probes[i], m);
    EXPECT_EQ(why, "") << "mode " << m.name << ", " << results[i].Describe();
    if (!probes[i].export_dir.empty()) {
      EXPECT_EQ(JudgeExport(probes[i].export_dir, probes[i].export_dataset, results[i].exit_code == 0), "")
          << "mode " << m.name << ", what " << results[i].Describe() << " left in its folder";
    }
  }
  std::filesystem::remove_all(export_root, ignored);
  // The session leaves out system.peers rows that name a listed host, and
  // says so: ping prints how many, the Loader counts them in its metrics
  // (none when no row names a host twice).
  if (m.mode == Mode::kHonest || m.mode == Mode::kPeersRepeatHosts) {
    const int64_t want = m.mode == Mode::kHonest ? 0 : 2;
    for (size_t i = 0; i < probes.size(); ++i) {
      if (probes[i].label == "cqlstream ping") {
        // The line only when some were left out.
        const std::string line = want == 2 ? "system.peers rows left out: 2 " : "system.peers rows left out";
        EXPECT_EQ(results[i].out.find(line) != std::string::npos, want == 2) << results[i].Describe();
      } else if (probes[i].label.rfind("Loader", 0) == 0) {
        EXPECT_EQ(Reported(results[i], "ignored_peer_rows"), want) << results[i].Describe();
      }
    }
  }
  // Every reader of toy read again what was answered as if meant for
  // another request, and so read it whole (the mode's expectations).
  if (m.mode == Mode::kStrayAnswers) {
    EXPECT_GE((*server)->lies_told(), int64_t{kSamples}) << "each reader's first read of each sample";
  }
  // A lie nobody asked to hear tests nothing: the attached probes' first
  // fills send grouped key lookups, and each was answered with a lie.
  if (m.mode == Mode::kKeyGroupLies) {
    EXPECT_GT((*server)->lies_told(), 0);
  }
  // Grouped reads: the attached Loader probe reads its later rows in groups
  // (the keys are known, and more than 32 rows were read), the tiny Loader
  // probe its samples in coalesced groups. In the honest mode they were
  // sent, and each delivered all it was asked for; in the mode that lies
  // to them, each grouped answer lied, every kind at least once, and was
  // refused (the Loader read the lied-to samples again).
  struct Grouped {
    Mode lies;
    const char* probe;
    int64_t sent;
  };
  for (const Grouped& g : {Grouped{Mode::kForeignGroupLies, "Loader (attached)", (*server)->grouped_reads()},
                           Grouped{Mode::kNativeGroupLies, "Loader (tiny)", (*server)->coalesced_reads()}}) {
    if (m.mode != Mode::kHonest && m.mode != g.lies) continue;
    EXPECT_GT(g.sent, 0) << "no grouped read was sent to " << g.probe;
    if (m.mode == g.lies) {
      EXPECT_GE((*server)->lies_told(), 4) << "grouped reads: " << g.sent;
    }
    for (size_t i = 0; i < probes.size(); ++i) {
      if (probes[i].label != g.probe) continue;
      EXPECT_GT(Reported(results[i], "coalesced"), 0) << results[i].Describe();
      if (m.mode == g.lies) {
        EXPECT_GT(Reported(results[i], "retries"), 0) << results[i].Describe();
        EXPECT_GT(Reported(results[i], "group_failures"), 0) << results[i].Describe();
      } else {
        // Only a request that timed out (a busy machine) fails an honest
        // group's samples.
        EXPECT_TRUE(Reported(results[i], "group_failures") == 0 || Reported(results[i], "timeouts") > 0)
            << results[i].Describe();
      }
    }
  }
  // verify and export are the probes that must refuse two lies, with an
  // error naming the problem: they read toy's samples with their result
  // metadata, so an answer that names another table (as every native probe
  // must, by the mode's expectations; read again, it names another table
  // again); and they are the probes that read the metadata table, so a
  // repeated row (a second copy of a sample's metadata row is an answer
  // meant for another request), naming the block.
  const char* verify_names = m.mode == Mode::kMisnamedColumns ? "prepared with"
                             : m.mode == Mode::kMetaRowsLie   ? "segment 0 block 0"
                                                              : nullptr;
  if (verify_names != nullptr) {
    EXPECT_GT((*server)->lies_told(), 0);
    int judged = 0;
    for (size_t i = 0; i < probes.size(); ++i) {
      if (probes[i].label != "cqlstream verify" && probes[i].label != "cqlstream export") continue;
      ++judged;
      EXPECT_NE(results[i].exit_code, 0) << results[i].Describe();
      EXPECT_TRUE(CleanError(results[i], verify_names)) << results[i].Describe();
    }
    EXPECT_EQ(judged, 2);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, HostileTest, ::testing::ValuesIn(AllModes()),
                         [](const ::testing::TestParamInfo<ModeInfo>& i) {
                           std::string n = i.param.name;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// The server itself: honest answers decode with the client's own codec.
// `ls` reads the whole catalog: every dataset's row, then each one's
// segments. A listing that names a dataset twice, or a dataset whose
// segments page on without end, is refused by name.
TEST(HostileListing, LsRefusesAListingThatLies) {
  struct Case {
    Mode mode;
    bool correct;
    const char* words;  // of the listing (correct) or of the error
  };
  for (const Case& c : {Case{Mode::kHonest, true, kTinyDataset},
                        Case{Mode::kDatasetsListedTwice, false, "answered dataset 'toy' twice"},
                        Case{Mode::kSegmentsWithoutEnd, false, "more than 131072 rows"}}) {
    auto server = HostileServer::Start(c.mode);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    const std::vector<ChildResult> r = RunAll({{"cqlstream ls", CliCommand((*server)->port(), {"ls"})}}, kBound);
    (*server)->Stop();
    ASSERT_EQ(r.size(), 1u);
    EXPECT_FALSE(Crashed(r[0])) << r[0].Describe();
    if (c.correct) {
      EXPECT_EQ(r[0].exit_code, 0) << r[0].Describe();
      for (const char* d : {kDataset, kTinyDataset, kAttachedDataset}) {
        EXPECT_NE(r[0].out.find(d), std::string::npos) << r[0].Describe();
      }
    } else {
      EXPECT_TRUE(CleanError(r[0], c.words)) << r[0].Describe();
    }
    if (c.mode == Mode::kDatasetsListedTwice) {
      EXPECT_GT((*server)->lies_told(), 0);
    }
  }
}

// info's class counts refuse each lie of meta-scan-lies (one a run, in
// turn: tiny's 96 samples are one partition, so one range of the scan holds
// rows; a read sent again after a timeout would hear the next lie, so the
// runs go on until each was heard, six at most), and count the honest
// world's classes.
TEST(HostileCounts, InfoRefusesAMetadataScanThatLies) {
  const std::vector<std::string> words = {"a repeated or foreign page", "outside the range",
                                          "not an idx of that block"};
  for (const Mode mode : {Mode::kHonest, Mode::kMetaScanLies}) {
    auto server = HostileServer::Start(mode);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    std::set<std::string> heard;
    for (int run = 0; run < (mode == Mode::kHonest ? 2 : 6) && heard.size() < words.size(); ++run) {
      auto r = RunAll({{"cqlstream info (tiny)", CliCommand((*server)->port(), {"info", kTinyDataset})}}, kBound);
      ASSERT_EQ(r.size(), 1u);
      EXPECT_FALSE(Crashed(r[0])) << r[0].Describe();
      if (mode == Mode::kHonest) {
        EXPECT_EQ(r[0].exit_code, 0) << r[0].Describe();
        EXPECT_NE(r[0].out.find(TinyClassLines()), std::string::npos) << r[0].Describe();
        continue;
      }
      EXPECT_TRUE(CleanError(r[0], "a repeated or foreign page|outside the range|not an idx of that block"))
          << r[0].Describe();
      for (const auto& w : words) {
        if (r[0].err.find(w) != std::string::npos) heard.insert(w);
      }
    }
    const int64_t lies = (*server)->lies_told();
    (*server)->Stop();
    if (mode == Mode::kMetaScanLies) {
      EXPECT_EQ(heard.size(), words.size()) << "lies told: " << lies;
    }
  }
}

// stalled-rest: sample 5's first answer stands still mid-cell for 3 s,
// past the Loader's 1 s request timeout, then its rest comes inverted. The
// Loader reads the sample again; the rest of the first answer must land
// nowhere: the probe keeps every batch and compares them again 4 s after
// its epoch (the rest came 3 s after the first half). Before the fix, the rest was
// read into sample 5's place in a batch already handed out (its checksum
// had been checked), and the probe said WRONG.
TEST(HostileStalledRest, TheRestOfATimedOutAnswerLandsInNoBatch) {
  auto server = HostileServer::Start(Mode::kStalledRest);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string port = std::to_string((*server)->port());
  auto r = RunAll({{"Loader", {CQLSTREAM_HOSTILE_LOADER, "--port", port, "--recheck-after-ms", "4000"}}}, kBound);
  const int64_t lies = (*server)->lies_told();
  (*server)->Stop();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(lies, 1);
  EXPECT_EQ(r[0].exit_code, 0) << r[0].Describe();
  EXPECT_NE(r[0].out.find("OK " + std::to_string(kSamples) + " "), std::string::npos) << r[0].Describe();
  EXPECT_GE(Reported(r[0], "timeouts"), 1) << r[0].Describe();
}

TEST(HostileServer, ParsesTheSelectsCqlstreamSends) {
  auto s = ParseSelect("SELECT seg, idx, size, image_size, checksum, label, labels, data FROM hostile.d_toy "
                       "WHERE seg = ? AND idx = ?");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->table, "d_toy");
  EXPECT_EQ(s->columns.size(), 8u);
  EXPECT_EQ(s->where, (std::vector<std::string>{"seg", "idx"}));
  auto l = ParseSelect("SELECT release_version FROM system.local WHERE key='local'");
  ASSERT_TRUE(l.has_value());
  EXPECT_TRUE(l->where.empty());
  HonestWorld w;
  Answer a = w.Run(*s, {cql::Bytes{0, 0, 0, 0}, cql::Bytes{0, 0, 0, 3}});
  ASSERT_EQ(a.error_code, 0) << a.error;
  int64_t bytes = 0;
  for (const auto& r : a.table.rows) bytes += static_cast<int64_t>(r[7].as_blob().size());
  EXPECT_EQ(bytes, static_cast<int64_t>(SamplePayload(3).size()));
  EXPECT_GT(a.table.rows.size(), 1u) << "sample 3 spans several chunks";
  // The catalog is read with `SELECT *` (older catalogs lack later columns).
  auto all = ParseSelect("SELECT * FROM hostile.datasets WHERE name = ?");
  ASSERT_TRUE(all.has_value());
  Answer cat = w.Run(*all, {cql::Bytes{'t', 'o', 'y'}});
  ASSERT_EQ(cat.error_code, 0) << cat.error;
  EXPECT_GE(cat.table.columns.size(), 8u);
  EXPECT_EQ(cat.table.rows.size(), 1u);
  Answer bad = w.Run(*ParseSelect("SELECT nope FROM system.local"), {});
  EXPECT_EQ(bad.error_code, 0x2200);
  // The attached dataset: quoted identifiers, and IN with a list value.
  auto f = ParseSelect("SELECT \"img\" FROM \"hostile\".\"foreign\" WHERE \"id\" = ?");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->table, "foreign");
  EXPECT_EQ(f->columns, (std::vector<std::string>{"img"}));
  Answer row = w.Run(*f, {cql::Bytes{0, 0, 0x13, 0x91}});  // 5009: ForeignKeyOf(3)
  ASSERT_EQ(row.error_code, 0) << row.error;
  ASSERT_EQ(row.table.rows.size(), 1u);
  const auto img = row.table.rows[0][0].as_blob();
  EXPECT_EQ(std::vector<uint8_t>(img.begin(), img.end()), SamplePayload(3));
  auto g = ParseSelect("SELECT seg, idx, key FROM hostile.k_att WHERE seg = ? AND idx IN ?");
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->where, (std::vector<std::string>{"seg", "idx"}));
  EXPECT_EQ(g->in, (std::vector<bool>{false, true}));
  const cql::Bytes two_and_five = {0, 0, 0, 2, 0, 0, 0, 4, 0, 0, 0, 2, 0, 0, 0, 4, 0, 0, 0, 5};
  Answer keys = w.Run(*g, {cql::Bytes{0, 0, 0, 0}, two_and_five});
  ASSERT_EQ(keys.error_code, 0) << keys.error;
  ASSERT_EQ(keys.table.rows.size(), 2u);
  EXPECT_EQ(keys.table.rows[0][1].as_int(), 2);
  EXPECT_EQ(keys.table.rows[1][1].as_int(), 5);
  std::vector<uint16_t> pk;
  Answer binds = w.BindColumns(*g, &pk);
  ASSERT_EQ(binds.table.columns.size(), 2u);
  EXPECT_EQ(binds.table.columns[1].name, "in(idx)");
  EXPECT_EQ(binds.table.columns[1].type.id, TypeId::kList);
  EXPECT_EQ(w.Run(*g, {cql::Bytes{0, 0, 0, 0}, cql::Bytes{0, 0, 0, 9}}).error_code, 0x2200) << "a list that overruns";
  // A grouped foreign read: the rows of the keys listed, a key the table
  // does not hold answering none.
  auto many = ParseSelect("SELECT \"id\", \"img\" FROM \"hostile\".\"foreign\" WHERE \"id\" IN ?");
  ASSERT_TRUE(many.has_value());
  EXPECT_EQ(many->in, (std::vector<bool>{true}));
  cql::Bytes three(4 + 3 * 8);
  cql::StoreU32(three.data(), 3);
  for (int32_t i = 0; i < 3; ++i) {
    cql::StoreU32(three.data() + 4 + 8 * i, 4);
    cql::StoreU32(three.data() + 8 + 8 * i, static_cast<uint32_t>(ForeignKeyOf(i == 2 ? kAttachedSamples : 40 * i)));
  }
  Answer rows = w.Run(*many, {three});
  ASSERT_EQ(rows.error_code, 0) << rows.error;
  ASSERT_EQ(rows.table.rows.size(), 2u);
  EXPECT_EQ(rows.table.rows[0][0].as_int(), ForeignKeyOf(0));
  EXPECT_EQ(rows.table.rows[1][0].as_int(), ForeignKeyOf(40));
  const auto img40 = rows.table.rows[1][1].as_blob();
  EXPECT_EQ(std::vector<uint8_t>(img40.begin(), img40.end()), SamplePayload(40));
  // A coalesced read of tiny: one row per sample asked for, the limit
  // parsed (a partition of toy's several chunks answers two of them).
  auto co = ParseSelect("SELECT seg, idx, size, image_size, checksum, label, labels, data FROM hostile.d_tiny "
                        "WHERE seg = ? AND idx IN ? PER PARTITION LIMIT 2");
  ASSERT_TRUE(co.has_value());
  EXPECT_EQ(co->per_partition_limit, 2);
  EXPECT_EQ(co->in, (std::vector<bool>{false, true}));
  Answer tiny = w.Run(*co, {cql::Bytes{0, 0, 0, 0}, two_and_five});
  ASSERT_EQ(tiny.error_code, 0) << tiny.error;
  ASSERT_EQ(tiny.table.rows.size(), 2u);
  const auto tiny5 = tiny.table.rows[1][7].as_blob();
  EXPECT_EQ(std::vector<uint8_t>(tiny5.begin(), tiny5.end()), TinyPayload(5));
  EXPECT_LE(TinyPayload(5).size(), static_cast<size_t>(kTinyMaxSize));
  co->table = "d_toy";
  Answer toy = w.Run(*co, {cql::Bytes{0, 0, 0, 0}, two_and_five});
  ASSERT_EQ(toy.error_code, 0) << toy.error;
  EXPECT_EQ(toy.table.rows.size(), 3u) << "toy's sample 2 (one chunk) and two of sample 5's three chunks";
  EXPECT_FALSE(ParseSelect("SELECT seg FROM hostile.d_tiny WHERE seg = ? PER PARTITION LIMIT x").has_value());
  // A scan by token range (info's class counts): the rows of the partitions
  // in the range, in token order.
  auto scan = ParseSelect("SELECT seg, block, idx, label FROM hostile.m_tiny WHERE token(seg, block) > ? AND "
                          "token(seg, block) <= ?");
  ASSERT_TRUE(scan.has_value());
  EXPECT_EQ(scan->token_of, (std::vector<std::string>{"seg", "block"}));
  EXPECT_EQ(scan->where, (std::vector<std::string>{kTokenAbove, kTokenAtMost}));
  auto token = [](int64_t t) {
    cql::Bytes b(8);
    cql::StoreU64(b.data(), static_cast<uint64_t>(t));
    return b;
  };
  Answer ring = w.Run(*scan, {token(INT64_MIN), token(INT64_MAX)});
  ASSERT_EQ(ring.error_code, 0) << ring.error;
  ASSERT_EQ(ring.table.rows.size(), static_cast<size_t>(kTinySamples));
  EXPECT_EQ(ring.table.rows[5][3], Value::Int(TinyLabel(5)));
  EXPECT_TRUE(w.Run(*scan, {token(5), token(5)}).table.rows.empty());
  auto other_key = ParseSelect("SELECT seg FROM hostile.m_tiny WHERE token(seg) > ? AND token(seg) <= ?");
  ASSERT_TRUE(other_key.has_value());
  EXPECT_NE(w.Run(*other_key, {token(0), token(1)}).error_code, 0);
  EXPECT_FALSE(ParseSelect("SELECT seg FROM hostile.m_tiny WHERE token(seg, block) > ? AND token(seg) <= ?"));
}

}  // namespace
}  // namespace cqlstream::hostile
