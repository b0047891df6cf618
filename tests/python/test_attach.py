"""cqlstream attach of a table a third-party tool wrote, read with cqlstream.Loader.

The scenario of a user of the reference system: the samples are already in
`data_train(id uuid PRIMARY KEY, label int, data blob)` (plus
`metadata_train`), written with the Python `cassandra` driver's
execute_concurrent_with_args, as its loaders do. `cqlstream attach` registers
them without copying a byte; the Loader then reads an epoch on three ranks
exactly once with the bytes that were written, resumes from a checkpoint,
and after `attach --refresh` (new rows) reads the new snapshot while the old
checkpoint is refused.
"""

from __future__ import annotations

import os
import random
import uuid

# The cassandra driver (scylla-driver in python/requirements-dev.txt, which
# scripts/install puts into .venv) is a requirement: imported, never skipped.
import cassandra.cluster as cassandra_cluster
import pytest
from cassandra.concurrent import execute_concurrent_with_args

import cqlstream
from conftest import HOSTS, run_cli, unique_name


def write_rows(session, keyspace: str, first: int, n: int, seed: int) -> dict[bytes, tuple[uuid.UUID, int]]:
    """n rows of random bytes written as the reference system's writer does; data -> (id, label)."""
    rng = random.Random(seed)
    rows = []
    for i in range(first, first + n):
        data = bytes(rng.getrandbits(8) for _ in range(rng.randint(16, 400))) + i.to_bytes(4, "big")
        rows.append((uuid.UUID(int=rng.getrandbits(128), version=4), i % 7, data))
    ins = session.prepare(f"INSERT INTO {keyspace}.data_train (id, label, data) VALUES (?, ?, ?)")
    meta = session.prepare(
        f"INSERT INTO {keyspace}.metadata_train (id, label, or_label, or_split) VALUES (?, ?, ?, 'train')")
    for ok, r in execute_concurrent_with_args(session, ins, rows, concurrency=50):
        assert ok, r
    for ok, r in execute_concurrent_with_args(session, meta, [(u, lab, f"class{lab}") for u, lab, _ in rows],
                                             concurrency=50):
        assert ok, r
    return {data: (u, lab) for u, lab, data in rows}


@pytest.fixture(scope="module")
def third_party():
    cluster = cassandra_cluster.Cluster(HOSTS.split(","))
    session = cluster.connect()
    keyspace = unique_name("py_tp")
    session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute(f"CREATE TABLE {keyspace}.data_train (id uuid PRIMARY KEY, label int, data blob) "
                    "WITH compression = {'enabled': false}")
    session.execute(f"CREATE TABLE {keyspace}.metadata_train (id uuid PRIMARY KEY, label int, or_label text, "
                    "or_split text)")
    rows = write_rows(session, keyspace, 0, 150, seed=1)
    dataset = unique_name("py_att")
    yield session, keyspace, dataset, rows
    run_cli("drop", dataset, "--yes", check=False)
    session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")
    cluster.shutdown()


def keys_of(batches) -> list[int]:
    return [int(k) for b in batches for k in b.keys]


def payloads(batches) -> list[bytes]:
    return [bytes(b[i]) for b in batches for i in range(len(b))]


def test_attach_reads_exactly_once_on_three_ranks_and_resumes(third_party):
    session, keyspace, dataset, rows = third_party
    r = run_cli("attach", "--dataset", dataset, "--table", f"{keyspace}.data_train", "--key-column", "id",
                "--data-column", "data", "--label-column", "label", "--metadata-table",
                f"{keyspace}.metadata_train", "--kind", "blob")
    assert "150 keys" in r.stdout and "keys/s" in r.stdout, r.stdout
    info = run_cli("info", dataset).stdout
    assert f"{keyspace}.data_train" in info and "native-only" in info, info

    # One epoch on three ranks: every row once, byte-identical, with its label.
    kw = dict(hosts=HOSTS, batch_size=8, seed=5)
    seen_keys, seen = [], []
    for rank in range(3):
        with cqlstream.Loader(dataset, rank=rank, world_size=3, **kw) as loader:
            assert loader.dataset_info["label_kind"] == "class"
            batches = list(loader)
            assert batches, f"rank {rank} got nothing"
            seen_keys += keys_of(batches)
            for b in batches:
                for i in range(len(b)):
                    data = bytes(b[i])
                    assert data in rows, "a payload that was never written"
                    assert b.labels[i] == rows[data][1]
                    seen.append(data)
    assert len(seen_keys) == len(set(seen_keys)) == 150
    assert sorted(seen) == sorted(rows)

    # A checkpoint mid-epoch resumes exactly once.
    with cqlstream.Loader(dataset, **kw) as a:
        it = iter(a)
        first = [next(it) for _ in range(5)]
        state = a.state_dict()
    with cqlstream.Loader(dataset, **kw) as b:
        b.load_state_dict(state)
        rest = list(b)
    got = payloads(first) + payloads(rest)
    assert len(got) == 150 and sorted(got) == sorted(rows)

    # New rows from the third party: --refresh takes a new snapshot; a new
    # Loader sees it; the old checkpoint names segments that are gone.
    more = write_rows(session, keyspace, 150, 30, seed=2)
    run_cli("attach", "--dataset", dataset, "--table", f"{keyspace}.data_train", "--key-column", "id",
            "--data-column", "data", "--label-column", "label", "--metadata-table",
            f"{keyspace}.metadata_train", "--kind", "blob", "--refresh")
    with cqlstream.Loader(dataset, **{**kw, "epochs": 2}) as loader:
        fresh = payloads(list(loader))
        first_lookups = loader.metrics()["key_lookups"]
        again = payloads(list(loader))
        m = loader.metrics()
    assert sorted(fresh) == sorted({**rows, **more}) == sorted(again)
    # The second epoch read each row by the key the first looked up.
    assert 0 < first_lookups and m["key_lookups"] == first_lookups and m["foreign_keys_cached"] == 180
    with cqlstream.Loader(dataset, **kw) as stale:
        with pytest.raises(cqlstream.Error):
            stale.load_state_dict(state)
            list(stale)


def test_attach_refusals_say_what_and_why(third_party):
    session, keyspace, _, _ = third_party
    session.execute(f"CREATE TABLE {keyspace}.frames (id uuid, frame int, data blob, PRIMARY KEY (id, frame))")
    r = run_cli("attach", "--dataset", unique_name("py_bad"), "--table", f"{keyspace}.frames", "--key-column", "id",
                "--data-column", "data", check=False)
    assert r.returncode != 0
    assert "clustering column(s) (frame)" in r.stderr and "one row (one sample) per key" in r.stderr, r.stderr
    r = run_cli("attach", "--dataset", unique_name("py_bad"), "--table", f"{keyspace}.metadata_train",
                "--key-column", "id", "--data-column", "or_label", check=False)
    assert r.returncode != 0 and "must be a blob" in r.stderr, r.stderr


def test_attached_metadata_joins_the_metadata_table_and_maps_key_texts(third_party):
    """Dataset.metadata() of an attached dataset: path is the key's text, size
    is None (not known), extra the metadata table's other columns as text;
    keys_for_paths takes the keys' texts."""
    session, keyspace, _, rows = third_party
    name = unique_name("py_attm")
    run_cli("attach", "--dataset", name, "--table", f"{keyspace}.data_train", "--key-column", "id",
            "--data-column", "data", "--label-column", "label", "--metadata-table", f"{keyspace}.metadata_train")
    try:
        with cqlstream.Dataset(name, hosts=HOSTS) as ds:
            assert ds.attached
            md = ds.metadata("train")
            recs = md.to_dict("records") if hasattr(md, "to_dict") else md
            # The fixture's rows may have grown by a refresh test's 30: every
            # data row of the table is one metadata row.
            assert len(recs) == ds.count("train") >= 150
            want = {u: lab for u, lab in rows.values()}
            by_path = {}
            for r in recs:
                u = uuid.UUID(r["path"])
                by_path[r["path"]] = int(r["key"])
                assert r["split"] == "train"
                assert r["size"] is None or r["size"] != r["size"], r  # None (NaN once pandas made it float)
                assert r["extra"]["or_label"] == f"class{r['label']}", r
                assert r["extra"]["or_split"] == "train" and r["extra"]["label"] == str(r["label"]), r
                assert "id" not in r["extra"] and "_problem" not in r["extra"], r
                if u in want:
                    assert r["label"] == want[u]
            assert set(str(u) for u in want) <= set(by_path)
            some = [str(u) for u in list(want)[:5]]
            assert ds.keys_for_paths(some) == [by_path[p] for p in some]
            assert ds.keys_for_paths(some, split="train") == [by_path[p] for p in some]
            with pytest.raises(KeyError, match="is not in"):
                ds.keys_for_paths([str(uuid.UUID(int=1))])
    finally:
        run_cli("drop", name, "--yes", check=False)
