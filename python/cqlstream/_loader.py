"""cqlstream.Loader: the Python face of the C++ loader (see docs/python.md)."""

from __future__ import annotations

import math
import operator
import os
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Union

from . import _core
from ._core import Batch

__all__ = ["Loader", "DecodeSpec", "parse_keys", "InsecureTlsWarning", "MAX_SECONDS", "MAX_BATCH_SIZE"]

#: What ``decode=`` accepts: None (raw bytes), a side S (S x S), (H, W), or
#: {"size": (H, W) | S, "channels": 1 | 3, "mode": "crop" | "stretch", "jpeg_scaling": bool,
#: "max_pixels": int (most pixels one image may decode to; 0/absent: max(2^25, 64 x H x W))}
#: for images; "npy" or {"npy": True, "targets": "bytes" | "npy"} for .npy arrays (blob datasets).
DecodeSpec = Union[None, str, int, Sequence[int], Mapping[str, Any]]

_PASSWORD_REFUSED = (
    "Loader() does not accept password=: a password in code ends up in notebooks, logs and "
    "process listings. Put it in a file and pass password_file=..., or set "
    "CQLSTREAM_PASSWORD_FILE (or CQLSTREAM_PASSWORD) in the environment."
)

_DECODE_KEYS = {"size", "channels", "mode", "jpeg_scaling", "max_pixels"}
_NPY_KEYS = {"npy", "targets"}


def _parse_npy(spec: Any) -> dict[str, Any]:
    """decode="npy" or {"npy": True, "targets": "bytes" | "npy"}: .npy arrays out of a blob dataset."""
    if isinstance(spec, str):
        if spec != "npy":
            raise ValueError(f"decode must be 'npy' (for .npy arrays) when it is a string, got {spec!r}")
        return {"npy": True, "targets": "bytes"}
    unknown = set(spec) - _NPY_KEYS
    if unknown:
        raise ValueError(f"unknown .npy decode option(s) {sorted(unknown)}; known: {sorted(_NPY_KEYS)}")
    if spec["npy"] is not True:
        raise ValueError(f"decode={{'npy': ...}} takes True, got {spec['npy']!r}; use decode=None for raw bytes")
    targets = spec.get("targets", "bytes")
    if targets not in ("bytes", "npy"):
        raise ValueError(f"decode targets must be 'bytes' or 'npy', got {targets!r}")
    return {"npy": True, "targets": targets}


def _size(v: Any) -> tuple[int, int]:
    if isinstance(v, int) and not isinstance(v, bool):
        return (v, v)
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return (int(v[0]), int(v[1]))
    raise ValueError(f"decode size must be an int S or a pair (H, W) of ints, got {v!r}")


def _parse_decode(spec: DecodeSpec) -> dict[str, Any] | None:
    if spec is None:
        return None
    if isinstance(spec, str) or isinstance(spec, Mapping) and "npy" in spec:
        return _parse_npy(spec)
    if isinstance(spec, Mapping):
        unknown = set(spec) - _DECODE_KEYS
        if unknown:
            raise ValueError(f"unknown decode option(s) {sorted(unknown)}; known: {sorted(_DECODE_KEYS)}")
        if "size" not in spec:
            raise ValueError("decode={...} needs a 'size': (H, W)")
        out = {"size": _size(spec["size"]), "channels": _int("decode channels", spec.get("channels", 3), 1, 3),
               "mode": str(spec.get("mode", "crop")), "jpeg_scaling": bool(spec.get("jpeg_scaling", True)),
               "max_pixels": _int("decode max_pixels", spec.get("max_pixels", 0), 0, 1 << 28)}
    else:
        out = {"size": _size(spec), "channels": 3, "mode": "crop", "jpeg_scaling": True, "max_pixels": 0}
    if out["channels"] not in (1, 3):
        raise ValueError(f"decode channels must be 1 or 3, got {out['channels']}")
    if out["mode"] not in ("crop", "stretch"):
        raise ValueError(f"decode mode must be 'crop' or 'stretch', got {out['mode']!r}")
    return out


def parse_keys(keys: Iterable[Any]) -> list[int]:
    """Sample keys as 64-bit ints, from ints, (seg, idx) pairs or "seg:idx" strings."""
    out: list[int] = []
    for k in keys:
        if isinstance(k, str):
            seg, sep, idx = k.partition(":")
            if not sep:
                raise ValueError(f"key {k!r} is not 'seg:idx'")
            out.append(_core.make_key(int(seg), int(idx)))
        elif isinstance(k, (tuple, list)):
            if len(k) != 2:
                raise ValueError(f"key {k!r} is not a (seg, idx) pair")
            out.append(_core.make_key(int(k[0]), int(k[1])))
        else:
            v = int(k)
            if v < 0 or v >= 1 << 64:
                raise ValueError(f"key {k!r} is not a 64-bit sample key")
            out.append(v)
    return out


#: The longest timeout or retry budget accepted, in seconds (one day).
MAX_SECONDS = 86400.0
_I32 = (1 << 31) - 1
_I64 = (1 << 63) - 1
#: The largest batch accepted (16 Mi samples).
MAX_BATCH_SIZE = 1 << 24


def _seconds(name: str, v: Any) -> float | None:
    """A duration in seconds: None, or a finite real number in (0, MAX_SECONDS]."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) and not hasattr(v, "__float__"):
        raise TypeError(f"{name} must be a number of seconds, got {type(v).__name__} {v!r}")
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):
        raise TypeError(f"{name} must be a number of seconds, got {type(v).__name__} {v!r}") from None
    if not math.isfinite(f) or f <= 0 or f > MAX_SECONDS:
        raise ValueError(f"{name} must be a finite number of seconds in (0, {MAX_SECONDS:g}], got {v!r}")
    return f


def _int(name: str, v: Any, lo: int, hi: int, *, optional: bool = False) -> int | None:
    """An integer argument (Python or NumPy int, not bool or float) within [lo, hi]."""
    if v is None and optional:
        return None
    if isinstance(v, bool):
        raise TypeError(f"{name} must be an int, got bool {v!r}")
    try:
        i = operator.index(v)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(v).__name__} {v!r}") from None
    if i < lo or i > hi:
        raise ValueError(f"{name} must be an int in [{lo}, {hi}], got {i}")
    return i


def _warn_insecure_tls(option: str, stacklevel: int = 3) -> None:
    """The warning the CLI prints for --tls-insecure-skip-verify, as a Python warning and on stderr."""
    msg = _core.insecure_tls_warning(option)
    print(f"cqlstream: WARNING: {msg}", file=sys.stderr, flush=True)
    warnings.warn(msg, InsecureTlsWarning, stacklevel=stacklevel)


class InsecureTlsWarning(UserWarning):
    """TLS is used without verifying the server's certificate (tls_insecure_skip_verify=True)."""


def _state_bytes(s: Any) -> bytes:
    if isinstance(s, Mapping):
        if "checkpoint" not in s:
            raise ValueError("a loader state dict needs its 'checkpoint' entry (from Loader.state_dict())")
        s = s["checkpoint"]
    if isinstance(s, (bytes, bytearray, memoryview)):
        return bytes(s)
    raise TypeError(f"expected a Loader.state_dict() (or its checkpoint bytes), got {type(s).__name__}")


# (name, lowest, highest, None allowed) of each integer argument of Loader(),
# checked in this order.
_INT_ARGS = (
    ("batch_size", 1, MAX_BATCH_SIZE, False),
    ("seed", 0, (1 << 64) - 1, False),
    ("rank", 0, _I32, True),
    ("world_size", 1, _I32, True),
    ("epochs", 1, _I64, True),
    ("memory_bytes", 0, _I64, True),
    ("prefetch", 1, 1024, False),
    ("decode_threads", 0, 1024, True),
    ("port", 1, 65535, True),
    ("connections_per_host", 1, 64, True),
    ("max_shard_connections", 1, 65535, True),
    ("io_threads", 0, 64, True),
    ("max_in_flight", 1, _I32, True),
    ("initial_window", 1, _I32, True),
    ("max_connections_per_host", 1, 1024, True),
    ("max_attempts", 1, _I32, True),
    ("coalesce", 0, 100, True),
)


def _check_args(o: dict[str, Any], unexpected: dict[str, Any]) -> dict[str, Any] | None:
    """Refuses what Loader() cannot take and replaces each number in ``o`` by
    its checked value; returns the parsed ``decode`` spec (None: raw bytes)."""
    if "password" in unexpected:
        raise TypeError(_PASSWORD_REFUSED)
    if "tls_key_passphrase" in unexpected:
        raise TypeError("Loader() does not accept tls_key_passphrase=: pass tls_key_passphrase_file=... or set "
                        "CQLSTREAM_TLS_KEY_PASSPHRASE_FILE / CQLSTREAM_TLS_KEY_PASSPHRASE")
    if unexpected:
        raise TypeError(f"Loader() got unexpected keyword argument(s): {', '.join(sorted(unexpected))}")
    if not isinstance(o["dataset"], str) or not o["dataset"]:
        raise ValueError("dataset must be a non-empty string")
    # Every number is checked here, naming the parameter: nanobind's own
    # "incompatible function arguments" names none, and a float seed
    # would be truncated silently.
    for name, lo, hi, optional in _INT_ARGS:
        o[name] = _int(name, o[name], lo, hi, optional=optional)
    if o["on_missing"] not in ("raise", "skip"):
        raise ValueError(f"on_missing must be 'raise' or 'skip', got {o['on_missing']!r}")
    return _parse_decode(o["decode"])


def _path(v: Any) -> str | None:
    return os.fspath(v) if v is not None else None


def _core_args(o: dict[str, Any], dec: dict[str, Any] | None) -> _core.OpenArgs:
    """The checked arguments of Loader() as the C++ loader takes them."""
    a = _core.OpenArgs()
    for name in ("dataset", "split", "batch_size", "seed", "rank", "world_size", "epochs", "on_missing",
                 "memory_bytes", "max_in_flight", "initial_window", "max_connections_per_host", "max_attempts",
                 "port", "keyspace", "username", "tls_server_name", "local_dc", "connections_per_host",
                 "max_shard_connections", "io_threads", "prefetch"):
        setattr(a, name, o[name])
    for name in ("shuffle", "ordered", "drop_last", "verify_checksums", "adaptive", "hedge", "packed",
                 "tls_insecure_skip_verify"):
        setattr(a, name, bool(o[name]))
    for name in ("selection", "password_file", "tls_ca", "tls_cert", "tls_key", "tls_key_passphrase_file",
                 "secure_bundle"):
        setattr(a, name, _path(o[name]))
    if o["coalesce"] is not None:  # unset: the core's automatic value
        a.coalesce = o["coalesce"]
    a.request_timeout_s = _seconds("request_timeout", o["request_timeout"])
    a.retry_budget_s = _seconds("retry_budget", o["retry_budget"])
    hosts = o["hosts"]
    if isinstance(hosts, str):
        hosts = [h for h in hosts.split(",") if h]
    a.hosts = list(hosts) if hosts is not None else None
    a.connect_timeout_s = _seconds("connect_timeout", o["connect_timeout"])
    if dec is not None and dec.get("npy"):
        a.npy = True
        a.npy_targets = dec["targets"]
    elif dec is not None:
        a.decode_size = dec["size"]
        a.decode_channels = dec["channels"]
        a.decode_mode = dec["mode"]
        a.jpeg_scaling = dec["jpeg_scaling"]
        a.max_decode_pixels = dec["max_pixels"]
    a.decode_threads = o["decode_threads"] or 0
    return a


class Loader:
    """Streams batches of a dataset split (or selection) from Cassandra / ScyllaDB.

    Iterating the loader yields the batches of the next epoch, like a
    PyTorch DataLoader::

        loader = cqlstream.Loader("fashion_mnist", batch_size=256, epochs=3, decode=(28, 28))
        for epoch in range(3):
            for batch in loader:
                train(batch.images, batch.labels)

    At most ``epochs`` epochs are delivered (None: endless); iterating after
    the last one yields nothing. Leaving an epoch early (``break``) and
    iterating again continues that epoch where it stopped.

    Batches (:class:`cqlstream.Batch`): ``data`` (all samples' bytes, one
    read-only uint8 array over the batch buffer), ``offsets``, ``sizes``,
    ``image_sizes``, ``labels``, ``keys``, ``len(batch)``, ``batch[i]``;
    with ``decode=`` instead ``images`` (N, H, W, C uint8); with
    ``decode="npy"`` (datasets ingested with ``--kind blob``) ``arrays``
    (one typed array per sample), ``array`` (their (N, ...) stack when
    every sample has the same dtype and shape) and ``targets``. All are
    zero-copy views that keep the memory alive on their own;
    ``batch.torch()`` and ``torch.from_dlpack(...)`` give tensors over the
    same memory. See docs/python.md for every option.

    Connection options (hosts, port, keyspace, username, password_file,
    tls_ca, tls_cert, tls_key, tls_key_passphrase_file, secure_bundle,
    local_dc) default to the CQLSTREAM_* environment variables, then to
    127.0.0.1:9042 and keyspace ``cqlstream``. A password is only read from
    a file (``password_file``, CQLSTREAM_PASSWORD_FILE) or
    CQLSTREAM_PASSWORD, never passed in code; so is the passphrase of an
    encrypted client key (``tls_key_passphrase_file``,
    CQLSTREAM_TLS_KEY_PASSPHRASE_FILE or CQLSTREAM_TLS_KEY_PASSPHRASE).
    ``secure_bundle`` (a cloud secure-connect bundle zip) gives the endpoint
    and the TLS certificates instead of hosts/port/tls_* (docs/security.md).
    """

    def __init__(
        self,
        dataset: str,
        *,
        split: str = "train",
        selection: str | os.PathLike[str] | None = None,
        batch_size: int = 256,
        shuffle: bool = True,
        seed: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        ordered: bool = False,
        drop_last: bool = False,
        epochs: int | None = 1,
        on_missing: str = "raise",
        verify_checksums: bool = False,
        memory_bytes: int | None = None,
        decode: DecodeSpec = None,
        prefetch: int = 2,
        decode_threads: int | None = None,
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
        max_in_flight: int | None = None,
        initial_window: int | None = None,
        adaptive: bool = True,
        max_connections_per_host: int | None = None,
        request_timeout: float | None = None,
        max_attempts: int | None = None,
        retry_budget: float | None = None,
        hedge: bool = True,
        coalesce: int | None = None,
        packed: bool = False,
        **unexpected: Any,
    ) -> None:
        opts = {k: v for k, v in locals().items() if k not in ("self", "unexpected")}
        self._core: _core.Loader | None = None
        self._closed = True
        dec = _check_args(opts, unexpected)
        if tls_insecure_skip_verify:
            _warn_insecure_tls("tls_insecure_skip_verify")
        a = _core_args(opts, dec)
        self._decode = dec
        self._core = _core.Loader(a)
        self._closed = False
        self._info: dict[str, Any] | None = None

    # -- iteration ---------------------------------------------------------

    def _live(self) -> _core.Loader:
        if self._closed or self._core is None:
            raise ValueError("the loader is closed")
        return self._core

    def __iter__(self) -> Iterator[Batch]:
        """The batches of the current (or next) epoch."""
        core = self._live()
        return self._epoch(core)

    @staticmethod
    def _epoch(core: _core.Loader) -> Iterator[Batch]:
        while True:
            b = core.next()
            if b is None:
                return
            yield b

    def next_batch(self) -> Batch | None:
        """The next batch of the current epoch, or None at its end."""
        return self._live().next()

    def __len__(self) -> int:
        """Batches per epoch for this rank."""
        return int(self._live().batches_per_epoch)

    # -- checkpoints -------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """A checkpoint at the batch boundary the consumer has reached.

        ``checkpoint`` holds the opaque bytes (all that load_state_dict
        needs); ``epoch``, ``rank``, ``world_size``, ``batches_delivered``,
        ``samples_remaining`` and the rest are for humans. Plain types only,
        so it fits torch.save / json (after base64) / pickle.
        """
        st = self._live().state()
        d: dict[str, Any] = {"format": "cqlstream.loader/1", "checkpoint": st}
        d.update(_core.describe_state(st))
        return d

    def load_state_dict(self, state: Any) -> None:
        """Restores a checkpoint before the first batch is read.

        ``state`` is this rank's own ``state_dict()`` (same world size), or a
        list with the state dicts of *every* rank of the previous run (any
        world size): the rest of the epoch is then re-split over this run's
        ranks and delivered exactly once.
        """
        states = list(state) if isinstance(state, (list, tuple)) else [state]
        if not states:
            raise ValueError("load_state_dict() got an empty list of states")
        self._live().restore([_state_bytes(s) for s in states])

    # -- other -------------------------------------------------------------

    def fetch(self, keys: Iterable[Any]) -> Batch:
        """Reads exactly these samples now, in this order (interactive mode).

        Keys are 64-bit ints (``batch.keys`` values), (seg, idx) pairs or
        "seg:idx" strings; any committed sample of the dataset. Decoded when
        the loader decodes. Safe to call while another thread iterates.
        """
        return self._live().fetch(parse_keys(keys))

    def metrics(self) -> dict[str, float]:
        """Throughput, latency, window, memory and error counters (see docs/python.md)."""
        return dict(self._live().metrics())

    @property
    def dataset_info(self) -> dict[str, Any]:
        """The catalog entry: name, label_kind, class_names, splits with their sample counts."""
        if self._info is None:
            self._info = dict(self._live().dataset_info())
        return self._info

    @property
    def class_names(self) -> list[str]:
        return list(self.dataset_info["class_names"])

    @property
    def rank(self) -> int:
        return int(self._live().rank)

    @property
    def world_size(self) -> int:
        return int(self._live().world_size)

    @property
    def samples_per_epoch(self) -> int:
        return int(self._live().samples_per_epoch)

    @property
    def done(self) -> bool:
        """True when every epoch has been delivered (never for endless loaders)."""
        return bool(self._live().done)

    @property
    def decode(self) -> dict[str, Any] | None:
        """The decode settings (None: raw bytes)."""
        return None if self._decode is None else dict(self._decode)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stops reading and frees the connections. Batches already handed out stay valid."""
        if self._core is not None and not self._closed:
            self._closed = True
            self._core.close()

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._closed or self._core is None:
            return "<cqlstream.Loader closed>"
        c = self._core
        dec = ""
        if self._decode is not None:
            dec = ", decode npy" if self._decode.get("npy") else f", decode {self._decode['size']}"
        return f"<cqlstream.Loader rank {c.rank}/{c.world_size}, {c.batches_per_epoch} batches per epoch{dec}>"
