"""The DALI reader (fn.cqlstream.reader, CPU) on an attached dataset.

A user of the reference system keeps images in
`data_<split>(id uuid PRIMARY KEY, label int, data blob)`, written with the
Python driver's execute_concurrent_with_args. `cqlstream attach` registers
the table without copying a byte, and the DALI reader then reads it as it
reads an ingested dataset (attached datasets open through the same Loader):
an epoch delivers every row once with the bytes that were written and its
label, on one shard and on two disjoint shards, and the bytes decode with
DALI's CPU image decoder to what PIL decodes.

Needs what test_dali.py needs (the plugin, the CLI, the node) and the
cassandra driver (scylla-driver in .venv: imported, never skipped).
"""

from __future__ import annotations

import io
import random
import uuid

import cassandra.cluster as cassandra_cluster
import numpy as np
import pytest
from cassandra.concurrent import execute_concurrent_with_args
from PIL import Image

from conftest import HOSTS, run_cli, unique_name

import cqlstream.dali as cd
from nvidia.dali import fn, pipeline_def, types

N = 37  # rows: uneven for 2 shards and for the batch size
B = 5
CLASSES = 4


def make_images(n: int, seed: int) -> list[tuple[uuid.UUID, int, bytes]]:
    """(id, label, encoded image) rows: JPEG and PNG, RGB and grayscale, varied sizes."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        h, w = rng.randint(8, 40), rng.randint(8, 40)
        y, x = np.mgrid[0:h, 0:w]
        a = np.stack([(x * 7 + i * 13) % 256, (y * 9 + i) % 256, ((x + y) * 3) % 256], axis=-1).astype(np.uint8)
        im = Image.fromarray(a)
        if i % 3 == 2:
            im = im.convert("L")
        buf = io.BytesIO()
        im.save(buf, "PNG" if i % 2 else "JPEG", **({} if i % 2 else {"quality": 92}))
        rows.append((uuid.UUID(int=rng.getrandbits(128), version=4), i % CLASSES, buf.getvalue()))
    return rows


@pytest.fixture(scope="module")
def attached():
    """A reference-layout table written with the Python driver and attached:
    (dataset name, {bytes: (id, label)})."""
    cluster = cassandra_cluster.Cluster(HOSTS.split(","))
    session = cluster.connect()
    keyspace = unique_name("py_dtp")
    session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute(f"CREATE TABLE {keyspace}.data_train (id uuid PRIMARY KEY, label int, data blob) "
                    "WITH compression = {'enabled': false}")
    rows = make_images(N, seed=11)
    assert len({d for _, _, d in rows}) == N
    ins = session.prepare(f"INSERT INTO {keyspace}.data_train (id, label, data) VALUES (?, ?, ?)")
    for ok, r in execute_concurrent_with_args(session, ins, rows, concurrency=20):
        assert ok, r
    dataset = unique_name("py_datt")
    try:
        r = run_cli("attach", "--dataset", dataset, "--table", f"{keyspace}.data_train", "--key-column", "id",
                    "--data-column", "data", "--label-column", "label")
        assert f"{N} keys" in r.stdout, r.stdout
        yield dataset, {d: (u, lab) for u, lab, d in rows}
    finally:
        run_cli("drop", dataset, "--yes", check=False)
        session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")
        cluster.shutdown()


@pytest.fixture(autouse=True, scope="module")
def plugin():
    assert cd.load_plugin(), cd.plugin_error()


def ints(tl) -> list[int]:
    return [int(np.array(tl[i]).reshape(-1)[0]) for i in range(len(tl))]


def shard_size(n: int, i: int, s: int) -> int:
    """What DALI's iterators expect of shard i (its start_index formula)."""
    return (i + 1) * n // s - i * n // s


def read_shard(dataset: str, shard_id: int, num_shards: int, decode: bool = False):
    """One epoch of one shard: [(key, label, bytes[, decoded])] of its real
    samples (the padding of the last batch is checked and dropped)."""

    @pipeline_def(batch_size=B, num_threads=2, device_id=None)
    def pipe():
        data, labels, keys = cd.reader(dataset, shard_id=shard_id, num_shards=num_shards, output_keys=True,
                                       hosts=HOSTS.split(","), seed=3)
        if decode:
            return data, labels, keys, fn.decoders.image(data, device="cpu", output_type=types.RGB)
        return data, labels, keys

    p = pipe()
    p.build()
    meta = p.reader_meta("Reader")
    assert meta["epoch_size"] == N and meta["shard_id"] == shard_id and meta["number_of_shards"] == num_shards
    size = shard_size(N, shard_id, num_shards)
    padded = -(-N // num_shards)  # every shard delivers the largest shard's count
    slots = []
    for _ in range(-(-padded // B)):
        out = p.run()
        data, labels, keys = out[:3]
        for i, (k, lab) in enumerate(zip(ints(keys), ints(labels))):
            item = (k, lab, np.array(data[i]).tobytes())
            slots.append(item + ((np.array(out[3][i]),) if decode else ()))
    real = slots[:size]
    assert all(s[0] == real[-1][0] for s in slots[size:]), "padding must repeat the shard's last sample"
    return real


def check_epoch(samples, rows: dict[bytes, tuple[uuid.UUID, int]]) -> None:
    keys = [s[0] for s in samples]
    assert len(keys) == len(set(keys)) == N, "every key once"
    got = [s[2] for s in samples]
    assert sorted(got) == sorted(rows), "the bytes that were written, each once"
    for _, label, data in (s[:3] for s in samples):
        assert label == rows[data][1]


def test_dali_reader_reads_an_attached_table_exactly_once(attached):
    dataset, rows = attached
    samples = read_shard(dataset, 0, 1, decode=True)
    check_epoch(samples, rows)
    # The stored bytes are images DALI decodes as PIL does (PNG exactly).
    for _, _, data, decoded in samples:
        ref = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
        assert decoded.shape == ref.shape
        diff = np.abs(decoded.astype(int) - ref.astype(int))
        if data.startswith(b"\x89PNG"):
            assert diff.max() == 0
        else:
            assert diff.mean() < 1.5 and diff.max() <= 16


def test_dali_reader_two_shards_on_an_attached_table(attached):
    dataset, rows = attached
    shards = [read_shard(dataset, i, 2) for i in range(2)]
    assert [len(s) for s in shards] == [shard_size(N, i, 2) for i in range(2)]
    assert not {s[0] for s in shards[0]} & {s[0] for s in shards[1]}, "shards overlap"
    check_epoch(shards[0] + shards[1], rows)
