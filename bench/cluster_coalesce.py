#!/usr/bin/env python3
# Copyright (c) cqlstream authors.
"""Coalesced reads of small samples on the 3-node cluster (scripts/cassandra
--profile cluster, 127.0.3.1-3), keyspace of RF 1: what grouping by replica
set (docs/loader.md "Coalesced reads of small samples") does to the nodes.

`cqlstream bench` reads the dataset RUNS times with the CLI of --build and,
given --cli-before (a CLI built without the change, to compare), as many
times with that one, interleaved (after, before, after, ...) so that a
change in the machine's load hits both alike. Per run it prints images/s
(the bench's median over its measured epochs), the coalesced samples per
request, and over the whole process (warm-up included): client CPU us per
image (wait4), the three nodes' CPU us per image (/proc of their pids) and
the messages the nodes sent each other per 1,000 images (their own counters,
system_views.internode_outbound, read with the Python driver), with the
load average (1 min) before the run; then the medians per CLI.

Data: --folder (default bench/data/tiny1k, made by cqlstream-gen-images
when missing: COUNT JPEGs of about 1 kB, 10 classes, no val split) is
ingested once into KEYSPACE (simple:1) as DATASET; re-running a finished
ingest writes nothing.
Wall time: about RUNS x CLIs x (1 + EPOCHS) epochs of COUNT images, 2-5 min
on a quiet machine with the defaults.

  bench/cluster_coalesce.py [--build build] [--cli-before PATH] [--runs 3]
                            [--count 30000] [--epochs 2]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys

from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import WhiteListRoundRobinPolicy

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_lib"))
from bench_common import loadavg, process_cpu_s  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODES = ["127.0.3.1", "127.0.3.2", "127.0.3.3"]
STATE = os.path.join(ROOT, ".state", "cassandra", "cluster")


def node_pids():
    pids = []
    for i in range(1, 4):
        try:
            with open(os.path.join(STATE, f"node{i}", "cassandra.pid")) as f:
                pids.append(int(f.read().strip()))
        except (OSError, ValueError):
            sys.exit(f"cluster_coalesce: no pid for node {i} under {STATE}: start scripts/cassandra up --profile cluster")
    return pids


def nodes_cpu_s(pids):
    total = 0.0
    for p in pids:
        s = process_cpu_s(p)
        if s is None:
            sys.exit(f"cluster_coalesce: node process {p} is gone")
        total += s
    return total


def internode_messages(sessions):
    return sum(row.sent_count for s in sessions
               for row in s.execute("SELECT sent_count FROM system_views.internode_outbound"))


def children_cpu_s():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_cli(cmd):
    """Runs `cmd` to its end; returns (stdout, its user + sys CPU seconds, all threads)."""
    c0 = children_cpu_s()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"cluster_coalesce: {' '.join(cmd)} failed:\n{p.stderr}")
    return p.stdout, children_cpu_s() - c0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--cli-before", help="a second CLI to compare with (runs interleaved)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--count", type=int, default=30000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--keyspace", default="cqlstream_cluster_tiny")
    ap.add_argument("--dataset", default="tiny1k")
    ap.add_argument("--folder", default=os.path.join(ROOT, "bench", "data", "tiny1k"))
    a = ap.parse_args()
    cli = os.path.join(ROOT, a.build, "src", "cli", "cqlstream")
    gen = os.path.join(ROOT, a.build, "bench", "cqlstream-gen-images")
    for b in (cli, gen):
        if not os.path.exists(b):
            sys.exit(f"cluster_coalesce: {b} not found (build the CLI and the bench tools first)")
    pids = node_pids()
    if not os.path.isdir(a.folder):
        subprocess.run([gen, "--out", a.folder, "--count", str(a.count), "--classes", "10", "--val-fraction", "0",
                        "--mean-kb", "1", "--sigma", "0.3"], check=True)
    subprocess.run([cli, "ingest", a.folder, "--hosts", NODES[0], "--keyspace", a.keyspace, "--dataset", a.dataset,
                    "--replication", "simple:1"], check=True, stdout=subprocess.DEVNULL)
    n_images = sum(len(files) for _, _, files in os.walk(a.folder))
    # One session per node, pinned to it: the counters are each node's own.
    clusters = [Cluster([n], execution_profiles={
        EXEC_PROFILE_DEFAULT: ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([n]))}) for n in NODES]
    sessions = [c.connect() for c in clusters]
    clis = [("after", cli)] + ([("before", a.cli_before)] if a.cli_before else [])
    records = []
    for run in range(a.runs):
        for name, path in clis:
            cmd = [path, "bench", a.dataset, "--hosts", NODES[0], "--keyspace", a.keyspace, "--epochs",
                   str(a.epochs), "--warmup", "1", "--batch-size", "512", "--json"]
            l0 = loadavg()
            m0, c0 = internode_messages(sessions), nodes_cpu_s(pids)
            out, client_cpu = run_cli(cmd)
            m1, c1 = internode_messages(sessions), nodes_cpu_s(pids)
            rec = json.loads(out.strip().splitlines()[-1])
            images = (a.epochs + 1) * n_images
            r = dict(cli=name, run=run, images_per_s=rec["images_per_s"],
                     samples_per_request=(rec["coalesced_samples"] / rec["coalesced_requests"]
                                          if rec.get("coalesced_requests") else 1.0),
                     client_cpu_us_per_image=client_cpu / images * 1e6,
                     nodes_cpu_us_per_image=(c1 - c0) / images * 1e6,
                     messages_per_1000=(m1 - m0) / images * 1000, load_before=l0)
            records.append(r)
            print(f"{name:>6} run {run}: {r['images_per_s']:>8.0f} images/s  {r['samples_per_request']:5.1f} "
                  f"samples/request  CPU us/image: client {r['client_cpu_us_per_image']:5.1f}, "
                  f"nodes {r['nodes_cpu_us_per_image']:6.1f}  "
                  f"{r['messages_per_1000']:7.1f} internode messages per 1,000 images  load {l0}", flush=True)
    for name, _ in clis:
        rs = [r for r in records if r["cli"] == name]
        med = {k: statistics.median(r[k] for r in rs)
               for k in ("images_per_s", "samples_per_request", "client_cpu_us_per_image", "nodes_cpu_us_per_image",
                         "messages_per_1000")}
        print(f"{name:>6} median of {len(rs)}: {med['images_per_s']:.0f} images/s, "
              f"{med['samples_per_request']:.1f} samples/request, CPU us/image: client "
              f"{med['client_cpu_us_per_image']:.1f}, nodes {med['nodes_cpu_us_per_image']:.1f}; "
              f"{med['messages_per_1000']:.1f} internode messages per 1,000 images")
    for c in clusters:
        c.shutdown()


if __name__ == "__main__":
    main()
