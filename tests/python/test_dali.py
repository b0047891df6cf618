"""The DALI front end against the local Cassandra node (CPU only).

fn.cqlstream.reader (plugin): loading, exactly-once epochs across 1, 2 and 3
shards, labels, CPU decoding compared with PIL, DALI's PyTorch iterator with
reader_name, checkpoints mid-epoch, errors naming the missing sample, blob
targets and multilabels, zero_copy on/off; fn.cqlstream.keys_reader; the
external_source fallback over cqlstream.Loader.

Needs: the plugin (CQLSTREAM_DALI_PLUGIN, or <repo>/$CQLSTREAM_BUILD_DIR/plugins/dali/, built with
-DCQLSTREAM_BUILD_DALI=ON), the cqlstream CLI (to ingest; CQLSTREAM_CLI or
$CQLSTREAM_BUILD_DIR/src/cli/cqlstream) and the node (CQLSTREAM_TEST_HOSTS).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from conftest import run_cli

import cqlstream.dali as cd
from nvidia.dali import fn, pipeline_def, types

HOSTS = os.environ.get("CQLSTREAM_TEST_HOSTS", "127.0.0.1").split(",")
RUN = os.getpid() % 100000
N = 23  # samples of the class dataset: uneven for 2 and 3 shards
B = 4


def drop(name: str) -> None:
    run_cli("drop", name, "--yes", check=False)


def key(seg: int, idx: int) -> int:
    return (seg << 32) | idx


def ints(tl) -> list[int]:
    return [int(np.array(tl[i]).reshape(-1)[0]) for i in range(len(tl))]


class Dataset:
    """A dataset made for the tests: its name, and per index its file, label and bytes."""

    def __init__(self, name: str, root: Path, paths: list[str], labels: list[int]):
        self.name = name
        self.root = root
        self.paths = paths  # index order (sorted relative paths)
        self.labels = labels
        self.bytes = [(root / p).read_bytes() for p in paths]

    @property
    def keys(self) -> list[int]:
        return [key(0, i) for i in range(len(self.paths))]


def make_class_dataset(tmp: Path, name: str, n: int) -> Dataset:
    rng = np.random.default_rng(7)
    rels = []
    for i in range(n):
        cls = f"c{i % 3}"
        ext = "png" if i % 4 == 0 else "jpg"
        rel = f"{cls}/s{i:03d}.{ext}"
        (tmp / cls).mkdir(parents=True, exist_ok=True)
        h, w = 12 + (i * 5) % 23, 10 + (i * 3) % 17
        # Smooth content so that JPEG decoders agree closely.
        y, x = np.mgrid[0:h, 0:w]
        a = np.stack([(x * 9 + i * 7) % 256, (y * 11) % 256, ((x + y) * 5 + i) % 256], axis=-1).astype(np.uint8)
        a = np.clip(a.astype(int) + rng.integers(-3, 4, a.shape), 0, 255).astype(np.uint8)
        Image.fromarray(a).save(tmp / rel, **({"quality": 95} if ext == "jpg" else {}))
        rels.append(rel)
    paths = sorted(rels, key=lambda s: s.encode())
    labels = [int(p.split("/")[0][1:]) for p in paths]
    drop(name)
    run_cli("ingest", "--dataset", name, str(tmp), "--split", "train")
    return Dataset(name, tmp, paths, labels)


@pytest.fixture(scope="module")
def cls_ds(tmp_path_factory) -> Dataset:
    name = f"dali_t{RUN}_cls"
    ds = make_class_dataset(tmp_path_factory.mktemp("cls"), name, N)
    yield ds
    drop(name)


@pytest.fixture(scope="module")
def missing_ds(tmp_path_factory) -> Dataset:
    from cassandra.cluster import Cluster

    name = f"dali_t{RUN}_miss"
    ds = make_class_dataset(tmp_path_factory.mktemp("miss"), name, 10)
    cluster = Cluster(HOSTS)
    try:
        cluster.connect().execute(f"DELETE FROM cqlstream.d_{name} WHERE seg = 0 AND idx = 4")
    finally:
        cluster.shutdown()
    yield ds
    drop(name)


@pytest.fixture(autouse=True, scope="module")
def plugin():
    assert cd.load_plugin(), cd.plugin_error()


def reader_pipe(ds: Dataset, *, batch_size: int = B, checkpoint=None, enable_checkpointing=False,
                dense_only=False, **kw):
    """(data, labels, keys); dense_only: (labels, keys), what a framework iterator can stack."""
    kw.setdefault("output_keys", True)
    kw.setdefault("hosts", HOSTS)

    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, enable_checkpointing=enable_checkpointing)
    def pipe():
        out = cd.reader(ds.name, **kw)
        return out[1:] if dense_only else out

    p = pipe(checkpoint=checkpoint) if checkpoint is not None else pipe()
    p.build()
    return p


def dali_shard_size(n: int, i: int, s: int) -> int:
    return (i + 1) * n // s - i * n // s


def batches_per_epoch(n: int, s: int, b: int) -> int:
    return -(-(-(-n // s)) // b)


def run_epoch(p, n_batches: int) -> list[tuple[int, int]]:
    """(key, label) of every slot of n_batches iterations, padding included."""
    out = []
    for _ in range(n_batches):
        data, labels, keys = p.run()
        out += list(zip(ints(keys), ints(labels)))
    return out


# ---------------------------------------------------------------------------


def test_plugin_loads_and_documents_itself():
    assert cd.plugin_loaded() and cd.plugin_error() is None
    assert cd.plugin_path() is not None and cd.plugin_path().endswith("libcqlstream_dali.so")
    doc = fn.cqlstream.reader.__doc__
    for word in ("pad_last_batch", "shard_id", "num_shards", "shuffle_seed", "on_missing", "zero_copy",
                 "output_target", "password_file", "exactly once"):
        assert word in doc, word
    assert "keys" in fn.cqlstream.keys_reader.__doc__


def test_one_shard_epochs_exactly_once_with_padding(cls_ds):
    p = reader_pipe(cls_ds)
    meta = p.reader_meta("Reader")
    assert meta == {"epoch_size": N, "epoch_size_padded": N, "number_of_shards": 1, "shard_id": 0,
                    "pad_last_batch": 1, "stick_to_shard": 1}
    nb = batches_per_epoch(N, 1, B)  # 6 batches, 24 slots
    orders = []
    for _ in range(2):
        slots = run_epoch(p, nb)
        real = [k for k, _ in slots[:N]]
        assert sorted(real) == cls_ds.keys  # every sample exactly once
        assert [k for k, _ in slots[N:]] == [real[-1]] * (nb * B - N)  # padding repeats the last
        orders.append(real)
    assert orders[0] != orders[1]  # a new shuffle every epoch


@pytest.mark.parametrize("num_shards", [2, 3])
def test_shards_are_disjoint_and_cover_the_split(cls_ds, num_shards):
    nb = batches_per_epoch(N, num_shards, B)
    pipes = [reader_pipe(cls_ds, shard_id=i, num_shards=num_shards) for i in range(num_shards)]
    for epoch in range(2):
        seen: list[int] = []
        for i, p in enumerate(pipes):
            meta = p.reader_meta("Reader")
            assert meta["shard_id"] == i and meta["number_of_shards"] == num_shards
            assert meta["epoch_size"] == N and meta["epoch_size_padded"] == -(-N // num_shards) * num_shards
            slots = run_epoch(p, nb)
            size = dali_shard_size(N, i, num_shards)  # what DALI's iterators expect of shard i
            real = [k for k, _ in slots[:size]]
            assert len(set(real)) == size
            assert all(k == real[-1] for k, _ in slots[size:])
            seen += real
        assert sorted(seen) == cls_ds.keys, f"epoch {epoch}"


def test_labels_match_the_class_folders(cls_ds):
    p = reader_pipe(cls_ds)
    for k, label in run_epoch(p, batches_per_epoch(N, 1, B)):
        assert label == cls_ds.labels[k & 0xFFFFFFFF]


def test_bytes_and_cpu_decoding_match_the_files_and_pil(cls_ds):
    @pipeline_def(batch_size=B, num_threads=2, device_id=None)
    def pipe():
        data, labels, keys = cd.reader(cls_ds.name, output_keys=True, hosts=HOSTS)
        return data, keys, fn.decoders.image(data, device="cpu", output_type=types.RGB)

    p = pipe()
    p.build()
    checked_png = checked_jpg = 0
    for _ in range(batches_per_epoch(N, 1, B)):
        data, keys, images = p.run()
        for i, k in enumerate(ints(keys)):
            idx = k & 0xFFFFFFFF
            assert np.array(data[i]).tobytes() == cls_ds.bytes[idx]
            ref = np.asarray(Image.open(cls_ds.root / cls_ds.paths[idx]).convert("RGB"))
            got = np.array(images[i])
            assert got.shape == ref.shape
            diff = np.abs(got.astype(int) - ref.astype(int))
            if cls_ds.paths[idx].endswith(".png"):
                assert diff.max() == 0
                checked_png += 1
            else:  # JPEG decoders may round differently
                assert diff.mean() < 1.5 and diff.max() <= 16
                checked_jpg += 1
    assert checked_png >= 2 and checked_jpg >= 2


def test_zero_copy_off_gives_the_same_bytes(cls_ds):
    p = reader_pipe(cls_ds, zero_copy=False, ordered=True)
    q = reader_pipe(cls_ds, zero_copy=True, ordered=True)
    for _ in range(batches_per_epoch(N, 1, B)):
        (d1, l1, k1), (d2, l2, k2) = p.run(), q.run()
        assert ints(k1) == ints(k2) and ints(l1) == ints(l2)
        assert [np.array(d1[i]).tobytes() for i in range(B)] == [np.array(d2[i]).tobytes() for i in range(B)]


def test_pytorch_iterator_with_reader_name_ends_epochs(cls_ds):
    from nvidia.dali.plugin.base_iterator import LastBatchPolicy
    from nvidia.dali.plugin.pytorch import DALIGenericIterator

    for num_shards in (1, 3):
        iters = [DALIGenericIterator([reader_pipe(cls_ds, shard_id=i, num_shards=num_shards, dense_only=True)],
                                     ["labels", "keys"], reader_name="Reader",
                                     last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True)
                 for i in range(num_shards)]
        for epoch in range(3):
            seen = []
            for i, it in enumerate(iters):
                sizes = []
                for batch in it:
                    keys = batch[0]["keys"].reshape(-1).tolist()
                    labels = batch[0]["labels"].reshape(-1).tolist()
                    assert [cls_ds.labels[k & 0xFFFFFFFF] for k in keys] == labels
                    sizes.append(len(keys))
                    seen += keys
                shard = dali_shard_size(N, i, num_shards)
                assert sum(sizes) == shard, (num_shards, i, epoch, sizes)
                assert len(sizes) == len(it)
            assert sorted(seen) == cls_ds.keys, (num_shards, epoch)


def test_torch_iterator_helper_and_image_pipeline(cls_ds):
    pipe = cd.image_pipeline(cls_ds.name, batch_size=B, num_threads=2, size=(8, 8), mean=[0, 0, 0],
                             std=[255, 255, 255], hosts=HOSTS)
    assert pipe.cqlstream_reader == "plugin"
    it = cd.torch_iterator(pipe, ["images", "labels"])
    n = 0
    for batch in it:
        images = batch[0]["images"]
        assert tuple(images.shape[1:]) == (3, 8, 8) and str(images.dtype) == "torch.float32"
        assert float(images.max()) <= 1.0
        n += images.shape[0]
    assert n == N


@pytest.mark.parametrize("ordered", [False, True])
def test_checkpoint_resumes_mid_epoch_exactly_once(cls_ds, ordered):
    num_shards, shard = 2, 1
    size = dali_shard_size(N, shard, num_shards)  # 12
    nb = batches_per_epoch(N, num_shards, B)  # 3
    p = reader_pipe(cls_ds, shard_id=shard, num_shards=num_shards, ordered=ordered, enable_checkpointing=True)
    before = run_epoch(p, 1)
    cpt = p.checkpoint()
    after_a = run_epoch(p, nb - 1 + nb)  # the rest of epoch 0, then epoch 1
    q = reader_pipe(cls_ds, shard_id=shard, num_shards=num_shards, ordered=ordered, enable_checkpointing=True,
                    checkpoint=cpt)
    assert q.is_restored_from_checkpoint
    after_b = run_epoch(q, nb - 1 + nb)
    for after in (after_a, after_b):
        epoch0 = [k for k, _ in before + after[:(nb - 1) * B]][:size]
        assert len(set(epoch0)) == size  # nothing twice, nothing lost
        epoch1 = [k for k, _ in after[(nb - 1) * B:]][:size]
        assert len(set(epoch1)) == size
    if ordered:
        assert after_a == after_b  # bit-for-bit the same continuation
    else:
        assert {k for k, _ in after_a[:(nb - 1) * B]} == {k for k, _ in after_b[:(nb - 1) * B]}


def test_checkpoint_through_the_pytorch_iterator(cls_ds):
    from nvidia.dali.plugin.base_iterator import LastBatchPolicy
    from nvidia.dali.plugin.pytorch import DALIGenericIterator

    def make(cpt=None):
        p = reader_pipe(cls_ds, enable_checkpointing=True, checkpoint=cpt, dense_only=True)
        return DALIGenericIterator([p], ["labels", "keys"], reader_name="Reader", auto_reset=True,
                                   last_batch_policy=LastBatchPolicy.PARTIAL)

    it = make()
    first = [next(it)[0]["keys"].reshape(-1).tolist() for _ in range(2)]
    cpts = it.checkpoints()
    rest = [b[0]["keys"].reshape(-1).tolist() for b in make(cpts[0])]  # the restored epoch's remainder
    keys = sum(first, []) + sum(rest, [])
    assert sorted(keys) == cls_ds.keys


def test_checkpoint_of_another_sharding_is_refused(cls_ds):
    p = reader_pipe(cls_ds, shard_id=0, num_shards=2, enable_checkpointing=True)
    p.run()
    cpt = p.checkpoint()
    with pytest.raises(RuntimeError, match="checkpoint was taken with shard_id=0 num_shards=2"):
        reader_pipe(cls_ds, shard_id=0, num_shards=3, enable_checkpointing=True, checkpoint=cpt).run()


def test_missing_sample_is_an_error_naming_key_and_path(missing_ds):
    p = reader_pipe(missing_ds, batch_size=3)
    with pytest.raises(RuntimeError) as e:
        for _ in range(batches_per_epoch(10, 1, 3)):
            p.run()
    msg = str(e.value)
    assert "0:4" in msg and missing_ds.paths[4] in msg, msg
    assert "fn.cqlstream.reader" in msg


def test_missing_sample_skipped_completes_the_epoch_with_padding(missing_ds):
    p = reader_pipe(missing_ds, batch_size=3, on_missing="skip")
    slots = run_epoch(p, batches_per_epoch(10, 1, 3))  # 12 slots
    real = [k for k, _ in slots]
    assert sorted(set(real)) == [k for k in missing_ds.keys if k != key(0, 4)]
    assert real[9:] == [real[8]] * 3


def test_bad_arguments_are_errors_at_build(cls_ds):
    with pytest.raises(RuntimeError, match=r"shard_id 2 is not in \[0, num_shards 2\)"):
        reader_pipe(cls_ds, shard_id=2, num_shards=2)
    with pytest.raises(RuntimeError, match="pad_last_batch=False is not supported"):
        _raw_reader(cls_ds.name, pad_last_batch=False)
    with pytest.raises(RuntimeError, match="dali_no_such_dataset"):
        _raw_reader("dali_no_such_dataset")
    with pytest.raises(RuntimeError, match="output_target=True needs a dataset with label kind 'target'"):
        _raw_reader(cls_ds.name, output_target=True)
    with pytest.raises(TypeError, match="no password= argument"):
        cd.reader(cls_ds.name, password="secret")
    # A number past 32 bits reaches the option kit whole (not wrapped to 1).
    with pytest.raises(RuntimeError, match=r"max_shard_connections must be in \[1, 65535\], got 4294967297"):
        _raw_reader(cls_ds.name, max_shard_connections=(1 << 32) + 1)


def _raw_reader(dataset: str, **kw):
    @pipeline_def(batch_size=B, num_threads=1, device_id=None)
    def pipe():
        return tuple(fn.cqlstream.reader(dataset=dataset, hosts=HOSTS, **kw))

    p = pipe()
    p.build()
    return p


def test_target_and_multilabel_outputs(tmp_path):
    root = tmp_path / "m"
    root.mkdir()
    rows_t, rows_m, targets = [], [], {}
    for i in range(5):
        img = np.full((6 + i, 7, 3), 40 * i, np.uint8)
        mask = np.full((6 + i, 7), i, np.uint8)
        Image.fromarray(img).save(root / f"x{i}.png")
        Image.fromarray(mask).save(root / f"x{i}.mask.png")
        targets[f"x{i}.png"] = (root / f"x{i}.mask.png").read_bytes()
        rows_t.append({"path": f"x{i}.png", "target": f"x{i}.mask.png"})
        rows_m.append({"path": f"x{i}.png", "labels": ";".join(["a", "b", "c"][: i % 3 + 1])})
    for fname, rows in (("t.csv", rows_t), ("m.csv", rows_m)):
        with open(root / fname, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    tname, mname = f"dali_t{RUN}_tgt", f"dali_t{RUN}_ml"
    drop(tname)
    drop(mname)
    try:
        run_cli("ingest", "--dataset", tname, str(root / "t.csv"))
        run_cli("ingest", "--dataset", mname, str(root / "m.csv"))
        paths = sorted(targets, key=lambda s: s.encode())

        @pipeline_def(batch_size=5, num_threads=1, device_id=None)
        def tpipe():
            data, labels, target, keys = cd.reader(tname, output_target=True, output_keys=True, ordered=True,
                                                   shuffle=False, hosts=HOSTS)
            return data, labels, target, keys, fn.decoders.image(target, device="cpu", output_type=types.GRAY)

        p = tpipe()
        p.build()
        data, labels, target, keys, masks = p.run()
        for i, k in enumerate(ints(keys)):
            path = paths[k & 0xFFFFFFFF]
            assert np.array(data[i]).tobytes() == (root / path).read_bytes()
            assert np.array(target[i]).tobytes() == targets[path]
            assert int(np.array(masks[i]).max()) == int(path[1])  # the mask's value is its index
            assert ints(labels)[i] == -1

        @pipeline_def(batch_size=5, num_threads=1, device_id=None)
        def mpipe():
            data, labels, keys = cd.reader(mname, output_keys=True, shuffle=False, hosts=HOSTS)
            return labels, keys

        q = mpipe()
        q.build()
        labels, keys = q.run()
        for i, k in enumerate(ints(keys)):
            n = int(paths[k & 0xFFFFFFFF][1]) % 3 + 1
            assert np.array(labels[i]).tolist() == list(range(n))  # classes a, b, c -> 0, 1, 2
    finally:
        drop(tname)
        drop(mname)


def _npy(a: np.ndarray) -> bytes:
    import io

    f = io.BytesIO()
    np.lib.format.write_array(f, a, allow_pickle=False)
    return f.getvalue()


def test_npy_output_gives_typed_tensors(tmp_path, cls_ds):
    """output="npy" / target_output="npy" on a blob dataset (--kind blob): float32 inputs (one of them
    written big-endian) and uint8 masks come out as typed tensors equal to what was written."""
    root = tmp_path / "npy"
    root.mkdir()
    inputs, masks, rows = {}, {}, []
    for i in range(6):
        x = np.arange(12, dtype=np.float32).reshape(3, 4) * (i + 1)
        x[0, 0] = i
        inputs[i], masks[i] = x, np.full((3, 4), 10 + i, np.uint8)
        (root / f"x{i}.npy").write_bytes(_npy(x.astype(">f4") if i == 3 else x))
        (root / f"m{i}.npy").write_bytes(_npy(masks[i]))
        rows.append({"path": f"x{i}.npy", "target": f"m{i}.npy"})
    with open(root / "t.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["path", "target"])
        w.writeheader()
        w.writerows(rows)
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for i in range(4):
        (mixed / f"a{i}.npy").write_bytes(_npy(np.zeros((2,) if i % 2 else (2, 2), np.int32)))
    name, mname = f"dali_t{RUN}_npy", f"dali_t{RUN}_npymix"
    drop(name)
    drop(mname)
    try:
        run_cli("ingest", "--dataset", name, "--kind", "blob", str(root / "t.csv"))
        run_cli("ingest", "--dataset", mname, "--kind", "blob", "--labels", "none", str(mixed))
        for zero_copy in (True, False):
            p = _raw_reader(name, output="npy", output_target=True, target_output="npy", zero_copy=zero_copy)
            seen = set()
            for _ in range(2):
                data, labels, target = p.run()
                assert data.dtype == types.FLOAT and target.dtype == types.UINT8
                for i in range(len(data)):
                    a, m = np.array(data[i]), np.array(target[i])
                    ident = int(a[0, 0])
                    assert a.dtype == np.float32 and a.shape == (3, 4)
                    np.testing.assert_array_equal(a, inputs[ident])
                    np.testing.assert_array_equal(m, masks[ident])
                    seen.add(ident)
            assert seen == set(inputs)
        # Targets kept as bytes with output="npy" for the data; through the cqlstream.dali wrapper.
        @pipeline_def(batch_size=B, num_threads=1, device_id=None)
        def wrapped():
            return tuple(cd.reader(name, output="npy", output_target=True, hosts=HOSTS))

        w = wrapped()
        w.build()
        data, labels, target = w.run()
        for i in range(len(data)):
            assert np.array(target[i]).tobytes() == _npy(masks[int(np.array(data[i])[0, 0])])
        with pytest.raises(RuntimeError, match="must share dtype and number of dimensions"):
            _raw_reader(mname, output="npy", shuffle=False).run()
        with pytest.raises(RuntimeError, match="output='npy' decodes .npy arrays out of datasets of sample kind 'blob'"):
            _raw_reader(cls_ds.name, output="npy")
        with pytest.raises(RuntimeError, match="output must be 'bytes' or 'npy', not 'png'"):
            _raw_reader(name, output="png")
        with pytest.raises(RuntimeError, match="target_output='npy' decodes the target output"):
            _raw_reader(name, target_output="npy")
        with pytest.raises(ValueError, match="need the native plugin"):
            cd.reader(name, output="npy", use_plugin=False)
    finally:
        drop(name)
        drop(mname)


def test_keys_reader_fetches_on_demand(cls_ds):
    wanted = [key(0, 5), key(0, 0), key(0, 22), key(0, 5)]

    @pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        keys = fn.external_source(source=lambda: [np.array(k, dtype=np.int64) for k in wanted], batch=True,
                                  dtype=types.INT64)
        data, labels = cd.keys_reader(keys, cls_ds.name, hosts=HOSTS)
        return data, labels

    p = pipe()
    p.build()
    data, labels = p.run()
    for i, k in enumerate(wanted):
        assert np.array(data[i]).tobytes() == cls_ds.bytes[k & 0xFFFFFFFF]
        assert ints(labels)[i] == cls_ds.labels[k & 0xFFFFFFFF]

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def bad():
        keys = fn.external_source(source=lambda: [np.array(key(0, 1), np.int64), np.array(key(0, 999), np.int64)],
                                  batch=True, dtype=types.INT64)
        return cd.keys_reader(keys, cls_ds.name, hosts=HOSTS)[0]

    b = bad()
    b.build()
    with pytest.raises(RuntimeError, match="0:999"):
        b.run()


def test_external_source_fallback(cls_ds):
    # The fallback runs on the cqlstream bindings (cqlstream._core).
    pipe = cd.image_pipeline(cls_ds.name, batch_size=B, num_threads=2, use_plugin=False, size=(8, 8),
                             hosts=HOSTS)
    assert pipe.cqlstream_reader == "fallback"
    it = cd.torch_iterator(pipe, ["images", "labels"])
    for epoch in range(2):
        sizes, labels = [], []
        for batch in it:
            sizes.append(batch[0]["images"].shape[0])
            labels += batch[0]["labels"].reshape(-1).tolist()
        assert sum(sizes) == N and sizes[-1] == N % B, (epoch, sizes)
        assert sorted(labels) == sorted(cls_ds.labels)

    @pipeline_def(batch_size=B, num_threads=1, device_id=None)
    def raw():
        return cd.reader(cls_ds.name, use_plugin=False, output_keys=True, hosts=HOSTS)

    p = raw()
    p.build()
    seen = []
    while True:
        try:
            data, labels, keys = p.run()
        except StopIteration:
            break
        for i, k in enumerate(ints(keys)):
            assert np.array(data[i]).tobytes() == cls_ds.bytes[k & 0xFFFFFFFF]
            assert ints(labels)[i] == cls_ds.labels[k & 0xFFFFFFFF]
        seen += ints(keys)
    assert sorted(seen) == cls_ds.keys
