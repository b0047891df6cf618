#!/usr/bin/env python3
"""Trains a small CNN on Fashion-MNIST streamed from Cassandra through DALI (CPU pipeline, PyTorch).

The pipeline: fn.cqlstream.reader (the native cqlstream DALI reader, or its
external_source fallback when the plugin is not built) -> fn.decoders.image(
device="cpu", output_type=GRAY) -> fn.crop_mirror_normalize (float, CHW,
normalised) -> DALIGenericIterator(reader_name="Reader") -> the CNN.

Set-up (once):
    python3 scripts/fashion_mnist_to_png.py fashion_png           # 70,000 PNGs, train/ and test/
    build/src/cli/cqlstream ingest --dataset fashion_mnist fashion_png
    # the plugin: scripts/install installs DALI (python/requirements-dali.txt), the build
    # (-DCQLSTREAM_BUILD_DALI=ON, which scripts/test sets) makes plugins/dali/libcqlstream_dali.so

Full run:
    .venv/bin/python examples/fashion_mnist_train_dali.py
Shortened run (CI): one epoch of 40 batches, fails unless the test accuracy is above 50%:
    .venv/bin/python examples/fashion_mnist_train_dali.py --epochs 1 --limit-batches 40 --min-accuracy 0.5
Pipeline throughput only (read + decode + normalise, no training):
    .venv/bin/python examples/fashion_mnist_train_dali.py --bench-pipeline

Data parallel (torchrun --nproc-per-node N ...): each rank reads shard RANK of
WORLD_SIZE; every sample is seen once per epoch across the ranks and all ranks
get the same number of batches. Connection settings come from
--hosts/--keyspace or the CQLSTREAM_* environment variables.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
from torch import nn

import cqlstream.dali as cd
from nvidia.dali import fn, pipeline_def, types
from nvidia.dali.plugin.base_iterator import LastBatchPolicy
from nvidia.dali.plugin.pytorch import DALIGenericIterator

MEAN, STD = 0.2860, 0.3530  # of Fashion-MNIST's training pixels, in [0, 1]


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),   # 16 x 14 x 14
        nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),  # 32 x 7 x 7
        nn.Flatten(),
        nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25),
        nn.Linear(128, 10),
    )


@pipeline_def
def fashion_pipeline(dataset: str, split: str, shuffle: bool, shard_id: int, num_shards: int, conn: dict):
    jpegs, labels = cd.reader(dataset, split=split, shuffle=shuffle, seed=0, shard_id=shard_id,
                              num_shards=num_shards, name="Reader", **conn)
    images = fn.decoders.image(jpegs, device="cpu", output_type=types.GRAY)      # 28 x 28 x 1 uint8
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                      mean=[MEAN * 255.0], std=[STD * 255.0])  # 1 x 28 x 28 float
    return images, labels


def make_iterator(args: argparse.Namespace, split: str, batch_size: int, shuffle: bool, conn: dict):
    pipe = fashion_pipeline(dataset=args.dataset, split=split, shuffle=shuffle, shard_id=args.rank,
                            num_shards=args.world_size, conn=conn, batch_size=batch_size,
                            num_threads=args.dali_threads, device_id=None, prefetch_queue_depth=2)
    if cd.plugin_loaded():
        # The reader's metadata tells the iterator where each epoch ends; PARTIAL
        # drops the padding of the last batch.
        return DALIGenericIterator([pipe], ["images", "labels"], reader_name="Reader",
                                   last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True)
    # Fallback (external_source): epochs end with its StopIteration.
    return DALIGenericIterator([pipe], ["images", "labels"], last_batch_policy=LastBatchPolicy.PARTIAL,
                               auto_reset=True)


def evaluate(model: nn.Module, it) -> tuple[float, int]:
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for batch in it:
            images, labels = batch[0]["images"], batch[0]["labels"].reshape(-1).long()
            pred = model(images).argmax(1)
            correct += int((pred == labels).sum())
            total += labels.numel()
    return correct / max(total, 1), total


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="fashion_mnist")
    p.add_argument("--hosts", default=None, help="contact points (default: $CQLSTREAM_HOSTS or 127.0.0.1)")
    p.add_argument("--keyspace", default=None)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--limit-batches", type=int, default=None, help="train on at most N batches per epoch")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    p.add_argument("--dali-threads", type=int, default=2, help="DALI CPU threads (decoding)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--min-accuracy", type=float, default=None, help="exit 1 below this test accuracy")
    p.add_argument("--bench-pipeline", action="store_true",
                   help="only run the training pipeline for one epoch and print images/s")
    args = p.parse_args()
    args.rank = int(os.environ.get("RANK", "0"))
    args.world_size = int(os.environ.get("WORLD_SIZE", "1"))

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads or os.cpu_count() or 1)
    conn = {k: v for k, v in (("hosts", args.hosts), ("keyspace", args.keyspace)) if v is not None}
    print(f"reader: {'fn.cqlstream.reader (plugin)' if cd.plugin_loaded() else 'external_source fallback'}"
          + ("" if cd.plugin_loaded() else f" [{cd.plugin_error()}]"), flush=True)

    train = make_iterator(args, "train", args.batch_size, True, conn)
    if args.bench_pipeline:
        t0, n = time.perf_counter(), 0
        for batch in train:
            n += batch[0]["labels"].shape[0]
        dt = time.perf_counter() - t0
        print(f"pipeline: {n} images in {dt:.2f} s = {n / dt:,.0f} images/s "
              f"(read + CPU decode + normalise, batch {args.batch_size}, {args.dali_threads} DALI threads)")
        return 0

    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    t_start = time.perf_counter()
    seen = 0
    for epoch in range(args.epochs):
        model.train()
        t0, n, loss_sum, batches = time.perf_counter(), 0, 0.0, 0
        for batch in train:
            images, labels = batch[0]["images"], batch[0]["labels"].reshape(-1).long()
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(images), labels)
            loss.backward()
            opt.step()
            n += labels.numel()
            loss_sum += loss.item() * labels.numel()
            batches += 1
            if args.limit_batches is not None and batches >= args.limit_batches:
                break
        if args.limit_batches is not None and batches >= args.limit_batches and epoch + 1 < args.epochs:
            # Leaving an epoch early: drain it so that the next one starts at an epoch boundary.
            for _ in train:
                pass
        seen += n
        dt = time.perf_counter() - t0
        print(f"epoch {epoch}: {batches} batches, {n} images, loss {loss_sum / max(n, 1):.4f}, "
              f"{dt:.1f} s ({n / dt:,.0f} images/s)", flush=True)
    train_s = time.perf_counter() - t_start

    t0 = time.perf_counter()
    acc, total = evaluate(model, make_iterator(args, "test", 1000, False, conn))
    print(f"test accuracy: {acc:.4f} on {total} images ({time.perf_counter() - t0:.1f} s); "
          f"training: {seen} images in {train_s:.1f} s")
    if args.min_accuracy is not None and acc < args.min_accuracy:
        print(f"FAIL: accuracy {acc:.4f} is below --min-accuracy {args.min_accuracy}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
