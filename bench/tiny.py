#!/usr/bin/env python3
# Copyright (c) cqlstream authors.
"""Tiny samples: `cqlstream bench` on Fashion-MNIST (~540-byte PNGs) with
coalesced reads off (--coalesce 1) and on (automatic), at RTT 0 (straight
to the node) and through cqlstream-wan at 100 ms (W = 4 MiB per connection),
RUNS runs of each, interleaved (off, on, off, on, ...) so that a change in
the machine's load hits both alike.

Per run it prints images/s (the bench's images over the time of all its
measured epochs together; an older CLI: the median over its epochs),
client CPU per image twice: the bench's own figure for the measured epochs
(cpu_s_per_gb x bytes per image) and user+sys of the whole process from
/usr/bin/time divided by every image it delivered (warm-up included), the
coalesced samples per request, the node's CPU per image (utime + stime of
its process from /proc over the run, warm-up included: meaningful only
when nothing else uses the node), and the load average (1 min) before and
after; then the median per (RTT, mode) and the on/off ratio.

--cli-before PATH adds a second CLI (a build without the change being
measured); each run of each point then runs the build's CLI and this one
in turn (which goes first alternates between runs), and the medians and
the build/before ratios are printed per CLI.
--modes on (or off) measures one mode only; --modes packed adds packed
reads (`cqlstream bench --packed`: one request per pack of the packed copy
that `cqlstream pack DATASET` writes; it must have been run), with the
packed/on ratio.

Needs: the node at 127.0.0.1:9042 with the dataset ingested (bench/run's
data step puts `fashion` into keyspace cqlstream_bench), a build with the
CLI and the bench tools (CQLSTREAM_BUILD_DIR, default build). The node's
CPU is read when scripts/cassandra started it (its pid file); otherwise
it is shown as "-".
Wall time: about 12 runs x (4 epochs of 60,000 images + start-up), 3-6 min
on a quiet machine, longer at 100 ms without coalescing.

  bench/tiny.py [--runs 3] [--rtts 0,100] [--keyspace cqlstream_bench]
                [--dataset fashion] [--batch-size 512] [--modes off,on,packed]
                [--cli-before PATH] [--json out.json]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench", "run_lib"))
from bench_common import default_node_pid, process_cpu_s  # noqa: E402

NODE = "127.0.0.1"
PROXY_IP = "127.0.9.1"
PORT = 9042


def binary(build, name):
    for sub in ("src/cli", "bench"):
        p = os.path.join(ROOT, build, sub, name)
        if os.path.exists(p):
            return p
    sys.exit(f"tiny: {name} not found under {build}/ (build the CLI and the bench tools first)")


def node_pid():
    """The local node's pid, or None: then the node's CPU is not reported
    (no node that scripts/cassandra started, or it is not running)."""
    pid = default_node_pid()
    return pid if process_cpu_s(pid) is not None else None


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def train_images(cli, keyspace, dataset):
    out = subprocess.run([cli, "ls", "--hosts", NODE, "--keyspace", keyspace], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == dataset:
            m = re.search(r"train ([\d,]+)", line)
            if m:
                return int(m.group(1).replace(",", ""))
    sys.exit(f"tiny: dataset {dataset} has no train split in keyspace {keyspace}")


class Proxy:
    def __init__(self, wan, rtt):
        self.log = tempfile.TemporaryFile(mode="w+")
        self.p = subprocess.Popen([wan, "--rtt-ms", str(rtt), "--window", "4MiB", "--map",
                                   f"{PROXY_IP}:{PORT}={NODE}:{PORT}"], stdout=self.log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        t0 = time.time()
        while time.time() - t0 < 10:
            self.log.seek(0)
            if "listening" in self.log.read():
                return
            if self.p.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        sys.exit("tiny: cqlstream-wan did not start listening")

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            self.p.wait(10)


def one_run(a, cli, host, mode_args, n_train, pid):
    with tempfile.NamedTemporaryFile("r") as tf:
        cmd = ["/usr/bin/time", "-f", "%U %S", "-o", tf.name, cli, "bench", a.dataset, "--hosts", host, "--keyspace",
               a.keyspace, "--epochs", str(a.epochs), "--warmup", str(a.warmup), "--batch-size", str(a.batch_size),
               *mode_args, "--json"]
        l0 = loadavg()
        n0 = process_cpu_s(pid)
        out = subprocess.run(cmd, capture_output=True, text=True)
        n1 = process_cpu_s(pid)
        l1 = loadavg()
        node_s = n1 - n0 if n0 is not None and n1 is not None else None
        if out.returncode != 0:
            sys.exit(f"tiny: {' '.join(cmd)} failed:\n{out.stderr}")
        rec = json.loads(out.stdout.strip().splitlines()[-1])
        user, sys_ = (float(x) for x in tf.read().split()[:2])
    median_images = rec["images_per_s"]
    bytes_per_image = rec["mb_per_s"] * 1e6 / median_images if median_images else 0
    # All measured epochs together (a CLI without the field: the median of
    # the epochs); with packed reads the window can hold a whole epoch, and
    # epochs then alternate between waiting and arriving at once.
    images = rec.get("images_per_s_overall", median_images)
    total_images = max((a.epochs + a.warmup) * n_train, 1)
    return dict(images_per_s=images, mb_per_s=rec["mb_per_s"],
                bench_cpu_us_per_image=rec["cpu_s_per_gb"] * bytes_per_image / 1e9 * 1e6,
                process_cpu_us_per_image=(user + sys_) / total_images * 1e6,
                node_cpu_us_per_image=node_s / total_images * 1e6 if node_s is not None else None,
                samples_per_request=(rec.get("coalesced_samples", 0) / rec["coalesced_requests"]
                                     if rec.get("coalesced_requests") else 1.0),
                load_before=l0, load_after=l1)


KEYS = ("images_per_s", "bench_cpu_us_per_image", "process_cpu_us_per_image", "node_cpu_us_per_image",
        "samples_per_request")


def describe(m):
    """The figures of one run or of a point's medians, as one line's tail."""
    return (f"{m['images_per_s']:9.0f} images/s  CPU/image {m['bench_cpu_us_per_image']:6.2f} us (bench) "
            f"{m['process_cpu_us_per_image']:6.2f} us (process) {us(m['node_cpu_us_per_image'])} (node)  "
            f"{m['samples_per_request']:5.1f} samples/request")


def us(x):
    return f"{x:6.2f} us" if x is not None else "     - us"


def median(xs):
    xs = list(xs)
    return None if any(x is None for x in xs) else statistics.median(xs)


def ratio(a, b, key):
    if a[key] is None or b[key] is None:
        return float("nan")
    return a[key] / max(b[key], 1e-9)


def print_medians(records, rtt, modes, clis):
    med = {}
    for mode, _ in modes:
        for which, _ in clis:
            rs = [r for r in records if r["rtt_ms"] == rtt and r["mode"] == mode and r["cli"] == which]
            med[(mode, which)] = m = {k: median(r[k] for r in rs) for k in KEYS}
            label = f" {which:>6}" if len(clis) > 1 else ""
            loads = ", ".join(f"{r['load_before']:.2f}" for r in rs)
            print(f"  rtt {rtt:>3} ms {mode:>6}{label}: {describe(m)}  load at start: {loads}")
    for which, _ in clis:
        off, on = med.get(("off", which)), med.get(("on", which))
        if off and on:
            label = f" ({which})" if len(clis) > 1 else ""
            print(f"  rtt {rtt:>3} ms on/off{label}: {ratio(on, off, 'images_per_s'):.2f}x images/s, "
                  f"{ratio(on, off, 'process_cpu_us_per_image'):.2f}x CPU per image")
        packed = med.get(("packed", which))
        if packed and on:
            label = f" ({which})" if len(clis) > 1 else ""
            print(f"  rtt {rtt:>3} ms packed/on{label}: {ratio(packed, on, 'images_per_s'):.2f}x images/s, "
                  f"{ratio(packed, on, 'node_cpu_us_per_image'):.2f}x node CPU per image, "
                  f"{ratio(packed, on, 'process_cpu_us_per_image'):.2f}x client CPU per image")
    if len(clis) > 1:
        for mode, _ in modes:
            after, before = med[(mode, "build")], med[(mode, "before")]
            print(f"  rtt {rtt:>3} ms {mode:>6} build/before: {ratio(after, before, 'images_per_s'):.2f}x "
                  f"images/s, {ratio(after, before, 'node_cpu_us_per_image'):.2f}x node CPU per image, "
                  f"{ratio(after, before, 'process_cpu_us_per_image'):.2f}x client CPU per image")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rtts", default="0,100")
    ap.add_argument("--keyspace", default="cqlstream_bench")
    ap.add_argument("--dataset", default="fashion")
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--modes", default="off,on",
                    help="any of off (coalescing off), on (automatic), packed (--packed) (default off,on)")
    ap.add_argument("--cli-before", help="a second CLI to compare with (runs interleaved)")
    ap.add_argument("--json", help="write every run's record here")
    a = ap.parse_args()
    build = os.environ.get("CQLSTREAM_BUILD_DIR", "build")
    cli, wan = binary(build, "cqlstream"), binary(build, "cqlstream-wan")
    known = {"off": ["--coalesce", "1"], "on": ["--coalesce", "0"], "packed": ["--coalesce", "0", "--packed"]}
    names = list(dict.fromkeys(m.strip() for m in a.modes.split(",") if m.strip()))
    if not names or any(m not in known for m in names):
        sys.exit(f"tiny: --modes takes a list of off, on, packed (got {a.modes!r})")
    modes = [(m, known[m]) for m in names]
    clis = [("build", cli)]
    if a.cli_before:
        if not os.access(a.cli_before, os.X_OK):
            sys.exit(f"tiny: --cli-before {a.cli_before} is not an executable")
        clis.append(("before", a.cli_before))
    pid = node_pid()
    n_train = train_images(cli, a.keyspace, a.dataset)
    records = []
    for rtt in (int(x) for x in a.rtts.split(",")):
        proxy = Proxy(wan, rtt) if rtt > 0 else None
        host = PROXY_IP if proxy else NODE
        try:
            for run in range(a.runs):
                for mode, mode_args in modes:
                    # The order alternates between runs, so that neither CLI
                    # always runs on the machine the other one just warmed.
                    for which, path in (clis if run % 2 == 0 else clis[::-1]):
                        r = one_run(a, path, host, mode_args, n_train, pid)
                        r.update(rtt_ms=rtt, mode=mode, run=run, cli=which)
                        records.append(r)
                        label = f" {which:>6}" if len(clis) > 1 else ""
                        print(f"rtt {rtt:>3} ms {mode:>6}{label} run {run}: {describe(r)}  load "
                              f"{r['load_before']:.2f} -> {r['load_after']:.2f}", flush=True)
        finally:
            if proxy:
                proxy.stop()
    print(f"\nmedians of {a.runs} runs ({a.dataset}, batch {a.batch_size}, {a.epochs} epochs after "
          f"{a.warmup} warm-up):")
    for rtt in sorted({r["rtt_ms"] for r in records}):
        print_medians(records, rtt, modes, clis)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(records, f, indent=1)


if __name__ == "__main__":
    main()
