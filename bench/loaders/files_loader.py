#!/usr/bin/env python3
"""The local-disk reference: the same images read as files from a local
image folder (FOLDER/SPLIT/<class>/<file>), no network.

  --kind torch  PyTorch DataLoader, shuffled, --workers worker processes, each
                sample the file's bytes (no decoding, as `cqlstream bench`);
  --kind dali   DALI's fn.readers.file in a CPU pipeline (device_id=None),
                shuffled, --workers threads; --decode adds
                fn.decoders.image(device="cpu") (off by default: no decoding).

The files sit in the page cache after the warm-up epoch (the machine has far
more memory than the data), so this is the bound of a loader that does no
network I/O at all rather than of a disk.
"""
import os
import sys

import common


def list_files(root):
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    files = []
    for i, c in enumerate(classes):
        d = os.path.join(root, c)
        for f in sorted(os.listdir(d)):
            files.append((os.path.join(d, f), i))
    return files


class FileBytes:
    """torch Dataset: (bytes, label) per file."""

    def __init__(self, files):
        self.files = files

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        path, label = self.files[i]
        with open(path, "rb") as f:
            return f.read(), label


def collate(items):
    return [b for b, _ in items], [lab for _, lab in items]


def torch_epochs(a, files):
    import torch
    from torch.utils.data import DataLoader
    torch.set_num_threads(1)
    ds = FileBytes(files)

    class Epoch:
        def __init__(self, e):
            g = torch.Generator()
            g.manual_seed(a.seed * 1000003 + e)
            # Non-persistent workers: they exit (and are reaped, so their CPU
            # is counted) when the epoch's iterator is closed.
            self.dl = DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=a.workers,
                                 collate_fn=collate, generator=g, prefetch_factor=4 if a.workers else None)
            self.it = iter(self.dl)

        def __iter__(self):
            return self

        def __next__(self):
            samples, labels = next(self.it)
            return samples, len(samples)

        def close(self):
            shutdown = getattr(self.it, "_shutdown_workers", None)
            if shutdown:
                shutdown()
            self.it = None

    return Epoch, dict(torch=torch.__version__, workers=a.workers)


def dali_epochs(a, root):
    import numpy as np
    from nvidia.dali import fn, pipeline_def
    import nvidia.dali as dali

    @pipeline_def(batch_size=a.batch_size, num_threads=max(1, a.workers), device_id=None, seed=a.seed + 1,
                  prefetch_queue_depth=2)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True, name="Reader")
        if a.decode:
            images = fn.decoders.image(jpegs, device="cpu")
            return images, labels
        return jpegs, labels

    p = pipe()
    p.build()
    epoch_size = p.epoch_size("Reader")

    class Epoch:
        def __init__(self, e):
            self.left = epoch_size

        def __iter__(self):
            return self

        def __next__(self):
            if self.left <= 0:
                raise StopIteration
            out, _ = p.run()
            n = min(len(out), self.left)
            self.left -= len(out)
            # Bytes the reader delivered (encoded file bytes; decoded pixels
            # with --decode). The last batch of an epoch is padded by DALI
            # with samples of the next one: counted as images it returned.
            nbytes = sum(int(np.asarray(out[i]).nbytes) for i in range(n))
            return nbytes, n

    return Epoch, dict(dali=dali.__version__, threads=max(1, a.workers), decode=a.decode)


def main():
    ap = common.parser(__doc__)
    common.add_common_args(ap)
    ap.add_argument("--folder", required=True, help="image folder root (holds SPLIT/<class>/...)")
    ap.add_argument("--split", default="train")
    ap.add_argument("--kind", choices=["torch", "dali"], default="torch")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers / DALI threads")
    ap.add_argument("--decode", action="store_true", help="DALI: decode on the CPU")
    a = ap.parse_args()
    root = os.path.join(a.folder, a.split)
    if not os.path.isdir(root):
        sys.exit(f"{root}: no such folder")
    if a.kind == "torch":
        Epoch, extra = torch_epochs(a, list_files(root))
    else:
        Epoch, extra = dali_epochs(a, root)
    common.measure(a.loader_name or f"{a.kind}-files", lambda e: Epoch(e), a, extra=extra)


if __name__ == "__main__":
    main()
