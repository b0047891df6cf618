#!/usr/bin/env python3
# Copyright (c) cqlstream authors.
"""Tiny samples: `cqlstream bench` on Fashion-MNIST (~540-byte PNGs) with
coalesced reads off (--coalesce 1) and on (automatic), at RTT 0 (straight
to the node) and through cqlstream-wan at 100 ms (W = 4 MiB per connection),
RUNS runs of each, interleaved (off, on, off, on, ...) so that a change in
the machine's load hits both alike.

Per run it prints images/s (the bench's median over its measured epochs),
client CPU per image twice: the bench's own figure for the measured epochs
(cpu_s_per_gb x bytes per image) and user+sys of the whole process from
/usr/bin/time divided by every image it delivered (warm-up included), the
coalesced samples per request, and the load average (1 min) before and
after; then the median per (RTT, mode) and the on/off ratio.

Needs: the node at 127.0.0.1:9042 with the dataset ingested (bench/run's
data step puts `fashion` into keyspace cqlstream_bench), a build with the
CLI and the bench tools (CQLSTREAM_BUILD_DIR, default build).
Wall time: about 12 runs x (4 epochs of 60,000 images + start-up), 3-6 min
on a quiet machine, longer at 100 ms without coalescing.

  bench/tiny.py [--runs 3] [--rtts 0,100] [--keyspace cqlstream_bench]
                [--dataset fashion] [--batch-size 512] [--json out.json]
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
NODE = "127.0.0.1"
PROXY_IP = "127.0.9.1"
PORT = 9042


def binary(build, name):
    for sub in ("src/cli", "bench"):
        p = os.path.join(ROOT, build, sub, name)
        if os.path.exists(p):
            return p
    sys.exit(f"tiny: {name} not found under {build}/ (build the CLI and the bench tools first)")


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


def one_run(a, cli, host, coalesce, n_train):
    with tempfile.NamedTemporaryFile("r") as tf:
        cmd = ["/usr/bin/time", "-f", "%U %S", "-o", tf.name, cli, "bench", a.dataset, "--hosts", host, "--keyspace",
               a.keyspace, "--epochs", str(a.epochs), "--warmup", str(a.warmup), "--batch-size", str(a.batch_size),
               "--coalesce", str(coalesce), "--json"]
        l0 = loadavg()
        out = subprocess.run(cmd, capture_output=True, text=True)
        l1 = loadavg()
        if out.returncode != 0:
            sys.exit(f"tiny: {' '.join(cmd)} failed:\n{out.stderr}")
        rec = json.loads(out.stdout.strip().splitlines()[-1])
        user, sys_ = (float(x) for x in tf.read().split()[:2])
    images = rec["images_per_s"]
    bytes_per_image = rec["mb_per_s"] * 1e6 / images if images else 0
    total_images = (a.epochs + a.warmup) * n_train
    return dict(images_per_s=images, mb_per_s=rec["mb_per_s"],
                bench_cpu_us_per_image=rec["cpu_s_per_gb"] * bytes_per_image / 1e9 * 1e6,
                process_cpu_us_per_image=(user + sys_) / total_images * 1e6,
                samples_per_request=(rec.get("coalesced_samples", 0) / rec["coalesced_requests"]
                                     if rec.get("coalesced_requests") else 1.0),
                load_before=l0, load_after=l1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rtts", default="0,100")
    ap.add_argument("--keyspace", default="cqlstream_bench")
    ap.add_argument("--dataset", default="fashion")
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--json", help="write every run's record here")
    a = ap.parse_args()
    build = os.environ.get("CQLSTREAM_BUILD_DIR", "build")
    cli, wan = binary(build, "cqlstream"), binary(build, "cqlstream-wan")
    n_train = train_images(cli, a.keyspace, a.dataset)
    modes = (("off", 1), ("on", 0))
    records = []
    for rtt in (int(x) for x in a.rtts.split(",")):
        proxy = Proxy(wan, rtt) if rtt > 0 else None
        host = PROXY_IP if proxy else NODE
        try:
            for run in range(a.runs):
                for mode, coalesce in modes:
                    r = one_run(a, cli, host, coalesce, n_train)
                    r.update(rtt_ms=rtt, mode=mode, run=run)
                    records.append(r)
                    print(f"rtt {rtt:>3} ms coalesce {mode:>3} run {run}: {r['images_per_s']:>9.0f} images/s "
                          f"{r['mb_per_s']:7.1f} MB/s  CPU/image {r['bench_cpu_us_per_image']:6.2f} us (bench) "
                          f"{r['process_cpu_us_per_image']:6.2f} us (process)  {r['samples_per_request']:5.1f} "
                          f"samples/request  load {r['load_before']:.2f} -> {r['load_after']:.2f}", flush=True)
        finally:
            if proxy:
                proxy.stop()
    print(f"\nmedians of {a.runs} runs ({a.dataset}, batch {a.batch_size}, {a.epochs} epochs after {a.warmup} warm-up):")
    med = {}
    for rtt in sorted({r["rtt_ms"] for r in records}):
        for mode, _ in modes:
            rs = [r for r in records if r["rtt_ms"] == rtt and r["mode"] == mode]
            m = {k: statistics.median(r[k] for r in rs) for k in ("images_per_s", "bench_cpu_us_per_image",
                                                                  "process_cpu_us_per_image", "samples_per_request")}
            med[(rtt, mode)] = m
            loads = ", ".join(f"{r['load_before']:.2f}" for r in rs)
            print(f"  rtt {rtt:>3} ms coalesce {mode:>3}: {m['images_per_s']:9.0f} images/s  CPU/image "
                  f"{m['bench_cpu_us_per_image']:6.2f} us (bench) {m['process_cpu_us_per_image']:6.2f} us (process)  "
                  f"{m['samples_per_request']:5.1f} samples/request  load at start: {loads}")
        off, on = med[(rtt, "off")], med[(rtt, "on")]
        if off["images_per_s"] > 0:
            print(f"  rtt {rtt:>3} ms on/off: {on['images_per_s'] / off['images_per_s']:.2f}x images/s, "
                  f"{on['process_cpu_us_per_image'] / max(off['process_cpu_us_per_image'], 1e-9):.2f}x CPU per image")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(records, f, indent=1)


if __name__ == "__main__":
    main()
