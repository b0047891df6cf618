"""Decoding in C++ (decode=...): correctness against Pillow, pipelining, bad samples."""

from __future__ import annotations

import io
import time

import numpy as np
import pytest
from PIL import Image

import cqlstream
from conftest import run_cli, unique_name, write_image_set


def plan(h: int, w: int, H: int, W: int, mode: str):
    """Mirror of loader::PlanResize (src/loader/decode.h)."""
    if mode == "stretch":
        rh, rw = H, W
    elif H * w >= W * h:
        rh, rw = H, max(W, (2 * w * H + h) // (2 * h))
    else:
        rh, rw = max(H, (2 * h * W + w) // (2 * w)), W
    s = min(w // rw, h // rh)
    s = 8 if s >= 8 else 4 if s >= 4 else 2 if s >= 2 else 1
    return rh, rw, (rh - H) // 2, (rw - W) // 2, s


def pil_decode(data: bytes, H: int, W: int, C: int, mode: str) -> np.ndarray:
    """The same pipeline with Pillow: draft (JPEG DCT scaling), convert, BILINEAR resize, centre crop."""
    im = Image.open(io.BytesIO(data))
    w, h = im.size
    rh, rw, top, left, s = plan(h, w, H, W, mode)
    pmode = "L" if C == 1 else "RGB"
    if im.format == "JPEG":
        im.draft(pmode, (rw, rh) if s > 1 else None)
    im = im.convert(pmode)
    if im.size != (rw, rh):
        im = im.resize((rw, rh), Image.BILINEAR)
    a = np.asarray(im.crop((left, top, left + W, top + H)))
    return a[..., None] if C == 1 else a


CONFIGS = [
    ((28, 28), 1, "crop"),
    ((32, 24), 3, "crop"),
    ((40, 56), 3, "stretch"),
    ((64, 64), 3, "crop"),  # mostly upscaling; the large images get DCT scaling
    ((100, 150), 1, "stretch"),
]


@pytest.mark.parametrize("size,channels,mode", CONFIGS)
def test_decode_image_matches_pillow(images, size, channels, mode):
    worst = {"png": 0, "jpg": 0}
    for s in images.samples:
        ours = cqlstream.decode_image(s.data, size, channels=channels, mode=mode)[0]
        ref = pil_decode(s.data, *size, channels, mode)
        assert ours.shape == ref.shape == (size[0], size[1], channels)
        d = int(np.abs(ours.astype(int) - ref.astype(int)).max())
        kind = s.path.suffix[1:]
        worst[kind] = max(worst[kind], d)
    # PNG: the same pixels and Pillow's resampling arithmetic; Pillow 13 does
    # the vertical pass first for some shapes (rounding moves by one).
    assert worst["png"] <= 1, worst
    # JPEG: libjpeg-turbo here and the one bundled with Pillow may round a
    # few IDCT outputs differently.
    assert worst["jpg"] <= 2, worst


def test_decode_without_resize_is_identical(tmp_path):
    rng = np.random.default_rng(3)
    for mode in ("L", "RGB"):
        arr = rng.integers(0, 256, size=(28, 28) + (() if mode == "L" else (3,)), dtype=np.uint8)
        buf = io.BytesIO()
        Image.fromarray(arr, mode).save(buf, "PNG")
        ours = cqlstream.decode_image(buf.getvalue(), (28, 28), channels=1 if mode == "L" else 3)[0]
        assert np.array_equal(ours.reshape(arr.shape), arr)
        buf = io.BytesIO()
        Image.fromarray(arr, mode).save(buf, "JPEG", quality=85)
        ours = cqlstream.decode_image(buf.getvalue(), (28, 28), channels=1 if mode == "L" else 3)[0]
        ref = np.asarray(Image.open(io.BytesIO(buf.getvalue())))
        assert np.abs(ours.reshape(ref.shape).astype(int) - ref).max() <= 1


def test_decode_errors_are_clear():
    with pytest.raises(cqlstream.UnsupportedError, match="not a JPEG or PNG"):
        cqlstream.decode_image(b"hello world", (8, 8))
    with pytest.raises(cqlstream.UnsupportedError, match="WebP"):
        cqlstream.decode_image(b"RIFF\0\0\0\0WEBPVP8 ", (8, 8))
    with pytest.raises(cqlstream.InvalidArgumentError, match="size"):
        cqlstream.decode_image(b"x", (0, 8))
    with pytest.raises(cqlstream.InvalidArgumentError, match="mode"):
        cqlstream.decode_image(b"x", (8, 8), mode="fill")


def test_ctrl_c_ends_decode_images():
    """decode_images of many JPEGs ran to its end before Python looked at its signals (the test sizes it to about
    6 s on one thread); it now runs on a thread of its own while Python handles signals: Ctrl-C ends it within the
    images in hand and raises KeyboardInterrupt. The same call without the interrupt still decodes every image."""
    from conftest import ctrl_c_after

    # A smooth 1536 x 1536 JPEG (about 100 kB), decoded whole and resized:
    # milliseconds each, few bytes to copy in.
    y, x = np.mgrid[0:1536, 0:1536]
    arr = np.stack([x * 255 // 1535, y * 255 // 1535, (x + y) * 255 // 3070], -1).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr, "RGB").save(buf, "JPEG", quality=90)
    one = buf.getvalue()
    start = time.monotonic()
    cqlstream.decode_images([one] * 8, (64, 64), threads=1, jpeg_scaling=False)
    per_image = (time.monotonic() - start) / 8
    blobs = [one] * max(16, int(6.0 / per_image))  # about 6 s of decoding on one thread
    with ctrl_c_after(0.3) as t, pytest.raises(KeyboardInterrupt):
        cqlstream.decode_images(blobs, (64, 64), threads=1, jpeg_scaling=False)
    assert t["waited"] < 0.3 + 1.0 + 2 * per_image, f"decode_images held Ctrl-C for {t['waited'] - 0.3:.1f} s"
    frames = cqlstream.decode_images(blobs[:4], (64, 64), threads=2)
    assert frames.shape == (4, 64, 64, 3)


def test_loader_decodes_like_pillow(images, loader_kwargs):
    n = images.count("train")
    by_content = images.by_content("train")
    raw = {}
    with cqlstream.Loader(images.name, batch_size=32, shuffle=False, **loader_kwargs) as l:
        for b in l:
            for i in range(len(b)):
                raw[int(b.keys[i])] = bytes(b[i])
    seen = 0
    with cqlstream.Loader(images.name, batch_size=32, decode=(24, 20), **loader_kwargs) as l:
        for b in l:
            imgs = b.images
            assert imgs.shape == (len(b), 24, 20, 3) and imgs.dtype == np.uint8
            assert imgs.flags.c_contiguous and imgs.ctypes.data == b.address
            with pytest.raises(ValueError, match="images"):
                b.data
            for i in range(len(b)):
                data = raw[int(b.keys[i])]
                ref = pil_decode(data, 24, 20, 3, "crop")
                tol = 1 if data.startswith(b"\x89PNG") else 2
                assert np.abs(imgs[i].astype(int) - ref).max() <= tol
                assert b[i].ctypes.data == b.address + i * 24 * 20 * 3
                assert l.class_names[b.labels[i]] == by_content[data].cls
                seen += 1
    assert seen == n


def test_decoded_batches_to_torch(images, loader_kwargs):
    import torch

    with cqlstream.Loader(images.name, batch_size=16, decode={"size": (8, 6), "channels": 3}, **loader_kwargs) as l:
        b = next(iter(l))
        nhwc = b.torch()
        assert nhwc.shape == (len(b), 8, 6, 3) and nhwc.dtype == torch.uint8
        assert nhwc.data_ptr() == b.address
        nchw = b.torch("NCHW")
        assert nchw.shape == (len(b), 3, 8, 6) and nchw.data_ptr() == b.address
        assert torch.equal(nchw, nhwc.permute(0, 3, 1, 2))
        t = torch.from_dlpack(b.images)
        assert t.data_ptr() == b.address and torch.equal(t, nhwc)
        with pytest.raises(ValueError, match="layout"):
            b.torch("CHW")


def test_decoding_overlaps_the_training_step(images, loader_kwargs):
    # Each batch costs ~0.1-0.3 s to decode (large frames, one thread) and the
    # "training step" sleeps as long: with the pipeline the wall time is far
    # below decode + training.
    with cqlstream.Loader(images.name, batch_size=15, decode=(512, 512), decode_threads=1, prefetch=2,
                          shuffle=False, **loader_kwargs) as l:
        it = iter(l)
        next(it)
        step, waited, batches = 0.0, 0.0, 0
        d0, cw0 = l.metrics()["decode_s"], l.metrics()["wait_s"]
        t0 = time.monotonic()
        while True:
            w0 = time.monotonic()
            b = next(it, None)
            waited += time.monotonic() - w0
            if b is None:
                break
            batches += 1
            per = (l.metrics()["decode_s"] - d0) / batches
            time.sleep(per)  # "training" as long as decoding a batch
            step += per
        wall = time.monotonic() - t0
        decode = l.metrics()["decode_s"] - d0
        cwait = l.metrics()["wait_s"] - cw0  # the same waits, measured in C++
    assert batches >= 4
    assert wall < 0.85 * (decode + step), (wall, decode, step)
    assert waited < 0.5 * decode, (waited, decode)
    assert 0 <= cwait <= waited + 0.01, (cwait, waited)


@pytest.fixture()
def bad_dataset(tmp_path_factory, hosts):
    """5 PNGs; one's image data is cut short (its header is fine, so ingest takes it)."""
    root = tmp_path_factory.mktemp("bad")
    samples = write_image_set(root, {"train": 2}, seed=7)
    rng = np.random.default_rng(1)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (60, 60, 3), dtype=np.uint8), "RGB").save(buf, "PNG")
    cut = buf.getvalue()[: len(buf.getvalue()) // 2]
    (root / "train" / "cat" / "bad.png").write_bytes(cut)
    name = unique_name("py_bad")
    run_cli("ingest", "--dataset", name, str(root))
    yield name, len(samples) + 1
    run_cli("drop", name, "--yes", check=False)


def key_of_path(name: str, hosts: str, path: str) -> int:
    from cassandra.cluster import Cluster

    cluster = Cluster(hosts.split(","))
    try:
        s = cluster.connect()
        for r in s.execute(f"SELECT seg, idx, path FROM cqlstream.m_{name}"):
            if r.path == path:
                return cqlstream.make_key(r.seg, r.idx)
    finally:
        cluster.shutdown()
    raise AssertionError(f"{path} not found in m_{name}")


def test_undecodable_sample_is_named_or_skipped(bad_dataset, hosts, loader_kwargs):
    name, n = bad_dataset
    key = key_of_path(name, hosts, "train/cat/bad.png")
    with cqlstream.Loader(name, batch_size=n, decode=(16, 16), **loader_kwargs) as l:
        with pytest.raises(cqlstream.CorruptionError) as e:
            list(l)
    assert f"sample {cqlstream.format_key(key)}" in str(e.value) and "PNG" in str(e.value)
    with cqlstream.Loader(name, batch_size=n, decode=(16, 16), on_missing="skip", **loader_kwargs) as l:
        batches = list(l)
        assert sum(len(b) for b in batches) == n - 1
        assert key not in {int(k) for b in batches for k in b.keys}
        assert l.metrics()["decode_skipped"] == 1


def test_missing_sample_names_key_and_path(bad_dataset, hosts, loader_kwargs):
    from cassandra.cluster import Cluster

    name, n = bad_dataset
    # The last dog image: delete its data rows (its metadata stays).
    cluster = Cluster(hosts.split(","))
    try:
        s = cluster.connect()
        rows = [r for r in s.execute(f"SELECT seg, idx, path FROM cqlstream.m_{name}") if r.path.startswith("train/dog/")]
        victim = sorted(rows, key=lambda r: r.path)[-1]
        s.execute(f"DELETE FROM cqlstream.d_{name} WHERE seg = %s AND idx = %s", (victim.seg, victim.idx))
    finally:
        cluster.shutdown()
    path = victim.path
    key = cqlstream.format_key(cqlstream.make_key(victim.seg, victim.idx))
    with cqlstream.Loader(name, batch_size=2, **loader_kwargs) as l:
        with pytest.raises(cqlstream.NotFoundError) as e:
            list(l)
    assert key in str(e.value) and path in str(e.value), str(e.value)
    with cqlstream.Loader(name, batch_size=2, on_missing="skip", **loader_kwargs) as l:
        assert sum(len(b) for b in l) == n - 1
        assert l.metrics()["skipped"] == 1
