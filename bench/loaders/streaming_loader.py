#!/usr/bin/env python3
"""MosaicML Streaming in the loader comparison. Runs in its own virtualenv
(bench/loaders/requirements-streaming.txt; bench/run makes it).

  write-mds  FOLDER SPLIT OUT   the split's images as MDS shards (columns image: bytes,
                                label: int; no compression, default 64 MiB shard limit)
  upload     OUT s3://BUCKET/PREFIX   put the shards into the S3 endpoint ($S3_ENDPOINT_URL)
  read       --remote s3://...  read epochs through StreamingDataset + torch DataLoader

`read` measures like the other loaders (bench/loaders/common.py). Each epoch
starts with an empty local cache (a fresh `local` folder), so every shard of
every measured epoch crosses the network: otherwise Streaming would read the
second epoch from its local disk cache. S3_ENDPOINT_URL points at the WAN
emulator, which forwards to a local moto_server. No decoding: a sample is
the image's bytes.
"""
import os
import shutil
import sys
import tempfile

import common


def list_files(root):
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    for i, c in enumerate(classes):
        d = os.path.join(root, c)
        for f in sorted(os.listdir(d)):
            yield os.path.join(d, f), i


def write_mds(folder, split, out):
    from streaming import MDSWriter
    if os.path.exists(os.path.join(out, "index.json")):
        print(f"{out}: MDS shards present")
        return
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    n = 0
    with MDSWriter(out=tmp, columns={"image": "bytes", "label": "int"}, compression=None) as w:
        for path, label in list_files(os.path.join(folder, split)):
            with open(path, "rb") as f:
                w.write({"image": f.read(), "label": label})
            n += 1
    os.replace(tmp, out)
    print(f"{out}: {n} samples as MDS shards")


def upload(out, remote):
    import boto3
    from urllib.parse import urlparse
    u = urlparse(remote)
    s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT_URL"])
    try:
        s3.create_bucket(Bucket=u.netloc)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    n = 0
    for name in sorted(os.listdir(out)):
        s3.upload_file(os.path.join(out, name), u.netloc, f"{u.path.strip('/')}/{name}")
        n += 1
    print(f"uploaded {n} files to {remote}")


def collate(items):
    return [it["image"] for it in items]


def read(a):
    import streaming
    import torch
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory
    from torch.utils.data import DataLoader
    torch.set_num_threads(1)
    clean_stale_shared_memory()
    cache_root = tempfile.mkdtemp(prefix="cqls-bench-streaming-")

    class Epoch:
        def __init__(self, e):
            self.local = os.path.join(cache_root, f"epoch{e}")
            ds = StreamingDataset(remote=a.remote, local=self.local, batch_size=a.batch_size, shuffle=True,
                                  shuffle_seed=a.seed * 1000003 + e + 1, download_timeout=300)
            self.dl = DataLoader(ds, batch_size=a.batch_size, num_workers=a.workers, collate_fn=collate,
                                 prefetch_factor=4 if a.workers else None)
            self.it = iter(self.dl)

        def __iter__(self):
            return self

        def __next__(self):
            b = next(self.it)
            return b, len(b)

        def close(self):
            shutdown = getattr(self.it, "_shutdown_workers", None)
            if shutdown:
                shutdown()
            self.it = self.dl = None
            shutil.rmtree(self.local, ignore_errors=True)
            clean_stale_shared_memory()

    try:
        common.measure(a.loader_name or "streaming", lambda e: Epoch(e), a,
                       extra=dict(streaming=streaming.__version__, workers=a.workers,
                                  endpoint=os.environ.get("S3_ENDPOINT_URL")))
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "write-mds":
        return write_mds(*sys.argv[2:5])
    if len(sys.argv) > 1 and sys.argv[1] == "upload":
        return upload(*sys.argv[2:4])
    if len(sys.argv) > 1 and sys.argv[1] == "read":
        del sys.argv[1]
    ap = common.parser(__doc__)
    common.add_common_args(ap)
    ap.add_argument("--remote", required=True, help="s3://BUCKET/PREFIX of the MDS shards")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers")
    read(ap.parse_args())


if __name__ == "__main__":
    main()
