"""cqlstream.Selection: selection files from Python (issue 11 §2).

A selection is a list of sample keys of one split that the loader reads
instead of the whole split (``cqlstream.Loader(..., selection=path)``). It
may fix an order (a curriculum: read in that order with ``shuffle=False``)
and repeat keys (oversampling: a key listed k times is delivered k times per
epoch). File format: docs/schema.md (sorted unique lists are written as
CQLSSEL1 files, which older releases read; others as CQLSSEL2).
"""

from __future__ import annotations

import datetime
import math
import os
import random
from collections.abc import Iterable, Sequence
from typing import Any, Union

from . import _core
from ._loader import _int, parse_keys
from .dataset import Dataset

__all__ = ["Selection"]

#: A dataset given by name (connected with the CQLSTREAM_* defaults) or an open :class:`Dataset`.
DatasetRef = Union[str, Dataset]


def _split_keys(dataset: DatasetRef, split: str) -> tuple[str, list[int]]:
    if isinstance(dataset, Dataset):
        return dataset.name, dataset.keys(split)
    with Dataset(dataset) as ds:
        return ds.name, ds.keys(split)


def _name(dataset: DatasetRef) -> str:
    name = dataset.name if isinstance(dataset, Dataset) else dataset
    if not isinstance(name, str) or not name:
        raise ValueError("dataset must be a Dataset or a non-empty dataset name")
    return name


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Selection:
    """Sample keys of one split of one dataset, in order, repeats allowed.

    ``keys`` are 64-bit sample keys ((seg << 32) | idx; see
    :func:`cqlstream.make_key`). Build one with :meth:`from_keys`,
    :meth:`from_mask` or :meth:`from_weights`, write it with :meth:`save`,
    read one with :meth:`load`. The loader checks every key against the
    dataset when it opens the selection.
    """

    def __init__(self, dataset: str, split: str, keys: Iterable[Any], *, query: str = "",
                 created: str | None = None) -> None:
        if not isinstance(dataset, str) or not dataset:
            raise ValueError("dataset must be a non-empty string")
        if not isinstance(split, str) or not split:
            raise ValueError("split must be a non-empty string")
        self.dataset = dataset
        self.split = split
        self.keys: list[int] = parse_keys(keys)
        for k in self.keys:
            if (k >> 32) >= 1 << 31 or (k & 0xFFFFFFFF) >= 1 << 31:
                raise ValueError(f"key {_core.format_key(k)} has a segment or index outside [0, 2^31)")
        self.query = str(query)
        self.created = created if created is not None else _now()

    # -- constructors ----------------------------------------------------------

    @classmethod
    def from_keys(cls, dataset: DatasetRef, split: str, keys: Iterable[Any], *, query: str = "from_keys") -> Selection:
        """The keys as given (ints, (seg, idx) pairs or "seg:idx" strings), order and repeats kept."""
        return cls(_name(dataset), split, keys, query=query)

    @classmethod
    def from_mask(cls, dataset: DatasetRef, split: str, mask: Sequence[Any]) -> Selection:
        """The samples of ``split`` whose entry of ``mask`` is true; ``mask``
        has one entry per sample of the split in ascending key order
        (:meth:`Dataset.keys`, the rows of :meth:`Dataset.metadata`), e.g. a
        boolean NumPy array or a pandas Series."""
        name, keys = _split_keys(dataset, split)
        flags = list(mask)
        if len(flags) != len(keys):
            raise ValueError(f"mask has {len(flags)} entries; split {split!r} of {name!r} has {len(keys)} samples")
        return cls(name, split, [k for k, m in zip(keys, flags) if bool(m)], query="from_mask")

    @classmethod
    def from_weights(cls, dataset: DatasetRef, split: str, weights: Sequence[Any], *, seed: int = 0,
                     max_repeats: int = 1 << 16) -> Selection:
        """Oversampling: sample i of ``split`` (ascending key order, as for
        :meth:`from_mask`) is listed round-down-or-up of ``weights[i]`` times.

        Rounding: a weight w (finite, >= 0, at most ``max_repeats``) gives
        floor(w) copies plus one more with probability w - floor(w), drawn in
        key order from ``random.Random(seed)``; so the expected count of every
        sample is its weight, and the same weights and seed always give the
        same list. Copies of a sample are adjacent; the loader's shuffle
        spreads them over the epoch.
        """
        seed = _int("seed", seed, 0, (1 << 64) - 1)
        max_repeats = _int("max_repeats", max_repeats, 1, 1 << 31)
        name, keys = _split_keys(dataset, split)
        ws = list(weights)
        if len(ws) != len(keys):
            raise ValueError(f"weights has {len(ws)} entries; split {split!r} of {name!r} has {len(keys)} samples")
        rng = random.Random(seed)
        out: list[int] = []
        for i, (k, w) in enumerate(zip(keys, ws)):
            w = float(w)
            if not math.isfinite(w) or w < 0 or w > max_repeats:
                raise ValueError(f"weights[{i}] = {w!r} must be finite and in [0, {max_repeats}]")
            n = math.floor(w)
            if rng.random() < w - n:
                n += 1
            out.extend([k] * n)
        return cls(name, split, out, query=f"from_weights seed={seed}")

    # -- files -----------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes the selection file atomically (a temporary file renamed over ``path``)."""
        _core.save_selection(os.fspath(path), self.dataset, self.split, self.keys, self.query, self.created)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Selection:
        """Reads a selection file (any made by cqlstream select/split or :meth:`save`)."""
        d = _core.load_selection(os.fspath(path))
        return cls(d["dataset"], d["split"], d["keys"], query=d["query"], created=d["created"])

    # -- sequence-like ---------------------------------------------------------

    @property
    def ordered(self) -> bool:
        """True when the keys are not sorted and unique (a CQLSSEL2 file)."""
        return any(b <= a for a, b in zip(self.keys, self.keys[1:]))

    def __len__(self) -> int:
        return len(self.keys)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Selection) and (self.dataset, self.split, self.keys) ==
                (other.dataset, other.split, other.keys))

    def __repr__(self) -> str:
        return (f"Selection({self.dataset!r}, {self.split!r}, {len(self.keys)} keys"
                f"{', ordered' if self.ordered else ''}, query={self.query!r})")
