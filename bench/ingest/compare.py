#!/usr/bin/env python3
"""Ingest throughput, one run: `cqlstream ingest` and the Python
scylla-driver (bench/ingest/driver_ingest.py) writing the same image folder
into the local node, alternating, each into a freshly dropped keyspace.
Prints a Markdown table (docs/benchmarks-ingest.md, "Ingest: cqlstream and the
Python driver") and writes the raw lines to bench/results/raw/.

  .venv/bin/python bench/ingest/compare.py bench/data/jpeg [--runs 2]

Client CPU is the child process's (wait4 rusage: user + system, all threads).
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

from cassandra.cluster import Cluster

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PY = os.path.join(ROOT, ".venv", "bin", "python")


def loadavg():
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def folder_stats(root):
    n = b = 0
    for dirpath, _, files in os.walk(root):
        for f in files:
            n += 1
            b += os.path.getsize(os.path.join(dirpath, f))
    return n, b


def timed(cmd):
    """Runs cmd; returns (returncode, wall s, stdout, stderr). Its CPU time is
    in the RUSAGE_CHILDREN delta around the call (children_cpu)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate()
    wall = time.monotonic() - t0
    return p.returncode, wall, out, err


def children_cpu():
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--hosts", default="127.0.0.1")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--cli", default=os.path.join(ROOT, "build-bench", "src", "cli", "cqlstream"))
    a = ap.parse_args()
    n, nbytes = folder_stats(a.folder)
    cluster = Cluster(a.hosts.split(","), protocol_version=4)
    admin = cluster.connect()
    admin.default_timeout = 120
    raw_path = os.path.join(ROOT, "bench", "results", "raw", f"ingest-compare-{time.strftime('%Y%m%d-%H%M%S')}.jsonl")
    os.makedirs(os.path.dirname(raw_path), exist_ok=True)
    rows = []
    with open(raw_path, "w") as raw:
        for run in range(a.runs):
            for tool in ("cqlstream", "scylla-driver"):
                ks = "ingcmp_cq" if tool == "cqlstream" else "ingcmp_py"
                admin.execute(f"DROP KEYSPACE IF EXISTS {ks}")
                cluster.control_connection.wait_for_schema_agreement()
                time.sleep(2)
                if tool == "cqlstream":
                    cmd = [a.cli, "ingest", "--hosts", a.hosts, "--keyspace", ks, "--dataset", "jpeg",
                           "--concurrency", str(a.concurrency), a.folder]
                else:
                    cmd = [PY, os.path.join(ROOT, "bench", "ingest", "driver_ingest.py"), "--hosts", a.hosts,
                           "--keyspace", ks, "--dataset", "jpeg", "--concurrency", str(a.concurrency), a.folder]
                load0 = loadavg()
                cpu0 = children_cpu()
                rc, wall, out, err = timed(cmd)
                cpu = children_cpu() - cpu0
                if rc != 0:
                    print(f"{tool} failed ({rc}): {err[-2000:]}", file=sys.stderr)
                r = dict(tool=tool, run=run, rc=rc, samples=n, bytes=nbytes, wall_s=round(wall, 2),
                         images_per_s=round(n / wall, 1), mb_per_s=round(nbytes / 1e6 / wall, 1),
                         cpu_s=round(cpu, 2), cpu_s_per_gb=round(cpu / (nbytes / 1e9), 2), load_before=load0,
                         load_after=loadavg())
                raw.write(json.dumps(r) + "\n")
                raw.flush()
                rows.append(r)
                print(f"{tool} run {run}: {r['images_per_s']} images/s, {r['mb_per_s']} MB/s, "
                      f"{r['cpu_s_per_gb']} CPU s/GB (load {load0})", file=sys.stderr, flush=True)
        for ks in ("ingcmp_cq", "ingcmp_py"):
            admin.execute(f"DROP KEYSPACE IF EXISTS {ks}")
    cluster.shutdown()
    print(f"{n} files, {nbytes / 1e9:.2f} GB, concurrency {a.concurrency}; raw: {raw_path}")
    print()
    print("| tool | run | images/s | MB/s | wall s | client CPU s | client CPU s/GB | load before |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        status = "" if r["rc"] == 0 else " (failed)"
        print(f"| {r['tool']}{status} | {r['run'] + 1} | {r['images_per_s']:.0f} | {r['mb_per_s']:.1f} | "
              f"{r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['cpu_s_per_gb']:.2f} | {r['load_before']} |")
    return 0 if all(r["rc"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
