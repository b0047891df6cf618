#!/usr/bin/env python3
"""Trains a small CNN on Fashion-MNIST streamed from Cassandra with PyTorch Lightning (DDP, CPU).

Data-parallel training with Lightning's ``ddp`` strategy (gloo on CPU, one
process per device; Lightning starts the other processes itself), the data
read and decoded by cqlstream: every rank streams its own disjoint part of
each epoch. Checkpoints carry the loader position of *every* rank, so a run
resumed from a checkpoint taken mid-epoch trains on exactly the samples that
epoch had not trained on yet, each once, on any number of ranks.

Set-up (once), as for examples/fashion_mnist_train.py:
    python3 scripts/fashion_mnist_to_png.py fashion_png
    build/src/cli/cqlstream ingest --dataset fashion_mnist fashion_png

Run (2 CPU processes):
    .venv/bin/python examples/lightning_fashion_mnist.py --devices 2 --epochs 2
Stop after 10 steps with a checkpoint, as a preempted job would, then resume it:
    .venv/bin/python examples/lightning_fashion_mnist.py --interrupt-after 10 --checkpoint ckpt.pt
    .venv/bin/python examples/lightning_fashion_mnist.py --resume ckpt.pt

How the loader position gets into Lightning's checkpoint: the data module's
``state_dict()`` (which Lightning calls on every rank while it builds a
checkpoint; rank 0 writes it) gathers all ranks' loader states
(``cqlstream.torch.gather_state_dicts``); its ``load_state_dict()`` hands the
list to the loader, which re-splits the rest of the epoch over the ranks of
the new run. Lightning fetches one batch ahead of the training step, so the
state saved is the one of the last batch *trained*, not the last one read.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections import deque
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from torch import nn

import cqlstream.torch as ct

MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST's training pixels, in [0, 1]


class KeyedStream(ct.StreamDataset):
    """A StreamDataset whose items are ``(images, labels, keys, ordinal)``.

    ``ordinal`` counts the batches this rank has read in this process; the
    loader state reached after each of the last few batches is kept, so that
    the state of the last batch the model trained on can be saved (Lightning
    has already read the next batch by then).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ordinal = 0
        self.states: deque[tuple[int, dict[str, Any]]] = deque(maxlen=8)

    def convert(self, batch: Any) -> tuple[Any, ...]:
        images, labels = super().convert(batch)
        self.ordinal += 1
        self.states.append((self.ordinal, self.loader.state_dict()))
        keys = torch.from_numpy(np.asarray(batch.keys, dtype=np.int64))
        return images, labels, keys, self.ordinal

    def state_after(self, ordinal: int) -> dict[str, Any]:
        """The loader state after batch ``ordinal`` (0: before the first batch read here)."""
        if ordinal == 0 and not self.states:
            return self.loader.state_dict()
        for n, state in self.states:
            if n == ordinal:
                return state
        raise RuntimeError(f"no loader state kept for batch {ordinal} (kept: {[n for n, _ in self.states]})")

    def __getstate__(self) -> dict[str, Any]:
        d = super().__getstate__()
        d["states"] = deque(maxlen=8)
        return d


class FashionData(L.LightningDataModule):
    """The training split through cqlstream; checkpoints carry every rank's loader state."""

    def __init__(self, dataset: str, batch_size: int, seed: int, conn: dict[str, Any]) -> None:
        super().__init__()
        # drop_last: every rank delivers the same number of full batches, so
        # the DDP ranks step together (and after a resume too).
        self.train = KeyedStream(dataset, batch_size=batch_size, decode=(28, 28, 1), seed=seed, drop_last=True,
                                 epochs=None, **conn)
        self.trained_through = 0  # ordinal of the last batch a training step used (set by the model)

    def train_dataloader(self) -> Any:
        # The stream itself is the loader (cqlstream batches in C++; no worker
        # processes); a plain iterable has no state_dict for Lightning to save
        # per rank, the data module saves all ranks' instead.
        return _Iterable(self.train)

    def state_dict(self) -> dict[str, Any]:
        # Called on every rank while a checkpoint is built: a collective.
        state = self.train.state_after(self.trained_through)
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            states: list[Any] = [None] * dist.get_world_size()
            dist.all_gather_object(states, state)
        else:
            states = [state]
        return {"cqlstream_states": states}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.train.load_state_dict(state["cqlstream_states"])  # applied when the loader opens


class _Iterable:
    """Iterates a StreamDataset, one epoch per iter(); len() is this rank's batches per epoch."""

    def __init__(self, ds: KeyedStream) -> None:
        self.ds = ds

    def __iter__(self) -> Any:
        return iter(self.ds)

    def __len__(self) -> int:
        return len(self.ds)


class Classifier(L.LightningModule):
    def __init__(self, lr: float, data: FashionData, keys_out: Path | None) -> None:
        super().__init__()
        self.lr = lr
        self.data = data
        self.keys_out = keys_out
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),   # 16 x 14 x 14
            nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),  # 32 x 7 x 7
            nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = images.to(torch.float32, memory_format=torch.contiguous_format)  # NCHW view of NHWC frames
        return self.net(x.div_(255.0).sub_(MEAN).div_(STD))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        images, labels, keys, ordinal = batch
        out = self(images)
        loss = nn.functional.cross_entropy(out, labels)
        self.log("train_loss", loss, prog_bar=True, sync_dist=False)
        self.data.trained_through = int(ordinal)
        if self.keys_out is not None:  # which samples each rank trained on (the CI test checks them)
            with open(self.keys_out / f"rank{self.global_rank}.txt", "a") as f:
                f.write(f"{self.current_epoch} " + " ".join(str(int(k)) for k in keys) + "\n")
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.lr)


class Interrupt(L.Callback):
    """Saves a checkpoint after ``steps`` training steps and stops (a preempted job, mid-epoch)."""

    def __init__(self, steps: int, path: Path) -> None:
        self.steps, self.path = steps, path
        self.fired = False

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if not self.fired and trainer.global_step >= self.steps:
            self.fired = True
            trainer.save_checkpoint(self.path)  # on every rank: the loader states are gathered
            trainer.should_stop = True


def evaluate(model: Classifier, dataset: str, conn: dict[str, Any]) -> tuple[float, int]:
    model.eval()
    correct = total = 0
    with torch.no_grad(), ct.loader(dataset, split="test", batch_size=1000, shuffle=False, decode=(28, 28, 1),
                                    rank=0, world_size=1, **conn) as test:
        for images, labels in test:
            correct += int((model(images).argmax(1) == labels).sum())
            total += labels.numel()
    return correct / max(total, 1), total


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="fashion_mnist")
    p.add_argument("--hosts", default=None, help="contact points (default: $CQLSTREAM_HOSTS or 127.0.0.1)")
    p.add_argument("--keyspace", default=None)
    p.add_argument("--devices", type=int, default=2, help="DDP processes (CPU)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads per process")
    p.add_argument("--checkpoint", type=Path, default=None, help="write a checkpoint here when training ends")
    p.add_argument("--interrupt-after", type=int, default=None,
                   help="write --checkpoint after N steps and stop there (mid-epoch)")
    p.add_argument("--resume", type=Path, default=None, help="continue from this checkpoint")
    p.add_argument("--keys-out", type=Path, default=None, help="append each rank's trained keys to DIR/rank<R>.txt")
    p.add_argument("--min-accuracy", type=float, default=None, help="exit 1 below this test accuracy")
    args = p.parse_args()

    # Lightning cannot see that the data module restores the loaders (it only
    # knows dataloaders with a state_dict of their own, saved per rank).
    warnings.filterwarnings("ignore", message="You're resuming from a checkpoint that ended before the epoch ended")
    torch.set_num_threads(args.threads)
    L.seed_everything(args.seed, workers=False, verbose=False)
    conn = {k: v for k, v in (("hosts", args.hosts), ("keyspace", args.keyspace)) if v is not None}
    if args.keys_out is not None:
        args.keys_out.mkdir(parents=True, exist_ok=True)

    if args.interrupt_after is not None and args.checkpoint is None:
        p.error("--interrupt-after needs --checkpoint")
    data = FashionData(args.dataset, args.batch_size, args.seed, conn)
    model = Classifier(args.lr, data, args.keys_out)
    interrupt = Interrupt(args.interrupt_after, args.checkpoint) if args.interrupt_after is not None else None
    trainer = L.Trainer(accelerator="cpu", devices=args.devices, strategy="ddp" if args.devices > 1 else "auto",
                        max_epochs=args.epochs, use_distributed_sampler=False, callbacks=[interrupt] if interrupt else [],
                        enable_checkpointing=False, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(model, datamodule=data, ckpt_path=args.resume)
    if args.checkpoint is not None and interrupt is None:
        trainer.save_checkpoint(args.checkpoint)  # every rank takes part (the loader states are gathered)
    rank = trainer.global_rank
    print(f"rank {rank}: trained {trainer.global_step} steps in total, epoch {trainer.current_epoch}; "
          f"{len(data.train)} batches per epoch per rank", flush=True)
    data.train.close()
    if rank != 0:
        return 0
    acc, total = evaluate(model, args.dataset, conn)
    print(f"test accuracy {acc:.4f} on {total} images")
    if args.min_accuracy is not None and acc < args.min_accuracy:
        print(f"FAILED: test accuracy {acc:.4f} is below {args.min_accuracy}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PL_DISABLE_FORK", "1")
    sys.exit(main())
