"""Coalesced reads of small samples (LoaderOptions::coalesce) from every
Python front end, against the real node: cqlstream.Loader(coalesce=N), cqlstream.torch.loader
and the DALI reader's ``coalesce`` argument read the same keys exactly once with
coalescing off (1) and on (32), and the loader's metrics show which it did.
Bad values are refused naming the argument before anything is opened.
Packed reads, after `cqlstream pack` or cqlstream.Dataset.pack.

Needs the node (CQLSTREAM_TEST_HOSTS) and the CLI (to ingest); the DALI tests
need nvidia.dali in the environment and the plugin (see test_dali.py).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import cqlstream
from conftest import ctrl_c_after, run_cli, unique_name

N = 120  # samples: 3 classes x 40 (15 DALI batches of 8), each a few hundred bytes (coalescible)


def _write_small_images(root: Path) -> dict[bytes, str]:
    """Tiny PNGs under root/train/<class>/; returns {file bytes: relative path}."""
    rng = np.random.default_rng(13)
    out: dict[bytes, str] = {}
    for i in range(N):
        cls = f"c{i % 3}"
        d = root / "train" / cls
        d.mkdir(parents=True, exist_ok=True)
        h, w = 8 + i % 9, 8 + (i * 7) % 11
        a = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
        buf = io.BytesIO()
        Image.fromarray(a).save(buf, "PNG")
        data = buf.getvalue()
        assert len(data) < 16 << 10 and data not in out
        rel = f"{cls}/s{i:03d}.png"
        (d / f"s{i:03d}.png").write_bytes(data)
        out[data] = rel
    return out


class SmallDataset:
    def __init__(self, name: str, by_content: dict[bytes, str]):
        self.name = name
        self.by_content = by_content


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> SmallDataset:
    root = tmp_path_factory.mktemp("small")
    by_content = _write_small_images(root)
    name = unique_name("py_small")
    run_cli("ingest", "--dataset", name, str(root))
    yield SmallDataset(name, by_content)
    run_cli("drop", name, "--yes", check=False)


def _read_epoch(small: SmallDataset, hosts: str, coalesce: int) -> tuple[list[int], set[bytes], dict]:
    with cqlstream.Loader(small.name, batch_size=16, shuffle=True, seed=5, hosts=hosts,
                          coalesce=coalesce) as loader:
        assert loader.samples_per_epoch == N
        keys: list[int] = []
        contents: set[bytes] = set()
        for b in loader:
            keys += [int(k) for k in b.keys]
            contents |= {bytes(b[i]) for i in range(len(b))}
        return keys, contents, loader.metrics()


def test_loader_coalesce_off_and_on_read_each_key_once(small, hosts):
    off_keys, off_bytes, off_m = _read_epoch(small, hosts, 1)
    on_keys, on_bytes, on_m = _read_epoch(small, hosts, 32)
    for keys in (off_keys, on_keys):
        assert len(keys) == N and len(set(keys)) == N
    assert sorted(off_keys) == sorted(on_keys)
    # Every delivered payload is one of the files, each exactly once.
    assert off_bytes == on_bytes == set(small.by_content)
    assert off_m["coalesced_requests"] == 0 and off_m["coalesced_samples"] == 0
    assert on_m["coalesced_requests"] > 0
    # Several samples per coalesced request, never more than asked for.
    assert on_m["coalesced_samples"] >= 2 * on_m["coalesced_requests"]
    assert on_m["coalesced_samples"] <= 32 * on_m["coalesced_requests"]
    assert on_m["coalesced_samples"] <= N
    # An honest node's grouped answers deliver every sample they were asked
    # for; only a request that timed out (a busy machine) fails its samples.
    assert off_m["group_failures"] == 0
    assert on_m["group_failures"] == 0 or on_m["timeouts"] > 0


def test_loader_coalesce_automatic_by_default(small, hosts):
    _, contents, m = _read_epoch(small, hosts, 0)
    assert contents == set(small.by_content)
    assert m["coalesced_requests"] > 0


@pytest.mark.parametrize("coalesce", [1, 32])
def test_torch_loader_passes_coalesce(small, hosts, coalesce):
    pytest.importorskip("torch")
    import cqlstream.torch as ct
    with ct.loader(small.name, batch_size=16, hosts=hosts, coalesce=coalesce) as ds:
        keys = [int(k) for batch, _ in ds for k in batch.keys]
        m = ds.metrics()
    assert len(keys) == N and len(set(keys)) == N
    assert (m["coalesced_requests"] > 0) == (coalesce > 1)


@pytest.mark.parametrize("value", [-1, 101, 1 << 40])
def test_loader_coalesce_out_of_range_names_it(value):
    with pytest.raises(ValueError, match=r"^coalesce must be an int in \[0, 100\]"):
        cqlstream.Loader("ds", coalesce=value)


@pytest.mark.parametrize("value", [2.0, "8", True])
def test_loader_coalesce_must_be_an_int(value):
    with pytest.raises(TypeError, match=r"^coalesce must be an int"):
        cqlstream.Loader("ds", coalesce=value)


def test_core_refuses_out_of_range_coalesce_too():
    # The resolver in C++ checks it as well (the DALI operators and the CLI go
    # through it without the Python checks).
    from cqlstream import _core
    a = _core.OpenArgs()
    a.dataset = "ds"
    a.coalesce = 101
    with pytest.raises(cqlstream.Error, match=r"coalesce must be in \[0, 100\], got 101"):
        _core.Loader(a)


def test_loader_packed_reads_each_key_once_by_pack(small, hosts):
    # Before `cqlstream pack`, packed=True names the missing step.
    with pytest.raises(cqlstream.Error, match=r"has no packs: run `cqlstream pack"):
        cqlstream.Loader(small.name, batch_size=16, hosts=hosts, packed=True)
    out = run_cli("pack", small.name, "--pack-size", "8").stdout
    assert "packed 120 samples into 15 packs" in out, out
    with cqlstream.Loader(small.name, batch_size=16, shuffle=True, seed=5, hosts=hosts, packed=True,
                          epochs=2) as loader:
        for _ in range(2):
            keys: list[int] = []
            contents: set[bytes] = set()
            for b in loader:
                keys += [int(k) for k in b.keys]
                contents |= {bytes(b[i]) for i in range(len(b))}
            assert len(keys) == N and len(set(keys)) == N
            assert contents == set(small.by_content)
        m = loader.metrics()
    # 15 packs of 8 per epoch, each read whole with one request.
    assert m["packed_requests"] == 30
    assert m["coalesced_samples"] >= 240


def test_dataset_pack_from_python_alone(hosts):
    # A user of the wheel (no CLI) writes with cqlstream.Writer, packs with
    # cqlstream.Dataset.pack and reads with packed=True.
    name = unique_name("py_pack")
    blobs = [bytes([i % 251]) * (100 + i) for i in range(100)]
    try:
        with cqlstream.Writer(name, split="train", label_kind="class", classes=["a", "b"], kind="blob",
                              source_id="pack-test", hosts=hosts) as w:
            keys = [w.add(b, label=i % 2, path=f"s{i:03d}") for i, b in enumerate(blobs)]
        with cqlstream.Dataset(name, hosts=hosts) as ds:
            with pytest.raises(ValueError, match=r"pack_size must be an int in \[2, 100\], got 1"):
                ds.pack(pack_size=1)
            with pytest.raises(ValueError, match=r"concurrency must be an int in \[1, 256\], got 0"):
                ds.pack(concurrency=0)
            with pytest.raises(KeyError, match="has no split 'val'"):
                ds.pack("val")
            r = ds.pack(pack_size=16)
            # 100 samples: 6 packs of 16, 4 read alone.
            assert (r["packs_written"], r["samples_packed"], r["left_out"]) == (6, 96, 0), r
            assert [(g["split"], g["outcome"], g["pack_size"], g["packs"], g["packed"]) for g in r["segments"]] == \
                [("train", "packed", 16, 6, 96)]
            again = ds.pack(pack_size=16)
            assert again["packs_written"] == 0 and again["segments"][0]["outcome"] == "already packed", again
        with cqlstream.Loader(name, batch_size=10, shuffle=True, seed=3, hosts=hosts, packed=True) as loader:
            got: dict[int, bytes] = {}
            for b in loader:
                for i in range(len(b)):
                    assert int(b.keys[i]) not in got
                    got[int(b.keys[i])] = bytes(b[i])
            m = loader.metrics()
        assert got == dict(zip(keys, blobs))
        assert m["packed_requests"] == 6 and m["pack_fallbacks"] == 0
    finally:
        run_cli("drop", name, "--yes", check=False)


def test_ctrl_c_ends_dataset_pack(hosts):
    # Ctrl-C in a notebook or a terminal ends Dataset.pack() at once with
    # KeyboardInterrupt; it used to pack to the end first. The segment is
    # then not marked packed, so the next pack() writes its packs.
    name = unique_name("py_pack_intr")
    n = 6000  # about 2 s of packing two samples a pack, one pack at a time
    try:
        with cqlstream.Writer(name, split="train", label_kind="class", classes=["a", "b"], kind="blob",
                              source_id="pack-intr", hosts=hosts) as w:
            for i in range(n):
                w.add(bytes([i % 251]) * 200, label=i % 2, path=f"s{i}")
        with cqlstream.Dataset(name, hosts=hosts) as ds:
            with ctrl_c_after(0.3), pytest.raises(KeyboardInterrupt):
                ds.pack(pack_size=2, concurrency=1)
            r = ds.pack(pack_size=2, concurrency=1)
            assert [(g["outcome"], g["packs"]) for g in r["segments"]] == [("packed", n // 2)], r
            assert r["packs_written"] == n // 2, r
    finally:
        run_cli("drop", name, "--yes", check=False)


# --- DALI -------------------------------------------------------------------


def _dali_keys(small: SmallDataset, hosts: str, **kw) -> list[int]:
    dali = pytest.importorskip("nvidia.dali")
    import cqlstream.dali as cd
    assert cd.load_plugin(), cd.plugin_error()
    b = 8

    @dali.pipeline_def(batch_size=b, num_threads=1, device_id=None)
    def pipe():
        data, labels, keys = cd.reader(small.name, hosts=hosts.split(","), output_keys=True, shuffle=False,
                                       use_plugin=True, **kw)
        return data, keys

    p = pipe()
    p.build()
    out: list[int] = []
    for _ in range(-(-N // b)):
        _, keys = p.run()
        out += [int(np.array(keys[i]).reshape(-1)[0]) for i in range(len(keys))]
    return out


@pytest.mark.parametrize("coalesce", [1, 32])
def test_dali_reader_takes_coalesce(small, hosts, coalesce):
    keys = _dali_keys(small, hosts, coalesce=coalesce)
    # One epoch (N is a whole number of batches): each key exactly once.
    assert len(keys) == N and len(set(keys)) == N


def test_dali_reader_refuses_out_of_range_coalesce(small, hosts):
    with pytest.raises(RuntimeError, match=r"coalesce must be in \[0, 100\], got 101"):
        _dali_keys(small, hosts, coalesce=101)


@pytest.mark.parametrize("use_plugin", [True, False])
def test_dali_reader_takes_packed(small, hosts, use_plugin):
    pytest.importorskip("nvidia.dali")
    run_cli("pack", small.name, "--pack-size", "8")  # (already packed when the Loader test ran first)
    if use_plugin:
        keys = _dali_keys(small, hosts, packed=True)
    else:
        dali = pytest.importorskip("nvidia.dali")
        import cqlstream.dali as cd

        @dali.pipeline_def(batch_size=8, num_threads=1, device_id=None)
        def pipe():
            data, labels, k = cd.reader(small.name, hosts=hosts.split(","), output_keys=True, use_plugin=False,
                                        packed=True)
            return data, k

        p = pipe()
        p.build()
        keys = []
        for _ in range(N // 8):
            _, k = p.run()
            keys += [int(np.array(k[i]).reshape(-1)[0]) for i in range(len(k))]
    assert len(keys) == N and len(set(keys)) == N


def test_dali_fallback_takes_coalesce(small, hosts):
    dali = pytest.importorskip("nvidia.dali")
    import cqlstream.dali as cd
    b = 8

    @dali.pipeline_def(batch_size=b, num_threads=1, device_id=None)
    def pipe():
        data, labels = cd.reader(small.name, hosts=hosts.split(","), shuffle=False, use_plugin=False, coalesce=1)
        return data, labels

    p = pipe()
    p.build()
    got = set()
    for _ in range(N // b):
        data, _ = p.run()
        got |= {np.array(data[i]).tobytes() for i in range(len(data))}
    assert got == set(small.by_content)



def test_ingest_pack_writes_the_packs_in_the_same_command(tmp_path, hosts):
    # `ingest --pack`: one command from a folder of small files to a
    # dataset that packed=True reads; run again, it writes nothing new.
    by_content = _write_small_images(tmp_path)
    name = unique_name("py_ingpack")
    try:
        bad = run_cli("ingest", "--dataset", name, "--pack-size", "8", str(tmp_path), check=False)
        assert bad.returncode == 2 and "--pack-size requires --pack" in bad.stdout + bad.stderr
        out = run_cli("ingest", "--dataset", name, "--pack", "--pack-size", "8", str(tmp_path)).stdout
        assert f"ingested {N} samples" in out and "packed 120 samples into 15 packs" in out, out
        again = run_cli("ingest", "--dataset", name, "--pack", "--pack-size", "8", str(tmp_path)).stdout
        assert "already packed" in again and "packed 0 samples into 0 packs" in again, again
        with cqlstream.Loader(name, batch_size=16, hosts=hosts, packed=True, epochs=1) as loader:
            got = [bytes(b[i]) for b in loader for i in range(len(b))]
            m = loader.metrics()
        assert len(got) == N and set(got) == set(by_content)
        assert m["packed_requests"] == 15 and m["pack_fallbacks"] == 0
    finally:
        run_cli("drop", name, "--yes", check=False)
