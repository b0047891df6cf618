#!/usr/bin/env python3
"""The latency-tolerance table (entry point: bench/run --tolerance;
docs/benchmarks.md, issue 13 section 1).

cqlstream (out-of-order) through cqlstream-wan (W = 4 MiB per connection):
the JPEG set uncapped at RTT 0, 100 and 200 ms and rate-capped at 1000 Mbit/s
at the same RTTs, and Fashion-MNIST uncapped at RTT 0 and 100 ms; RUNS runs
per point (default 3), one `cqlstream bench` process each (1 warm-up epoch,
EPOCHS measured), in rounds of one run of every point (see measure()). Per point: median images/s, fraction of the series' RTT-0
median, median client CPU s/GB and µs per image (the loader's own figure over
its measured epochs), and the per-process CPU split of bench/cpu_split.sh —
CPU seconds of the Cassandra node, of the emulator and of the loader process
over the whole run (warm-up included), per GB read — with the load average
before each run, and how late the emulator's delay line released the run's
bytes (the 99th percentile's bucket bound: the emulated path was that much
longer for 1% of the bytes). --emulator-rt-priority 0 runs the emulator at
normal priority (it then preempts the loader less, and is late more).

Outputs (OUT = bench/results, or bench/results/raw/quick with --quick):
  OUT/tolerance.md   the table (also printed)
  OUT/tolerance.csv  one row per point
  bench/results/raw/tolerance-<time>/records.json  every run
"""
import argparse
import copy
import csv
import datetime
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import harness
from bench_common import default_node_pid as node_pid, loadavg, log, process_cpu_s as proc_cpu
from summary import fmt

ROOT = harness.ROOT


def run_cqlstream(cmd, timeout):
    """Runs cmd to its end (killed after timeout s); (returncode, stdout, stderr, its own CPU s from os.wait4)."""
    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
        p = subprocess.Popen(cmd, stdout=fo, stderr=fe, text=True, cwd=harness.LOADERS)
        timer = threading.Timer(timeout, lambda: os.kill(p.pid, signal.SIGKILL))
        timer.start()
        try:
            _, status, ru = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        return p.returncode, fo.read(), fe.read(), ru.ru_utime + ru.ru_stime


def epochs_of(cfg, rate):
    """Measured epochs of a run: fewer in the rate-capped series (a JPEG epoch at 1000 Mbit/s takes ~18 s)."""
    return cfg.capped_epochs if rate else cfg.epochs


def run_once(cfg, dataset, rtt, rate, run, proxy):
    """One cqlstream bench process through proxy; its record with the CPU split."""
    run_cfg = copy.copy(cfg)
    run_cfg.epochs = epochs_of(cfg, rate)
    cmd, _ = harness.loader_command(run_cfg, "cqlstream", dataset)
    npid = node_pid()
    late0 = late_buckets(proxy.snapshot())
    n0, w0, l0, t0 = proc_cpu(npid), proc_cpu(proxy.p.pid), loadavg(), time.time()
    rc, out, err, loader_cpu = run_cqlstream(cmd, cfg.loader_timeout)
    wall = time.time() - t0
    n1, w1 = proc_cpu(npid), proc_cpu(proxy.p.pid)
    late1 = late_buckets(proxy.snapshot())
    late = [(bound, n - (late0[i][1] if i < len(late0) else 0)) for i, (bound, n) in enumerate(late1)]
    res = None
    for line in out.splitlines():
        if line.startswith("{"):
            res = json.loads(line)
    rec = dict(dataset=dataset, rtt_ms=rtt, rate_mbit=rate, run=run, wall_s=round(wall, 1), load_before=l0,
               load_after=loadavg(), node_cpu_s=None, emulator_cpu_s=None, loader_cpu_s=round(loader_cpu, 2),
               emulator_late_p50_ms=harness.late_quantile_ms(late, 0.5),
               emulator_late_p99_ms=harness.late_quantile_ms(late, 0.99), result=res)
    if None in (n0, n1, w0, w1):
        # The node (restarted by someone) or the emulator went away during
        # the run: its figures are not comparable with the others.
        rec["result"] = None
        rec["error"] = f"the {'node' if None in (n0, n1) else 'emulator'} (pid " \
                       f"{npid if None in (n0, n1) else proxy.p.pid}) went away during the run"
    else:
        rec["node_cpu_s"], rec["emulator_cpu_s"] = round(n1 - n0, 2), round(w1 - w0, 2)
        if res is None and rc == -signal.SIGKILL and wall >= cfg.loader_timeout:
            rec["error"] = f"killed after {cfg.loader_timeout} s"
        elif res is None:
            rec["error"] = err.strip().splitlines()[-1] if err.strip() else f"exit {rc}"
    return rec


def late_buckets(snapshot):
    """The emulator's lateness buckets [(bound ms, bytes)] summed over its mappings (a snapshot's totals)."""
    total = []
    for v in snapshot.values():
        for i, (bound, n) in enumerate(v.get("late", [])):
            if i < len(total):
                total[i] = (bound, total[i][1] + n)
            else:
                total.append((bound, n))
    return total


def measure(cfg, points, runs, raw, rt_priority=None):
    """Every (dataset, rate, RTT) point RUNS times, in rounds: each round runs
    every point once (in the order of `points` in odd rounds, reversed in even
    ones), each run through an emulator started for it. A point's runs so
    spread over the whole pass, and a drift in the machine's speed while it
    lasts (a neighbour on the host, the node's JIT or a compaction) falls on
    every point alike: before, the three runs of a point came one after
    another, and a slower minute fell on one point's runs only, which then
    showed it in its fraction of RTT 0."""
    records = []
    for r in range(1, runs + 1):
        for d, rate, rtt in (points if r % 2 else list(reversed(points))):
            proxy = harness.Proxy(rtt, rate, raw, rt_priority)
            time.sleep(0.1)  # a margin for its warning about a refused priority (printed before "listening")
            try:
                rec = run_once(cfg, d, rtt, rate, r, proxy)
            finally:
                proxy.stop()
            rec["emulator_rt_refused"] = proxy.rt_refused
            records.append(rec)
            res = rec["result"]
            log(f"{d} rate {rate} RTT {rtt} run {r}: " + (
                f"{res['images_per_s']:.0f} images/s, {res['cpu_s_per_gb']:.2f} CPU s/GB; CPU s node "
                f"{rec['node_cpu_s']}, emulator {rec['emulator_cpu_s']}, loader {rec['loader_cpu_s']}; "
                f"load {rec['load_before']}" if res else f"FAILED: {rec['error']}"))
            with open(os.path.join(raw, "records.json"), "w") as f:
                json.dump(records, f, indent=1)
    return records


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def rows_of(records, cfg, points):
    """One row per point: medians over its runs, and the CPU split per GB read."""
    rows = []
    for d, rate, rtt in points:
        recs = [r for r in records if (r["dataset"], r["rate_mbit"], r["rtt_ms"]) == (d, rate, rtt)]
        ok = [r for r in recs if r["result"]]
        # Bytes each run read: warm-up + measured epochs of the whole split.
        gb = cfg.info[d]["train_bytes"] * (epochs_of(cfg, rate) + cfg.warmup) / 1e9
        images = cfg.info[d]["train_images"]
        ips = med([r["result"]["images_per_s"] for r in ok])
        cpu_gb = med([r["result"]["cpu_s_per_gb"] for r in ok])
        bytes_per_image = cfg.info[d]["train_bytes"] / images
        rows.append(dict(dataset=d, rate_mbit=rate, rtt_ms=rtt, runs=len(ok), failed=len(recs) - len(ok),
                         images_per_s=ips, mb_per_s=med([r["result"]["mb_per_s"] for r in ok]),
                         cpu_s_per_gb=cpu_gb, cpu_us_per_image=cpu_gb * bytes_per_image / 1e3,
                         connections=med([r["result"].get("connections") for r in ok]),
                         node_s_per_gb=med([r["node_cpu_s"] / gb for r in ok]),
                         emulator_s_per_gb=med([r["emulator_cpu_s"] / gb for r in ok]),
                         loader_s_per_gb=med([r["loader_cpu_s"] / gb for r in ok if r["loader_cpu_s"] is not None]),
                         emulator_late_p99_ms=late_median([r.get("emulator_late_p99_ms") for r in ok]),
                         per_run="; ".join(f"{r['result']['images_per_s']:,.0f} @ {r['load_before']}" if r["result"]
                                           else f"failed @ {r['load_before']}" for r in recs)))
    for row in rows:
        base = next((b for b in rows if b["dataset"] == row["dataset"] and b["rate_mbit"] == row["rate_mbit"]
                     and b["rtt_ms"] == 0), None)
        row["fraction_of_rtt0"] = row["images_per_s"] / base["images_per_s"] if base and base["images_per_s"] else \
            float("nan")
    return rows


COLUMNS = ["dataset", "rate_mbit", "rtt_ms", "runs", "failed", "images_per_s", "fraction_of_rtt0", "mb_per_s",
           "cpu_s_per_gb", "cpu_us_per_image", "connections", "node_s_per_gb", "emulator_s_per_gb", "loader_s_per_gb",
           "emulator_late_p99_ms", "per_run"]


def count(v):
    """v as a whole number with thousands separators; NaN as empty."""
    return "" if v != v else f"{v:,.0f}"


def late_median(values):
    """The median of the runs' lateness bounds (bucket bounds in ms, or ">100" for the last bucket), itself
    one of them (the higher of the middle two); None when no run timed anything."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    return sorted(values, key=lambda v: float("inf") if isinstance(v, str) else v)[len(values) // 2]


def late_ms(v):
    """A lateness bound for the table: the bucket bound, '>100' for the last bucket, 0 when nothing was
    timed."""
    if v is None:
        return "0"
    return v if isinstance(v, str) else f"{v:g}"


def markdown(rows, meta):
    md = [f"# Latency tolerance ({meta['mode']})", "",
          f"Run {meta['run']} on {meta['machine']}; load average {meta['load_start']} at the start, "
          f"{meta['load_end']} at the end. cqlstream bench (out-of-order, automatic window), batch "
          f"{meta['batch_size']}, 1 warm-up + {meta['epochs']} measured epochs per run ({meta['capped_epochs']} in the "
          f"rate-capped series), {meta['runs']} runs per point, "
          f"through cqlstream-wan with W = 4 MiB per connection, its I/O threads {meta['emulator_priority']}. images/s, MB/s and client CPU: medians over the "
          "runs of each run's median epoch; of RTT 0: over the same series' RTT-0 median. CPU split: CPU seconds "
          "of the Cassandra node, the emulator and the loader process over the whole run (warm-up included) per "
          "GB read, medians (the node's figure counts all its work: meaningful only when nothing else uses the node). "
          "Emulator late p99: the bucket bound (ms) under which the emulator's delay line released 99% of a run's "
          "bytes after their time (the emulated path was longer by up to that for 1% of the bytes), median over the "
          "runs; 0 where nothing is timed (RTT 0 uncapped is a pass-through). "
          "Per run: images/s @ load average (1/5/15 min) before it.", "",
          "| data set | rate | RTT ms | images/s | of RTT 0 | MB/s | client CPU s/GB | client CPU µs/image | "
          "connections | node s/GB | emulator s/GB | loader s/GB | emulator late p99 ms | runs (images/s @ load) |",
          "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        rate = f"{r['rate_mbit']} Mbit/s" if r["rate_mbit"] else "uncapped"
        md.append(f"| {r['dataset']} | {rate} | "
                  f"{r['rtt_ms']} | {count(r['images_per_s'])} | {fmt(r['fraction_of_rtt0'], 2)} | "
                  f"{fmt(r['mb_per_s'], 1)} | {fmt(r['cpu_s_per_gb'], 2)} | {fmt(r['cpu_us_per_image'], 1)} | "
                  f"{fmt(r['connections'], 0)} | {fmt(r['node_s_per_gb'], 2)} | {fmt(r['emulator_s_per_gb'], 2)} | "
                  f"{fmt(r['loader_s_per_gb'], 2)} | {late_ms(r['emulator_late_p99_ms'])} | {r['per_run']}" + (f" ({r['failed']} failed)" if r['failed'] else "")
                  + " |")
    return md


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="bench/run --tolerance", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="bench/run --quick's tiny data sets, 1 run, 1 epoch")
    ap.add_argument("--runs", type=int, default=None, help="runs per point (default 3; --quick 1)")
    ap.add_argument("--epochs", type=int, default=None, help="measured epochs per run (default 8; --quick 1)")
    ap.add_argument("--capped-epochs", type=int, default=None,
                    help="measured epochs per run of the rate-capped series (default 2; --quick 1)")
    ap.add_argument("--rtts", default="0,100,200", help="JPEG RTTs in ms (default 0,100,200)")
    ap.add_argument("--fashion-rtts", default="0,100", help="Fashion-MNIST RTTs in ms (default 0,100; '' for none)")
    ap.add_argument("--rates", default="0,1000", help="JPEG rate series in Mbit/s, 0 = uncapped (default 0,1000)")
    ap.add_argument("--emulator-rt-priority", type=int, default=None,
                    help="the emulator's SCHED_FIFO priority (default: its own, 10; 0 = normal scheduling)")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--build-dir", default=None)
    ap.add_argument("--out", default=None)
    return ap.parse_args(argv)


def main(argv):
    a = parse_args(argv)
    cfg = harness.make_cfg(argparse.Namespace(quick=a.quick, rtts=None, rates=None, epochs=a.epochs or
                                              (1 if a.quick else 8)))
    cfg.batch_size = 64 if a.quick else 512
    cfg.capped_epochs = a.capped_epochs or (1 if a.quick else 2)
    runs = a.runs or (1 if a.quick else 3)
    if a.build_dir:
        harness.BUILD = os.path.abspath(a.build_dir)
    if not a.no_build:
        harness.build(["cqlstream_cli", "cqlstream-wan", "cqlstream-gen-images"])
    if subprocess.run([os.path.join(ROOT, "scripts", "cassandra"), "status"], stdout=subprocess.DEVNULL).returncode:
        sys.exit("the Cassandra node does not answer: scripts/cassandra up")
    cfg.info = harness.prepare_data(cfg)
    points = [(cfg.jpeg_name, int(rate), int(rtt)) for rate in a.rates.split(",") for rtt in a.rtts.split(",")]
    points += [(cfg.fashion_name, 0, int(rtt)) for rtt in a.fashion_rtts.split(",") if rtt]
    run_id = datetime.datetime.now().strftime("%Y%m%d-%H%M%S") + ("-quick" if a.quick else "")
    raw = os.path.join(ROOT, "bench", "results", "raw", f"tolerance-{run_id}")
    os.makedirs(raw, exist_ok=True)
    meta = dict(mode="--quick" if a.quick else "full", run=run_id, load_start=loadavg(), runs=runs,
                epochs=cfg.epochs, capped_epochs=cfg.capped_epochs, batch_size=cfg.batch_size, machine=f"{os.cpu_count()} CPUs, {platform.release()}",
                emulator_priority="at normal priority" if a.emulator_rt_priority == 0 else
                f"at SCHED_FIFO priority {10 if a.emulator_rt_priority is None else a.emulator_rt_priority}")
    records = measure(cfg, points, runs, raw, a.emulator_rt_priority)
    if a.emulator_rt_priority != 0 and any(r.get("emulator_rt_refused") for r in records):
        meta["emulator_priority"] = "at normal priority (the system refused SCHED_FIFO: run as root or with " \
                                    "CAP_SYS_NICE)"
    meta["load_end"] = loadavg()
    with open(os.path.join(raw, "records.json"), "w") as f:
        json.dump(dict(meta=meta, info=cfg.info, records=records), f, indent=1)
    rows = rows_of(records, cfg, points)
    out = a.out or os.path.join(ROOT, "bench", "results", *(["raw", "quick"] if a.quick else []))
    os.makedirs(out, exist_ok=True)
    md = markdown(rows, meta)
    with open(os.path.join(out, "tolerance.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(out, "tolerance.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow([fmt(r[c], 3) if isinstance(r[c], float) else r[c] for c in COLUMNS])
    print("\n".join(md))
    log(f"wrote {os.path.relpath(out, ROOT)}/tolerance.md, tolerance.csv (raw: {os.path.relpath(raw, ROOT)})")
    return 1 if any(r["failed"] or not r["runs"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
