#!/usr/bin/env python3
"""Ingest throughput: `cqlstream ingest` (the CLI) and cqlstream.Writer (Python)
writing the same image folder into the local node, alternating, each into a
freshly dropped keyspace. Prints one line per run and a Markdown table of the
medians (docs/benchmarks-ingest.md, "Ingest: the CLI and cqlstream.Writer"); the raw
lines go to bench/results/raw/.

  .venv/bin/python bench/ingest/writer_compare.py FOLDER [--runs 3] [--cli build/src/cli/cqlstream]

FOLDER is an image folder as the CLI ingests it: FOLDER/<split>/<class>/<file>
(what `cqlstream-gen-images --out FOLDER` writes). The Writer side is this
script run as a child (`write` sub-command): one cqlstream.Writer per split,
fed the files in the CLI's order (sorted by path) with their class index, the
file read by Python. Client CPU is each child process's (wait4 rusage: user +
system, all threads), so both sides pay for reading the files; the node's
CPU comes from /proc (node_cpu.py) when it runs on this machine. Each table
value is the median of the runs.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import node_cpu

T_START = time.monotonic()
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DATASET = "wcmp"


def loadavg() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def listing(folder: str) -> dict[str, list[tuple[str, str]]]:
    """split -> [(relative path under the split, class name)], sorted by path."""
    out: dict[str, list[tuple[str, str]]] = {}
    for split in sorted(os.listdir(folder)):
        sdir = os.path.join(folder, split)
        if not os.path.isdir(sdir):
            continue
        items = []
        for cls in sorted(os.listdir(sdir)):
            cdir = os.path.join(sdir, cls)
            if os.path.isdir(cdir):
                items += [(f"{cls}/{f}", cls) for f in os.listdir(cdir)]
        out[split] = sorted(items)
    return out


def write_child(a: argparse.Namespace) -> int:
    """The Writer side: every split of the folder through cqlstream.Writer."""
    import cqlstream

    splits = listing(a.folder)
    classes = sorted({cls for items in splits.values() for _, cls in items})
    index = {c: i for i, c in enumerate(classes)}
    n = 0
    for split, items in splits.items():
        with cqlstream.Writer(a.dataset, split=split, label_kind="class", classes=classes,
                              source_id=f"bench/{split}", hosts=a.hosts, keyspace=a.keyspace) as w:
            for rel, cls in items:
                with open(os.path.join(a.folder, split, rel), "rb") as f:
                    w.add(f.read(), label=index[cls], path=rel)
                n += 1
    print(f"wrote {n} samples", file=sys.stderr)
    return 0


def run_child(cmd: list[str]) -> tuple[int, float, float, str]:
    """Runs cmd; returns (returncode, wall s, child CPU s, stderr tail)."""
    u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (u1.ru_utime - u0.ru_utime) + (u1.ru_stime - u0.ru_stime)
    return p.returncode, wall, cpu, (p.stdout + p.stderr)[-2000:]


def compare(a: argparse.Namespace) -> int:
    from cassandra.cluster import Cluster

    splits = listing(a.folder)
    n = sum(len(v) for v in splits.values())
    nbytes = sum(os.path.getsize(os.path.join(a.folder, s, rel)) for s, items in splits.items() for rel, _ in items)
    if n == 0:
        raise SystemExit(f"{a.folder}: no FOLDER/<split>/<class>/<file> images")
    cluster = Cluster(a.hosts.split(","), protocol_version=4)
    admin = cluster.connect()
    admin.default_timeout = 120
    raw_path = os.path.join(ROOT, "bench", "results", "raw", f"writer-compare-{time.strftime('%Y%m%d-%H%M%S')}.jsonl")
    os.makedirs(os.path.dirname(raw_path), exist_ok=True)
    node = node_cpu.node_pid(a.hosts.split(",")[0])
    rows = []
    tools = {
        "cqlstream ingest": lambda ks: [a.cli, "ingest", "--hosts", a.hosts, "--keyspace", ks, "--dataset", DATASET,
                                        a.folder],
        "cqlstream.Writer": lambda ks: [sys.executable, os.path.abspath(__file__), "write", "--hosts", a.hosts,
                                        "--keyspace", ks, "--dataset", DATASET, a.folder],
    }
    with open(raw_path, "w") as raw:
        for run in range(a.runs):
            for tool, cmd in tools.items():
                ks = "wcmp_cli" if tool == "cqlstream ingest" else "wcmp_writer"
                admin.execute(f"DROP KEYSPACE IF EXISTS {ks}")
                time.sleep(2)
                load0 = loadavg()
                n0 = node_cpu.cpu_seconds(node)
                rc, wall, cpu, tail = run_child(cmd(ks))
                n1 = node_cpu.cpu_seconds(node)
                node_s = round(n1 - n0, 1) if n0 is not None and n1 is not None else None
                if rc != 0:
                    print(f"{tool} failed ({rc}):\n{tail}", file=sys.stderr)
                r = dict(tool=tool, run=run, rc=rc, samples=n, bytes=nbytes, wall_s=round(wall, 2),
                         images_per_s=round(n / wall, 1), mb_per_s=round(nbytes / 1e6 / wall, 1),
                         cpu_s=round(cpu, 2), cpu_s_per_gb=round(cpu / (nbytes / 1e9), 2),
                         node_cpu_s=node_s, node_cpu_s_per_gb=round(node_s / (nbytes / 1e9), 1) if node_s else None,
                         load_before=load0, load_after=loadavg())
                raw.write(json.dumps(r) + "\n")
                raw.flush()
                rows.append(r)
                if rc == 0:
                    print(f"{tool} run {run + 1}: {r['images_per_s']} images/s, {r['mb_per_s']} MB/s, "
                          f"{r['wall_s']} s, {r['cpu_s']} CPU s = {r['cpu_s_per_gb']} CPU s/GB, "
                          f"node {r['node_cpu_s_per_gb']} CPU s/GB "
                          f"(load {load0} -> {r['load_after']})", flush=True)
        for ks in ("wcmp_cli", "wcmp_writer"):
            admin.execute(f"DROP KEYSPACE IF EXISTS {ks}")
    cluster.shutdown()
    print(f"\n{n} files, {nbytes / 1e9:.3f} GB; raw: {os.path.relpath(raw_path, ROOT)}\n")
    print("| tool | runs | images/s | MB/s | wall s | client CPU s | client CPU s/GB | node CPU s/GB "
          "| load average before each run |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for tool in tools:
        rs = [r for r in rows if r["tool"] == tool and r["rc"] == 0]
        if not rs:
            print(f"| {tool} (failed) | 0 | | | | | | |")
            continue
        med = {k: statistics.median(r[k] for r in rs) for k in ("images_per_s", "mb_per_s", "wall_s", "cpu_s",
                                                               "cpu_s_per_gb")}
        nodes = [r["node_cpu_s_per_gb"] for r in rs if r["node_cpu_s_per_gb"] is not None]
        node_med = f"{statistics.median(nodes):.1f}" if nodes else "-"
        print(f"| {tool} | {len(rs)} | {med['images_per_s']:,.0f} | {med['mb_per_s']:.1f} | {med['wall_s']:.1f} | "
              f"{med['cpu_s']:.1f} | {med['cpu_s_per_gb']:.2f} | {node_med} | "
              f"{', '.join(r['load_before'] for r in rs)} |")
    print(f"\nwall time of this command: {time.monotonic() - T_START:.0f} s")
    return 0 if all(r["rc"] == 0 for r in rows) else 1


def main() -> int:
    if sys.argv[1:2] == ["write"]:
        w = argparse.ArgumentParser(prog="writer_compare.py write", description="the Writer side, run as a child")
        w.add_argument("--hosts", default="127.0.0.1")
        w.add_argument("--keyspace", required=True)
        w.add_argument("--dataset", required=True)
        w.add_argument("folder")
        return write_child(w.parse_args(sys.argv[2:]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", help="FOLDER/<split>/<class>/<file>")
    ap.add_argument("--hosts", default="127.0.0.1")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "src", "cli", "cqlstream"))
    return compare(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
