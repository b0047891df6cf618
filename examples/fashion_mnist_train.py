#!/usr/bin/env python3
"""Trains a small CNN on Fashion-MNIST streamed from Cassandra through cqlstream (PyTorch, CPU).

The images are decoded in C++ (PNG -> 28x28x1 uint8) by cqlstream's decode
pipeline, overlapping the training step; the model sees float tensors.

Set-up (once):
    python3 scripts/fashion_mnist_to_png.py fashion_png           # 70,000 PNGs, train/ and test/
    build/src/cli/cqlstream ingest --dataset fashion_mnist fashion_png

Full run (README, "Training from the database"):
    .venv/bin/python examples/fashion_mnist_train.py
Shortened run (CI): one epoch of 30 batches, fails unless the test accuracy is above 50%:
    .venv/bin/python examples/fashion_mnist_train.py --epochs 1 --limit-batches 30 --min-accuracy 0.5

With --limit-batches each epoch trains on the next N batches of the stream.
Connection settings come from --hosts/--keyspace or the CQLSTREAM_*
environment variables.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
from torch import nn

import cqlstream.torch as ct

MEAN, STD = 0.2860, 0.3530  # of Fashion-MNIST's training pixels, in [0, 1]


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),   # 16 x 14 x 14
        nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),  # 32 x 7 x 7
        nn.Flatten(),
        nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25),
        nn.Linear(128, 10),
    )


def to_input(images: torch.Tensor) -> torch.Tensor:
    # uint8 NCHW (a view of cqlstream's decoded batch) -> normalised float32
    return images.to(torch.float32).div_(255.0).sub_(MEAN).div_(STD)


def evaluate(model: nn.Module, args: argparse.Namespace, conn: dict) -> tuple[float, int]:
    model.eval()
    correct = total = 0
    with torch.no_grad(), ct.loader(args.dataset, split="test", batch_size=1000, shuffle=False,
                                    decode=(28, 28, 1), **conn) as test:
        for images, labels in test:
            pred = model(to_input(images)).argmax(1)
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
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--min-accuracy", type=float, default=None, help="exit 1 below this test accuracy")
    args = p.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads or os.cpu_count() or 1)
    conn = {k: v for k, v in (("hosts", args.hosts), ("keyspace", args.keyspace)) if v is not None}

    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    t_start = time.monotonic()
    train = ct.loader(args.dataset, batch_size=args.batch_size, seed=args.seed, epochs=args.epochs,
                      decode=(28, 28, 1), **conn)
    print(f"cqlstream: {args.dataset}: {train.loader.samples_per_epoch} training images, "
          f"{len(train)} batches per epoch")
    for epoch in range(args.epochs):
        model.train()
        t0, seen, loss_sum, correct = time.monotonic(), 0, 0.0, 0
        for step, (images, labels) in enumerate(train):
            x = to_input(images)
            out = model(x)
            loss = loss_fn(out, labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            seen += labels.numel()
            loss_sum += loss.item() * labels.numel()
            correct += int((out.argmax(1) == labels).sum())
            if args.limit_batches is not None and step + 1 >= args.limit_batches:
                break
        dt = time.monotonic() - t0
        m = train.metrics()
        print(f"epoch {epoch + 1}/{args.epochs}: loss {loss_sum / max(seen, 1):.4f}, "
              f"train accuracy {correct / max(seen, 1):.4f}, {seen} images in {dt:.1f} s "
              f"({seen / max(dt, 1e-9):,.0f} images/s; so far the training loop waited {m['wait_s']:.2f} s "
              f"for batches, decoding took {m['decode_s']:.2f} s in C++ threads)", flush=True)
    train.close()

    acc, total = evaluate(model, args, conn)
    wall = time.monotonic() - t_start
    print(f"test accuracy {acc:.4f} on {total} images; wall time {wall:.1f} s")
    if args.min_accuracy is not None and acc < args.min_accuracy:
        print(f"FAILED: test accuracy {acc:.4f} is below {args.min_accuracy}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
