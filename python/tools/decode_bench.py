#!/usr/bin/env python3
"""Decode throughput of cqlstream's C++ decoder (cqlstream.decode_images), with Pillow as a reference.

usage: .venv/bin/python python/tools/decode_bench.py [--fashion DIR] [--threads 1,2] [--seconds 3]

Cases: Fashion-MNIST PNGs (28x28 gray, from DIR as written by
scripts/fashion_mnist_to_png.py; skipped without it), synthetic photo-like
JPEGs of 500x375 (~ImageNet) and 1600x1200 to 224x224x3 (resize + centre
crop; the large ones with and without JPEG DCT scaling). Prints images/s.
"""

from __future__ import annotations

import argparse
import io
import time
from pathlib import Path

import numpy as np
from PIL import Image

import cqlstream


def photo(rng: np.random.Generator, w: int, h: int) -> bytes:
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    base = np.stack([128 + 90 * np.sin(x * rng.uniform(0.01, 0.05) + y * rng.uniform(0.01, 0.05) + k)
                     for k in range(3)], axis=-1)
    arr = np.clip(base + rng.normal(0, 25, base.shape), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def rate(fn, n_per_call: int, seconds: float) -> float:
    fn()  # warm up
    t0, calls = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        fn()
        calls += 1
    return calls * n_per_call / (time.perf_counter() - t0)


def pil_decode(data: bytes, size: tuple[int, int], channels: int) -> np.ndarray:
    im = Image.open(io.BytesIO(data))
    im.draft("L" if channels == 1 else "RGB", (size[1], size[0]))
    im = im.convert("L" if channels == 1 else "RGB")
    w, h = im.size
    s = max(size[0] / h, size[1] / w)
    im = im.resize((max(size[1], round(w * s)), max(size[0], round(h * s))), Image.BILINEAR)
    left, top = (im.size[0] - size[1]) // 2, (im.size[1] - size[0]) // 2
    return np.asarray(im.crop((left, top, left + size[1], top + size[0])))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--fashion", default="bench/data/py_fashion")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--seconds", type=float, default=3.0)
    args = p.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    rng = np.random.default_rng(0)
    cases = []
    fashion = sorted((Path(args.fashion) / "train").glob("*/*.png"))[:2048]
    if fashion:
        cases.append(("Fashion-MNIST PNG 28x28 gray -> 28x28x1", [f.read_bytes() for f in fashion], (28, 28), 1, True))
    mid = [photo(rng, 500, 375) for _ in range(64)]
    big = [photo(rng, 1600, 1200) for _ in range(16)]
    cases.append((f"JPEG 500x375 ({np.mean([len(b) for b in mid]) / 1e3:.0f} kB) -> 224x224x3", mid, (224, 224), 3, True))
    cases.append((f"JPEG 1600x1200 ({np.mean([len(b) for b in big]) / 1e3:.0f} kB) -> 224x224x3, DCT scaling",
                  big, (224, 224), 3, True))
    cases.append(("JPEG 1600x1200 -> 224x224x3, full decode", big, (224, 224), 3, False))
    print(f"{'case':58} " + " ".join(f"{f'{t} thread(s)':>12}" for t in threads) + f" {'Pillow, 1':>12}")
    for name, blobs, size, ch, scaling in cases:
        row = []
        for t in threads:
            row.append(rate(lambda: cqlstream.decode_images(blobs, size, channels=ch, jpeg_scaling=scaling,
                                                            threads=t), len(blobs), args.seconds))
        sub = blobs[: max(1, len(blobs) // 8)]
        pil = rate(lambda: [pil_decode(b, size, ch) for b in sub], len(sub), args.seconds) if scaling else float("nan")
        print(f"{name:58} " + " ".join(f"{r:12,.0f}" for r in row) + f" {pil:12,.0f}")


if __name__ == "__main__":
    main()
