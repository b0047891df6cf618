"""decode="npy": typed arrays out of blob datasets, read from the real node.

Blob datasets of .npy files are ingested with the CLI (``--kind blob``):
float32 images of one shape (a class folder), int64 token shards of varying
lengths, float32 inputs with a uint8 mask as target (a manifest), and a
folder where one blob is not a .npy file. Each array carries its own id in
its first item, so what is read back is matched to what was written and
compared exactly (dtype, shape and values).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pytest

import cqlstream
from conftest import run_cli, unique_name


def npy(a: np.ndarray) -> bytes:
    f = io.BytesIO()
    np.lib.format.write_array(f, a, allow_pickle=False)
    return f.getvalue()


def ingest_blob(name: str, source: Path, *extra: str) -> None:
    run_cli("ingest", "--dataset", name, "--kind", "blob", str(source), *extra)


def read_all(name: str, hosts: str, **kw) -> list:
    with cqlstream.Loader(name, hosts=hosts, batch_size=kw.pop("batch_size", 7), shuffle=False, **kw) as ld:
        return list(ld)


@pytest.fixture(scope="module")
def float_images(tmp_path_factory):
    """24 float32 (8, 8, 3) arrays in two class folders; array i has a[0, 0, 0] == i."""
    root = tmp_path_factory.mktemp("npy_float")
    rng = np.random.default_rng(1)
    arrays = {}
    for i in range(24):
        a = rng.standard_normal((8, 8, 3)).astype(np.float32)
        a[0, 0, 0] = i
        arrays[i] = a
        d = root / ("a" if i % 2 else "b")
        d.mkdir(exist_ok=True)
        (d / f"x{i:02d}.npy").write_bytes(npy(a))
    name = unique_name("py_npyf")
    ingest_blob(name, root)
    yield name, arrays
    run_cli("drop", name, "--yes", check=False)


@pytest.fixture(scope="module")
def token_shards(tmp_path_factory):
    """17 int64 token shards of lengths 1..17 (one of them big-endian); shard i starts with i."""
    root = tmp_path_factory.mktemp("npy_tokens")
    arrays = {}
    for i in range(17):
        a = np.arange(i, i + 1 + i, dtype=np.int64) * 1_000_003
        a[0] = i
        arrays[i] = a
        (root / f"t{i:02d}.npy").write_bytes(npy(a.astype(">i8") if i == 5 else a))
    name = unique_name("py_npyt")
    ingest_blob(name, root, "--labels", "none")
    yield name, arrays
    run_cli("drop", name, "--yes", check=False)


@pytest.fixture(scope="module")
def masks(tmp_path_factory):
    """10 float32 (4, 6) inputs with uint8 (4, 6) masks as targets (a manifest); input i has a[0, 0] == i."""
    root = tmp_path_factory.mktemp("npy_masks")
    rng = np.random.default_rng(2)
    pairs = {}
    rows = []
    for i in range(10):
        x = rng.random((4, 6), dtype=np.float32)
        x[0, 0] = i
        m = (rng.random((4, 6)) > 0.5).astype(np.uint8)
        (root / f"x{i}.npy").write_bytes(npy(x))
        (root / f"m{i}.npy").write_bytes(npy(m))
        pairs[i] = (x, m)
        rows.append({"path": f"x{i}.npy", "target": f"m{i}.npy"})
    with open(root / "manifest.csv", "w", newline="") as f:
        w = csv.DictWriter(f, ["path", "target"])
        w.writeheader()
        w.writerows(rows)
    name = unique_name("py_npym")
    ingest_blob(name, root / "manifest.csv")
    yield name, pairs, root
    run_cli("drop", name, "--yes", check=False)


@pytest.fixture(scope="module")
def with_corrupt(tmp_path_factory):
    """6 int32 (2,) arrays and one blob that is not .npy (bad.npy)."""
    root = tmp_path_factory.mktemp("npy_bad")
    for i in range(6):
        (root / f"ok{i}.npy").write_bytes(npy(np.array([i, -i], dtype=np.int32)))
    (root / "bad.npy").write_bytes(b"\x93NUMPY but then not a header at all")
    name = unique_name("py_npyc")
    ingest_blob(name, root, "--labels", "none")
    yield name
    run_cli("drop", name, "--yes", check=False)


def test_same_shape_arrays_stack_and_equal_what_was_written(float_images, hosts):
    name, arrays = float_images
    seen = {}
    for b in read_all(name, hosts, decode="npy"):
        assert b.decoded and b.stacked
        stack = b.array
        assert stack.dtype == np.float32 and stack.shape == (len(b), 8, 8, 3)
        per = b.arrays
        assert len(per) == len(b)
        for i, a in enumerate(per):
            np.testing.assert_array_equal(a, stack[i])
            assert b[i].shape == (8, 8, 3)
            ident = int(a[0, 0, 0])
            np.testing.assert_array_equal(a, arrays[ident])
            assert ident not in seen
            seen[ident] = True
        # Odd ids are in class folder "a" (label 0), even ones in "b" (label 1).
        assert list(b.labels) == [1 - int(a[0, 0, 0]) % 2 for a in per]
        assert b.targets == []
    assert sorted(seen) == sorted(arrays)


def test_varying_lengths_come_as_a_list_and_do_not_stack(token_shards, hosts):
    name, arrays = token_shards
    seen = set()
    for b in read_all(name, hosts, decode="npy", batch_size=5):
        for a in b.arrays:
            assert a.dtype == np.int64 and a.dtype.isnative
            ident = int(a[0])
            np.testing.assert_array_equal(a, arrays[ident])
            seen.add(ident)
        if len({a.shape for a in b.arrays}) > 1:
            assert not b.stacked
            with pytest.raises(ValueError, match=r"do not stack: sample 0 .* is int64 \(\d+\).*use \.arrays"):
                b.array
    assert seen == set(arrays)


def test_mask_targets_as_npy_or_as_bytes(masks, hosts):
    name, pairs, root = masks
    got = 0
    for b in read_all(name, hosts, decode={"npy": True, "targets": "npy"}):
        assert len(b.targets) == len(b)
        for x, m in zip(b.arrays, b.targets):
            want_x, want_m = pairs[int(x[0, 0])]
            np.testing.assert_array_equal(x, want_x)
            assert m.dtype == np.uint8
            np.testing.assert_array_equal(m, want_m)
            got += 1
    assert got == len(pairs)
    for b in read_all(name, hosts, decode="npy"):  # targets kept as their bytes
        for x, t in zip(b.arrays, b.targets):
            i = int(x[0, 0])
            assert t.dtype == np.uint8 and t.ndim == 1
            assert t.tobytes() == (root / f"m{i}.npy").read_bytes()


def test_fetch_decodes_too(float_images, hosts):
    name, arrays = float_images
    with cqlstream.Loader(name, hosts=hosts, batch_size=4, shuffle=False, decode="npy") as ld:
        first = next(iter(ld))
        keys = list(first.keys)[::-1]
        again = ld.fetch(keys)
        for k, a in zip(again.keys, again.arrays):
            i = list(first.keys).index(k)
            np.testing.assert_array_equal(a, first.arrays[i])


def test_corrupt_blob_is_a_per_sample_error_or_skipped(with_corrupt, hosts):
    with pytest.raises(cqlstream.InvalidArgumentError, match=r"sample \d+:\d+: not a valid \.npy array"):
        read_all(with_corrupt, hosts, decode="npy")
    with cqlstream.Loader(with_corrupt, hosts=hosts, batch_size=3, shuffle=False, decode="npy",
                          on_missing="skip") as ld:
        got = sorted(int(a[0]) for b in ld for a in b.arrays)
        assert got == list(range(6))
        assert ld.metrics()["decode_skipped"] == 1


def test_decode_must_fit_the_sample_kind(images, float_images, token_shards, hosts):
    with pytest.raises(cqlstream.InvalidArgumentError, match="kind 'image'.*decode='npy'.*kind 'blob'"):
        cqlstream.Loader(images.name, hosts=hosts, decode="npy")
    with pytest.raises(cqlstream.InvalidArgumentError, match="kind 'blob', not images"):
        cqlstream.Loader(float_images[0], hosts=hosts, decode=(8, 8))
    with pytest.raises(cqlstream.InvalidArgumentError, match="label kind 'none'.*needs label kind 'target'"):
        cqlstream.Loader(token_shards[0], hosts=hosts, decode={"npy": True, "targets": "npy"})


def test_decode_spec_errors():
    with pytest.raises(ValueError, match="must be 'npy'"):
        cqlstream.Loader("x", decode="png")
    with pytest.raises(ValueError, match="targets must be 'bytes' or 'npy'"):
        cqlstream.Loader("x", decode={"npy": True, "targets": "png"})
    with pytest.raises(ValueError, match=r"unknown \.npy decode option"):
        cqlstream.Loader("x", decode={"npy": True, "size": 3})


def test_accessors_explain_the_mode(float_images, images, hosts):
    b = read_all(float_images[0], hosts, decode="npy")[0]
    with pytest.raises(ValueError, match="use .arrays|decoded batch"):
        b.images
    raw = read_all(float_images[0], hosts)[0]
    with pytest.raises(ValueError, match=r"decode='npy'.*raw bytes"):
        raw.arrays


def test_arrays_outlive_the_loader_and_the_batch(float_images, hosts):
    name, arrays = float_images
    with cqlstream.Loader(name, hosts=hosts, batch_size=24, shuffle=False, decode="npy") as ld:
        b = next(iter(ld))
        stack, first = b.array, b.arrays[0]
        b.release()
    for a in stack:
        np.testing.assert_array_equal(a, arrays[int(a[0, 0, 0])])
    np.testing.assert_array_equal(first, stack[0])


def test_torch_adapter(float_images, masks, token_shards, hosts):
    torch = pytest.importorskip("torch")
    import cqlstream.torch as ct

    name, arrays = float_images
    n = 0
    for x, y in ct.loader(name, hosts=hosts, batch_size=8, shuffle=False, decode="npy"):
        assert isinstance(x, torch.Tensor) and x.dtype == torch.float32 and x.shape[1:] == (8, 8, 3)
        assert y.dtype == torch.int64
        for a in x:
            np.testing.assert_array_equal(a.numpy(), arrays[int(a[0, 0, 0])])
            n += 1
    assert n == len(arrays)
    name, pairs, _ = masks
    for x, m in ct.loader(name, hosts=hosts, batch_size=4, decode={"npy": True, "targets": "npy"}):
        assert x.shape[1:] == (4, 6) and m.shape == (x.shape[0], 4, 6) and m.dtype == torch.uint8
        for xi, mi in zip(x, m):
            np.testing.assert_array_equal(mi.numpy(), pairs[int(xi[0, 0])][1])
    for x, _ in ct.loader(token_shards[0], hosts=hosts, batch_size=17, shuffle=False, decode="npy"):
        assert isinstance(x, list) and len(x) == 17 and all(t.dtype == torch.int64 for t in x)
