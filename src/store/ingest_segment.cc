// Copyright (c) cqlstream authors.
#include "store/ingest_segment.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <memory>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/measure.h"
#include "util/mutex.h"

namespace cqlstream::store {
namespace {

using Clock = std::chrono::steady_clock;

struct ReadResult {
  Payload payload;
  std::string skip;
};

// The readers and the feeder of one segment.
class SegmentFeed {
 public:
  SegmentFeed(net::Session& s, const IngestOptions& o, const ReadOptions& read, const DatasetInfo& d,
              const IngestStatements& p, const SplitPlan& plan, IngestReport* report, IngestProgressState* progress)
      : o_(o),
        read_(read),
        plan_(plan),
        report_(report),
        progress_(progress),
        base_(progress->p),
        budget_(std::make_shared<ByteBudget>(o.memory_bytes)),
        writer_(SegmentWriter::Create(s, WriteOptionsOf(o), d, p,
                                      SegmentTarget{plan.seg, plan.start, plan.writetime}, budget_)) {}

  Status Run(SplitResult* result) EXCLUDES(mu_);

 private:
  // The feeder's loop state (calling thread only).
  struct Loop {
    size_t pos = 0;
    int64_t issued = 0;
    int64_t since_commit = 0;
    Clock::time_point last_commit = Clock::now();
    bool crashed = false;
    bool interrupted = false;
    Status status;
  };
  enum class Await { kGot, kWaiting, kStop };

  Await AwaitItem(Loop& loop, ReadResult* rr) EXCLUDES(mu_);
  Status SkipItem(size_t pos, const std::string& reason, SplitResult* result) EXCLUDES(mu_);
  Status IssueItem(size_t pos, ReadResult rr) EXCLUDES(mu_);
  Status MaybeCommit(Loop& loop);
  Status Finish(const Loop& loop, SplitResult* result);
  void ReaderLoop() EXCLUDES(mu_);
  void ScheduleReadsLocked(size_t pos) REQUIRES(mu_);
  void ReportProgress(bool force);

  const IngestOptions& o_;
  const ReadOptions& read_;
  const SplitPlan& plan_;
  IngestReport* report_;            // skips: feeder only
  IngestProgressState* progress_;   // feeder only
  const IngestProgress base_;       // the run's counts when this segment started
  int64_t skipped_ = 0;             // feeder only
  const std::shared_ptr<ByteBudget> budget_;
  const std::shared_ptr<SegmentWriter> writer_;

  // Two condition variables, so that a reader finishing an item wakes the
  // feeder only when it waits for that item, and admitting an item wakes one
  // reader (not every reader and the feeder for every item: on a warm page
  // cache those wake-ups cost more CPU than the reads).
  Mutex mu_;
  CondVar work_cv_;    // readers: an item was admitted, or stopping_
  CondVar result_cv_;  // the feeder: the item it waits for was read
  size_t awaited_ GUARDED_BY(mu_) = SIZE_MAX;  // the position the feeder waits for
  bool stopping_ GUARDED_BY(mu_) = false;
  size_t next_read_ GUARDED_BY(mu_) = 0;
  size_t read_limit_ GUARDED_BY(mu_) = 0;
  std::unordered_map<size_t, ReadResult> results_ GUARDED_BY(mu_);
  std::unordered_map<size_t, int64_t> reservation_ GUARDED_BY(mu_);  // pos -> bytes held
};

void SegmentFeed::ScheduleReadsLocked(size_t pos) {
  const size_t end = plan_.items.size();
  const size_t max_ahead = static_cast<size_t>(o_.concurrency) + static_cast<size_t>(o_.readers) * 4 + 8;
  if (read_limit_ < pos) read_limit_ = pos;
  // Admitted in groups of `refill` (unless the feeder's own item is not
  // admitted yet): one wake-up of the readers per group, not per item.
  const size_t refill = std::max<size_t>(1, max_ahead / 8);
  if (read_limit_ > pos && read_limit_ < end && read_limit_ - pos + refill > max_ahead) return;
  size_t admitted = 0;
  while (read_limit_ < end && read_limit_ - pos < max_ahead) {
    const int64_t size = ListedSize(*plan_.items[read_limit_]);
    // The item the feeder waits for is always admitted.
    if (!budget_->TryTake(size, read_limit_ == pos)) break;
    reservation_[read_limit_] = size;
    ++read_limit_;
    ++admitted;
  }
  if (admitted == 1) {
    work_cv_.Signal();
  } else if (admitted > 1) {
    work_cv_.SignalAll();
  }
}

void SegmentFeed::ReaderLoop() {
  for (;;) {
    size_t p;
    {
      MutexLock l(&mu_);
      while (!stopping_ && next_read_ >= read_limit_) work_cv_.Wait(&mu_);
      if (stopping_) return;
      p = next_read_++;
    }
    ReadResult r;
    r.skip = ReadItem(*plan_.items[p], read_, &r.payload);
    // The checksum while the bytes are still in this core's cache.
    if (r.skip.empty()) r.payload.xxh64 = XXH64(r.payload.data.get(), r.payload.size, 0);
    MutexLock l(&mu_);
    if (r.skip.empty()) {
      // Hold what was really read.
      const int64_t actual = static_cast<int64_t>(r.payload.size);
      budget_->Adjust(reservation_[p], actual);
      reservation_[p] = actual;
    }
    results_.emplace(p, std::move(r));
    if (p == awaited_) result_cv_.Signal();
  }
}

void SegmentFeed::ReportProgress(bool force) {
  const auto now = Clock::now();
  if (!force && (!o_.on_progress || now - progress_->last_report < std::chrono::milliseconds(200))) return;
  const SegmentWriter::Counts c = writer_->counts();
  IngestProgress p = base_;
  p.items_done += skipped_ + c.written;
  p.bytes_done += c.bytes;
  p.skipped += skipped_;
  progress_->p = p;
  if (!o_.on_progress) return;
  progress_->last_report = now;
  p.split = plan_.split;
  p.elapsed_s = SecondsSince(progress_->start);
  o_.on_progress(p);
}

// Waits (up to 100 ms) for the read of loop.pos. kStop: a write failed or
// the simulated crash is due.
SegmentFeed::Await SegmentFeed::AwaitItem(Loop& loop, ReadResult* rr) {
  if (!writer_->error().ok()) return Await::kStop;
  if (o_.crash_after >= 0 && loop.issued >= o_.crash_after) {
    loop.crashed = true;
    return Await::kStop;
  }
  MutexLock l(&mu_);
  ScheduleReadsLocked(loop.pos);
  const auto wake = Clock::now() + std::chrono::milliseconds(100);
  awaited_ = loop.pos;
  while (results_.count(loop.pos) == 0 && result_cv_.WaitUntil(&mu_, wake)) {
  }
  awaited_ = SIZE_MAX;
  auto it = results_.find(loop.pos);
  if (it == results_.end()) return Await::kWaiting;
  *rr = std::move(it->second);
  results_.erase(it);
  return Await::kGot;
}

// An item that turned out invalid: reported, its position handled (under
// --strict the run fails instead, and the watermark stops before it).
Status SegmentFeed::SkipItem(size_t pos, const std::string& reason, SplitResult* result) {
  report_->skips.push_back(IngestSkip{plan_.split, plan_.items[pos]->path, reason});
  result->skipped++;
  skipped_++;
  {
    MutexLock l(&mu_);
    budget_->Give(reservation_[pos]);
    reservation_.erase(pos);
  }
  if (o_.strict) {
    return Status::Corruption(
        fmt::format("--strict: {} turned invalid while ingesting: {}", plan_.items[pos]->path, reason));
  }
  writer_->Skip();
  return Status::OK();
}

// A valid item: the next sample of the segment. A write that failed while
// waiting for a slot ends the run (its error is the writer's).
Status SegmentFeed::IssueItem(size_t pos, ReadResult rr) {
  int64_t reserved = 0;
  {
    MutexLock l(&mu_);
    reserved = reservation_[pos];
    reservation_.erase(pos);
  }
  // The listing outlives the writer: a non-owning pointer.
  std::shared_ptr<const SourceItem> item(std::shared_ptr<const SourceItem>(), plan_.items[pos]);
  return writer_->Issue(std::move(item), std::move(rr.payload), reserved).status();
}

// A periodic commit of the watermark: every commit_interval, or every
// commit_every positions.
Status SegmentFeed::MaybeCommit(Loop& loop) {
  ++loop.since_commit;
  const bool by_count = o_.commit_every > 0 && loop.since_commit >= o_.commit_every;
  if (!by_count && Clock::now() - loop.last_commit < o_.commit_interval) return Status::OK();
  CQLS_RETURN_IF_ERROR(writer_->Commit(false));
  loop.last_commit = Clock::now();
  loop.since_commit = 0;
  return Status::OK();
}

Status SegmentFeed::Run(SplitResult* result) {
  const size_t end = plan_.items.size();
  Loop loop;
  loop.pos = static_cast<size_t>(plan_.start.next_pos);
  {
    MutexLock l(&mu_);
    next_read_ = read_limit_ = loop.pos;
  }
  std::vector<std::thread> readers;
  for (int i = 0; i < std::max(1, o_.readers); ++i) readers.emplace_back([this] { ReaderLoop(); });
  while (loop.pos < end) {
    if (o_.stop != nullptr && o_.stop->load()) {
      loop.interrupted = true;
      break;
    }
    ReadResult rr;
    const Await got = AwaitItem(loop, &rr);
    if (got == Await::kStop) break;
    if (got == Await::kWaiting) {
      ReportProgress(false);
      continue;
    }
    if (!rr.skip.empty()) {
      loop.status = SkipItem(loop.pos, rr.skip, result);
      if (!loop.status.ok()) break;
    } else {
      if (!IssueItem(loop.pos, std::move(rr)).ok()) break;
      ++loop.issued;
    }
    ++loop.pos;
    loop.status = MaybeCommit(loop);
    if (!loop.status.ok()) break;
    ReportProgress(false);
  }
  // Let what is in flight finish (every request ends: the session times out).
  writer_->Drain();
  {
    MutexLock l(&mu_);
    stopping_ = true;
    work_cv_.SignalAll();
  }
  for (auto& t : readers) t.join();
  return Finish(loop, result);
}

// After the loop: the final commit (sealed when every position was
// handled), the counts, and what the run returns.
Status SegmentFeed::Finish(const Loop& loop, SplitResult* result) {
  Status status = loop.status;
  if (status.ok()) status = writer_->error();
  const SegmentWriter::Counts c = writer_->counts();
  result->written += c.written;
  result->bytes += c.bytes;
  ReportProgress(true);
  if (loop.crashed) {
    result->count = writer_->last_written().count;
    return Status::Cancelled(fmt::format("simulated crash after {} samples (segment {} left as it was)", loop.issued,
                                         plan_.seg));
  }
  const bool complete = status.ok() && !loop.interrupted && loop.pos == plan_.items.size();
  Status commit = writer_->Commit(complete);
  // What the segment row says: after a failed commit that is the last
  // successful one, not the in-memory watermark.
  result->count = writer_->last_written().count;
  if (!status.ok()) return status;
  if (!commit.ok()) return commit;
  result->sealed = complete;
  if (loop.interrupted) {
    return Status::Cancelled(fmt::format("interrupted: segment {} of split '{}' committed {} samples; run the same "
                                         "command again to resume",
                                         plan_.seg, plan_.split, result->count));
  }
  return Status::OK();
}

}  // namespace

SegmentWriteOptions WriteOptionsOf(const IngestOptions& o) {
  SegmentWriteOptions w;
  w.concurrency = o.concurrency;
  w.consistency = o.consistency;
  w.write_attempts = o.write_attempts;
  w.max_batch_bytes = o.max_batch_bytes;
  w.meta_batch = o.meta_batch;
  return w;
}

Status WriteSegment(net::Session& s, const IngestOptions& options, const ReadOptions& read, const DatasetInfo& d,
                    const IngestStatements& statements, const SplitPlan& plan, IngestReport* report,
                    IngestProgressState* progress, SplitResult* result) {
  SegmentFeed feed(s, options, read, d, statements, plan, report, progress);
  return feed.Run(result);
}

}  // namespace cqlstream::store
