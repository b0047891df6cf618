#!/usr/bin/env python3
"""Ingest of an image folder with the Python scylla-driver (package
`cassandra`), the way people commonly write such a loader: one prepared
INSERT per data chunk and per metadata row, kept in flight with
cassandra.concurrent.execute_concurrent (--concurrency requests).

It writes the same layout as `cqlstream ingest` (docs/schema.md, tables
d_NAME and m_NAME: chunks of --chunk-size bytes with the size, checksum and
label as static columns; one metadata row per sample), so both tools move
the same bytes into the same kind of rows. Differences, in the driver's
favour: no image validation, a CRC-32 (zlib, C code) instead of xxh64, no
catalog/segment bookkeeping, no resume; metadata rows are not batched.

Prints one JSON line: samples, bytes, wall_s, images_per_s, mb_per_s,
cpu_s (getrusage of this process, all threads), cpu_s_per_gb.
"""
import argparse
import json
import os
import resource
import sys
import time
import zlib

from cassandra.cluster import Cluster
from cassandra.concurrent import execute_concurrent


def cpu_seconds():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def listing(root):
    """(relative path, class index) of every file under root/<class>/, sorted."""
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    items = []
    for ci, c in enumerate(classes):
        for dirpath, _, files in os.walk(os.path.join(root, c)):
            for f in files:
                items.append((os.path.relpath(os.path.join(dirpath, f), root), ci))
    items.sort()
    return items


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--hosts", default="127.0.0.1")
    ap.add_argument("--keyspace", default="ingest_driver")
    ap.add_argument("--dataset", default="jpeg")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--chunk-size", type=int, default=1 << 20)
    a = ap.parse_args()

    cluster = Cluster(a.hosts.split(","), protocol_version=4)
    s = cluster.connect()
    s.default_timeout = 60
    s.execute(f"CREATE KEYSPACE IF NOT EXISTS {a.keyspace} WITH replication = "
              "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    s.execute(f"CREATE TABLE IF NOT EXISTS {a.keyspace}.d_{a.dataset} (seg int, idx int, chunk int, "
              "size bigint static, image_size bigint static, checksum bigint static, label int static, "
              "data blob, PRIMARY KEY ((seg, idx), chunk)) WITH compression = {'enabled': 'false'}")
    s.execute(f"CREATE TABLE IF NOT EXISTS {a.keyspace}.m_{a.dataset} (seg int, block int, idx int, path text, "
              "label int, size bigint, image_size bigint, checksum bigint, PRIMARY KEY ((seg, block), idx))")
    cluster.control_connection.wait_for_schema_agreement()
    first = s.prepare(f"INSERT INTO {a.keyspace}.d_{a.dataset} (seg, idx, chunk, size, image_size, checksum, "
                      "label, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
    more = s.prepare(f"INSERT INTO {a.keyspace}.d_{a.dataset} (seg, idx, chunk, data) VALUES (?, ?, ?, ?)")
    meta = s.prepare(f"INSERT INTO {a.keyspace}.m_{a.dataset} (seg, block, idx, path, label, size, image_size, "
                     "checksum) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")

    cpu0, t0 = cpu_seconds(), time.monotonic()
    items = listing(a.folder)
    total = {"bytes": 0}

    def statements():
        cs = a.chunk_size
        for idx, (path, label) in enumerate(items):
            with open(os.path.join(a.folder, path), "rb") as f:
                data = f.read()
            n = len(data)
            total["bytes"] += n
            crc = zlib.crc32(data)
            yield first, (0, idx, 0, n, n, crc, label, data[:cs])
            for c in range(1, (n + cs - 1) // cs):
                yield more, (0, idx, c, data[c * cs:(c + 1) * cs])
            yield meta, (0, idx >> 10, idx, path, label, n, n, crc)

    failed = 0
    for ok, res in execute_concurrent(s, statements(), concurrency=a.concurrency, raise_on_first_error=False,
                                      results_generator=True):
        if not ok:
            failed += 1
            if failed == 1:
                print(f"first error: {res}", file=sys.stderr)
    wall = time.monotonic() - t0
    cpu = cpu_seconds() - cpu0
    cluster.shutdown()
    gb = total["bytes"] / 1e9
    out = dict(tool="scylla-driver", samples=len(items), bytes=total["bytes"], failed=failed, wall_s=round(wall, 2),
               images_per_s=round(len(items) / wall, 1), mb_per_s=round(total["bytes"] / 1e6 / wall, 1),
               cpu_s=round(cpu, 2), cpu_s_per_gb=round(cpu / gb, 2) if gb else None)
    print(json.dumps(out))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
