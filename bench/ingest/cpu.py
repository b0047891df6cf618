#!/usr/bin/env python3
"""Client CPU of `cqlstream ingest` per GB and per item (issue 13, part 4).

Generates, or reuses from bench/data/ (cached as bench/run caches its data:
a folder with a `.complete` marker), the synthetic JPEG set
(`cqlstream-gen-images --count N --classes 100 --val-fraction 0`, the flags
bench/run uses) and the Fashion-MNIST PNGs (scripts/fashion_mnist_to_png.py),
then ingests each into a scratch keyspace --runs times, dropping the
keyspace before every run, and prints per run and as medians:

  wall s, client user + sys CPU s (wait4 rusage of the ingest process, all
  threads), GB, client CPU s/GB, items/s, client CPU us per item, node CPU
  s/GB (when the node is a local process: bench/ingest/node_cpu.py), and the
  load average before the run.

No preprocessing (its CPU is image work, not ingest). With --driver the
JPEG set is also written by bench/ingest/driver_ingest.py (scylla-driver)
in the same way, for the "per CPU second" comparison.

  .venv/bin/python bench/ingest/cpu.py                      # 20,000 JPEGs + Fashion-MNIST, 3 runs each
  .venv/bin/python bench/ingest/cpu.py --jpeg-count 4000 --datasets jpeg
  .venv/bin/python bench/ingest/cpu.py --driver             # also the Python driver on the JPEGs

The raw lines go to bench/results/raw/ingest-cpu-<time>.jsonl.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from cassandra.cluster import Cluster

import node_cpu

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.path.join(ROOT, "bench", "data")
PY = os.path.join(ROOT, ".venv", "bin", "python")
KEYSPACE = "ingest_cpu"


def loadavg():
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def folder_stats(root):
    n = b = 0
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f.startswith("."):
                continue
            n += 1
            b += os.path.getsize(os.path.join(dirpath, f))
    return n, b


def ensure_jpeg(build, count):
    folder = os.path.join(DATA, "jpeg" if count == 20000 else f"jpeg{count}")
    if not os.path.exists(os.path.join(folder, ".complete")):
        if os.path.exists(folder):
            subprocess.run(["rm", "-rf", folder], check=True)
        log(f"generating {count} JPEGs into {folder}")
        subprocess.run([os.path.join(build, "bench", "cqlstream-gen-images"), "--out", folder, "--count", str(count),
                        "--classes", "100", "--val-fraction", "0", "--threads", "2"], check=True)
        open(os.path.join(folder, ".complete"), "w").close()
    return folder


def ensure_fashion():
    folder = os.path.join(DATA, "fashion")
    if not os.path.exists(os.path.join(folder, ".complete")):
        log(f"writing Fashion-MNIST PNGs into {folder}")
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "fashion_mnist_to_png.py"), folder], check=True)
        open(os.path.join(folder, ".complete"), "w").close()
    return folder


def run_child(cmd):
    """Runs cmd; (returncode, wall s, user s, sys s, stderr tail) from wait4."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, wall, ru.ru_utime, ru.ru_stime, err.decode(errors="replace")[-2000:]


def one_run(a, admin, node, tool, name, folder, items, nbytes, run):
    admin.execute(f"DROP KEYSPACE IF EXISTS {KEYSPACE}")
    admin.cluster.control_connection.wait_for_schema_agreement()
    time.sleep(a.settle)
    if tool == "cqlstream":
        cmd = [a.cli, "ingest", "--hosts", a.hosts, "--keyspace", KEYSPACE, "--dataset", name] + a.ingest_args + [folder]
    else:
        cmd = [PY, os.path.join(ROOT, "bench", "ingest", "driver_ingest.py"), "--hosts", a.hosts, "--keyspace",
               KEYSPACE, "--dataset", name, os.path.join(folder, "train")]
    load = loadavg()
    n0 = node_cpu.cpu_seconds(node)
    rc, wall, user, sys_s, err = run_child(cmd)
    n1 = node_cpu.cpu_seconds(node)
    if rc != 0:
        log(f"{tool} {name} run {run + 1} failed ({rc}): {err}")
    cpu = user + sys_s
    gb = nbytes / 1e9
    r = dict(tool=tool, dataset=name, run=run + 1, rc=rc, items=items, bytes=nbytes, wall_s=round(wall, 2),
             user_s=round(user, 2), sys_s=round(sys_s, 2), cpu_s=round(cpu, 2), gb=round(gb, 3),
             cpu_s_per_gb=round(cpu / gb, 3), items_per_s=round(items / wall, 1), mb_per_s=round(nbytes / 1e6 / wall, 1),
             cpu_us_per_item=round(cpu / items * 1e6, 1),
             node_cpu_s_per_gb=round((n1 - n0) / gb, 2) if n0 is not None and n1 is not None else None,
             load_before=load, load_after=loadavg())
    log(f"{tool} {name} run {r['run']}: {r['wall_s']} s, CPU {r['user_s']} user + {r['sys_s']} sys = "
        f"{r['cpu_s_per_gb']} s/GB, {r['cpu_us_per_item']} us/item, {r['items_per_s']} items/s (load {load})")
    return r


COLUMNS = [("wall s", "wall_s", "{:.2f}"), ("user s", "user_s", "{:.2f}"), ("sys s", "sys_s", "{:.2f}"),
           ("GB", "gb", "{:.3f}"), ("client CPU s/GB", "cpu_s_per_gb", "{:.2f}"), ("items/s", "items_per_s", "{:,.0f}"),
           ("MB/s", "mb_per_s", "{:.1f}"), ("client CPU us/item", "cpu_us_per_item", "{:.1f}"),
           ("node CPU s/GB", "node_cpu_s_per_gb", "{:.1f}")]


def fmt(spec, v):
    return "-" if v is None else spec.format(v)


def print_tables(rows):
    head = "| tool | dataset | run | " + " | ".join(c[0] for c in COLUMNS) + " | load avg before (1/5/15) |"
    print(head)
    print("|" + "---|" * 3 + "---:|" * len(COLUMNS) + "---|")
    for r in rows:
        failed = "" if r["rc"] == 0 else " (failed)"
        print(f"| {r['tool']}{failed} | {r['dataset']} | {r['run']} | "
              + " | ".join(fmt(c[2], r[c[1]]) for c in COLUMNS) + f" | {r['load_before']} |")
    print()
    print("Medians (successful runs):")
    print()
    print("| tool | dataset | runs | " + " | ".join(c[0] for c in COLUMNS) + " | load avg before each run |")
    print("|" + "---|" * 3 + "---:|" * len(COLUMNS) + "---|")
    groups = {}
    for r in rows:
        groups.setdefault((r["tool"], r["dataset"]), []).append(r)
    for (tool, name), rs in groups.items():
        ok = [r for r in rs if r["rc"] == 0]
        if not ok:
            continue
        med = []
        for _, key, spec in COLUMNS:
            vals = [r[key] for r in ok if r[key] is not None]
            med.append(fmt(spec, statistics.median(vals) if vals else None))
        loads = ", ".join(r["load_before"] for r in ok)
        print(f"| {tool} | {name} | {len(ok)} | " + " | ".join(med) + f" | {loads} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--datasets", default="jpeg,fashion", help="jpeg, fashion or both (comma-separated)")
    ap.add_argument("--jpeg-count", type=int, default=20000)
    ap.add_argument("--hosts", default="127.0.0.1")
    ap.add_argument("--build", default=os.path.join(ROOT, os.environ.get("CQLSTREAM_BENCH_BUILD_DIR", "build")),
                    help="build folder holding src/cli/cqlstream and bench/cqlstream-gen-images (default build)")
    ap.add_argument("--cli", default=None, help="the cqlstream binary (default BUILD/src/cli/cqlstream)")
    ap.add_argument("--driver", action="store_true", help="also ingest the JPEGs with bench/ingest/driver_ingest.py")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds to wait after each drop")
    ap.add_argument("ingest_args", nargs="*", help="after --: more `cqlstream ingest` options")
    a = ap.parse_args()
    a.cli = a.cli or os.path.join(a.build, "src", "cli", "cqlstream")
    want = a.datasets.split(",")
    sets = []
    if "jpeg" in want:
        sets.append(("jpeg", ensure_jpeg(a.build, a.jpeg_count)))
    if "fashion" in want:
        sets.append(("fashion", ensure_fashion()))
    cluster = Cluster(a.hosts.split(","), protocol_version=4)
    admin = cluster.connect()
    admin.default_timeout = 120
    node = node_cpu.node_pid(a.hosts.split(",")[0])
    raw_path = os.path.join(ROOT, "bench", "results", "raw", f"ingest-cpu-{time.strftime('%Y%m%d-%H%M%S')}.jsonl")
    os.makedirs(os.path.dirname(raw_path), exist_ok=True)
    rows = []
    t0 = time.monotonic()
    with open(raw_path, "w") as raw:
        for name, folder in sets:
            items, nbytes = folder_stats(folder)
            log(f"{name}: {folder}, {items} files, {nbytes / 1e9:.3f} GB")
            tools = ["cqlstream"] + (["scylla-driver"] if a.driver and name == "jpeg" else [])
            for run in range(a.runs):
                for tool in tools:
                    r = one_run(a, admin, node, tool, name, folder, items, nbytes, run)
                    raw.write(json.dumps(r) + "\n")
                    raw.flush()
                    rows.append(r)
    admin.execute(f"DROP KEYSPACE IF EXISTS {KEYSPACE}")
    cluster.shutdown()
    print(f"cqlstream ingest client CPU ({a.cli}); {time.monotonic() - t0:.0f} s in all; raw: "
          f"{os.path.relpath(raw_path, ROOT)}")
    print()
    print_tables(rows)
    return 0 if rows and all(r["rc"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
