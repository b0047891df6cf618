"""cqlstream.Dataset: a dataset's catalog and metadata from Python (issue 11 §2).

Looks up keys from paths and reads the metadata rows (key, split, path,
label, size, extra) so that selections can be computed with pandas / NumPy
and written with :class:`cqlstream.Selection`; packs the small samples for
packed reads (:meth:`Dataset.pack`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from . import _core
from ._loader import _int, _seconds, _warn_insecure_tls

__all__ = ["Dataset"]

_COLUMNS = ("key", "split", "path", "label", "size", "extra")


class Dataset:
    """One dataset of a keyspace: its splits, classes, keys and metadata.

    ::

        ds = cqlstream.Dataset("pets", hosts="10.0.0.5", keyspace="images")
        keys = ds.keys_for_paths(["cat/1.jpg", "dog/7.jpg"])
        df = ds.metadata("train")         # pandas DataFrame if pandas is importable

    Connection options are those of :class:`cqlstream.Loader` (hosts, port,
    keyspace, username, password_file, tls_*, secure_bundle, local_dc,
    connections_per_host, max_shard_connections, io_threads,
    connect_timeout), with the same
    CQLSTREAM_* environment defaults. The catalog is read once when the
    Dataset opens; the metadata is scanned on each :meth:`metadata` call and
    once for the first :meth:`keys_for_paths` of a split (then cached).
    Use it as a context manager or call :meth:`close`.
    """

    def __init__(
        self,
        name: str,
        *,
        hosts: str | Sequence[str] | None = None,
        port: int | None = None,
        keyspace: str | None = None,
        username: str | None = None,
        password_file: str | os.PathLike[str] | None = None,
        tls_ca: str | os.PathLike[str] | None = None,
        tls_cert: str | os.PathLike[str] | None = None,
        tls_key: str | os.PathLike[str] | None = None,
        tls_server_name: str | None = None,
        tls_key_passphrase_file: str | os.PathLike[str] | None = None,
        tls_insecure_skip_verify: bool = False,
        secure_bundle: str | os.PathLike[str] | None = None,
        local_dc: str | None = None,
        connections_per_host: int | None = None,
        max_shard_connections: int | None = None,
        io_threads: int | None = None,
        connect_timeout: float | None = None,
        **unexpected: Any,
    ) -> None:
        self._h: _core.DatasetHandle | None = None
        if "password" in unexpected:
            raise TypeError("Dataset() does not accept password=: pass password_file=... or set "
                            "CQLSTREAM_PASSWORD_FILE (or CQLSTREAM_PASSWORD)")
        if unexpected:
            raise TypeError(f"Dataset() got unexpected keyword argument(s): {', '.join(sorted(unexpected))}")
        if not isinstance(name, str) or not name:
            raise ValueError("name must be a non-empty string")
        if tls_insecure_skip_verify:
            _warn_insecure_tls("tls_insecure_skip_verify")
        a = _core.DatasetArgs()
        a.dataset = name
        if isinstance(hosts, str):
            hosts = [h for h in hosts.split(",") if h]
        a.hosts = list(hosts) if hosts is not None else None
        a.port = _int("port", port, 1, 65535, optional=True)
        a.keyspace = keyspace
        a.username = username
        a.password_file = os.fspath(password_file) if password_file is not None else None
        a.tls_ca = os.fspath(tls_ca) if tls_ca is not None else None
        a.tls_cert = os.fspath(tls_cert) if tls_cert is not None else None
        a.tls_key = os.fspath(tls_key) if tls_key is not None else None
        a.tls_server_name = tls_server_name
        a.tls_key_passphrase_file = (os.fspath(tls_key_passphrase_file)
                                     if tls_key_passphrase_file is not None else None)
        a.tls_insecure_skip_verify = bool(tls_insecure_skip_verify)
        a.secure_bundle = os.fspath(secure_bundle) if secure_bundle is not None else None
        a.local_dc = local_dc
        a.connections_per_host = _int("connections_per_host", connections_per_host, 1, 64, optional=True)
        a.max_shard_connections = _int("max_shard_connections", max_shard_connections, 1, 65535, optional=True)
        a.io_threads = _int("io_threads", io_threads, 0, 64, optional=True)
        a.connect_timeout_s = _seconds("connect_timeout", connect_timeout)
        self._h = _core.DatasetHandle(a)
        self._paths: dict[str | None, dict[str, list[int]]] = {}

    # -- catalog ---------------------------------------------------------------

    def _handle(self) -> _core.DatasetHandle:
        if self._h is None:
            raise ValueError("this Dataset is closed")
        return self._h

    @property
    def name(self) -> str:
        return self._handle().name

    @property
    def label_kind(self) -> str:
        """'none', 'class', 'multilabel' or 'target'."""
        return self._handle().label_kind

    @property
    def attached(self) -> bool:
        """Whether the dataset is attached (``cqlstream attach``) rather than ingested."""
        return bool(self._handle().attached)

    @property
    def class_names(self) -> list[str]:
        return list(self._handle().class_names)

    def splits(self) -> list[str]:
        return list(self._handle().splits())

    def count(self, split: str) -> int:
        """Committed samples of ``split`` (0 for a split the dataset does not have)."""
        return int(self._handle().count(split))

    def keys(self, split: str) -> list[int]:
        """The keys of ``split``'s samples in ascending key order: the order
        :meth:`cqlstream.Selection.from_mask` and ``from_weights`` index.
        KeyError naming the split when the dataset has none of that name."""
        if split not in self.splits():
            raise KeyError(f"dataset {self.name!r} has no split {split!r} (splits: {', '.join(self.splits())})")
        return list(self._handle().split_keys(split))

    # -- metadata --------------------------------------------------------------

    def _columns(self, split: str | None) -> Any:
        if split is not None and split not in self.splits():
            raise KeyError(f"dataset {self.name!r} has no split {split!r} (splits: {', '.join(self.splits())})")
        return self._handle().metadata(split)

    def metadata(self, split: str | None = None) -> Any:
        """The metadata rows of ``split`` (None: every split), ascending key:
        columns key, split, path, label, size, extra. ``label`` is the class
        index (class datasets), the list of labels (multilabel) or None;
        ``size`` the image's bytes; ``extra`` a dict of text. A pandas
        DataFrame when pandas is importable, else a list of dicts.

        Attached datasets (``cqlstream attach``): ``path`` is the key
        column's value as text (a text key as it is, a uuid as
        8-4-4-4-12, a number in decimal, a blob in hex), ``size`` is None
        (not known without reading the bytes), and ``extra`` holds the
        columns of the split's ``--metadata-table`` other than the key, as
        text cut to 256 bytes ("...[cut: N bytes]"); a key without a
        metadata row has an empty ``extra``. A sample that cannot be read
        (its row deleted, a bad label) is a row with label None and
        ``extra["_problem"]`` saying why. Ctrl-C on the main thread raises
        KeyboardInterrupt once the blocks being read are done."""
        c = self._columns(split)
        multilabel = self.label_kind == "multilabel"
        labels = list(c.multilabels) if multilabel else list(c.labels)
        cols = {"key": list(c.keys), "split": list(c.splits), "path": list(c.paths), "label": labels,
                "size": list(c.sizes), "extra": [dict(e) for e in c.extra]}
        try:
            import pandas
        except ImportError:
            return [dict(zip(_COLUMNS, row)) for row in zip(*(cols[k] for k in _COLUMNS))]
        return pandas.DataFrame(cols, columns=list(_COLUMNS))

    def keys_for_paths(self, paths: Iterable[str | os.PathLike[str]], split: str | None = None) -> list[int]:
        """The key of each path, in the order given (ingest's relative paths,
        e.g. "cat/1.jpg"; for an attached dataset the foreign keys' text,
        as :meth:`metadata`'s ``path``, e.g. a uuid "0f6e...-..."). Looks in
        ``split`` only when given. KeyError naming
        the first path the dataset does not have; ValueError when a path names
        several samples (the same path in two segments: pass ``split=``)."""
        index = self._paths.get(split)
        if index is None:
            c = self._columns(split)
            index = {}
            for k, p in zip(c.keys, c.paths):
                index.setdefault(p, []).append(int(k))
            self._paths[split] = index
        out = []
        for p in paths:
            p = os.fspath(p)
            found = index.get(p)
            if found is None:
                where = f"split {split!r} of " if split is not None else ""
                raise KeyError(f"path {p!r} is not in {where}dataset {self.name!r}")
            if len(found) > 1:
                raise ValueError(f"path {p!r} names {len(found)} samples of dataset {self.name!r} "
                                 f"({', '.join(_core.format_key(k) for k in found[:5])}); pass split=")
            out.append(found[0])
        return out

    # -- packed layout ---------------------------------------------------------

    def pack(self, split: str | None = None, *, pack_size: int = _core.PACK_SIZE_DEFAULT, concurrency: int = 8,
             force: bool = False) -> dict[str, Any]:
        """Writes the packed copy of the dataset's small samples, what
        ``cqlstream pack`` does: afterwards ``cqlstream.Loader(...,
        packed=True)`` reads them one pack of up to 100 samples per request
        (docs/loader.md, "Packed reads", says what packing does to the
        shuffle). Only sealed segments of samples of at most 16 KiB are
        packed; segments already packed are kept unless ``force``. ``split``:
        one split (None: all). ``pack_size``: samples per pack, in [2, 100],
        lowered so that a pack holds at most 512 KiB; a split keeps the size
        it was first packed with. ``concurrency``: packs built at a time.

        Returns the report: ``segments`` (a dict per segment: seg, split,
        outcome — "packed", "already packed" or why it was not —, pack_size,
        packs, packed, left_out), ``packs_written``, ``samples_packed``,
        ``left_out`` (samples whose row failed its check: left out of their
        pack, the loader reads them alone, where their own check names them)
        and ``seconds``. Raises cqlstream.Error for an attached dataset or
        when a write fails (run it again: finished segments are kept), and
        KeyboardInterrupt at Ctrl-C on the main thread within a sample read
        (a page being waited for is given up; the segment being packed stays
        unpacked)."""
        if split is not None and split not in self.splits():
            raise KeyError(f"dataset {self.name!r} has no split {split!r} (splits: {', '.join(self.splits())})")
        size = _int("pack_size", pack_size, _core.PACK_SIZE_MIN, _core.PACK_SIZE_MAX)
        conc = _int("concurrency", concurrency, 1, _core.PACK_CONCURRENCY_MAX)
        if not isinstance(force, bool):
            raise TypeError(f"force must be a bool, got {type(force).__name__} {force!r}")
        report = self._handle().pack(split, size, conc, force)
        report["segments"] = [dict(s) for s in report["segments"]]
        return dict(report)

    # -- lifetime --------------------------------------------------------------

    def close(self) -> None:
        if self._h is not None:
            self._h.close()
            self._h = None

    def __enter__(self) -> Dataset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        h = getattr(self, "_h", None)
        if h is not None:
            h.close()

    def __repr__(self) -> str:
        if self._h is None:
            return "Dataset(closed)"
        return f"Dataset({self.name!r}, keyspace={self._h.keyspace!r}, splits={self.splits()!r})"
