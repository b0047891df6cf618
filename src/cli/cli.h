// Copyright (c) cqlstream authors.
//
// Shared pieces of the cqlstream command-line tool: the connection flags
// every subcommand takes, and error reporting.
//
// Connection flags (each also from CQLSTREAM_<NAME> in the environment; a
// flag wins over the variable): --hosts H1,H2 (127.0.0.1), --port (9042),
// --keyspace (cqlstream), --username, --password-file, --tls-ca, --tls-cert,
// --tls-key, --tls-server-name, --local-dc, --connections(-per-host),
// --io-threads, plus --tls-insecure-skip-verify. They are resolved and
// checked by the resolver shared with Python and DALI (loader/option_kit.h). The password is
// never taken from a flag (it would show in `ps`): --password-file or
// CQLSTREAM_PASSWORD / CQLSTREAM_PASSWORD_FILE.
//
// Thread-safety: used from main() only.
#ifndef CQLSTREAM_CLI_CLI_H_
#define CQLSTREAM_CLI_CLI_H_

#include <CLI/CLI.hpp>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cqlstream/dataset.h"
#include "cqlstream/options.h"
#include "cqlstream/status.h"
#include "net/session.h"
#include "store/pack_options.h"

namespace cqlstream::cli {

class ConnectionFlags {
 public:
  // Adds the flags to `app` (a subcommand).
  void Add(CLI::App* app);
  // Environment first, then the flags given; validated. `interrupt` (may be
  // null): a secure bundle's metadata fetch gives up once it is set.
  StatusOr<ConnectionOptions> Resolve(const std::atomic<bool>* interrupt = nullptr) const;
  // Resolve(interrupt) + ConnectTo.
  StatusOr<std::shared_ptr<net::Session>> Connect(net::SessionOptions so = {},
                                                  const std::atomic<bool>* interrupt = nullptr) const;
  // Session::Connect to `o` (what Resolve gave), with a message naming the
  // hosts on failure. `interrupt` (may be null; store::InstallInterruptHandler's
  // flag, which lives as long as the process): the connect gives up once it
  // is set (Cancelled "interrupted"), and the session forgets it after.
  static StatusOr<std::shared_ptr<net::Session>> ConnectTo(const ConnectionOptions& o, net::SessionOptions so = {},
                                                           const std::atomic<bool>* interrupt = nullptr);
  // Connect() without watching server events, then the catalog entry of
  // dataset `name`: what the commands that read one dataset (verify,
  // export, select, pack) open first. `interrupt` as for Connect; the
  // catalog read gives up once it is set too.
  struct OpenedDataset {
    std::shared_ptr<net::Session> session;
    DatasetInfo dataset;
  };
  StatusOr<OpenedDataset> OpenDataset(const std::string& name, const std::atomic<bool>* interrupt = nullptr) const;

 private:
  std::string hosts_, keyspace_, username_, password_file_, tls_ca_, tls_cert_, tls_key_, tls_server_name_, local_dc_;
  std::string tls_key_passphrase_file_, secure_bundle_;
  std::optional<double> connect_timeout_s_;
  // Unset unless given (then checked by the option kit, 0 included).
  std::optional<int64_t> port_, connections_, max_shard_connections_, io_threads_, timeout_ms_;
  bool tls_insecure_ = false;
};

// Prints "cqlstream: error: <message>" to stderr and returns the exit code
// for the status (2 for bad arguments, 1 otherwise).
int ReportError(const Status& s);
// The exit of a command that took store/progress.h's interrupt flag:
// where `st` is a Cancelled that `stop` (set) explains, prints
// "cqlstream: <interrupted>" to stderr and returns 130 (128 + SIGINT, as a
// shell reports a process the signal ended; SIGTERM, which sets the same
// flag, gives 130 too, as for ingest and attach); otherwise ReportError(st).
int ReportErrorOrInterrupt(const Status& st, const std::atomic<bool>* stop, std::string_view interrupted);

// What `cqlstream pack` and `ingest --pack` print for a store::PackReport:
// one line per segment, then the totals (cmd_pack.cc).
void PrintPackReport(const store::PackReport& r);

// A subcommand: registers its flags on `app` and sets the action to run.
// The action returns the process exit code.
using Action = std::function<int()>;
void RegisterPing(CLI::App& app, Action* action);
// Datasets (src/cli/cmd_<name>.cc).
void RegisterIngest(CLI::App& app, Action* action);
void RegisterAttach(CLI::App& app, Action* action);
void RegisterLs(CLI::App& app, Action* action);
void RegisterInfo(CLI::App& app, Action* action);
void RegisterSelect(CLI::App& app, Action* action);
void RegisterSplit(CLI::App& app, Action* action);
void RegisterVerify(CLI::App& app, Action* action);
void RegisterPack(CLI::App& app, Action* action);
void RegisterExport(CLI::App& app, Action* action);
void RegisterDrop(CLI::App& app, Action* action);
void RegisterBench(CLI::App& app, Action* action);

}  // namespace cqlstream::cli

#endif  // CQLSTREAM_CLI_CLI_H_
