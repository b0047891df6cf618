// Copyright (c) cqlstream authors.
//
// WindowController: how many requests the loader keeps in flight, and how
// many connections per host it asks for, found without hand-tuning.
//
// The objective is goodput (bytes delivered per second). The controller
// climbs it:
//  * Start-up, in the manner of TCP's slow start: every completed request
//    adds one to the window, so the window doubles once per round trip
//    whatever the latency, and the connections grow with it at each round
//    trip that paid: one per kBytesPerConnection of 1.5x the bytes in
//    flight (one TCP connection carries at most its window per round trip,
//    Linux's default is 4 MiB; a connection takes two round trips to open,
//    TCP's and OPTIONS+STARTUP's, and a third to bring answers, while the
//    window doubles in one), of 4x on round trips of kLookAheadLatency and
//    more (the window two doublings on), up to max_connections; before the
//    first request the loader opens those 4x the initial window needs
//    (InitialConnections). The window stops growing while requests queue
//    (the smoothed latency above 1.25x the lowest, at most kStartupDelayCap
//    above it: HyStart's delay signal, for windows of kMinCap and more) and
//    never grows past 3 bandwidth-delay products of the last round trip's
//    goodput. Once per measured round trip (an interval of
//    max(startup_interval, the smoothed latency)) goodput is checked: the
//    climb goes on while each round trip raises it by >= kStartupGain. A
//    round trip that does not, without queueing (judged on the lower of
//    the smoothed latency and the round trip's mean), is the lag of the
//    measure
//    (the answers to what the window added come a round trip later): the
//    window keeps growing, with connections for it, and three flat round
//    trips in a row (of either kind) end start-up. With queueing, the
//    first one pauses the growth; a second one in a row, or one with
//    heavy queueing (latency 2x the lowest: a whole
//    bandwidth-delay product waiting), ends start-up at the measured
//    bandwidth-delay product plus 25% headroom (not below the window it
//    reached, up to WindowFloor(): kMinCap requests of 110-kB samples; a
//    cold node's first answers measured a fraction of its goodput) — but not within
//    kConnectionOpenRounds round trips of asking for more connections
//    (they are still opening: the growth only pauses). A timeout or an
//    overload answer ends it at once (see below), and the 3-BDP cap bounds
//    it all along. (Before the delay signal, the window through a 200 ms
//    path to one node overshot to up to 5,600 requests, about 3 BDPs, and
//    the rate then fell by two thirds for a second or two: docs/loader.md.)
//  * Steady state: it keeps probing — a larger window (x1.25) and, when
//    requests wait much longer than the fastest ones (the path, not the
//    server, is the limit: one TCP connection carries at most window/RTT),
//    more connections — keeping a change only if goodput rises by >= 5%, and
//    now and then a smaller window (x0.9, never below WindowFloor(): a few MB
//    saved there cost more on a noisy measure), kept if goodput does not fall by
//    more than 3% (less memory for the same speed), neither from before the
//    probe nor from the best goodput a smaller window was kept from (so
//    that small losses do not add up), and fewer connections
//    (x2/3; the session's pools park the surplus at once and close each 30 s
//    after it was parked: net/pool.h), kept while goodput stays within 3%
//    of what it was before the first of a series of them — each connection
//    costs the client system calls and wake-ups, and start-up asks for them
//    ahead of need (at 200 ms it opened 218-256 where ~50 carry the path;
//    on 2026-12-05, before any were given back, a cap of 96 was faster in
//    8 of 9 pairs, by ~4% at 3% less CPU per GB in the medians of 6; on a
//    slower instance on 2026-12-06, with the surplus given back, 4
//    alternating pairs showed no difference: docs/benchmarks-startup.md
//    and docs/benchmarks-long-rtt.md), so the end of a first start-up that
//    looked ahead gives back at once all beyond one connection per 1 MiB of
//    the settled window's bytes (kSettledConnectionFactor; never below
//    kKeptConnections), and the second probe after start-up is this one (the first is a larger
//    window: start-up may have ended short). A fewer-connections probe goes
//    never below kKeptConnections (32: too few to be worth a probe's dip) nor
//    one connection per kProbeBytesPerConnection on the wire (the window's
//    bytes, at most the bandwidth-delay product, at the most Linux's
//    autotuning lets a TCP send buffer hold each: below what the path's
//    windows need the probe loses and is undone; a larger-window probe brings x1.25 the connections, at most
//    kBytesPerConnection's count for its bytes), nor to a count a probe
//    showed too few (a fewer-connections probe that lost or met a timeout
//    or overload answer, the count before a more-connections probe that
//    paid; forgotten after kTooFewMemory probes and when start-up
//    resumes), and not at all
//    where the session cannot shrink (SetConnectionsShrink: ScyllaDB's
//    shard-aware pools). A probe that does not pay, or meets a
//    timeout or overload answer, gives back the connections it added. A window or connection
//    probe whose two measured intervals each raise goodput as much as a
//    start-up round trip must (kStartupGain) shows a path far from full —
//    start-up ended early, on a timeout or a stall, with a fraction of the
//    window and connections the path needs — and start-up resumes from
//    there, judging latency against the lowest seen since the path last
//    changed (a step down in goodput, below), or against the larger
//    window's own latency where that did not grow with it (a window-limited
//    path's round trip, seen before a step could be): without that, one timeout in
//    the first second at 200 ms left a run at 8-36% of its speed for tens of
//    seconds (x1.25 a probe, a probe every few round trips). Congestion
//    after a resumed start-up (a node shedding load, not a stall) ends the
//    resuming until a step down shows a changed path (below), and a resumed
//    start-up adds no connections once a probe showed they do not pay.
//  * Timeouts and overload errors shrink the window at once (x0.7) and end
//    start-up; a first start-up they end probes after one steady-state
//    interval instead of five. The goodput average restarts at the next
//    interval (within the 30% the cut can take).
//  * The window never exceeds 3 bandwidth-delay products (goodput x the
//    lowest latency seen): more requests only queue, mostly in the server,
//    which buffers the answers a slow path cannot take yet.
//  * Intervals in which the loader was held back by something else (the
//    consumer is slower, the byte budget is spent) are not measured, and
//    the start-up window does not grow in them.
//
// A steady-state interval lasts max(min_interval, 4 x the smoothed latency)
// and needs at least a few completions, so the measurement spans several
// round trips whatever the network's latency. Probes are judged against an
// average of the intervals between them, which a step (intervals 30% off it
// on one side for over a second) restarts, and so does a timeout or an
// overload answer in steady state (the cut is the controller's own); a step
// down also takes the lowest latency, which the caps and the delay signal
// are measured against, to the new path's. A path whose round trip rose
// mid-run (a route change, a failover to a far data centre) is so filled
// again within seconds; before, a run stayed at a fraction of the path for
// minutes (the model's figures: APathWhoseRoundTripRoseIsFilledAgain). At steady state the window
// settles near bandwidth x latency (the bandwidth-delay product) of the
// path.
//
// Connections: connections() counts the connections to all hosts together
// (what the bytes in flight need, wherever they go); the loader asks the
// session for that total (net::Session::SetTotalConnections spreads it over
// the up hosts and caps it by the process's descriptors), and the session
// opens the missing ones in the background and parks those beyond it (they
// close 30 s later unless asked for again). The loader passes the session's
// ConnectionLimit() to SetConnectionLimit() and its ConnectionsShrink() to
// SetConnectionsShrink() at every tick, and sends the count whenever it
// differs from what it last sent (a count lowered outside Tick() included):
// once every host refused a connection
// (native_transport_max_connections_per_ip) or the descriptors are spent,
// the controller asks for no more.
//
// Thread-safety: not thread-safe; the loader calls it under its lock.
#ifndef CQLSTREAM_LOADER_WINDOW_H_
#define CQLSTREAM_LOADER_WINDOW_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace cqlstream::loader {

class WindowController {
 public:
  using Clock = std::chrono::steady_clock;
  // Connections per host the controller may open by default (the loader
  // sets Options::max_connections to this x the up hosts): a safety limit,
  // not a tuning knob — the controller opens only what bytes in flight need
  // (kBytesPerConnection each) and what probes show to pay. 256 x 4 MiB per
  // 200 ms round trip is 5.4 GB/s, above what one client host takes from a
  // node. A node that refuses more connections
  // (native_transport_max_connections_per_ip) stops the growth through
  // SetConnectionLimit; overload answers shrink the window. The old fixed
  // ceiling of 32 capped a 200 ms path at 32 x 4 MiB / 0.2 s = 671 MB/s,
  // below what the node served.
  static constexpr int kDefaultMaxConnections = 256;
  // Bytes in flight per connection during start-up: half of what Linux's
  // autotuning lets a TCP send buffer hold (tcp_wmem's maximum, 4 MiB), so
  // that no connection is window-limited.
  // Steady state's fewer-connections probes go down to one per
  // kProbeBytesPerConnection (twice this) on the wire, and its larger-window
  // probes bring connections up to one per kBytesPerConnection of their
  // bytes.
  static constexpr double kBytesPerConnection = 2.0 * 1048576;
  // Start-up goes on while each round trip raises goodput by this factor.
  static constexpr double kStartupGain = 1.15;
  // Start-up on a long round trip asks for the connections the window will
  // need by the time they take requests: a connection opens two round trips
  // after it is asked for (TCP, then OPTIONS and STARTUP), and the window may
  // double in each, so for kConnectionLookAhead (4) times the window instead
  // of 1.5 times (only in the first start-up and where the session shrinks:
  // its end and then the probes give the surplus back). Through a 200 ms path
  // the 1.5x rule left the open connections two round trips behind the window
  // at every doubling (2 open while the window was 64, 9 at 448), and the
  // rate in the second second was 219-332 MB/s where the node serves ~1,100
  // (docs/benchmarks-startup.md). Below kLookAheadLatency those two round trips are
  // tens of milliseconds, and start-up keeps the 1.5x rule (fewer connections
  // for the probes to give back).
  static constexpr double kConnectionLookAhead = 4.0;
  static constexpr std::chrono::milliseconds kLookAheadLatency{20};
  // When a first start-up that looked ahead ends, the connections beyond one
  // per 1 MiB of the bytes the settled window keeps in flight
  // (kSettledConnectionFactor per kBytesPerConnection; at least
  // kKeptConnections) are given back at once: the look-ahead was for
  // doublings that no longer come. The pools park them (a probe that asks for
  // them again has them at once); before, fewer-connections probes gave them
  // back x2/3 at a time, and at 100 ms 214 and 238 stayed in use for the
  // first 12.7 and 14.0 s of steady state, until the probes had them down to
  // 62 and 51 (docs/benchmarks-startup.md). Twice, not start-up's 1.5x: a path whose
  // TCP windows are a quarter of Linux's default then keeps what it needs (in
  // the model, which is deterministic, 776 MB/s of 800 at 200 ms with 1 MiB
  // windows; 692 with 1.5x; 753 without giving any back here).
  static constexpr double kSettledConnectionFactor = 2.0;
  // The connections, all hosts together, that a loader asks for before its
  // first request (the round trip is not known yet): those for
  // kConnectionLookAhead times the initial window of `mean_bytes` samples,
  // one per kBytesPerConnection, between 1 and kDefaultMaxConnections —
  // 7 for 110-KB images and a window of 32, 1 for 540-B ones. On a short
  // path they stay (probes keep 32): start-up there asks for about as many
  // within its first round trips (7 at the end of RTT-0 runs, 9-11
  // before).
  static int InitialConnections(int initial_window, double mean_bytes);
  // Fewer-connections probes leave at least this many: a probe costs a dip
  // while it is measured, and below a few dozen connections there is
  // nothing worth it to give back. At 10 ms (13-26 connections) probes
  // down to 11 delayed the time to 90% from a median of 1.0 s to 3.2 s
  // (7 pairs, docs/benchmarks-long-rtt.md) for no measurable CPU.
  static constexpr int kKeptConnections = 32;
  // Nor below one connection per kProbeBytesPerConnection on the wire (the
  // window's bytes, at most the bandwidth-delay product): the most Linux's
  // autotuning lets a TCP send buffer hold (tcp_wmem's maximum, 4 MiB), so
  // the most one connection carries per round trip there (less: the
  // buffer counts its own overhead).
  // Below what the path's windows need, a probe loses goodput and is
  // undone, and its count is remembered as too few (kTooFewMemory probes);
  // the controller cannot see the windows, so the probe is what tells. (Until
  // 2026-12-07 the floor was kBytesPerConnection, half of that: at 200 ms
  // and 1.1 GB/s about 105 connections where 4 MiB windows need about 52,
  // and a cap of 64 had cost 7.4% less CPU per GB:
  // docs/benchmarks-long-rtt.md.)
  static constexpr double kProbeBytesPerConnection = 4.0 * 1048576;
  struct Options {
    int initial_window = 32;
    int min_window = 4;
    int max_window = 65536;
    int initial_connections = 2;                    // all hosts together
    int max_connections = kDefaultMaxConnections;   // all hosts together
    std::chrono::milliseconds min_interval{100};     // steady state
    std::chrono::milliseconds startup_interval{10};  // start-up: at least one round trip
    bool adaptive = true;
  };
  enum class Phase { kStartup, kSteady };

  explicit WindowController(Options o, Clock::time_point now);

  // A request completed: `bytes` delivered, after `latency`. In start-up
  // the window grows by one.
  void OnComplete(int64_t bytes, std::chrono::microseconds latency);
  // A timeout or an overload error.
  void OnCongestion(Clock::time_point now);
  // The loader could not issue because of something other than the window.
  void OnHeldBack() { held_back_ = true; }
  // The most connections the session can hold now, all hosts together
  // (net::Session::ConnectionLimit(): the descriptor budget, or what the
  // hosts accepted before refusing more); <= 0: no limit known. The
  // controller asks for no more than that, and when it had asked for more,
  // takes its count down to it (the session opened no more anyway).
  void SetConnectionLimit(int limit);
  // Whether fewer connections take effect (net::Session::ConnectionsShrink():
  // not on shard-aware ScyllaDB pools); without it no fewer-connections
  // probe runs (it would measure nothing and be kept). Default: true.
  void SetConnectionsShrink(bool shrink) { connections_shrink_ = shrink; }
  // Periodic evaluation; returns true when window or connections changed.
  bool Tick(Clock::time_point now);

  int window() const { return window_; }
  int connections() const { return connections_; }
  // How often steady state went back to start-up (a probe paid kStartupGain).
  int startup_resumes() const { return startup_resumes_; }
  // How often steady state saw goodput step to a new level (a changed path:
  // EvaluateSteady).
  int level_steps() const { return level_steps_; }
  Phase phase() const { return phase_; }
  double goodput() const { return best_goodput_; }  // bytes/s, best stable measurement
  // The lowest interval mean latency (about the unloaded round trip; it
  // drifts up 1% a steady interval, a step down in goodput sets it to the
  // new path's, and a resumed start-up may raise it to the latency of the
  // probe that paid); zero before the first measurement.
  std::chrono::microseconds min_latency() const {
    return std::chrono::microseconds(static_cast<int64_t>(min_rtt_us_));
  }
  std::string Describe() const;

 private:
  enum class Probe { kNone, kWindowUp, kWindowDown, kConnections, kFewerConnections };
  void StartProbe(Probe p);
  // One interval's goodput (and its answers' mean latency): the startup
  // climb, the steady state's probe schedule, or the verdict on a running
  // probe.
  void Evaluate(double goodput, double mean_latency_us, double secs);
  void EvaluateStartup(double goodput, double mean_latency_us);
  void EvaluateSteady(double goodput, double mean_latency_us, double secs);
  void EvaluateProbe(double goodput, double mean_latency_us);
  // Start-up: connections for the bytes the window keeps in flight.
  void GrowConnections();
  // o_.max_connections, and the session's limit (SetConnectionLimit).
  int MaxConnections() const;
  // What a fewer-connections probe would keep (connections_ when none
  // applies): x2/3, not below kKeptConnections nor the bytes on the wire
  // at kProbeBytesPerConnection each, and above a count shown too few
  // (too_few_connections_).
  int FewerConnections() const;
  void EndStartup(double goodput);
  // Back to start-up from steady state at goodput `goodput`, after a probe
  // whose lowest interval mean latency was `latency_us`.
  void ResumeStartup(double goodput, double latency_us);

  Options o_;
  Phase phase_ = Phase::kStartup;
  int window_;
  int connections_;
  int connection_limit_ = 0;  // SetConnectionLimit (0: none)
  Clock::time_point interval_start_;
  int64_t bytes_ = 0;
  int64_t completions_ = 0;
  double srtt_us_ = 0;       // smoothed latency
  // The lowest interval mean latency: in steady state it drifts up 1% an
  // interval, and a step down in goodput sets it to the new path's
  // (EvaluateSteady).
  double min_rtt_us_ = 0;
  // The lowest interval mean latency since the path last changed (no drift;
  // a step down in goodput resets it, and a resumed start-up may raise it to
  // the latency of the probe that paid): what a resumed start-up judges
  // latency against.
  double floor_rtt_us_ = 0;
  double sum_latency_us_ = 0;
  bool held_back_ = false;

  double best_goodput_ = 0;
  // Steady state: a step in goodput (EvaluateSteady). The side (-1, +1) on
  // which the last intervals in a row were more than kLevelStep off the
  // average (0: the last one was not), how many, of those after the first
  // their bytes, seconds and lowest mean latency, and the average the row is
  // judged against.
  // kLevelStep, 30%: a round trip that rose 1.8x or more at a window of 1.25
  // bandwidth-delay products (the model's rises take 38-95% off); smaller
  // changes the average follows, and the probes with it, within seconds. A
  // margin against a node's noise at short round trips, where a false step
  // only restarts the average and probes at once.
  static constexpr double kLevelStep = 0.3;
  static constexpr double kLevelStepTime = 1.0;  // seconds, after the first interval off
  int step_side_ = 0;
  int step_intervals_ = 0;
  double step_bytes_ = 0;
  double step_secs_ = 0;
  double step_min_latency_us_ = 0;
  double step_reference_ = 0;  // the average when the row began
  int level_steps_ = 0;        // level_steps()
  bool restart_average_ = false;  // congestion cut the window: the next interval's goodput is the average
  // After a step down: the lowest latencies from before it, restored if the
  // larger window probed next does not pay (a node slowed; the path did not).
  bool step_probe_pending_ = false;
  double step_saved_min_us_ = 0;
  double step_saved_floor_us_ = 0;
  bool step_saved_may_resume_ = true;  // may_resume_ before the step
  // The probe after a step down is over: the lowest latencies from before the
  // step back if `restore`.
  void EndStepProbe(bool restore);
  // No intervals off the average counted: a held-back interval, congestion,
  // or start-up ending or resuming broke the row (a probe's intervals do
  // not: they are not the average's).
  void ForgetStep();
  int best_window_ = 0;
  int flat_intervals_ = 0;         // start-up: flat round trips in a row
  int queued_flat_intervals_ = 0;  // start-up: of those, in a row with requests queueing
  // Steady-state probing.
  Probe probe_ = Probe::kNone;
  double baseline_ = 0;   // goodput before the probe
  int saved_window_ = 0;
  int saved_connections_ = 0;
  // Fewer connections: the goodput before the first of a series of kept
  // probes (0: no series), and the most connections shown too few.
  double fewer_reference_ = 0;
  // Smaller window: the highest goodput a kept smaller-window probe started
  // from (0: none yet). Each such probe is judged against it as well, so that
  // 1-3% losses, each within the 3% a probe may lose on a noisy measure, do
  // not add up and walk the window down (judged one at a time, two traced
  // runs at RTT 0 went from 47 to 23 and from 41 to 25 requests in 15 and
  // 20 s, and one run ended at 9 with 15% fewer images/s than the others of its
  // series: docs/benchmarks-startup.md). Not forgotten when a larger window is kept
  // (the measure's noise keeps some of those; forgetting let the model's
  // window walk down to 0.91 of its goodput); forgotten when start-up
  // resumes, on congestion, and when a smaller-window probe starts with
  // goodput more than kDownReferenceDrop below it and the smoothed latency
  // above what it was then (down_reference_latency_us_): the path slowed (a
  // host went down, other clients load the node), and the probes must still
  // be able to give memory back. A drop that smaller windows caused comes
  // with a lower latency, and does not forget it.
  double down_reference_ = 0;
  double down_reference_latency_us_ = 0;
  static constexpr double kDownReferenceDrop = 0.10;
  double baseline_latency_us_ = 0;  // the smoothed latency when the probe began
  // Whether this start-up asked for connections ahead of the window
  // (GrowConnections): its end gives the surplus back.
  bool looked_ahead_ = false;
  int too_few_connections_ = 0;
  int too_few_age_ = 0;  // probes since too_few_connections_ was set
  // A count shown too few is forgotten after this many probes (one noisy
  // loss must not stop the giving back for good) and when start-up resumes.
  static constexpr int kTooFewMemory = 12;
  bool connections_shrink_ = true;  // SetConnectionsShrink
  // Connections for `factor` x the bytes on the wire (the window's, at most
  // the bandwidth-delay product of the best goodput), at kBytesPerConnection
  // each (1..MaxConnections()): what a larger-window probe brings at most,
  // what a resumed start-up keeps at least, and at factor
  // kBytesPerConnection / kProbeBytesPerConnection the fewer-connections
  // probes' floor.
  int ConnectionFloor(double factor) const;
  // One connection per kBytesPerConnection of `bytes`, between 1 and `most`.
  static int ConnectionsFor(double bytes, int most);
  int probe_intervals_ = 0;
  double probe_sum_ = 0;
  double probe_first_ = 0;  // the first measured interval's goodput
  double probe_latency_us_ = 0;  // the lowest mean latency of the measured intervals
  int steady_intervals_ = 0;
  int next_probe_ = 0;    // round-robin over probe kinds
  bool connections_help_ = true;
  bool startup_paused_ = false;           // a round trip did not pay: wait for the next verdict
  int startup_resumes_ = 0;               // steady-state probes that paid a start-up round trip's gain
  // False once congestion followed a resumed start-up; a step down makes it
  // true (the old path's verdict), restored if its probe does not pay.
  bool may_resume_ = true;
  int startup_cap_ = 0;                   // the 3-BDP cap of the last interval (0: none yet)
  int startup_growth_cap_ = 0;            // kStartupBdpFactor x the last interval's BDP (0: none yet)
  int interval_window_ = 0;               // the window when the interval began
  int rounds_since_connections_ = 1000;   // start-up verdicts since connections were last added
  // A new connection brings answers only after its TCP handshake, OPTIONS
  // and STARTUP (sent together: 2 round trips) and its first request's
  // round trip: start-up does not end on a flat round trip this soon after
  // asking for connections.
  static constexpr int kConnectionOpenRounds = 3;
  double mean_bytes_ = 0;                 // per completion (smoothed)
  // The window never exceeds kBdpFactor bandwidth-delay products (goodput x
  // the lowest latency seen, in requests), nor goes below kMinCap for it.
  static constexpr double kBdpFactor = 3.0;
  // Start-up: the window grows to at most this many bandwidth-delay
  // products of the last round trip's goodput (the cap's factor, but of
  // the last measure, not the best: one burst of answers must not license
  // a window the path cannot carry).
  static constexpr double kStartupBdpFactor = 3.0;
  // Start-up ends on a flat round trip whose latency is this many times the
  // lowest (a whole bandwidth-delay product waits in queues), once
  // kConnectionOpenRounds have passed since connections were asked for.
  static constexpr double kStartupQueueing = 2.0;
  // Start-up stops growing the window while the smoothed latency is above
  // this many times the lowest, and never more than kStartupDelayCap above
  // it (StartupDelayLimitUs): as HyStart++ caps its delay threshold at
  // 16 ms (RFC 9406), since at long round trips a quarter of one is a
  // large queue — at 200 ms, 50 ms of a ~1.1 GB/s path, and start-up's
  // window peaked at 2.1-2.4 bandwidth-delay products before the signal
  // stopped it.
  static constexpr double kStartupDelayGrowth = 1.25;
  static constexpr std::chrono::milliseconds kStartupDelayCap{16};
  // The smoothed latency above which start-up's window does not grow.
  double StartupDelayLimitUs() const;
  // Flat round trips in a row (with or without queueing) that end start-up.
  static constexpr int kStartupFlatRounds = 3;
  static constexpr int kMinCap = 64;
  // The smallest window start-up settles at (where the window reached it)
  // and smaller-window probes go to: kMinCap requests, at most kFloorBytes
  // of samples (4 of 4-MiB ones), within the user's bounds (a user cap below
  // it is kept, and no smaller-window probe runs).
  static constexpr double kFloorBytes = 16.0 * 1048576;
  int WindowFloor() const;
  // A probe's larger window is taken as unqueued while its lowest interval
  // mean latency is within this factor of the smoothed latency before it.
  static constexpr double kUnqueuedGrowth = 1.1;
};

}  // namespace cqlstream::loader

#endif  // CQLSTREAM_LOADER_WINDOW_H_
