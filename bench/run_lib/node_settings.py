#!/usr/bin/env python3
"""Before/after of the node's serving settings (entry point:
bench/node_settings.sh; docs/cassandra.md "Serving large blobs").

For each configuration (a scripts/cassandra --tuning and --heap) it starts a
fresh node of the `scratch` profile (127.0.4.1; the shared default node is
never touched), ingests the JPEG set RUNS times (into datasets jpeg_1 ..
jpeg_RUNS), waits for compaction to go quiet, reads jpeg_1 RUNS times with
`cqlstream bench`, and stops and purges the node. Every run records its wall
time, the client's and the node's CPU seconds and the load average before and
after; the table gives medians.

Outputs: the Markdown table on stdout and in
bench/results/node_settings-<time>.md, every run's record in
bench/results/raw/node_settings-<time>/records.json.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

from bench_common import loadavg, log, process_cpu_s

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CASSANDRA = os.path.join(ROOT, "scripts", "cassandra")
PROFILE = "scratch"
HOST = "127.0.4.1"
KEYSPACE = "cqlstream_node_settings"


def node_pid():
    with open(os.path.join(ROOT, ".state", "cassandra", PROFILE, "node1", "cassandra.pid")) as f:
        return int(f.read().strip())


def proc_cpu(pid):
    """utime + stime of the running node, in seconds."""
    cpu = process_cpu_s(pid)
    if cpu is None:
        raise RuntimeError(f"the {PROFILE} node (pid {pid}) is gone")
    return cpu


def timed(cmd):
    """Runs cmd; returns (stdout, wall s, child CPU s, node CPU s, load before, load after)."""
    pid = node_pid()
    n0, l0, t0 = proc_cpu(pid), loadavg(), time.time()
    c0 = os.times()
    p = subprocess.run(cmd, capture_output=True, text=True)
    c1 = os.times()
    wall, n1 = time.time() - t0, proc_cpu(pid)
    if p.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-400:]}")
    child = (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)
    return p.stdout, wall, child, n1 - n0, l0, loadavg()


def wait_quiet(limit_s, idle_cpu=0.1):
    """Until the node uses < idle_cpu cores over 5 s (compaction done), at most limit_s."""
    pid, t0 = node_pid(), time.time()
    while time.time() - t0 < limit_s:
        a = proc_cpu(pid)
        time.sleep(5)
        if (proc_cpu(pid) - a) / 5 < idle_cpu:
            break
    return time.time() - t0


def node_up(tuning, heap, disk):
    subprocess.run([CASSANDRA, "down", "--profile", PROFILE, "--purge"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([CASSANDRA, "up", "--profile", PROFILE, "--tuning", tuning, "--heap", heap] +
                   (["--disk-access-mode", disk] if disk else []), check=True, stdout=subprocess.DEVNULL)


def node_down():
    subprocess.run([CASSANDRA, "down", "--profile", PROFILE, "--purge"], check=True, stdout=subprocess.DEVNULL)


def measure_config(a, cli, config, data_bytes):
    """Ingest RUNS times, then bench RUNS times, on a fresh node; the run records."""
    tuning, heap, disk = config
    name = config_name(config)
    recs = []
    node_up(tuning, heap, disk)
    try:
        for r in range(1, a.runs + 1):
            out, wall, cpu, node, l0, l1 = timed([cli, "ingest", "--hosts", HOST, "--keyspace", KEYSPACE,
                                                   "--dataset", f"jpeg_{r}", a.data])
            recs.append(dict(config=name, kind="ingest", run=r, wall_s=wall, mb_per_s=data_bytes / wall / 1e6,
                             client_cpu_s_per_gb=cpu / (data_bytes / 1e9), node_cpu_s_per_gb=node / (data_bytes / 1e9),
                             load_before=l0, load_after=l1))
            log(f"{name} ingest {r}: {recs[-1]['mb_per_s']:.1f} MB/s, client {recs[-1]['client_cpu_s_per_gb']:.2f}"
                f" node {recs[-1]['node_cpu_s_per_gb']:.2f} CPU s/GB, load {l0} -> {l1}")
        log(f"compaction settled after {wait_quiet(a.settle_s):.0f} s")
        for r in range(1, a.runs + 1):
            out, wall, cpu, node, l0, l1 = timed([cli, "bench", "jpeg_1", "--hosts", HOST, "--keyspace", KEYSPACE,
                                                   "--epochs", str(a.epochs), "--warmup", "1", "--batch-size", "512",
                                                   "--json"])
            res = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])
            # The node's CPU covers the warm-up epoch too: per GB of all epochs read.
            gb = data_bytes * (a.epochs + 1) / 1e9
            recs.append(dict(config=name, kind="bench", run=r, wall_s=wall,
                             images_per_s=res["images_per_s"], mb_per_s=res["mb_per_s"],
                             client_cpu_s_per_gb=res["cpu_s_per_gb"], node_cpu_s_per_gb=node / gb,
                             load_before=l0, load_after=l1, result=res))
            log(f"{name} bench {r}: {res['images_per_s']:.0f} images/s, client {res['cpu_s_per_gb']:.2f} "
                f"node {node / gb:.2f} CPU s/GB, load {l0} -> {l1}")
    finally:
        node_down()
    return recs


def config_name(config):
    return " ".join(x for x in config if x)


def med(recs, key):
    return statistics.median(r[key] for r in recs) if recs else float("nan")


def table(records, configs, a, meta):
    md = [f"# Node settings: before/after ({meta['run']})", "",
          f"{a.runs} runs each; JPEG set {meta['data']} ({meta['images']} images, {meta['bytes'] / 1e9:.2f} GB); "
          f"bench: batch 512, 1 warm-up + {a.epochs} measured epochs, direct to the node (no emulator); "
          f"node CPU per GB counts the warm-up epoch too. Load average (1/5/15 min) before each run in the last "
          f"column. {meta['machine']}.", "",
          "| configuration | ingest MB/s | ingest client CPU s/GB | ingest node CPU s/GB | read images/s | "
          "read MB/s | read client CPU s/GB | read node CPU s/GB | load averages (ingest; read) |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for c in configs:
        ing = [r for r in records if r["config"] == c and r["kind"] == "ingest"]
        rd = [r for r in records if r["config"] == c and r["kind"] == "bench"]
        loads = ", ".join(r["load_before"] for r in ing) + "; " + ", ".join(r["load_before"] for r in rd)
        md.append(f"| {c} | {med(ing, 'mb_per_s'):.1f} | {med(ing, 'client_cpu_s_per_gb'):.2f} | "
                  f"{med(ing, 'node_cpu_s_per_gb'):.2f} | {med(rd, 'images_per_s'):.0f} | {med(rd, 'mb_per_s'):.1f} | "
                  f"{med(rd, 'client_cpu_s_per_gb'):.2f} | {med(rd, 'node_cpu_s_per_gb'):.2f} | {loads} |")
    return md


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="stock:1G,serving:2G",
                    help="comma-separated TUNING:HEAP[:DISK_ACCESS_MODE] (default stock:1G,serving:2G: before and "
                         "after; e.g. serving:2G:mmap adds memory-mapped data files)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3, help="measured epochs per bench run (default 3)")
    ap.add_argument("--data", default=os.path.join(ROOT, "bench", "data", "jpeg"),
                    help="image folder to ingest (default bench/data/jpeg, bench/run's 20,000 JPEGs)")
    ap.add_argument("--build-dir", default=os.environ.get("CQLSTREAM_BENCH_BUILD_DIR", "build-bench"))
    ap.add_argument("--settle-s", type=float, default=180, help="longest wait for compaction after the ingests")
    a = ap.parse_args()
    cli = os.path.join(ROOT, a.build_dir, "src", "cli", "cqlstream")
    if not os.access(cli, os.X_OK):
        sys.exit(f"node_settings: {cli} missing (build it: ninja -C {a.build_dir} cqlstream_cli)")
    if not os.path.isdir(os.path.join(a.data, "train")):
        sys.exit(f"node_settings: {a.data}/train missing (bench/run makes bench/data/jpeg)")
    files = [os.path.join(d, n) for d, _, ns in os.walk(os.path.join(a.data, "train")) for n in ns]
    data_bytes = sum(os.path.getsize(f) for f in files)
    configs = []
    for c in a.configs.split(","):
        parts = c.split(":") + ["", ""]
        configs.append((parts[0], parts[1] or "2G", parts[2]))
    run_id = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    raw = os.path.join(ROOT, "bench", "results", "raw", f"node_settings-{run_id}")
    os.makedirs(raw, exist_ok=True)
    meta = dict(run=run_id, data=os.path.relpath(a.data, ROOT), images=len(files), bytes=data_bytes,
                machine=f"{os.cpu_count()} CPUs", load_start=loadavg())
    records = []
    for config in configs:
        records += measure_config(a, cli, config, data_bytes)
        with open(os.path.join(raw, "records.json"), "w") as f:
            json.dump(dict(meta=meta, records=records), f, indent=1)
    md = table(records, [config_name(c) for c in configs], a, meta)
    out = os.path.join(ROOT, "bench", "results", f"node_settings-{run_id}.md")
    with open(out, "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    log(f"wrote {os.path.relpath(out, ROOT)} (raw: {os.path.relpath(raw, ROOT)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
