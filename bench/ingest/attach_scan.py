#!/usr/bin/env python3
"""Attach scan rate: how fast `cqlstream attach` enumerates the keys of a table
it did not write (docs/benchmarks-attach.md, "Attach: key scan rate").

  .venv/bin/python bench/ingest/attach_scan.py [--keys 50000] [--runs 3] [--cli build/src/cli/cqlstream]

The table is the published reference system's layout,
`data_train(id uuid PRIMARY KEY, label int, data blob) WITH compression =
{'enabled': false}` in keyspace attbench (SimpleStrategy, RF 1), written once
with the Python driver (execute_concurrent_with_args, 64 in flight) as a
third-party tool would: --keys rows of --blob-bytes random bytes each. It is
kept between invocations (a row count check decides; --rewrite forces it).
Each run attaches it as a fresh dataset (`cqlstream attach`, whole command
timed: catalog, paged token-range scan, key snapshot written), then drops the
dataset (the snapshot; the table stays). Reported: keys / wall s of the
command, the scan's own rate from the CLI's "key scan:" line, and the CPU
of the client and (node_cpu.py) of a local node; medians of the runs.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
import uuid

import node_cpu

T_START = time.monotonic()
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
KEYSPACE = "attbench"
TABLE = "data_train"


def loadavg() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def populate(session, keys: int, blob_bytes: int, rewrite: bool) -> None:
    from cassandra.concurrent import execute_concurrent_with_args

    session.execute(f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    if rewrite:
        session.execute(f"DROP TABLE IF EXISTS {KEYSPACE}.{TABLE}")
    session.execute(f"CREATE TABLE IF NOT EXISTS {KEYSPACE}.{TABLE} (id uuid PRIMARY KEY, label int, data blob) "
                    "WITH compression = {'enabled': false}")
    have = session.execute(f"SELECT count(*) FROM {KEYSPACE}.{TABLE}", timeout=300).one()[0]
    if have == keys:
        print(f"{KEYSPACE}.{TABLE}: {have} rows already", flush=True)
        return
    if have:
        session.execute(f"TRUNCATE {KEYSPACE}.{TABLE}", timeout=120)
    ins = session.prepare(f"INSERT INTO {KEYSPACE}.{TABLE} (id, label, data) VALUES (?, ?, ?)")
    t0 = time.monotonic()
    done = 0
    step = 5000
    while done < keys:
        n = min(step, keys - done)
        args = [(uuid.uuid4(), (done + i) % 100, os.urandom(blob_bytes)) for i in range(n)]
        for ok, res in execute_concurrent_with_args(session, ins, args, concurrency=64, raise_on_first_error=False):
            if not ok:
                raise SystemExit(f"an INSERT failed: {res!r}")
        done += n
    print(f"{KEYSPACE}.{TABLE}: wrote {keys} rows with the Python driver in {time.monotonic() - t0:.1f} s", flush=True)


def run_attach(cli: str, hosts: str, dataset: str) -> tuple[int, float, float, str]:
    cmd = [cli, "attach", "--hosts", hosts, "--dataset", dataset, "--table", f"{KEYSPACE}.{TABLE}",
           "--key-column", "id", "--data-column", "data", "--label-column", "label", "--label-kind", "class",
           "--split", "train"]
    u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (u1.ru_utime - u0.ru_utime) + (u1.ru_stime - u0.ru_stime)
    return p.returncode, wall, cpu, p.stdout + p.stderr


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", default="127.0.0.1")
    ap.add_argument("--keys", type=int, default=50_000)
    ap.add_argument("--blob-bytes", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rewrite", action="store_true", help="write the table anew")
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "src", "cli", "cqlstream"))
    a = ap.parse_args()

    from cassandra.cluster import Cluster

    cluster = Cluster(a.hosts.split(","), protocol_version=4)
    session = cluster.connect()
    session.default_timeout = 120
    populate(session, a.keys, a.blob_bytes, a.rewrite)
    cluster.shutdown()

    raw_path = os.path.join(ROOT, "bench", "results", "raw", f"attach-scan-{time.strftime('%Y%m%d-%H%M%S')}.jsonl")
    os.makedirs(os.path.dirname(raw_path), exist_ok=True)
    node = node_cpu.node_pid(a.hosts.split(",")[0])
    rows = []
    with open(raw_path, "w") as raw:
        for run in range(a.runs):
            dataset = f"attbench_{run}"
            subprocess.run([a.cli, "drop", dataset, "--yes", "--hosts", a.hosts], capture_output=True)
            load0 = loadavg()
            n0 = node_cpu.cpu_seconds(node)
            rc, wall, cpu, out = run_attach(a.cli, a.hosts, dataset)
            n1 = node_cpu.cpu_seconds(node)
            # The CLI's own line: "key scan: N keys in S s: R keys/s" (the scan alone).
            m = re.search(r"key scan: ([0-9,]+) keys in ([0-9.]+) s: ([0-9,]+) keys/s", out)
            keys_seen = int(m.group(1).replace(",", "")) if m else None
            scan_s = float(m.group(2)) if m else None
            r = dict(run=run, rc=rc, keys=a.keys, keys_reported=keys_seen, wall_s=round(wall, 2),
                     keys_per_s=round(a.keys / wall), scan_s=scan_s,
                     scan_keys_per_s=int(m.group(3).replace(",", "")) if m else None,
                     cpu_s=round(cpu, 2), node_cpu_s=round(n1 - n0, 1) if n0 is not None and n1 is not None else None,
                     load_before=load0, load_after=loadavg())
            if rc == 0 and keys_seen != a.keys:
                print(f"attach run {run + 1}: the CLI reported {keys_seen} keys, the table has {a.keys}",
                      file=sys.stderr)
                r["rc"] = -1
            raw.write(json.dumps(r) + "\n")
            raw.flush()
            rows.append(r)
            if rc != 0:
                print(f"attach run {run + 1} failed ({rc}):\n{out[-2000:]}", file=sys.stderr)
            else:
                print(f"attach run {run + 1}: {r['keys_per_s']:,} keys/s over the command ({wall:.1f} s), "
                      f"scan alone {r['scan_keys_per_s']} keys/s ({scan_s} s), client CPU {cpu:.1f} s, node CPU {r['node_cpu_s']} s "
                      f"(load {load0} -> {r['load_after']})", flush=True)
            subprocess.run([a.cli, "drop", dataset, "--yes", "--hosts", a.hosts], capture_output=True)
    ok = [r for r in rows if r["rc"] == 0]
    print(f"\n{a.keys} keys, {a.blob_bytes}-byte blobs; raw: {os.path.relpath(raw_path, ROOT)}\n")
    print("| runs | keys/s, whole command | wall s | keys/s, scan alone | scan s | client CPU s | node CPU s "
          "| load average before each run |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|")
    if ok:
        med = {k: statistics.median(r[k] for r in ok) for k in ("keys_per_s", "wall_s", "scan_keys_per_s", "scan_s",
                                                               "cpu_s")}
        nodes = [r["node_cpu_s"] for r in ok if r["node_cpu_s"] is not None]
        node_med = f"{statistics.median(nodes):.1f}" if nodes else "-"
        print(f"| {len(ok)} | {med['keys_per_s']:,.0f} | {med['wall_s']:.1f} | {med['scan_keys_per_s']:,.0f} | "
              f"{med['scan_s']:.2f} | {med['cpu_s']:.1f} | {node_med} | {', '.join(r['load_before'] for r in ok)} |")
    print(f"\nwall time of this command: {time.monotonic() - T_START:.0f} s")
    return 0 if len(ok) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
