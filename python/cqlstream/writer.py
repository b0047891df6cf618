"""cqlstream.Writer: samples written from any program into a dataset (issue 11 §3).

The writer of ``cqlstream ingest`` fed from memory: batched and pipelined in
C++ (the GIL is released while it works), with ingest's validation, rows and
checksums, and resumable and idempotent by ``source_id`` and position.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from . import _core
from ._loader import _int, _seconds, _warn_insecure_tls

__all__ = ["Writer"]

_LABEL_KINDS = ("none", "class", "multilabel", "target")
_KINDS = ("image", "blob")


def _bytes(name: str, v: Any) -> bytes:
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        raise TypeError(f"{name} must be bytes (or a bytes-like object), got str")
    try:
        return bytes(memoryview(v).cast("B"))
    except TypeError:
        raise TypeError(f"{name} must be bytes (or a bytes-like object), got {type(v).__name__}") from None


def _check_args(o: dict[str, Any], unexpected: dict[str, Any]) -> list[str] | None:
    """Refuses what Writer() cannot take; returns the class names (None: not given)."""
    if "password" in unexpected:
        raise TypeError("Writer() does not accept password=: pass password_file=... or set "
                        "CQLSTREAM_PASSWORD_FILE (or CQLSTREAM_PASSWORD)")
    if unexpected:
        raise TypeError(f"Writer() got unexpected keyword argument(s): {', '.join(sorted(unexpected))}")
    if not isinstance(o["name"], str) or not o["name"]:
        raise ValueError("name must be a non-empty string")
    if not isinstance(o["source_id"], str) or not o["source_id"]:
        raise ValueError("source_id must be a non-empty string (it names what this writer writes, "
                         "e.g. 'job-42/part-7')")
    if not isinstance(o["split"], str) or not o["split"]:
        raise ValueError("split must be a non-empty string")
    if o["label_kind"] is not None and o["label_kind"] not in _LABEL_KINDS:
        raise ValueError(f"label_kind must be one of {', '.join(_LABEL_KINDS)}, got {o['label_kind']!r}")
    if o["kind"] is not None and o["kind"] not in _KINDS:
        raise ValueError(f"kind must be 'image' or 'blob', got {o['kind']!r}")
    reencode = o["reencode"]
    if reencode is not None and not isinstance(reencode, str):
        raise TypeError(f"reencode must be 'keep', 'png' or 'jpeg:Q', got {type(reencode).__name__}")
    classes = o["classes"]
    if classes is None:
        return None
    if isinstance(classes, str):
        raise TypeError("classes must be a list of class names or an int, got str")
    if isinstance(classes, int) and not isinstance(classes, bool):
        return [str(i) for i in range(_int("classes", classes, 1, 1 << 20))]
    names = list(classes)
    if not all(isinstance(c, str) for c in names):
        raise TypeError("classes must be a list of str")
    return names


def _path(v: Any) -> str | None:
    return os.fspath(v) if v is not None else None


def _core_args(o: dict[str, Any], names: list[str] | None) -> _core.WriterArgs:
    """The checked arguments of Writer() as the C++ writer takes them."""
    a = _core.WriterArgs()
    a.dataset = o["name"]
    a.split = o["split"]
    a.source_id = o["source_id"]
    a.label_kind = o["label_kind"]
    a.classes = names
    a.kind = o["kind"]
    a.chunk_size = _int("chunk_size", o["chunk_size"], 1024, 16 << 20, optional=True)
    a.description = str(o["description"])
    a.replication = o["replication"]
    a.concurrency = _int("concurrency", o["concurrency"], 1, 4096)
    a.memory_mb = _int("memory_mb", o["memory_mb"], 1, 1 << 20)
    a.commit_interval_s = _seconds("commit_interval", o["commit_interval"])
    a.commit_every = _int("commit_every", o["commit_every"], 0, 1 << 62)
    a.resize_shorter = _int("resize_shorter", o["resize_shorter"], 1, 1 << 20, optional=True) or 0
    a.center_crop = _int("center_crop", o["center_crop"], 1, 1 << 20, optional=True) or 0
    a.reencode = o["reencode"] or ""
    a.resize_target = bool(o["resize_target"])
    hosts = o["hosts"]
    if isinstance(hosts, str):
        hosts = [h for h in hosts.split(",") if h]
    a.hosts = list(hosts) if hosts is not None else None
    a.port = _int("port", o["port"], 1, 65535, optional=True)
    a.keyspace = o["keyspace"]
    a.username = o["username"]
    a.password_file = _path(o["password_file"])
    a.tls_ca = _path(o["tls_ca"])
    a.tls_cert = _path(o["tls_cert"])
    a.tls_key = _path(o["tls_key"])
    a.tls_server_name = o["tls_server_name"]
    a.tls_key_passphrase_file = _path(o["tls_key_passphrase_file"])
    a.tls_insecure_skip_verify = bool(o["tls_insecure_skip_verify"])
    a.secure_bundle = _path(o["secure_bundle"])
    a.local_dc = o["local_dc"]
    a.connections_per_host = _int("connections_per_host", o["connections_per_host"], 1, 64, optional=True)
    a.max_shard_connections = _int("max_shard_connections", o["max_shard_connections"], 1, 65535, optional=True)
    a.io_threads = _int("io_threads", o["io_threads"], 0, 64, optional=True)
    a.connect_timeout_s = _seconds("connect_timeout", o["connect_timeout"])
    return a


class Writer:
    """Writes samples into one split of a dataset, creating it when needed.

    ::

        with cqlstream.Writer("pets", split="train", label_kind="class", classes=["cat", "dog"],
                              source_id="job-42/part-7", hosts="10.0.0.5") as w:
            for path, label in items:
                w.add(open(path, "rb").read(), label=label, path=path, extra={"source": "web"})

    **Resumable and idempotent.** ``source_id`` names the writer's segment of
    the split and a sample's position is the order of its :meth:`add` call.
    A writer opened again with the same ``source_id`` (a retried task)
    resumes: the positions an earlier writer committed are skipped (nothing
    is written; they count in :attr:`resumed`), the others are written. Once
    a writer with that ``source_id`` was closed, the segment is sealed and a
    new writer with it writes nothing. Add the same samples in the same order
    under the same ``source_id`` and no sample is ever stored twice; never run
    two writers with the same ``source_id`` at once (turn Spark's speculative
    execution off).

    **Validation** (as ``cqlstream ingest``): non-empty bytes, at most 1 GiB
    with the target; images must be JPEG, PNG or WebP with a readable header
    unless ``kind="blob"`` (any bytes: ``.npy`` arrays, TIFF, audio, token
    shards); the label of the dataset's label kind (``"class"``: ``label``,
    an int in [0, len(classes)) or a class name; ``"multilabel"``:
    ``labels``; ``"target"``: ``target`` bytes, e.g. a mask; ``"none"``:
    nothing); paths and ``extra`` (str to str) valid text. A refused sample
    raises :class:`cqlstream.InvalidArgumentError` (a ValueError) and takes
    no position.

    **Dataset.** A new dataset is created with ``label_kind`` (default
    ``"none"``), ``classes`` (needed for ``"class"`` and ``"multilabel"``:
    a list of names, or an int N for "0".."N-1"; fixed at creation), ``kind``
    (default ``"image"``), ``chunk_size``, ``description`` and the ingest-time
    preprocessing of images as ``cqlstream ingest`` applies it
    (``resize_shorter``, ``center_crop``, ``reencode`` = ``"jpeg:Q"`` |
    ``"png"``, ``resize_target``). For an existing dataset they may be left
    out (its preprocessing is applied); given, they must match it.

    **Pipeline.** :meth:`add` copies the bytes and returns once the sample is
    queued: at most ``concurrency`` samples and ``memory_mb`` MiB are in
    flight (add waits while either is reached; Ctrl-C on the main thread
    ends that wait with KeyboardInterrupt, the sample not taken). The
    committed watermark advances every ``commit_interval`` seconds (or
    ``commit_every`` samples), at :meth:`flush` and at :meth:`close`, which
    seals the segment (Ctrl-C while they wait for the writes in flight:
    KeyboardInterrupt, nothing committed, the writer still open).
    Leaving the ``with`` block by an exception calls :meth:`abort` instead
    (the watermark is committed, the segment stays open for a retry).

    Connection options are those of :class:`cqlstream.Loader` (hosts, port,
    keyspace, username, password_file, tls_*, secure_bundle, local_dc,
    connections_per_host, max_shard_connections, io_threads,
    connect_timeout), with the same
    CQLSTREAM_* environment defaults.
    """

    def __init__(
        self,
        name: str,
        *,
        source_id: str,
        split: str = "train",
        label_kind: str | None = None,
        classes: Sequence[str] | int | None = None,
        kind: str | None = None,
        chunk_size: int | None = None,
        description: str = "",
        replication: str | None = None,
        concurrency: int = 64,
        memory_mb: int = 256,
        commit_interval: float = 2.0,
        commit_every: int = 0,
        resize_shorter: int | None = None,
        center_crop: int | None = None,
        reencode: str | None = None,
        resize_target: bool = False,
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
        opts = {k: v for k, v in locals().items() if k not in ("self", "unexpected")}
        self._h: _core.WriterHandle | None = None
        self._report: dict[str, Any] | None = None
        names = _check_args(opts, unexpected)
        self._class_index = {c: i for i, c in enumerate(names)} if names is not None else None
        if tls_insecure_skip_verify:
            _warn_insecure_tls("tls_insecure_skip_verify")
        self._h = _core.WriterHandle(_core_args(opts, names))

    def _handle(self) -> _core.WriterHandle:
        if self._h is None:
            raise ValueError("this Writer is closed")
        return self._h

    def add(
        self,
        data: bytes,
        *,
        label: int | str | None = None,
        labels: Sequence[int] | None = None,
        target: bytes | None = None,
        path: str | None = None,
        target_path: str | None = None,
        extra: Mapping[str, str] | None = None,
    ) -> int:
        """Writes the next sample; returns its key (see :func:`cqlstream.format_key`).

        ``path`` names the sample in the dataset's metadata (default
        ``"<source_id>/<position>"``); ``extra`` is stored with it (str to str).
        """
        h = self._handle()
        data = _bytes("data", data)
        if isinstance(label, str):
            if self._class_index is None or label not in self._class_index:
                raise ValueError(f"label {label!r} is not one of the classes given to this Writer")
            label = self._class_index[label]
        elif label is not None:
            label = _int("label", label, -(1 << 31), (1 << 31) - 1)
        if labels is not None:
            labels = [_int("labels[]", x, -(1 << 31), (1 << 31) - 1) for x in labels]
        tgt = _bytes("target", target) if target is not None else None
        if path is not None and not isinstance(path, str):
            path = os.fspath(path)
        if target_path is not None and not isinstance(target_path, str):
            target_path = os.fspath(target_path)
        ex: dict[str, str] = {}
        if extra is not None:
            for k, v in extra.items():
                if not isinstance(k, str) or not isinstance(v, str):
                    raise TypeError(f"extra must map str to str, got {type(k).__name__}: {type(v).__name__}")
                ex[k] = v
        return int(h.add(data, label, labels, tgt, path or "", target_path or "", ex))

    def flush(self) -> None:
        """Waits for the samples in flight and commits the watermark. Ctrl-C
        on the main thread ends the wait for the samples (KeyboardInterrupt):
        nothing is committed, the writer stays open; the same for
        :meth:`close` and :meth:`abort` (not the commit itself, which may
        wait up to the request timeout on a stalled cluster)."""
        self._handle().flush()

    def close(self) -> None:
        """Flushes and seals the segment: this ``source_id`` is complete.
        Raises the error of a write that failed (the segment then stays open)."""
        self._end(seal=True)

    def abort(self) -> None:
        """Flushes and leaves the segment open: a writer with the same
        ``source_id`` resumes after the committed samples. Ctrl-C while it
        waits for the writes in flight: KeyboardInterrupt, the writer still
        open (as in :meth:`flush`)."""
        self._end(seal=False)

    def _end(self, seal: bool) -> None:
        """close() (seal) or abort(): the handle is let go unless the call
        left it open (interrupted while it waited, or refused from a signal
        handler while another call of this writer waits)."""
        if self._h is None:
            return
        h, self._h = self._h, None
        try:
            if seal:
                h.close()
            else:
                h.abort()
        except BaseException:
            if not h.closed:
                self._h = h
            raise
        finally:
            if self._h is None:
                self._report = dict(h.report())

    def report(self) -> dict[str, Any]:
        """dataset, split, source_id, created_dataset, seg, action ('new',
        'resumed', 'complete'), start_count, added, resumed, written, bytes,
        count (committed), sealed."""
        return dict(self._report) if self._h is None and self._report is not None else dict(self._handle().report())

    @property
    def written(self) -> int:
        """Samples this writer wrote."""
        return int(self.report()["written"])

    @property
    def resumed(self) -> int:
        """Samples added that an earlier writer with this source_id had already committed."""
        return int(self.report()["resumed"])

    @property
    def added(self) -> int:
        return int(self.report()["added"])

    @property
    def closed(self) -> bool:
        return self._h is None

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            self.close()
            return
        # The block's exception is the one the caller sees: an abort that
        # fails too is attached to it, never raised in its place. (A second
        # Ctrl-C while the abort waits for the writes in flight is raised,
        # the first exception its context; the writer stays open until
        # close(), abort() or its end.)
        try:
            self.abort()
        except Exception as e:
            note = f"cqlstream.Writer: abort() after this exception failed too: {type(e).__name__}: {e}"
            if hasattr(exc, "add_note"):
                exc.add_note(note)
            else:
                warnings.warn(note, RuntimeWarning, stacklevel=2)

    def __del__(self) -> None:
        # The handle's own end aborts an open writer (its watermark
        # committed, the segment left open) without asking Python's signal
        # handlers: a Ctrl-C raised in __del__ would be printed and lost.
        self._h = None

    def __repr__(self) -> str:
        r = self._report if self._h is None else None
        if r is not None:
            return f"Writer(closed, {r['dataset']!r}, split={r['split']!r}, written={r['written']})"
        if self._h is None:
            return "Writer(closed)"
        r = self.report()
        return (f"Writer({r['dataset']!r}, split={r['split']!r}, source_id={r['source_id']!r}, "
                f"{r['action']}, added={r['added']}, written={r['written']})")
