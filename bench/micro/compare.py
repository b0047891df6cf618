#!/usr/bin/env python3
"""Runs the CQL client micro-benchmark and the loader-vs-raw comparison and
prints Markdown tables (docs/benchmarks.md, "CQL client micro-benchmark" and
"Loader vs raw client").

  compare.py clients       cqlstream-cql-micro (blob mode, --setup) then the
                           Python scylla-driver (bench/micro/driver_micro.py,
                           callback window and execute_concurrent_with_args)
                           on the same 100 KB blobs, same levels
  compare.py loader-vs-raw cqlstream-cql-micro --dataset D and
                           `cqlstream bench D --fixed-window --max-in-flight C`
                           at the same C, plus the adaptive loader

Both talk to the local node directly (no emulator). Raw JSON lines go to
bench/results/raw/micro-*.jsonl.
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, "build-bench")
MICRO = os.path.join(BUILD, "bench", "cqlstream-cql-micro")
CLI = os.path.join(BUILD, "src", "cli", "cqlstream")
PY = os.path.join(ROOT, ".venv", "bin", "python")


def loadavg():
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def json_lines(cmd, raw, timeout=3600):
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    load0 = loadavg()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    out = []
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            d["load_before"], d["load_after"] = load0, loadavg()
            out.append(d)
            raw.write(json.dumps(d) + "\n")
            raw.flush()
    if p.returncode != 0:
        print(p.stderr[-2000:], file=sys.stderr)
    return out


def f(v, n=1):
    return "-" if v is None else f"{v:.{n}f}"


def clients(a, raw):
    levels = a.concurrency
    cq = json_lines([MICRO, "--setup", "--keyspace", a.keyspace, "--concurrency", levels, "--warmup-s",
                     str(a.warmup_s), "--measure-s", str(a.measure_s), "--json"], raw)
    py = json_lines([PY, os.path.join(ROOT, "bench", "micro", "driver_micro.py"), "--keyspace", a.keyspace,
                     "--concurrency", levels, "--warmup-s", str(a.warmup_s), "--measure-s", str(a.measure_s),
                     "--method", "both", "--json"], raw)
    print("| client | in flight | requests/s | MB/s | client CPU s/GB | p50 ms | p99 ms | load |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in cq:
        print(f"| cqlstream (C++) | {r['concurrency']} | {r['requests_per_s']:.0f} | {r['mb_per_s']:.1f} | "
              f"{r['cpu_s_per_gb']:.2f} | {f(r['p50_ms'], 2)} | {f(r['p99_ms'], 2)} | {r['load_before']} |")
    for r in py:
        m = "callback window" if r["method"] == "window" else "execute_concurrent_with_args"
        print(f"| scylla-driver, {m} | {r['concurrency']} | {r['requests_per_s']:.0f} | {r['mb_per_s']:.1f} | "
              f"{r['cpu_s_per_gb']:.2f} | {f(r['p50_ms'], 2)} | {f(r['p99_ms'], 2)} | {r['load_before']} |")
    print()
    print("| in flight | cqlstream MB/s | best Python MB/s | throughput ratio | cqlstream MB per CPU s | "
          "Python MB per CPU s | per-CPU ratio |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in cq:
        ps = [p for p in py if p["concurrency"] == r["concurrency"] and p["mb_per_s"] > 0]
        if not ps:
            continue
        best = max(ps, key=lambda p: p["mb_per_s"])
        eff_c = 1000.0 / r["cpu_s_per_gb"] if r["cpu_s_per_gb"] else 0
        eff_p = 1000.0 / best["cpu_s_per_gb"] if best["cpu_s_per_gb"] else 0
        print(f"| {r['concurrency']} | {r['mb_per_s']:.1f} | {best['mb_per_s']:.1f} | "
              f"{r['mb_per_s'] / best['mb_per_s']:.1f}x | {eff_c:.0f} | {eff_p:.0f} | {eff_c / eff_p:.1f}x |")


def loader_vs_raw(a, raw):
    rows = []
    for ds in a.datasets.split(","):
        raws = json_lines([MICRO, "--keyspace", a.keyspace, "--dataset", ds, "--concurrency", a.concurrency,
                           "--warmup-s", str(a.warmup_s), "--measure-s", str(a.measure_s), "--json"], raw)
        for r in raws:
            c = r["concurrency"]
            lo = json_lines([CLI, "bench", ds, "--keyspace", a.keyspace, "--fixed-window", "--max-in-flight", str(c),
                             "--epochs", str(a.epochs), "--warmup", "1", "--json"], raw)
            rows.append((ds, c, r, lo[0] if lo else None))
        ad = json_lines([CLI, "bench", ds, "--keyspace", a.keyspace, "--epochs", str(a.epochs), "--warmup", "1",
                         "--json"], raw)
        best = max(raws, key=lambda r: r["mb_per_s"]) if raws else None
        rows.append((ds, "adaptive", best, ad[0] if ad else None))
    print("| dataset | in flight | raw client MB/s | raw images/s | loader MB/s | loader images/s | loader / raw | "
          "raw CPU s/GB | loader CPU s/GB | loader window / connections | load (raw, loader) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for ds, c, r, lo in rows:
        if r is None:
            continue
        label = c if c != "adaptive" else f"adaptive (vs best raw, {r['concurrency']})"
        if lo is None:
            print(f"| {ds} | {label} | {r['mb_per_s']:.1f} | {r['requests_per_s']:.0f} | failed | | | "
                  f"{r['cpu_s_per_gb']:.2f} | | | {r['load_before']} |")
            continue
        print(f"| {ds} | {label} | {r['mb_per_s']:.1f} | {r['requests_per_s']:.0f} | {lo['mb_per_s']:.1f} | "
              f"{lo['images_per_s']:.0f} | {lo['mb_per_s'] / r['mb_per_s']:.2f} | {r['cpu_s_per_gb']:.2f} | "
              f"{lo['cpu_s_per_gb']:.2f} | {lo['window']} / {lo['connections']} | {r['load_before']}, "
              f"{lo['load_before']} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["clients", "loader-vs-raw"])
    ap.add_argument("--keyspace", default=None)
    ap.add_argument("--datasets", default="jpeg,fashion")
    ap.add_argument("--concurrency", default=None)
    ap.add_argument("--warmup-s", type=float, default=3)
    ap.add_argument("--measure-s", type=float, default=10)
    ap.add_argument("--epochs", type=int, default=2)
    a = ap.parse_args()
    if a.what == "clients":
        a.keyspace = a.keyspace or "cqlstream_micro"
        a.concurrency = a.concurrency or "1,64,1024,8192"
    else:
        a.keyspace = a.keyspace or "cqlstream_bench"
        a.concurrency = a.concurrency or "64,1024,8192"
    os.makedirs(os.path.join(ROOT, "bench", "results", "raw"), exist_ok=True)
    path = os.path.join(ROOT, "bench", "results", "raw", f"micro-{a.what}-{time.strftime('%Y%m%d-%H%M%S')}.jsonl")
    with open(path, "w") as raw:
        print(f"load average at start: {loadavg()}", file=sys.stderr)
        clients(a, raw) if a.what == "clients" else loader_vs_raw(a, raw)
        print(f"load average at end: {loadavg()}; raw: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
