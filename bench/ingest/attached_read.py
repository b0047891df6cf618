#!/usr/bin/env python3
"""Attached reads: `cqlstream bench` on a table in the published reference
system's layout, attached, against the same images ingested natively
(docs/benchmarks-attach.md, "Attached reads").

  .venv/bin/python bench/ingest/attached_read.py [--count 4000] [--runs 3] [--epochs 2] \\
      [--cli build/src/cli/cqlstream] [--gen build/bench/cqlstream-gen-images] \\
      [--sample-bytes B] [--base-cli OTHER_BUILD/src/cli/cqlstream]

The images: `cqlstream-gen-images --count N --classes 100 --val-fraction 0`
(ImageNet-like JPEGs, mean ~110 kB) into bench/data/attread-N, made once.
Two datasets hold the same bytes and labels, both kept between invocations
(a count check decides; --rewrite makes them anew):
  - arnative: `cqlstream ingest` of the folder (native layout: segments,
    checksums, chunks over 1 MiB);
  - aratt: the files written with the Python driver (execute_concurrent_with_args,
    16 in flight) into `arbench.data_train(id uuid PRIMARY KEY, label int,
    data blob) WITH compression = {'enabled': false}`, as a third-party tool
    would, then `cqlstream attach`ed (key snapshot; no copy).
Each run reads both, alternating: `cqlstream bench DATASET --epochs E
--warmup 1 --json` (shuffled, batch 256, no decoding). Reported per run and
as medians: images/s and MB/s over the measured epochs, the loader's client
CPU s per GB (the bench's own figure), the whole command's CPU (wait4
rusage, warm-up and open included) and the load average before and after.
`--drop` removes both datasets and the keyspace.

`--sample-bytes B` uses N files of B random bytes instead (100 class
folders; `ingest --kind blob`), in datasets and a keyspace of their own
(artnative, artatt, arbencht): small samples, where the requests per sample
set the rate. `--base-cli` also reads the attached dataset with another
build's CLI in every run (before/after comparisons of the attached path).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import time
import uuid

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
KEYSPACE = "arbench"
NATIVE = "arnative"
ATTACHED = "aratt"


def use_tiny_names() -> None:
    """--sample-bytes: datasets and a keyspace apart from the JPEG ones."""
    global KEYSPACE, NATIVE, ATTACHED
    KEYSPACE, NATIVE, ATTACHED = "arbencht", "artnative", "artatt"


def loadavg() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def cli(a: argparse.Namespace, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run([a.cli, *args, "--hosts", a.hosts], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise SystemExit(f"cqlstream {' '.join(args)} failed ({p.returncode}):\n{(p.stdout + p.stderr)[-2000:]}")
    return p


def files_of(folder: str) -> list[tuple[str, int]]:
    """(path, class index) of FOLDER/train/<class>/<file>, sorted by path; classes by sorted name."""
    root = os.path.join(folder, "train")
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    return sorted((os.path.join(root, c, f), i) for i, c in enumerate(classes) for f in os.listdir(os.path.join(root, c)))


def count_of(a: argparse.Namespace, dataset: str) -> int | None:
    """The samples of the dataset's train split, or None when it does not exist."""
    p = cli(a, "info", dataset, check=False)
    if p.returncode != 0:
        return None
    m = re.search(r"^\s+train\s+([0-9,]+)\s", p.stdout, re.M)
    return int(m.group(1).replace(",", "")) if m else -1


def prepare(a: argparse.Namespace) -> tuple[str, int, int]:
    """The folder and both datasets, made when missing; (folder, files, bytes)."""
    folder = os.path.join(ROOT, "bench", "data", f"attread-{a.count}" + (f"-b{a.sample_bytes}" if a.sample_bytes else ""))
    if a.sample_bytes and not os.path.isdir(os.path.join(folder, "train")):
        rnd = random.Random(a.count)
        for i in range(a.count):
            d = os.path.join(folder, "train", f"c{i % 100:03d}")
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, f"{i:07d}.bin"), "wb") as f:
                f.write(rnd.randbytes(a.sample_bytes))
    elif not os.path.isdir(os.path.join(folder, "train")):
        subprocess.run([a.gen, "--out", folder, "--count", str(a.count), "--classes", "100", "--val-fraction", "0",
                        "--threads", "2"], check=True)
    files = files_of(folder)
    nbytes = sum(os.path.getsize(p) for p, _ in files)
    if a.rewrite or count_of(a, NATIVE) != len(files):
        cli(a, "drop", NATIVE, "--yes", check=False)
        t0 = time.monotonic()
        cli(a, "ingest", "--dataset", NATIVE, *(["--kind", "blob"] if a.sample_bytes else []), folder)
        print(f"{NATIVE}: ingested {len(files)} files in {time.monotonic() - t0:.1f} s", flush=True)
    if a.rewrite or count_of(a, ATTACHED) != len(files):
        write_table(a, files)
        cli(a, "drop", ATTACHED, "--yes", check=False)
        cli(a, "attach", "--dataset", ATTACHED, "--table", f"{KEYSPACE}.data_train", "--key-column", "id",
            "--data-column", "data", "--label-column", "label", "--label-kind", "class")
    return folder, len(files), nbytes


def write_table(a: argparse.Namespace, files: list[tuple[str, int]]) -> None:
    """The files into arbench.data_train with the Python driver, as a third-party writer would."""
    from cassandra.cluster import Cluster
    from cassandra.concurrent import execute_concurrent_with_args

    cluster = Cluster(a.hosts.split(","), protocol_version=4)
    s = cluster.connect()
    s.default_timeout = 120
    s.execute(f"DROP KEYSPACE IF EXISTS {KEYSPACE}", timeout=120)
    s.execute(f"CREATE KEYSPACE {KEYSPACE} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    s.execute(f"CREATE TABLE {KEYSPACE}.data_train (id uuid PRIMARY KEY, label int, data blob) "
              "WITH compression = {'enabled': false}")
    ins = s.prepare(f"INSERT INTO {KEYSPACE}.data_train (id, label, data) VALUES (?, ?, ?)")
    t0 = time.monotonic()
    for i in range(0, len(files), 500):
        rows = []
        for path, label in files[i:i + 500]:
            with open(path, "rb") as f:
                rows.append((uuid.uuid4(), label, f.read()))
        for ok, res in execute_concurrent_with_args(s, ins, rows, concurrency=16, raise_on_first_error=False):
            if not ok:
                raise SystemExit(f"an INSERT failed: {res!r}")
    cluster.shutdown()
    print(f"{KEYSPACE}.data_train: wrote {len(files)} rows with the Python driver in {time.monotonic() - t0:.1f} s",
          flush=True)


def drop_all(a: argparse.Namespace) -> int:
    """What this bench keeps between invocations, removed (the generated folder stays)."""
    from cassandra.cluster import Cluster

    for dataset in (NATIVE, ATTACHED):
        cli(a, "drop", dataset, "--yes", check=False)
    cluster = Cluster(a.hosts.split(","), protocol_version=4)
    cluster.connect().execute(f"DROP KEYSPACE IF EXISTS {KEYSPACE}", timeout=120)
    cluster.shutdown()
    print(f"dropped {NATIVE}, {ATTACHED} and keyspace {KEYSPACE}")
    return 0


def bench_once(a: argparse.Namespace, dataset: str, binary: str) -> dict:
    cmd = [binary, "bench", dataset, "--hosts", a.hosts, "--epochs", str(a.epochs), "--warmup", "1",
           "--batch-size", str(a.batch_size), "--json"]
    u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    load0, t0 = loadavg(), time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    line = next((ln for ln in reversed(p.stdout.splitlines()) if ln.startswith("{")), None)
    if p.returncode != 0 or line is None:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{(p.stdout + p.stderr)[-2000:]}")
    r = json.loads(line)
    r.update(dataset=dataset, wall_s=round(wall, 2), load_before=load0, load_after=loadavg(),
             command_cpu_s=round((u1.ru_utime - u0.ru_utime) + (u1.ru_stime - u0.ru_stime), 2))
    return r


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", default="127.0.0.1")
    ap.add_argument("--count", type=int, default=4000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--rewrite", action="store_true", help="make both datasets anew")
    ap.add_argument("--drop", action="store_true", help="drop both datasets and the arbench keyspace, then exit")
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "src", "cli", "cqlstream"))
    ap.add_argument("--gen", default=os.path.join(ROOT, "build", "bench", "cqlstream-gen-images"))
    ap.add_argument("--sample-bytes", type=int, default=0, help="files of this many random bytes instead of JPEGs")
    ap.add_argument("--base-cli", default="", help="also read the attached dataset with this CLI in every run")
    a = ap.parse_args()
    if a.sample_bytes:
        use_tiny_names()
    if a.drop:
        return drop_all(a)
    t_start = time.monotonic()
    _, n, nbytes = prepare(a)
    raw_path = os.path.join(ROOT, "bench", "results", "raw", f"attached-read-{time.strftime('%Y%m%d-%H%M%S')}.jsonl")
    os.makedirs(os.path.dirname(raw_path), exist_ok=True)
    rows = []
    reads = [(NATIVE, "ingested (native)", a.cli), (ATTACHED, "attached (reference layout)", a.cli)]
    if a.base_cli:
        reads.append((ATTACHED, "attached, --base-cli", a.base_cli))
    with open(raw_path, "w") as raw:
        for run in range(a.runs):
            for dataset, label, binary in reads:
                r = bench_once(a, dataset, binary)
                r.update(run=run, label=label)
                raw.write(json.dumps(r) + "\n")
                rows.append(r)
                print(f"{label} run {run + 1}: {r['images_per_s']:,.0f} images/s, {r['mb_per_s']:.1f} MB/s, "
                      f"{r['cpu_s_per_gb']:.2f} client CPU s/GB, command {r['wall_s']} s / {r['command_cpu_s']} CPU s "
                      f"(load {r['load_before']} -> {r['load_after']})", flush=True)
    what = f"files of {a.sample_bytes} random bytes" if a.sample_bytes else "JPEGs"
    print(f"\n{n} {what}, {nbytes / 1e6:.1f} MB; {a.epochs} measured epochs (+1 warm-up) per run, batch "
          f"{a.batch_size}; raw: {os.path.relpath(raw_path, ROOT)}\n")
    print("| dataset | runs | images/s | MB/s | client CPU s/GB | command CPU s | key lookups per run | "
          "load average before each run |")
    print("|---|---:|---:|---:|---:|---:|---|---|")
    for _, label, _ in reads:
        rs = [r for r in rows if r["label"] == label]
        med = {k: statistics.median(r[k] for r in rs) for k in ("images_per_s", "mb_per_s", "cpu_s_per_gb",
                                                               "command_cpu_s")}
        lookups = ", ".join(str(r["key_lookups"]) if "key_lookups" in r else "-" for r in rs)
        print(f"| {label} | {len(rs)} | {med['images_per_s']:,.0f} | {med['mb_per_s']:.1f} | "
              f"{med['cpu_s_per_gb']:.2f} | {med['command_cpu_s']:.1f} | {lookups} | "
              f"{', '.join(r['load_before'] for r in rs)} |")
    print(f"\nwall time of this command: {time.monotonic() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
