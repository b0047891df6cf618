#!/usr/bin/env python3
"""Writes Debian's Fashion-MNIST (package dataset-fashion-mnist) as a folder of PNG files.

usage: scripts/fashion_mnist_to_png.py OUT_DIR [--limit N] [--source DIR] [--jobs J]

Layout: OUT_DIR/{train,test}/<class name>/<index>.png, where <index> is the
image's position in its split, zero-padded to 5 digits (train 00000-59999,
test 00000-09999), and the class names are those of the data set's README
("T-shirt_top", "Trouser", ... with "/" and " " made file-name safe).

Each PNG is 28x28 8-bit grayscale, made with zlib from the standard library
only, so the bytes are the same on every run. Existing files with the right
bytes are left alone (the script is idempotent); others are rewritten
atomically. --limit N keeps the first N images of each split.
"""

import argparse
import gzip
import os
import struct
import subprocess
import sys
import time
import zlib
from multiprocessing import Pool

CLASSES = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle_boot"]
SPLITS = {"train": "train", "test": "t10k"}
DEFAULT_SOURCE = "/usr/share/datasets/fashion-mnist"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def find_source():
    """The folder holding the IDX files, as installed by dataset-fashion-mnist."""
    try:
        out = subprocess.run(["dpkg", "-L", "dataset-fashion-mnist"], capture_output=True,
                             text=True, check=True).stdout
        for path in out.splitlines():
            if os.path.basename(path).startswith("train-images-idx3-ubyte"):
                return os.path.dirname(path)
    except (OSError, subprocess.CalledProcessError):
        pass
    return DEFAULT_SOURCE


def read_idx(folder, stem, limit=None):
    """The dimensions of an IDX file (gzipped or not) and its first `limit` items."""
    for name, opener in ((stem + ".gz", gzip.open), (stem, open)):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            break
    else:
        sys.exit(f"fashion_mnist_to_png: {stem}[.gz] not found in {folder} "
                 "(install the Debian package dataset-fashion-mnist: scripts/install)")
    with opener(path, "rb") as f:
        magic, = struct.unpack(">I", f.read(4))
        ndim = magic & 0xFF
        if magic >> 8 != 0x08 or ndim not in (1, 3):
            sys.exit(f"fashion_mnist_to_png: {path}: not an unsigned-byte IDX file")
        dims = struct.unpack(">" + "I" * ndim, f.read(4 * ndim))
        count = dims[0] if limit is None else min(dims[0], limit)
        item = 1
        for d in dims[1:]:
            item *= d
        body = f.read(count * item)
    if len(body) != count * item:
        sys.exit(f"fashion_mnist_to_png: {path}: truncated ({len(body)} of {count * item} bytes)")
    return dims, body


def chunk(kind, payload):
    return (struct.pack(">I", len(payload)) + kind + payload
            + struct.pack(">I", zlib.crc32(kind + payload) & 0xFFFFFFFF))


def png_gray8(pixels, width, height):
    """An 8-bit grayscale PNG; every row with filter type 0 (none)."""
    raw = b"".join(b"\x00" + pixels[y * width:(y + 1) * width] for y in range(height))
    return (PNG_SIGNATURE
            + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b""))


def write_batch(job):
    """Writes one batch of images; returns (written, unchanged)."""
    out_dir, split, first, labels, pixels, width, height = job
    size = width * height
    written = unchanged = 0
    for k, label in enumerate(labels):
        index = first + k
        png = png_gray8(pixels[k * size:(k + 1) * size], width, height)
        path = os.path.join(out_dir, split, CLASSES[label], f"{index:05d}.png")
        try:
            with open(path, "rb") as f:
                if f.read() == png:
                    unchanged += 1
                    continue
        except FileNotFoundError:
            pass
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(png)
        os.replace(tmp, path)
        written += 1
    return written, unchanged


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out_dir", metavar="OUT_DIR")
    p.add_argument("--limit", type=int, help="keep the first N images of each split")
    p.add_argument("--source", help="folder with the IDX files (default: from dpkg -L dataset-fashion-mnist)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    args = p.parse_args()
    if args.limit is not None and args.limit < 0:
        p.error("--limit must be >= 0")

    t0 = time.monotonic()
    source = args.source or find_source()
    jobs, total = [], 0
    batch = 1000
    for split, stem in SPLITS.items():
        (count, height, width), pixels = read_idx(source, f"{stem}-images-idx3-ubyte", args.limit)
        (nlabels,), labels = read_idx(source, f"{stem}-labels-idx1-ubyte", args.limit)
        if nlabels != count:
            sys.exit(f"fashion_mnist_to_png: {split}: {count} images but {nlabels} labels")
        if labels and max(labels) >= len(CLASSES):
            sys.exit(f"fashion_mnist_to_png: {split}: label {max(labels)} out of range")
        n = len(labels)
        for name in CLASSES:
            os.makedirs(os.path.join(args.out_dir, split, name), exist_ok=True)
        size = width * height
        for first in range(0, n, batch):
            last = min(n, first + batch)
            jobs.append((args.out_dir, split, first, labels[first:last],
                         pixels[first * size:last * size], width, height))
        total += n

    written = unchanged = 0
    with Pool(max(1, args.jobs)) as pool:
        for w, u in pool.imap_unordered(write_batch, jobs):
            written += w
            unchanged += u
    print(f"fashion_mnist_to_png: {total} images in {args.out_dir} "
          f"({written} written, {unchanged} unchanged) in {time.monotonic() - t0:.1f} s")


if __name__ == "__main__":
    main()
