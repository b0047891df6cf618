#!/usr/bin/env python3
"""Requests/s of fn.cqlstream.interactive_reader behind an emulated WAN, with
1 vs N requests queued ahead (prefetch across requests; docs/triton.md).

Starts cqlstream-wan (bench/wan) in front of the node with --rtt-ms, builds the
serialized interactive pipeline (connected through the proxy), and serves the
same requests R times per queue depth, as a server would (cqlstream.serving.
run_requests). Prints one line per run, then the median per depth, the
operator's counters and the load average (timings on a shared machine are
taken under whatever load it has: say so when quoting them).

    .venv/bin/python examples/triton/bench_prefetch.py DATASET --rtt-ms 50 --queued 1,8
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import cqlstream.dali as cd
import cqlstream.serving as cs
from nvidia.dali import Pipeline, pipeline_def

ROOT = Path(__file__).resolve().parents[2]


def wan_binary() -> str:
    if os.environ.get("CQLSTREAM_WAN"):
        return os.environ["CQLSTREAM_WAN"]
    for b in (os.environ.get("CQLSTREAM_BUILD_DIR"), "build"):
        if b and (ROOT / b / "bench" / "cqlstream-wan").is_file():
            return str(ROOT / b / "bench" / "cqlstream-wan")
    found = shutil.which("cqlstream-wan")
    if not found:
        sys.exit("cqlstream-wan not found: build it (-DCQLSTREAM_BUILD_BENCH=ON) or set CQLSTREAM_WAN")
    return found


def start_proxy(rtt_ms: float, listen: str, node: str) -> subprocess.Popen:
    cmd = [wan_binary(), "--rtt-ms", str(rtt_ms), "--map", f"{listen}={node}", "--stats-interval", "0"]
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t0 = time.time()
    for line in p.stdout:
        if "listening" in line:
            return p
        if time.time() - t0 > 10:
            break
    p.kill()
    sys.exit("cqlstream-wan did not start listening")


def pipeline(dataset: str, host: str, port: int, max_batch: int, prefetch: int, name: str) -> Pipeline:
    @pipeline_def(batch_size=max_batch, num_threads=2, device_id=None, prefetch_queue_depth=1,
                  exec_dynamic=True)
    def serve():
        data, labels = cs.interactive_reader(dataset, name=name, prefetch_requests=prefetch, hosts=[host],
                                             port=port)
        return data, labels

    p = Pipeline.deserialize(serialized_pipeline=serve().serialize(), prefetch_queue_depth=1,
                             exec_dynamic=True)
    p.build()
    return p


def one_run(p: Pipeline, name: str, requests: list[list[int]], queued: int) -> float:
    t0 = time.perf_counter()
    for r, out in cs.run_requests(p, name, requests, queued=queued):
        if isinstance(out, Exception):
            raise out
    return len(requests) / (time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("--rtt-ms", type=float, default=50)
    ap.add_argument("--queued", default="1,8", help="queue depths to compare")
    ap.add_argument("--requests", type=int, default=40, help="requests per run")
    ap.add_argument("--request-size", type=int, default=4, help="keys per request")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--listen", default="127.0.9.61:9042", help="the proxy's address")
    ap.add_argument("--node", default="127.0.0.1:9042")
    a = ap.parse_args(argv)
    cd.load_plugin(required=True)
    import cqlstream

    with cqlstream.Loader(a.dataset, batch_size=a.request_size, shuffle=False, hosts=a.node.split(":")[0]) as ld:
        n = ld.samples_per_epoch
        keys = [int(k) for b in ld for k in b.keys]
    requests = [[keys[(i * a.request_size + j) % n] for j in range(a.request_size)] for i in range(a.requests)]
    depths = [int(x) for x in a.queued.split(",")]
    proxy = start_proxy(a.rtt_ms, a.listen, a.node)
    try:
        host, port = a.listen.rsplit(":", 1)
        medians = {}
        for q in depths:
            name = f"BENCH_Q{q}"
            p = pipeline(a.dataset, host, int(port), a.request_size, max(depths), name)
            one_run(p, name, requests[:4], q)  # connect and warm up
            rates = []
            for i in range(a.repeat):
                rates.append(one_run(p, name, requests, q))
                print(f"rtt {a.rtt_ms:g} ms, queued {q}: run {i + 1}: {rates[-1]:.2f} requests/s", flush=True)
            medians[q] = statistics.median(rates)
            print(f"  counters: {cs.stats(name)}", flush=True)
            del p
        for q in depths:
            print(f"rtt {a.rtt_ms:g} ms, {a.request_size} keys/request, queued {q}: median of {a.repeat}: "
                  f"{medians[q]:.2f} requests/s")
        if len(depths) > 1:
            print(f"speed-up queued {depths[-1]} vs {depths[0]}: {medians[depths[-1]] / medians[depths[0]]:.2f}x")
        print("load average: " + Path("/proc/loadavg").read_text().strip())
    finally:
        proxy.terminate()
        proxy.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
