"""cqlstream.torch over an attached dataset (the read side of `cqlstream attach`).

A table in the reference system's layout, `data_train(id uuid PRIMARY KEY,
label int, data blob)`, holds real PNG images written with the Python
`cassandra` driver as a third-party tool would. After `cqlstream attach`,
three torch ranks read an epoch exactly once (raw batches: the bytes that
were written, with their labels), the images decode to tensors, and a row
deleted after the snapshot is an error naming the sample and the table, or
skipped and counted when asked.
"""

from __future__ import annotations

import io
import random
import uuid

# The cassandra driver (scylla-driver in python/requirements-dev.txt, which
# scripts/install puts into .venv) is a requirement: imported, never skipped.
import cassandra.cluster as cassandra_cluster
import numpy as np
import pytest
import torch
from cassandra.concurrent import execute_concurrent_with_args
from PIL import Image

import cqlstream
import cqlstream.torch as ct
from conftest import HOSTS, run_cli, unique_name

ROWS = 90


def png(rng: random.Random, i: int) -> bytes:
    """A 12x10 grayscale PNG whose first pixel is i (so each row differs)."""
    px = np.array([rng.randrange(256) for _ in range(120)], dtype=np.uint8).reshape(10, 12)
    px[0, 0] = i % 256
    out = io.BytesIO()
    Image.fromarray(px, mode="L").save(out, format="PNG")
    return out.getvalue()


@pytest.fixture(scope="module")
def attached():
    cluster = cassandra_cluster.Cluster(HOSTS.split(","))
    session = cluster.connect()
    keyspace = unique_name("py_atl")
    session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute(f"CREATE TABLE {keyspace}.data_train (id uuid PRIMARY KEY, label int, data blob) "
                    "WITH compression = {'enabled': false}")
    rng = random.Random(7)
    rows = [(uuid.UUID(int=rng.getrandbits(128), version=4), i % 5, png(rng, i)) for i in range(ROWS)]
    ins = session.prepare(f"INSERT INTO {keyspace}.data_train (id, label, data) VALUES (?, ?, ?)")
    for ok, r in execute_concurrent_with_args(session, ins, rows, concurrency=32):
        assert ok, r
    dataset = unique_name("py_atl")
    run_cli("attach", "--dataset", dataset, "--table", f"{keyspace}.data_train", "--key-column", "id",
            "--data-column", "data", "--label-column", "label")
    yield session, keyspace, dataset, {data: (u, lab) for u, lab, data in rows}
    run_cli("drop", dataset, "--yes", check=False)
    session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")
    cluster.shutdown()


def test_torch_ranks_read_an_attached_epoch_exactly_once(attached):
    _, _, dataset, rows = attached
    keys, payloads = [], []
    for rank in range(3):
        with ct.loader(dataset, hosts=HOSTS, batch_size=8, seed=3, rank=rank, world_size=3) as ds:
            for batch, labels in ds:
                assert isinstance(batch, cqlstream.Batch)
                for i in range(len(batch)):
                    data = bytes(batch[i])
                    assert data in rows, "a payload that was never written"
                    assert int(labels[i]) == rows[data][1]
                    payloads.append(data)
                keys += [int(k) for k in batch.keys]
    assert len(keys) == len(set(keys)) == ROWS
    assert sorted(payloads) == sorted(rows)


def test_attached_images_decode_to_tensors(attached):
    _, _, dataset, _ = attached
    seen = 0
    with ct.loader(dataset, hosts=HOSTS, batch_size=16, decode=(10, 12, 1)) as ds:
        for imgs, labels in ds:
            assert imgs.dtype == torch.uint8 and tuple(imgs.shape[1:]) == (1, 10, 12)
            assert labels.dtype == torch.int64 and int(labels.min()) >= 0 and int(labels.max()) < 5
            seen += imgs.shape[0]
    assert seen == ROWS


def test_a_row_deleted_after_the_snapshot_is_named_or_skipped(attached):
    session, keyspace, dataset, rows = attached
    gone_data, (gone_id, _) = next(iter(rows.items()))
    session.execute(f"DELETE FROM {keyspace}.data_train WHERE id = %s", (gone_id,))
    try:
        with cqlstream.Loader(dataset, hosts=HOSTS, batch_size=8, epochs=1) as loader:
            with pytest.raises(cqlstream.Error) as err:
                list(loader)
        msg = str(err.value)
        assert f"{keyspace}.data_train" in msg and str(gone_id) in msg, msg
        with cqlstream.Loader(dataset, hosts=HOSTS, batch_size=8, epochs=1, on_missing="skip") as loader:
            got = [bytes(b[i]) for b in loader for i in range(len(b))]
            assert loader.metrics()["skipped"] == 1
        assert len(got) == ROWS - 1 and gone_data not in got
    finally:
        session.execute(f"INSERT INTO {keyspace}.data_train (id, label, data) VALUES (%s, %s, %s)",
                        (gone_id, rows[gone_data][1], gone_data))
