"""PyTorch adapter: batches from cqlstream as ``(images, labels)`` tensors.

Two ways in, both yielding one item per *batch* (cqlstream batches in C++):

* :func:`loader` -- a ready iterable::

      train = cqlstream.torch.loader("fashion_mnist", batch_size=256, decode=(28, 28, 1))
      for epoch in range(3):
          for images, labels in train:      # uint8 NCHW (zero-copy view), int64
              ...

* :class:`StreamDataset` -- an ``IterableDataset`` for code that wants a
  ``torch.utils.data.DataLoader``; use ``DataLoader(ds, batch_size=None,
  num_workers=0)``. Worker processes are refused: the C++ loader already
  reads and decodes in parallel threads, and each worker would open its own
  loader (reading every sample once per worker).

Sharding: ``rank``/``world_size`` default to the default process group of
``torch.distributed`` when it is initialised, else to $RANK/$WORLD_SIZE,
else a single process. Every rank gets a disjoint part of each epoch.

Items: in decode mode ``images`` is a uint8 tensor over the decoded batch
memory (``layout="NCHW"``, the default, is a strided view of the NHWC
frames; ``"NHWC"`` the frames as stored), ``labels`` an int64 tensor. In
raw mode (``decode=None``) the item is ``(batch, labels)`` with the
:class:`cqlstream.Batch` itself.

With ``decode="npy"`` (datasets of .npy arrays, ``--kind blob``) the first
element is one tensor of shape (N, ...) over the batch's arrays when every
sample has the same dtype and shape, else a list of N tensors (zero-copy
either way); the second is the labels, or for label kind "target" the
targets in the same form (``decode={"npy": True, "targets": "npy"}`` decodes
.npy targets such as segmentation masks; the default keeps their bytes as
uint8 tensors).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from ._core import Batch
from ._loader import Loader

__all__ = ["StreamDataset", "loader", "distributed_rank_world", "gather_state_dicts"]

WORKERS_REFUSED = (
    "cqlstream.torch.StreamDataset cannot run in DataLoader worker processes (num_workers > 0): "
    "the C++ loader already reads and decodes with its own threads, and every worker would open "
    "another full loader (duplicating each sample num_workers times). Use "
    "DataLoader(dataset, batch_size=None, num_workers=0), or iterate cqlstream.torch.loader(...) directly."
)


def distributed_rank_world() -> tuple[int | None, int | None]:
    """(rank, world_size) of torch.distributed's default group, else $RANK/$WORLD_SIZE, else (None, None)."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    r, w = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    return (int(r) if r else None, int(w) if w else None)


def _decode_spec(decode: Any) -> Any:
    """Also accepts (H, W, C) for the torch adapter: decode=(28, 28, 1)."""
    if isinstance(decode, (tuple, list)) and len(decode) == 3:
        return {"size": (int(decode[0]), int(decode[1])), "channels": int(decode[2])}
    return decode


class StreamDataset(IterableDataset):
    """An IterableDataset over a cqlstream dataset: one ``(images, labels)`` item per batch.

    Arguments are those of :class:`cqlstream.Loader` (``decode`` also takes
    ``(H, W, C)``), plus ``layout`` ("NCHW" or "NHWC") and ``device`` (where
    to move images and labels; None keeps them on the CPU, zero-copy). The
    loader opens lazily (at the first iteration, ``len()`` or
    ``state_dict()``), in the process that iterates.
    """

    def __init__(
        self,
        dataset: str,
        *,
        batch_size: int = 256,
        decode: Any = None,
        layout: str = "NCHW",
        device: str | torch.device | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        **loader_kwargs: Any,
    ) -> None:
        super().__init__()
        if layout not in ("NCHW", "NHWC"):
            raise ValueError(f"layout must be 'NCHW' or 'NHWC', got {layout!r}")
        if "password" in loader_kwargs:
            Loader("_", password=loader_kwargs["password"])  # raises the explanation
        self.dataset_name = dataset
        self.layout = layout
        self.device = torch.device(device) if device is not None else None
        self._kwargs = dict(loader_kwargs, batch_size=batch_size, decode=_decode_spec(decode))
        self._rank, self._world = rank, world_size
        self._loader: Loader | None = None
        self._pending_state: Any = None

    # -- the underlying loader ---------------------------------------------

    @property
    def loader(self) -> Loader:
        """The cqlstream.Loader (opened on first use)."""
        if self._loader is None:
            rank, world = self._rank, self._world
            if rank is None and world is None:
                rank, world = distributed_rank_world()
            self._loader = Loader(self.dataset_name, rank=rank, world_size=world, **self._kwargs)
            if self._pending_state is not None:
                state, self._pending_state = self._pending_state, None
                self._loader.load_state_dict(state)
        return self._loader

    def __iter__(self) -> Iterator[tuple[Any, torch.Tensor]]:
        if get_worker_info() is not None:
            raise RuntimeError(WORKERS_REFUSED)
        for batch in self.loader:
            yield self.convert(batch)

    def convert(self, batch: Batch) -> tuple[Any, Any]:
        """(images, labels) of one batch (raw mode: (batch, labels); npy mode: see the module)."""
        dec = self.loader.decode
        if dec is not None and dec.get("npy"):
            return self._convert_npy(batch)
        labels = torch.from_numpy(np.asarray(batch.labels, dtype=np.int64))
        images: Any = batch.torch(self.layout) if batch.decoded else batch
        if self.device is not None and self.device.type != "cpu":
            labels = labels.to(self.device, non_blocking=True)
            if batch.decoded:
                images = images.to(self.device, non_blocking=True)
        return images, labels

    def _to(self, t: Any) -> Any:
        if self.device is None or self.device.type == "cpu":
            return t
        if isinstance(t, list):
            return [x.to(self.device, non_blocking=True) for x in t]
        return t.to(self.device, non_blocking=True)

    def _convert_npy(self, batch: Batch) -> tuple[Any, Any]:
        arrays: Any = (torch.from_numpy(batch.array) if batch.stacked and len(batch)
                       else [torch.from_numpy(a) for a in batch.arrays])
        targets = batch.targets
        second: Any
        if self.loader.dataset_info["label_kind"] == "target":
            same = all(t.dtype == targets[0].dtype and t.shape == targets[0].shape for t in targets)
            second = (torch.from_numpy(np.stack(targets)) if targets and same
                      else [torch.from_numpy(t) for t in targets])
        else:
            second = torch.from_numpy(np.asarray(batch.labels, dtype=np.int64))
        return self._to(arrays), self._to(second)

    def __len__(self) -> int:
        """Batches per epoch for this rank."""
        return len(self.loader)

    # -- checkpoints -------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """This rank's loader checkpoint (see cqlstream.Loader.state_dict)."""
        return self.loader.state_dict()

    def load_state_dict(self, state: Any) -> None:
        """This rank's state, or a list of every rank's states of a previous run (any world size).

        May come before the loader is opened; it is applied when it opens.
        """
        if self._loader is None:
            self._pending_state = state
        else:
            self._loader.load_state_dict(state)

    def metrics(self) -> dict[str, float]:
        return self.loader.metrics()

    def close(self) -> None:
        if self._loader is not None:
            self._loader.close()

    def __enter__(self) -> StreamDataset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        # Pickling (spawned DataLoader workers, multiprocessing) carries the
        # arguments only, never a live loader.
        d = dict(self.__dict__)
        d["_loader"] = None
        return d


def loader(dataset: str, **kwargs: Any) -> StreamDataset:
    """A ready-to-iterate :class:`StreamDataset` (same arguments), opened now so that errors show at once."""
    ds = StreamDataset(dataset, **kwargs)
    ds.loader  # noqa: B018 - open now
    return ds


def gather_state_dicts(ds: StreamDataset | Loader) -> list[dict[str, Any]]:
    """Every rank's state dict (torch.distributed.all_gather_object; a list of one without a process group).

    Save the list: ``load_state_dict(list)`` resumes the epoch exactly once
    on any number of ranks.
    """
    state = ds.state_dict()
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()):
        return [state]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, state)
    return out
