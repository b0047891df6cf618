// Copyright (c) cqlstream authors.
//
// Bindings of the sample writer (store/sample_writer.h) for cqlstream.Writer.
// Opening (connecting, creating the dataset, claiming the segment), add
// (validating, copying the bytes, waiting for room in the pipeline), flush,
// close and abort release the GIL; the bytes of a sample are read without
// the GIL from the Python bytes objects the call holds (immutable, alive for
// the call). Errors become the cqlstream.errors exceptions (status_error.h).
//
// Thread-safety: a WriterHandle may be used from several Python threads; the
// SampleWriter serializes its calls, and the handle's pointers are read and
// written only with the GIL held (I/O runs on copies of them).
#include "bind_writer.h"

#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bind_options.h"
#include "cqlstream/dataset.h"
#include "interruptible.h"
#include "loader/option_kit.h"
#include "net/session.h"
#include "status_error.h"
#include "store/preprocess.h"
#include "store/sample_writer.h"
#include "store/schema.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace cqlstream::python {
namespace {

// What cqlstream.Writer passes: the dataset and split, the writer's
// options, and the connection options (the option kit's, as cqlstream.Loader
// takes them; its throttle fields are not used here).
struct WriterArgs : loader::OptionArgs {
  std::string dataset;
  std::string split = "train";
  std::string source_id;
  std::optional<std::string> label_kind;
  std::optional<std::vector<std::string>> classes;
  std::optional<std::string> kind;
  std::optional<int64_t> chunk_size;
  std::string description;
  std::optional<std::string> replication;
  int64_t concurrency = 64;
  int64_t memory_mb = 256;
  double commit_interval_s = 2.0;
  int64_t commit_every = 0;
  std::string source = "cqlstream.Writer";
  // Ingest-time preprocessing (store/preprocess.h); 0 / "" / false: not set
  // (then the existing dataset's is used, none for a new one).
  int64_t resize_shorter = 0;
  int64_t center_crop = 0;
  std::string reencode;
  bool resize_target = false;
};

StatusOr<store::SampleWriterOptions> WriterOptions(const WriterArgs& a, const std::string& keyspace) {
  store::SampleWriterOptions o;
  o.keyspace = keyspace;
  o.dataset = a.dataset;
  o.split = a.split;
  o.source_id = a.source_id;
  o.source = a.source;
  if (a.label_kind) {
    CQLS_ASSIGN_OR_RETURN(o.label_kind, ParseLabelKind(*a.label_kind));
  }
  o.class_names = a.classes;
  if (a.kind) {
    CQLS_ASSIGN_OR_RETURN(o.kind, ParseSampleKind(*a.kind));
  }
  if (a.chunk_size) {
    if (*a.chunk_size < 1024 || *a.chunk_size > (16 << 20)) {
      return Status::InvalidArgument("chunk_size must be between 1024 and 16777216 bytes");
    }
    o.chunk_size = static_cast<int32_t>(*a.chunk_size);
  }
  o.description = a.description;
  if (a.replication) {
    CQLS_ASSIGN_OR_RETURN(o.replication, store::Replication::Parse(*a.replication));
    o.replication_given = true;
  }
  if (a.concurrency < 1 || a.concurrency > 4096) return Status::InvalidArgument("concurrency must be in [1, 4096]");
  o.concurrency = static_cast<int>(a.concurrency);
  if (a.memory_mb < 1 || a.memory_mb > (1 << 20)) return Status::InvalidArgument("memory_mb must be in [1, 1048576]");
  o.memory_bytes = a.memory_mb << 20;
  if (!std::isfinite(a.commit_interval_s) || a.commit_interval_s < 0 || a.commit_interval_s > 86400) {
    return Status::InvalidArgument("commit_interval must be in [0, 86400] seconds");
  }
  o.commit_interval = std::chrono::milliseconds(static_cast<int64_t>(a.commit_interval_s * 1000));
  if (a.commit_every < 0) return Status::InvalidArgument("commit_every must not be negative");
  o.commit_every = a.commit_every;
  if (a.resize_shorter || a.center_crop || !a.reencode.empty() || a.resize_target) {
    if (a.resize_shorter < 0 || a.resize_shorter > store::kMaxPreprocessSide || a.center_crop < 0 ||
        a.center_crop > store::kMaxPreprocessSide) {
      return Status::InvalidArgument(
          fmt::format("resize_shorter and center_crop must be in [1, {}]", store::kMaxPreprocessSide));
    }
    CQLS_ASSIGN_OR_RETURN(const store::PreprocessSpec pre,
                          store::PreprocessSpec::FromOptions(static_cast<int>(a.resize_shorter),
                                                             static_cast<int>(a.center_crop), a.reencode,
                                                             a.resize_target));
    o.preprocess = pre.ToString();
  }
  return o;
}

std::span<const uint8_t> Bytes(const nb::bytes& b) {
  return {reinterpret_cast<const uint8_t*>(b.c_str()), b.size()};
}

class WriterHandle {
 public:
  explicit WriterHandle(const WriterArgs& a) {
    StatusOr<std::unique_ptr<store::SampleWriter>> w = Status::Internal("not opened");
    std::shared_ptr<net::Session> session;
    // Ctrl-C ends the connect and the catalog reads at their next wait; the
    // writes that follow (keyspace and tables where missing, the segment's
    // claim) run to their end first (store::SampleWriter::Open).
    auto stop = std::make_shared<std::atomic<bool>>(false);
    OpenInterruptibly(
        [&] {
          w = Open(a, &session, stop);
          if (!w.ok() && session) session->Close();
        },
        [&] {
          // Closed first: the writer's end then commits nothing (its
          // segment stays claimed, as a writer's that was dropped unclosed).
          if (session) session->Close();
          w = Status::Cancelled("interrupted");
        },
        stop.get());
    writer_ = std::shared_ptr<store::SampleWriter>(Unwrap(std::move(w)).release());
    session_ = std::move(session);
  }
  ~WriterHandle() {
    // An open writer dropped without close(): its watermark is committed, its segment stays open.
    if (writer_) (void)Stop(false);
  }

  uint64_t Add(const nb::bytes& data, std::optional<int32_t> label, std::optional<std::vector<int32_t>> labels,
               std::optional<nb::bytes> target, std::string path, std::string target_path,
               std::map<std::string, std::string> extra) {
    RefuseFromTheCheck("add");
    std::shared_ptr<store::SampleWriter> w = Live();
    store::SampleInput in;
    in.data = Bytes(data);
    if (target) in.target = Bytes(*target);
    in.label = label;
    if (labels) in.labels = std::move(*labels);
    in.path = std::move(path);
    in.target_path = std::move(target_path);
    in.extra = std::move(extra);
    // Ctrl-C ends a wait for memory or a write slot (the writes in flight
    // hold them), the sample not taken.
    bool raised = false;
    const std::function<bool()> interrupted = InterruptCheck(&raised);
    StatusOr<SampleKey> k = Status::Internal("not added");
    {
      nb::gil_scoped_release release;
      k = w->Add(in, interrupted);
    }
    if (raised) throw nb::python_error();
    return Unwrap(std::move(k));
  }

  // Ctrl-C ends the wait for the writes in flight: nothing committed, the
  // writer still open (the writes go on).
  void Flush() {
    RefuseFromTheCheck("flush");
    std::shared_ptr<store::SampleWriter> w = Live();
    bool raised = false;
    const std::function<bool()> interrupted = InterruptCheck(&raised);
    Status st;
    {
      nb::gil_scoped_release release;
      st = w->Flush(interrupted);
    }
    if (raised) throw nb::python_error();
    Check(st);
  }

  // Close (seal) or Abort, then the session goes: idempotent. Ctrl-C ends
  // the wait for the writes in flight as in flush(): the writer stays open.
  void Finish(bool seal) {
    RefuseFromTheCheck(seal ? "close" : "abort");
    bool raised = false;
    const Status st = Stop(seal, InterruptCheck(&raised), &raised);
    if (raised) throw nb::python_error();
    Check(st);
  }

  nb::dict Report() const {
    store::SampleWriterReport r;
    if (last_) {
      r = *last_;
    } else if (std::shared_ptr<store::SampleWriter> w = writer_) {
      nb::gil_scoped_release release;
      r = w->report();
    }
    nb::dict d;
    d["dataset"] = r.dataset;
    d["split"] = r.split;
    d["source_id"] = r.source_id;
    d["created_dataset"] = r.created_dataset;
    d["seg"] = r.seg;
    d["action"] = r.action;
    d["start_count"] = r.start_count;
    d["added"] = r.added;
    d["resumed"] = r.resumed;
    d["written"] = r.written;
    d["bytes"] = r.bytes;
    d["count"] = r.count;
    d["sealed"] = r.sealed;
    return d;
  }

  bool closed() const { return !writer_; }

  // A call from a signal handler that the interrupt check of add(),
  // flush(), close() or abort() runs (on the same thread) raises
  // RuntimeError instead of waiting on the feeder's lock, which that call
  // holds.
  void RefuseFromTheCheck(const std::string& call) const {
    if (checking_.load() == std::this_thread::get_id()) {
      throw std::runtime_error(
          fmt::format("Writer.{}() called from a signal handler while another call of this writer (add, flush, "
                      "close or abort) waits: raise in the handler (KeyboardInterrupt ends that call) and call "
                      "it after",
                      call));
    }
  }

 private:
  static StatusOr<std::unique_ptr<store::SampleWriter>> Open(const WriterArgs& a,
                                                             std::shared_ptr<net::Session>* session,
                                                             std::shared_ptr<const std::atomic<bool>> stop) {
    CQLS_ASSIGN_OR_RETURN(const loader::ResolvedOptions kit,
                          loader::ResolveOptions(a, loader::OptionSpelling::kKeyword, stop.get()));
    CQLS_ASSIGN_OR_RETURN(const store::SampleWriterOptions o, WriterOptions(a, kit.connection.keyspace));
    net::SessionOptions so;
    so.watch_events = false;
    so.stop = std::move(stop);
    CQLS_ASSIGN_OR_RETURN(*session, net::Session::Connect(kit.connection, so));
    return store::SampleWriter::Open(*session, o);  // clears the stop before it writes
  }

  std::shared_ptr<store::SampleWriter> Live() const {
    if (!writer_) Check(Status::InvalidArgument("this Writer is closed"));
    return writer_;
  }

  // Python's signal-handler check for the core's waits (SignalCheck; empty
  // off the main thread), *raised set when a handler raised. The handlers
  // run inside it, on this thread, while the core holds the feeder's lock:
  // a handler that calls back into this writer is refused
  // (RefuseFromTheCheck), as it would wait on that lock for ever.
  std::function<bool()> InterruptCheck(bool* raised) { return SignalCheck(raised, &checking_); }

  // Called with the GIL: the pointers are taken out with it, the work runs
  // without it. A concurrent add() holds its own copy of the writer: the
  // writer serializes it with Close / Abort (it then finds the writer closed).
  // Interrupted (`interrupted` said yes and set *raised: the writer is
  // still open), the pointers are put back.
  Status Stop(bool seal, const std::function<bool()>& interrupted = {}, const bool* raised = nullptr) {
    std::shared_ptr<store::SampleWriter> w = std::move(writer_);
    std::shared_ptr<net::Session> s = std::move(session_);
    writer_.reset();
    session_.reset();
    if (!w) return Status::OK();
    Status st;
    {
      nb::gil_scoped_release release;
      st = seal ? w->Close(interrupted) : w->Abort(interrupted);
    }
    if (raised != nullptr && *raised) {
      writer_ = std::move(w);
      session_ = std::move(s);
      return st;
    }
    store::SampleWriterReport r;
    {
      nb::gil_scoped_release release;
      r = w->report();
      w.reset();
      if (s) s->Close();
    }
    last_ = std::make_shared<store::SampleWriterReport>(std::move(r));
    return st;
  }

  std::shared_ptr<store::SampleWriter> writer_;
  std::shared_ptr<net::Session> session_;
  std::shared_ptr<store::SampleWriterReport> last_;  // the report once finished
  // The thread running add()'s interrupt check (Python's signal handlers),
  // while it runs.
  std::atomic<std::thread::id> checking_{};
};

}  // namespace

void BindWriter(nb::module_& m) {
  nb::class_<WriterArgs> args(m, "WriterArgs", "What cqlstream.Writer passes to the core (see cqlstream.Writer).");
  args.def(nb::init<>())
      .def_rw("dataset", &WriterArgs::dataset)
      .def_rw("split", &WriterArgs::split)
      .def_rw("source_id", &WriterArgs::source_id)
      .def_rw("label_kind", &WriterArgs::label_kind)
      .def_rw("classes", &WriterArgs::classes)
      .def_rw("kind", &WriterArgs::kind)
      .def_rw("chunk_size", &WriterArgs::chunk_size)
      .def_rw("description", &WriterArgs::description)
      .def_rw("replication", &WriterArgs::replication)
      .def_rw("concurrency", &WriterArgs::concurrency)
      .def_rw("memory_mb", &WriterArgs::memory_mb)
      .def_rw("commit_interval_s", &WriterArgs::commit_interval_s)
      .def_rw("commit_every", &WriterArgs::commit_every)
      .def_rw("source", &WriterArgs::source)
      .def_rw("resize_shorter", &WriterArgs::resize_shorter)
      .def_rw("center_crop", &WriterArgs::center_crop)
      .def_rw("reencode", &WriterArgs::reencode)
      .def_rw("resize_target", &WriterArgs::resize_target);
  DefConnectionOptions(args);

  nb::class_<WriterHandle>(m, "WriterHandle", "A sample writer of one split (store::SampleWriter).")
      .def(nb::init<const WriterArgs&>(), "args"_a)
      .def("add", &WriterHandle::Add, "data"_a, "label"_a.none(), "labels"_a.none(), "target"_a.none(), "path"_a,
           "target_path"_a, "extra"_a, "Writes the next sample; returns its key.")
      .def("flush", &WriterHandle::Flush, "Waits for the writes in flight and commits the watermark.")
      .def("close", [](WriterHandle& h) { h.Finish(true); }, "Flushes and seals the segment.")
      .def("abort", [](WriterHandle& h) { h.Finish(false); }, "Flushes and leaves the segment open.")
      .def("report", &WriterHandle::Report, "The writer's counts as a dict.")
      .def_prop_ro("closed", &WriterHandle::closed);
}

}  // namespace cqlstream::python
