"""cqlstream.Dataset and cqlstream.Selection against the real node (issue 11 §2).

Keys from paths, metadata rows, selections from keys / masks / weights,
their files (round trip, ordered CQLSSEL2 and sorted CQLSSEL1), and the
loader reading weighted, ordered selections: the exact order with shuffle
off, each entry as many times as it is listed over 2 ranks with shuffle on.
"""

from __future__ import annotations

import collections
import math

import pytest

import cqlstream
from conftest import CLASSES, run_cli


@pytest.fixture(scope="module")
def ds(images, hosts):
    with cqlstream.Dataset(images.name, hosts=hosts) as d:
        yield d


def _epoch_keys(loader) -> list[int]:
    out: list[int] = []
    for batch in loader:
        out.extend(int(k) for k in batch.keys)
    return out


def test_dataset_catalog(ds, images):
    assert ds.name == images.name
    assert ds.splits() == ["test", "train"]
    assert ds.count("train") == images.count("train") == 90
    assert ds.label_kind == "class"
    assert ds.class_names == CLASSES
    keys = ds.keys("train")
    assert keys == sorted(keys) and len(set(keys)) == 90
    with pytest.raises(KeyError, match="nosuch"):
        ds.keys("nosuch")
    assert "Dataset(" in repr(ds)


def test_metadata_rows_match_the_files(ds, images):
    rows = ds.metadata("train")
    if not isinstance(rows, list):  # pandas present: one row per sample
        rows = rows.to_dict("records")
    assert [r["key"] for r in rows] == ds.keys("train")
    by_path = {str(s.path.relative_to(images.root)): s for s in images.split("train")}
    for r in rows:
        assert set(r) == {"key", "split", "path", "label", "size", "extra"}
        assert r["split"] == "train"
        s = next(v for p, v in by_path.items() if p.endswith(r["path"]))
        assert r["label"] == CLASSES.index(s.cls)
        assert r["size"] == len(s.data)
        assert r["extra"] == {}
    everything = ds.metadata()
    assert len(everything) == 108
    with pytest.raises(KeyError, match="nosuch"):
        ds.metadata("nosuch")


def test_keys_for_paths(ds):
    rows = ds.metadata("test")
    rows = rows if isinstance(rows, list) else rows.to_dict("records")
    paths = [r["path"] for r in rows][::-1]
    assert ds.keys_for_paths(paths) == [r["key"] for r in rows][::-1]
    assert ds.keys_for_paths(paths[:2], split="test") == [r["key"] for r in rows][::-1][:2]
    with pytest.raises(KeyError, match="no/such.png"):
        ds.keys_for_paths([paths[0], "no/such.png"])
    with pytest.raises(KeyError, match="split 'train'"):
        ds.keys_for_paths([paths[0]], split="train")


def test_unknown_dataset_and_arguments(hosts):
    with pytest.raises(cqlstream.NotFoundError):
        cqlstream.Dataset("py_nosuch_dataset", hosts=hosts)
    with pytest.raises(TypeError, match="password"):
        cqlstream.Dataset("x", password="secret")
    with pytest.raises(ValueError, match="port"):
        cqlstream.Dataset("x", port=0)
    with pytest.raises(cqlstream.InvalidArgumentError):
        cqlstream.Dataset("Bad-Name", hosts=hosts)


def test_selection_files_round_trip(ds, tmp_path):
    keys = ds.keys("train")
    curriculum = [keys[5], keys[1], keys[1], keys[80], keys[0], keys[5]]
    sel = cqlstream.Selection.from_keys(ds, "train", curriculum)
    assert sel.ordered and len(sel) == 6
    sel.save(tmp_path / "c.sel")
    assert (tmp_path / "c.sel").read_bytes()[:8] == b"CQLSSEL2"
    back = cqlstream.Selection.load(tmp_path / "c.sel")
    assert back == sel and back.keys == curriculum and back.dataset == ds.name
    # Sorted unique keys keep the older format; keys as strings or pairs.
    plain = cqlstream.Selection.from_keys(ds.name, "train", [cqlstream.format_key(k) for k in keys[:3]])
    assert not plain.ordered
    plain.save(tmp_path / "p.sel")
    assert (tmp_path / "p.sel").read_bytes()[:8] == b"CQLSSEL1"
    assert cqlstream.Selection.load(tmp_path / "p.sel").keys == keys[:3]
    # A file made by the CLI loads too; damaged files are CorruptionError.
    run_cli("select", ds.name, "--split", "train", "--label", "dog", "-o", str(tmp_path / "dog.sel"))
    assert len(cqlstream.Selection.load(tmp_path / "dog.sel")) == 30
    (tmp_path / "bad.sel").write_bytes(b"CQLSSEL2" + b"\x02\x00\x00\x00{}")
    with pytest.raises(cqlstream.CorruptionError, match="bad.sel"):
        cqlstream.Selection.load(tmp_path / "bad.sel")
    with pytest.raises(ValueError):
        cqlstream.Selection.from_keys(ds, "train", ["1"])
    with pytest.raises(ValueError, match="outside"):
        cqlstream.Selection.from_keys(ds, "train", [cqlstream.make_key(0, 0) | (1 << 63)])


def test_mask_selects_in_key_order(ds, tmp_path, loader_kwargs):
    rows = ds.metadata("train")
    rows = rows if isinstance(rows, list) else rows.to_dict("records")
    mask = [r["label"] == CLASSES.index("dog") for r in rows]
    sel = cqlstream.Selection.from_mask(ds, "train", mask)
    assert sel.keys == [r["key"] for r in rows if r["label"] == 1]
    with pytest.raises(ValueError, match="90 samples"):
        cqlstream.Selection.from_mask(ds, "train", mask[:-1])
    sel.save(tmp_path / "m.sel")
    got = _epoch_keys(cqlstream.Loader(ds.name, selection=tmp_path / "m.sel", batch_size=7, **loader_kwargs))
    assert sorted(got) == sel.keys


def test_weights_round_deterministically(ds):
    n = ds.count("train")
    weights = [(i % 7) * 0.55 for i in range(n)]
    a = cqlstream.Selection.from_weights(ds, "train", weights, seed=3)
    b = cqlstream.Selection.from_weights(ds, "train", weights, seed=3)
    assert a.keys == b.keys
    counts = collections.Counter(a.keys)
    for k, w in zip(ds.keys("train"), weights):
        assert math.floor(w) <= counts.get(k, 0) <= math.ceil(w)
    assert a.keys != cqlstream.Selection.from_weights(ds, "train", weights, seed=4).keys
    for bad in (-1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="weights\\[0\\]"):
            cqlstream.Selection.from_weights(ds, "train", [bad] + weights[1:])


def test_loader_reads_weighted_ordered_selections_entry_by_entry(ds, tmp_path, loader_kwargs):
    keys = ds.keys("train")
    # A curriculum: the test order is reversed, some samples three times.
    listed = []
    for i, k in enumerate(reversed(keys)):
        listed.extend([k] * (3 if i % 10 == 0 else 1))
    sel = cqlstream.Selection.from_keys(ds, "train", listed)
    path = tmp_path / "w.sel"
    sel.save(path)
    exact = _epoch_keys(cqlstream.Loader(ds.name, selection=path, shuffle=False, ordered=True, batch_size=8,
                                         **loader_kwargs))
    assert exact == listed
    # Shuffle on, two ranks: each entry delivered as many times as listed.
    total = collections.Counter()
    for rank in range(2):
        total.update(_epoch_keys(cqlstream.Loader(ds.name, selection=path, seed=5, rank=rank, world_size=2,
                                                  batch_size=8, **loader_kwargs)))
    assert total == collections.Counter(listed)


def test_metadata_is_a_dataframe_exactly_when_pandas_is_importable(ds):
    try:
        import pandas
    except ImportError:
        pandas = None
    md = ds.metadata("test")
    if pandas is None:
        assert isinstance(md, list) and len(md) == 18 and isinstance(md[0], dict)
    else:
        assert isinstance(md, pandas.DataFrame) and len(md) == 18
        assert list(md.columns) == ["key", "split", "path", "label", "size", "extra"]
