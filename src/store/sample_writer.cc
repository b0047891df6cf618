// Copyright (c) cqlstream authors.
#include "store/sample_writer.h"

#include <fmt/format.h>

#include <cctype>
#include <cstring>
#include <set>
#include <utility>

#include "store/catalog.h"
#include "store/source.h"
#include "store/split_plan.h"
#include "util/escape.h"

namespace cqlstream::store {
namespace {

using Clock = std::chrono::steady_clock;

// Whether `s` is valid UTF-8 (no overlong forms, no surrogates, at most
// U+10FFFF): what the server accepts in a text column.
bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<uint8_t>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    for (size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return false;
      const auto b = static_cast<uint8_t>(s[i + k]);
      if ((b & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}

bool ValidSplit(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) return false;
  }
  return true;
}

Status CheckOptions(const SampleWriterOptions& o) {
  CQLS_RETURN_IF_ERROR(ValidateGeneratedKeyspace(o.keyspace));
  CQLS_RETURN_IF_ERROR(ValidateDatasetName(o.dataset));
  if (!ValidSplit(o.split)) {
    return Status::InvalidArgument(fmt::format("split '{}' is not [A-Za-z0-9_.-]{{1,64}}", PrintableText(o.split)));
  }
  if (o.source_id.empty() || o.source_id.size() > 1024 || !ValidUtf8(o.source_id)) {
    return Status::InvalidArgument("source_id must be non-empty UTF-8 text of at most 1024 bytes");
  }
  if (!ValidUtf8(o.source) || o.source.size() > kMaxWriterTextBytes) {
    return Status::InvalidArgument("source must be UTF-8 text of at most 65536 bytes");
  }
  if (o.concurrency < 1 || o.concurrency > 4096) {
    return Status::InvalidArgument(fmt::format("concurrency {} must be in 1..4096", o.concurrency));
  }
  if (o.memory_bytes < (1 << 20)) return Status::InvalidArgument("memory must be at least 1 MiB");
  if (o.meta_batch < 1 || o.meta_batch > 1024) return Status::InvalidArgument("meta_batch must be in 1..1024");
  if (o.write_attempts < 1) return Status::InvalidArgument("write_attempts must be at least 1");
  if (o.commit_every < 0) return Status::InvalidArgument("commit_every must not be negative");
  if (o.chunk_size && (*o.chunk_size < 1024 || *o.chunk_size > (16 << 20))) {
    return Status::InvalidArgument(fmt::format("chunk_size {} must be between 1024 and 16777216 bytes", *o.chunk_size));
  }
  return Status::OK();
}

// What the writer wants the dataset to be, given the one that exists (if any).
StatusOr<DatasetSpec> ResolveSpec(const SampleWriterOptions& o, const std::optional<DatasetInfo>& existing) {
  DatasetSpec spec;
  spec.name = o.dataset;
  spec.label_kind = o.label_kind.value_or(existing ? existing->label_kind : LabelKind::kNone);
  spec.sample_kind = o.kind.value_or(existing ? existing->sample_kind : SampleKind::kImage);
  spec.chunk_size = o.chunk_size.value_or(kDefaultChunkSize);
  spec.chunk_size_given = o.chunk_size.has_value();
  spec.description = o.description;
  spec.preprocess = o.preprocess.value_or(existing ? existing->preprocess : std::string());
  const bool classes = spec.label_kind == LabelKind::kClass || spec.label_kind == LabelKind::kMultiLabel;
  if (o.class_names && !classes) {
    return Status::InvalidArgument(fmt::format("class names were given, but the label kind is '{}'",
                                               LabelKindName(spec.label_kind)));
  }
  if (classes) {
    if (existing) {
      if (o.class_names && *o.class_names != existing->class_names) {
        return Status::InvalidArgument(fmt::format(
            "dataset '{}' exists with {} classes fixed when it was created (see cqlstream info {}); the writer was "
            "given {} class names that are not the same list in the same order: give the dataset's list or none",
            o.dataset, existing->class_names.size(), o.dataset, o.class_names->size()));
      }
      spec.class_names = existing->class_names;
    } else {
      if (!o.class_names || o.class_names->empty()) {
        return Status::InvalidArgument(fmt::format(
            "dataset '{}' does not exist: creating it with label kind '{}' needs its class names (label i is class "
            "i; they are fixed at creation)",
            o.dataset, LabelKindName(spec.label_kind)));
      }
      std::set<std::string> seen;
      for (const auto& c : *o.class_names) {
        if (c.empty() || !ValidUtf8(c)) return Status::InvalidArgument("class names must be non-empty UTF-8 text");
        if (!seen.insert(c).second) {
          return Status::InvalidArgument(fmt::format("class name '{}' is given twice", PrintableText(c)));
        }
      }
      spec.class_names = *o.class_names;
    }
  }
  if (existing) CQLS_RETURN_IF_ERROR(CheckCompatible(*existing, spec));
  CQLS_RETURN_IF_ERROR(CheckSpecSizes(spec));
  return spec;
}

}  // namespace

SampleWriter::SampleWriter(std::shared_ptr<net::Session> session, const SampleWriterOptions& options)
    : session_(std::move(session)), o_(options), budget_(std::make_shared<ByteBudget>(options.memory_bytes)) {}

SampleWriter::~SampleWriter() { (void)Abort(); }

StatusOr<std::unique_ptr<SampleWriter>> SampleWriter::Open(std::shared_ptr<net::Session> session,
                                                           const SampleWriterOptions& options) {
  if (!session) return Status::InvalidArgument("no session");
  CQLS_RETURN_IF_ERROR(CheckOptions(options));
  std::unique_ptr<SampleWriter> w(new SampleWriter(std::move(session), options));
  CQLS_RETURN_IF_ERROR(w->OpenImpl());
  w->session_->SetStop(nullptr);  // open (a complete split writes nothing): the writer's calls take their own checks
  return w;
}

Status SampleWriter::OpenImpl() {
  net::Session& s = *session_;
  std::optional<DatasetInfo> existing;
  auto d = LoadDataset(s, o_.keyspace, o_.dataset);
  if (d.ok()) {
    existing = std::move(d).value();
  } else if (!d.status().IsNotFound()) {
    return d.status();
  }
  CQLS_ASSIGN_OR_RETURN(std::vector<SegRow> rows, ReadSegRows(s, o_.keyspace, o_.dataset));
  if (!existing && !rows.empty()) {
    return Status::AlreadyExists(fmt::format(
        "dataset '{}' has no catalog entry but {} segment rows remain (an interrupted drop?); run "
        "'cqlstream drop {}' first",
        o_.dataset, rows.size(), o_.dataset));
  }
  CQLS_ASSIGN_OR_RETURN(const DatasetSpec spec, ResolveSpec(o_, existing));
  CQLS_ASSIGN_OR_RETURN(read_, MakeReadOptions(spec.sample_kind, spec.preprocess));
  const SplitDecision decision = DecideSplit(rows, o_.split, o_.source_id, kWriterFingerprint);
  if (decision.action == SplitAction::kAppend) {
    return Status::AlreadyExists(fmt::format(
        "source_id '{}' already names a segment of split '{}' of dataset '{}' that the sample writer did not write "
        "(cqlstream ingest?); use another source_id",
        PrintableText(o_.source_id), o_.split, o_.dataset));
  }
  // Not yet shared with another thread; the locks are for the analysis.
  MutexLock f(&feed_mu_);
  MutexLock l(&mu_);
  report_.dataset = o_.dataset;
  report_.split = o_.split;
  report_.source_id = o_.source_id;
  report_.action = SplitActionName(decision.action);
  if (decision.action == SplitAction::kComplete) {
    dataset_ = *existing;
    report_.seg = decision.segment->seg;
    start_ = decision.segment->c;
    report_.start_count = report_.count = start_.count;
    report_.sealed = true;
    return Status::OK();
  }
  // The writes below are never cut short by an opening's interrupt: a DDL
  // or a claim given up may still be applied (net/session.h
  // SessionOptions::stop).
  s.SetStop(nullptr);
  std::string note;
  CQLS_RETURN_IF_ERROR(EnsureKeyspace(s, o_.keyspace, o_.replication, o_.replication_given, &note));
  CQLS_RETURN_IF_ERROR(EnsureCatalog(s, o_.keyspace));
  CQLS_ASSIGN_OR_RETURN(dataset_, CreateOrOpenDataset(s, o_.keyspace, spec, &report_.created_dataset));
  CQLS_ASSIGN_OR_RETURN(statements_, PrepareIngestStatements(s, dataset_));
  SegmentTarget target;
  if (decision.action == SplitAction::kResume) {
    const SegRow& g = *decision.segment;
    // The writer never skips a position: what it committed is dense.
    if (g.c.count < 0 || g.c.count != g.c.next_pos || g.c.count > INT32_MAX) {
      return Status::Corruption(fmt::format(
          "segment {} of dataset '{}' (source_id '{}') says count {} and next_pos {}: a sample writer's segment has "
          "count == next_pos; it cannot be resumed",
          g.seg, o_.dataset, PrintableText(o_.source_id), g.c.count, g.c.next_pos));
    }
    target = SegmentTarget{g.seg, g.c, g.writetime};
  } else {
    CQLS_ASSIGN_OR_RETURN(ClaimedSegment claimed,
                          ClaimSegment(s, o_.keyspace, o_.dataset,
                                       NewSegment{o_.split, o_.source_id, o_.source, kWriterFingerprint}));
    target = SegmentTarget{claimed.seg, Committed(), claimed.writetime};
  }
  SegmentWriteOptions wo;
  wo.concurrency = o_.concurrency;
  wo.consistency = o_.consistency;
  wo.write_attempts = o_.write_attempts;
  wo.max_batch_bytes = o_.max_batch_bytes;
  wo.meta_batch = o_.meta_batch;
  writer_ = SegmentWriter::Create(s, wo, dataset_, statements_, target, budget_);
  start_ = target.start;
  report_.seg = target.seg;
  report_.start_count = report_.count = start_.count;
  last_commit_ = Clock::now();
  return Status::OK();
}

Status SampleWriter::Validate(const SampleInput& in, int64_t position) const {
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(fmt::format("sample {} (path '{}'): {}", position, PrintableText(in.path), what));
  };
  if (in.data.empty()) return bad("no bytes");
  const uint64_t target_size = in.target ? in.target->size() : 0;
  if (in.data.size() + target_size > kMaxPayloadBytes) {
    return bad(fmt::format("larger than {} bytes (with its target)", kMaxPayloadBytes));
  }
  const LabelKind k = dataset_.label_kind;
  const int64_t classes = static_cast<int64_t>(dataset_.class_names.size());
  const char* kind = LabelKindName(k).data();
  if (k != LabelKind::kClass && in.label) return bad(fmt::format("a label was given, but the label kind is '{}'", kind));
  if (k != LabelKind::kMultiLabel && !in.labels.empty()) {
    return bad(fmt::format("labels were given, but the label kind is '{}'", kind));
  }
  if (k != LabelKind::kTarget && in.target) return bad(fmt::format("a target was given, but the label kind is '{}'", kind));
  if (k == LabelKind::kClass) {
    if (!in.label) return bad("no label (the label kind is class)");
    if (*in.label < 0 || *in.label >= classes) {
      return bad(fmt::format("label {} is not in [0, {}) (the dataset's classes)", *in.label, classes));
    }
  }
  if (k == LabelKind::kMultiLabel) {
    if (in.labels.size() > kMaxLabelsPerSample) {
      return bad(fmt::format("{} labels (at most {})", in.labels.size(), kMaxLabelsPerSample));
    }
    for (int32_t x : in.labels) {
      if (x < 0 || x >= classes) return bad(fmt::format("label {} is not in [0, {}) (the dataset's classes)", x, classes));
    }
  }
  if (k == LabelKind::kTarget) {
    if (!in.target || in.target->empty()) return bad("no target bytes (the label kind is target)");
  }
  size_t text = in.path.size() + in.target_path.size();
  for (const auto& [key, value] : in.extra) text += key.size() + value.size();
  if (text > kMaxWriterTextBytes) {
    return bad(fmt::format("path, target path and extra hold {} bytes (at most {})", text, kMaxWriterTextBytes));
  }
  if (!ValidUtf8(in.path)) return bad("the path is not valid UTF-8");
  if (!ValidUtf8(in.target_path)) return bad("the target path is not valid UTF-8");
  for (const auto& [key, value] : in.extra) {
    if (key.empty()) return bad("an extra key is empty");
    if (!ValidUtf8(key) || !ValidUtf8(value)) return bad("an extra key or value is not valid UTF-8");
  }
  return Status::OK();
}

// The sample's payload (image bytes, then target bytes) after the kind's
// checks and the dataset's preprocessing, as ingest's ReadItem does them.
StatusOr<Payload> SampleWriter::Prepare(const SampleInput& in, int64_t position) const {
  const size_t tsize = in.target ? in.target->size() : 0;
  Payload payload;
  payload.size = in.data.size() + tsize;
  payload.image_size = in.data.size();  // as ingest: the image's bytes, the target after them
  payload.data.reset(new uint8_t[payload.size]);
  std::memcpy(payload.data.get(), in.data.data(), in.data.size());
  if (tsize) std::memcpy(payload.data.get() + in.data.size(), in.target->data(), tsize);
  if (std::string why = PreparePayload(read_, in.target.has_value(), &payload); !why.empty()) {
    const char* kind = read_.kind == SampleKind::kImage ? " (the dataset's kind is image)" : "";
    return Status::InvalidArgument(
        fmt::format("sample {} (path '{}'): {}{}", position, PrintableText(in.path), why, kind));
  }
  return payload;
}

StatusOr<SampleKey> SampleWriter::Add(const SampleInput& in, const std::function<bool()>& interrupted) {
  MutexLock f(&feed_mu_);
  if (closed_) return Status::InvalidArgument("this writer is closed");
  int64_t pos = 0;
  int32_t seg = -1;
  {
    MutexLock l(&mu_);  // report_.added changes only under feed_mu_, held here
    pos = report_.added;
    seg = report_.seg;
  }
  CQLS_RETURN_IF_ERROR(Validate(in, pos));
  if (pos >= INT32_MAX) return Status::InvalidArgument("a segment holds at most 2^31-1 samples: use another source_id");
  // Held while the payload is in memory: waits while the writes in flight
  // hold the budget (given back when its data rows are written). Under
  // feed_mu_, so the memory goes to the samples in position order; report()
  // does not wait for it.
  int64_t reserved = static_cast<int64_t>(in.data.size() + (in.target ? in.target->size() : 0));
  if (!budget_->Take(reserved, interrupted)) return Status::Cancelled("interrupted");
  // Every sample is checked, also one already committed: a refused sample
  // takes no position in any run, so positions are the same in every run.
  StatusOr<Payload> payload = Prepare(in, pos);
  if (!payload.ok() || pos < start_.next_pos || !writer_) budget_->Give(reserved);
  if (!payload.ok()) return payload.status();
  if (pos < start_.next_pos) {
    // Committed by an earlier writer with this source_id (index == position).
    MutexLock l(&mu_);
    ++report_.added;
    ++report_.resumed;
    return MakeKey(seg, static_cast<int32_t>(pos));
  }
  if (!writer_) {
    return Status::AlreadyExists(fmt::format(
        "source_id '{}' of split '{}' is complete (sealed with {} samples): sample {} is past its end; use another "
        "source_id for more samples",
        PrintableText(o_.source_id), o_.split, start_.count, pos));
  }
  budget_->Adjust(reserved, static_cast<int64_t>(payload->size));
  reserved = static_cast<int64_t>(payload->size);
  auto item = std::make_shared<SourceItem>();
  item->split = o_.split;
  // A sample without a path is named by its source and position.
  item->path = in.path.empty() ? fmt::format("{}/{}", o_.source_id, pos) : in.path;
  item->target_path = in.target_path;
  item->extra = in.extra;
  item->label = in.label.value_or(-1);
  item->labels = in.labels;
  CQLS_ASSIGN_OR_RETURN(const int32_t idx,
                        writer_->Issue(std::move(item), std::move(payload).value(), reserved, interrupted));
  {
    MutexLock l(&mu_);
    ++report_.added;
  }
  ++since_commit_;
  const bool by_count = o_.commit_every > 0 && since_commit_ >= o_.commit_every;
  if (by_count || Clock::now() - last_commit_ >= o_.commit_interval) CQLS_RETURN_IF_ERROR(Commit(false));
  return MakeKey(seg, idx);
}

Status SampleWriter::Commit(bool seal) {
  CQLS_RETURN_IF_ERROR(writer_->Commit(seal));
  since_commit_ = 0;
  last_commit_ = Clock::now();
  MutexLock l(&mu_);
  report_.count = writer_->last_written().count;
  return Status::OK();
}

bool SampleWriter::Drain(const std::function<bool()>& interrupted) {
  return !writer_ || writer_->Drain(interrupted);
}

// Waits for the writes in flight; commits (sealing when asked and nothing
// failed); the counts into report_.
Status SampleWriter::Finish(bool seal, bool commit) {
  if (!writer_) return Status::OK();
  writer_->Drain();
  const Status st = writer_->error();
  const Status c = commit ? Commit(seal && st.ok()) : Status::OK();
  const SegmentWriter::Counts n = writer_->counts();
  MutexLock l(&mu_);
  report_.written = n.written;
  report_.bytes = n.bytes;
  report_.count = writer_->last_written().count;
  if (seal && st.ok() && c.ok() && commit) report_.sealed = true;
  return st.ok() ? c : st;
}

Status SampleWriter::Flush(const std::function<bool()>& interrupted) {
  MutexLock f(&feed_mu_);
  if (closed_) return Status::InvalidArgument("this writer is closed");
  if (!Drain(interrupted)) return Status::Cancelled("interrupted");
  return Finish(false, true);
}

Status SampleWriter::Close(const std::function<bool()>& interrupted) {
  MutexLock f(&feed_mu_);
  if (closed_) return Status::OK();
  if (!Drain(interrupted)) return Status::Cancelled("interrupted");  // still open, nothing committed
  closed_ = true;
  return Finish(true, true);
}

Status SampleWriter::Abort(const std::function<bool()>& interrupted) {
  MutexLock f(&feed_mu_);
  if (closed_) return Status::OK();
  if (!Drain(interrupted)) return Status::Cancelled("interrupted");  // still open, nothing committed
  closed_ = true;
  return Finish(false, true);
}

void SampleWriter::AbandonForTesting() {
  MutexLock f(&feed_mu_);
  if (closed_) return;
  closed_ = true;
  (void)Finish(false, false);
}

SampleWriterReport SampleWriter::report() const {
  MutexLock l(&mu_);
  SampleWriterReport r = report_;
  if (writer_) {
    // counts() may be read from any thread (store/segment_writer.h);
    // last_written() is the feeder's, so the count is report_'s copy.
    const SegmentWriter::Counts n = writer_->counts();
    r.written = n.written;
    r.bytes = n.bytes;
  }
  return r;
}

}  // namespace cqlstream::store
