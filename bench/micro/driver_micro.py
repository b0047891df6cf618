#!/usr/bin/env python3
"""The Python counterpart of cqlstream-cql-micro: the same reads with the
Python scylla-driver (package `cassandra`), keeping C requests in flight.

Two ways of keeping requests in flight (--method):
  window      (default) a callback-based window: execute_async + add_callbacks,
              a new request started from each completion (what the driver's
              docs recommend for throughput; time-bounded like the C++ tool);
  concurrent  cassandra.concurrent.execute_concurrent_with_args over a list
              sized for about --measure-s seconds (from the window method's
              rate at the same level, or a pilot run).

Same workloads as the C++ tool: micro_blobs (blob mode) or a cqlstream
dataset's data table (--dataset, the loader's query over the split's
committed keys). Prints requests/s, MB/s, client CPU s/GB (getrusage of this
process, all threads), p50/p99 latency; --json: one JSON line per level.
"""
import argparse
import json
import random
import resource
import sys
import threading
import time


def cpu_seconds():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def percentile(v, p):
    if not v:
        return 0.0
    v = sorted(v)
    return v[min(len(v) - 1, int(p / 100.0 * len(v)))]


def dataset_keys(session, keyspace, dataset, split):
    rows = session.execute(
        f"SELECT seg, split, count FROM {keyspace}.segments WHERE dataset = %s", (dataset,))
    keys = []
    for r in rows:
        if r.split == split and r.count:
            keys.extend((r.seg, i) for i in range(r.count))
    return keys


def blob_bytes(row_list, dataset):
    """Payload bytes of one answer (all chunk rows); raises on a wrong key."""
    if not dataset:
        return len(row_list[0][0]) if row_list else 0
    return sum(len(r[7]) for r in row_list if r[7] is not None)


class Window:
    """Keeps `c` requests in flight; counts completions while measuring."""

    def __init__(self, session, stmt, keys, dataset):
        self.session, self.stmt, self.keys, self.dataset = session, stmt, keys, dataset
        self.lock = threading.Lock()
        self.done = threading.Condition(self.lock)
        self.next = 0

    def run(self, c, warmup_s, measure_s):
        self.in_flight, self.stop, self.measuring = 0, False, False
        self.requests = self.bytes = self.errors = 0
        self.lat = []
        self.first_error = None
        for _ in range(c):
            self.launch()
        time.sleep(warmup_s)
        cpu0, t0 = cpu_seconds(), time.monotonic()
        self.measuring = True
        time.sleep(measure_s)
        self.measuring = False
        t1, cpu1 = time.monotonic(), cpu_seconds()
        with self.lock:
            self.stop = True
            self.done.wait_for(lambda: self.in_flight == 0, timeout=120)
        return dict(requests=self.requests, bytes=self.bytes, errors=self.errors, seconds=t1 - t0,
                    cpu_s=cpu1 - cpu0, p50_ms=percentile(self.lat, 50), p99_ms=percentile(self.lat, 99),
                    first_error=repr(self.first_error) if self.first_error else None)

    def launch(self):
        with self.lock:
            k = self.keys[self.next % len(self.keys)]
            self.next += 1
            self.in_flight += 1
        t = time.monotonic()
        f = self.session.execute_async(self.stmt, k)
        f.add_callbacks(self.ok, self.fail, callback_args=(t,), errback_args=(t,))

    def ok(self, rows, t):
        n = blob_bytes(rows, self.dataset)
        self.finish(t, n, None)

    def fail(self, exc, t):
        self.finish(t, 0, exc)

    def finish(self, t, n, exc):
        now = time.monotonic()
        with self.lock:
            if self.measuring:
                if exc is None:
                    self.requests += 1
                    self.bytes += n
                    self.lat.append((now - t) * 1000.0)
                else:
                    self.errors += 1
            if exc is not None and self.first_error is None:
                self.first_error = exc
            self.in_flight -= 1
            again = not self.stop
            if self.in_flight == 0:
                self.done.notify_all()
        if again:
            self.launch()


def run_concurrent(session, stmt, keys, dataset, c, n):
    from cassandra.concurrent import execute_concurrent_with_args
    params = [keys[i % len(keys)] for i in range(n)]
    cpu0, t0 = cpu_seconds(), time.monotonic()
    # results_generator=True: results are yielded (and freed) as they come.
    res = execute_concurrent_with_args(session, stmt, params, concurrency=c, raise_on_first_error=False,
                                       results_generator=True)
    requests = nbytes = errors = 0
    first_error = None
    for ok, r in res:
        if ok:
            requests += 1
            nbytes += blob_bytes(list(r), dataset)
        else:
            errors += 1
            first_error = first_error or r
    t1, cpu1 = time.monotonic(), cpu_seconds()
    return dict(requests=requests, bytes=nbytes, errors=errors, seconds=t1 - t0, cpu_s=cpu1 - cpu0,
                p50_ms=None, p99_ms=None, first_error=repr(first_error) if first_error else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9042)
    ap.add_argument("--keyspace", default="cqlstream_micro")
    ap.add_argument("--dataset", default="")
    ap.add_argument("--split", default="train")
    ap.add_argument("--keys", type=int, default=2048)
    ap.add_argument("--concurrency", default="1,64,1024,8192")
    ap.add_argument("--warmup-s", type=float, default=2)
    ap.add_argument("--measure-s", type=float, default=10)
    ap.add_argument("--method", choices=["window", "concurrent", "both"], default="window")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    import cassandra
    from cassandra.cluster import Cluster, ExecutionProfile, EXEC_PROFILE_DEFAULT
    from cassandra.policies import RoundRobinPolicy
    from cassandra import ConsistencyLevel

    # One node: plain round robin (no token-aware wrapper that would look up
    # replicas by their system.local address); the contact point is the only
    # host the driver knows (docs/benchmarks.md, "Loader comparison": nodes
    # advertise the proxy's address, so that every loader stays behind it).
    profile = ExecutionProfile(load_balancing_policy=RoundRobinPolicy(),
                               consistency_level=ConsistencyLevel.LOCAL_ONE, request_timeout=60)
    cluster = Cluster(a.hosts.split(","), port=a.port, protocol_version=4,
                      execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    session = cluster.connect()
    dataset = bool(a.dataset)
    if dataset:
        keys = dataset_keys(session, a.keyspace, a.dataset, a.split)
        stmt = session.prepare(
            f"SELECT seg, idx, size, image_size, checksum, label, labels, data FROM {a.keyspace}.d_{a.dataset} "
            "WHERE seg = ? AND idx = ?")
    else:
        keys = [(k,) for k in range(a.keys)]
        stmt = session.prepare(f"SELECT v FROM {a.keyspace}.micro_blobs WHERE k = ?")
    if not keys:
        sys.exit("no keys to read")
    random.Random(7).shuffle(keys)
    stmt.fetch_size = 64

    driver = f"scylla-driver {cassandra.__version__}"
    if not a.json:
        print(f"client {driver}, {'dataset ' + a.dataset if dataset else 'blobs'}")
        print(f"{'method':>10} {'inflight':>8} {'req/s':>10} {'MB/s':>9} {'CPU s/GB':>10} {'p50 ms':>9} {'p99 ms':>9}")
    w = Window(session, stmt, keys, dataset)
    for c in [int(x) for x in a.concurrency.split(",") if x]:
        results = []
        rate = None
        if a.method in ("window", "both"):
            r = w.run(c, a.warmup_s, a.measure_s)
            rate = r["requests"] / r["seconds"] if r["seconds"] else None
            results.append(("window", r))
        if a.method in ("concurrent", "both"):
            if rate is None:
                p = w.run(c, 0.5, 2.0)
                rate = p["requests"] / p["seconds"]
            n = max(2 * c, int(rate * a.measure_s))
            run_concurrent(session, stmt, keys, dataset, c, min(n, 2 * c + 200))  # warm-up
            results.append(("concurrent", run_concurrent(session, stmt, keys, dataset, c, n)))
        for method, r in results:
            rps = r["requests"] / r["seconds"]
            mbps = r["bytes"] / 1e6 / r["seconds"]
            cpu_gb = r["cpu_s"] / (r["bytes"] / 1e9) if r["bytes"] else 0.0
            out = dict(client=driver, method=method, mode="dataset" if dataset else "blobs", concurrency=c,
                       requests_per_s=round(rps, 1), mb_per_s=round(mbps, 2), cpu_s_per_gb=round(cpu_gb, 3),
                       p50_ms=r["p50_ms"], p99_ms=r["p99_ms"], requests=r["requests"], errors=r["errors"],
                       seconds=round(r["seconds"], 2), cpu_s=round(r["cpu_s"], 3), peak_rss_mb=round(peak_rss_mb(), 1),
                       first_error=r["first_error"])
            if a.json:
                print(json.dumps(out), flush=True)
            else:
                p50 = f"{r['p50_ms']:.2f}" if r["p50_ms"] is not None else "-"
                p99 = f"{r['p99_ms']:.2f}" if r["p99_ms"] is not None else "-"
                print(f"{method:>10} {c:>8} {rps:>10.0f} {mbps:>9.1f} {cpu_gb:>10.3f} {p50:>9} {p99:>9}", flush=True)
    cluster.shutdown()


if __name__ == "__main__":
    main()
