"""cqlstream for NVIDIA DALI: the ``fn.cqlstream.reader`` plugin and a fallback.

``import cqlstream.dali`` loads the native plugin (``libcqlstream_dali.so``,
built from plugins/dali against the DALI installed at build time: ``pip
install .`` builds it against the DALI of the target environment) into DALI,
which adds ``fn.cqlstream.reader`` and ``fn.cqlstream.keys_reader``. A plugin
loads only on the DALI version it was built for (the build writes it into the
library; :func:`plugin_built_for` reads it). When no plugin can be loaded
(not built, or built for another DALI), :func:`reader` falls back to
``fn.external_source`` over :class:`cqlstream.Loader` with a
:class:`FallbackWarning`; see docs/dali.md for what the fallback lacks
(reader metadata, checkpoints, zero-copy, equal batch counts across shards).

Inside a pipeline definition::

    import cqlstream.dali as cd
    from nvidia.dali import pipeline_def, fn, types

    @pipeline_def(batch_size=256, num_threads=4, device_id=0)
    def train_pipe(shard_id, num_shards):
        jpegs, labels = cd.reader("imagenet", shard_id=shard_id, num_shards=num_shards)
        images = fn.decoders.image(jpegs, device="mixed", output_type=types.RGB)
        return images, labels

or with the ready-made builder :func:`image_pipeline` and the iterator
helper :func:`torch_iterator` (DALIGenericIterator with ``reader_name``).
"""

from __future__ import annotations

import mmap
import os
import re
import sys
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "DALI_VERSION",
    "PluginNotLoadedError",
    "FallbackWarning",
    "plugin_path",
    "plugin_built_for",
    "load_plugin",
    "plugin_loaded",
    "plugin_error",
    "reader",
    "keys_reader",
    "image_pipeline",
    "torch_iterator",
    "LoaderSource",
]

#: The DALI release the project tests first (python/requirements-dali.txt); CI
#: also builds and tests a 1.x release (scripts/test, stage dali-versions). A
#: plugin may be built for any DALI, and loads only on the one it was built for.
DALI_VERSION = "2.4.0"
PLUGIN_FILE = "libcqlstream_dali.so"
#: The marker the build writes into the plugin (plugins/dali/CMakeLists.txt):
#: "cqlstream-dali-built-for:<version>;package=<wheel>;cqlstream=<version>;".
_MARKER = b"cqlstream-dali-built-for:"
_VERSION_RE = re.compile(r"[0-9]+(\.[0-9A-Za-z+-]+)*")

#: Output names, in the operators' order.
_OUTPUTS = ("data", "labels", "target", "keys")
#: loader::kOptionArgNames (src/loader/option_kit.h), as the plugin's schema
#: (plugins/dali/connection_schema.cc) and cqlstream.Loader take them.
_CONNECTION_ARGS = ("hosts", "port", "keyspace", "username", "password_file", "tls_ca", "tls_cert", "tls_key",
                    "tls_server_name", "tls_key_passphrase_file", "tls_insecure_skip_verify", "secure_bundle",
                    "local_dc", "connections_per_host", "max_shard_connections", "io_threads", "connect_timeout",
                    "max_in_flight", "initial_window", "max_connections_per_host", "max_attempts",
                    "request_timeout", "retry_budget", "coalesce")


class PluginNotLoadedError(RuntimeError):
    """The native plugin is not loaded (see :func:`plugin_error` for why)."""


class FallbackWarning(UserWarning):
    """reader() runs on the ``external_source`` fallback because the native plugin is not loaded."""


#: CQLSTREAM_DALI_FALLBACK: "warn" (default: a FallbackWarning) or "error"
#: (PluginNotLoadedError) when reader() would fall back without being asked to.
FALLBACK_ENV = "CQLSTREAM_DALI_FALLBACK"


def _fallback_allowed() -> None:
    """Warns (or raises, with CQLSTREAM_DALI_FALLBACK=error) that reader() falls back, naming why."""
    mode = os.environ.get(FALLBACK_ENV, "warn").strip().lower() or "warn"
    if mode not in ("warn", "error"):
        raise ValueError(f"{FALLBACK_ENV} must be 'warn' or 'error', got {os.environ[FALLBACK_ENV]!r}")
    why = plugin_error() or "the plugin is not loaded"
    msg = (f"cqlstream.dali.reader: the native fn.cqlstream.reader is not available ({why}); using the slower "
           "external_source fallback (no reader metadata or DALI checkpoints; see docs/dali.md). "
           f"Pass use_plugin=False to choose it explicitly, or set {FALLBACK_ENV}=error to fail instead.")
    if mode == "error":
        raise PluginNotLoadedError(msg)
    warnings.warn(msg, FallbackWarning, stacklevel=3)


_lock = threading.Lock()
_loaded_path: str | None = None
_error: str | None = None
_used_fallback = False


def _repo_root() -> Path:
    # python/cqlstream/dali.py -> the repository (an editable install runs in place).
    return Path(__file__).resolve().parents[2]


def _candidates() -> list[Path]:
    out: list[Path] = []
    env = os.environ.get("CQLSTREAM_DALI_PLUGIN")
    if env:
        out.append(Path(env))
    out.append(Path(__file__).resolve().parent / PLUGIN_FILE)  # shipped next to the package
    root = _repo_root()
    build_dirs = []
    if os.environ.get("CQLSTREAM_BUILD_DIR"):
        build_dirs.append(os.environ["CQLSTREAM_BUILD_DIR"])
    build_dirs += ["build", "build-dali"]
    for b in build_dirs:
        p = Path(b)
        out.append((p if p.is_absolute() else root / p) / "plugins" / "dali" / PLUGIN_FILE)
    return out


def plugin_built_for(path: str | os.PathLike[str]) -> str | None:
    """The DALI version the plugin file at ``path`` was built for (read from
    the marker the build writes into it, without loading it); None when the
    file has no readable marker. Raises OSError when the file cannot be read."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return None
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            at = mm.find(_MARKER)
            if at < 0:
                return None
            start = at + len(_MARKER)
            end = mm.find(b";", start, start + 64)
            if end < 0:
                return None
            version = mm[start:end].decode("ascii", "replace")
    return version if _VERSION_RE.fullmatch(version) else None


def _running_dali() -> str | None:
    try:
        import nvidia.dali as dali
    except ImportError:
        return None
    return str(dali.__version__)


def _built_for_or_none(path: Path) -> str | None:
    try:
        return plugin_built_for(path)
    except (OSError, ValueError):
        return None


def plugin_path() -> str | None:
    """Where the plugin would be loaded from: $CQLSTREAM_DALI_PLUGIN as is;
    else the first of: next to this package (``pip install .`` puts it there),
    <repo>/$CQLSTREAM_BUILD_DIR, build, build-dali (``plugins/dali/libcqlstream_dali.so``)
    that was built for the DALI of this process (the first that exists when
    none was, or DALI is not installed); None when none exists."""
    if os.environ.get("CQLSTREAM_DALI_PLUGIN"):
        return os.environ["CQLSTREAM_DALI_PLUGIN"]  # explicit: used (and reported) as is
    existing = [c for c in _candidates() if c.is_file()]
    running = _running_dali()
    if running is not None:
        for c in existing:
            if (_built_for_or_none(c) or DALI_VERSION) == running:  # no marker: the old pinned build
                return str(c)
    return str(existing[0]) if existing else None


def _rebuild_hint() -> str:
    return ("rebuild it against this DALI: `pip install --force-reinstall --no-deps <cqlstream source>` in this "
            "environment, or configure the build with -DCQLSTREAM_BUILD_DALI=ON "
            f"-DCQLSTREAM_DALI_PYTHON={sys.executable} (docs/dali.md, 'Build and install')")


def _version_error(where: str, running: str) -> str | None:
    """Why the plugin at ``where`` cannot run under DALI ``running`` (None: it can)."""
    try:
        built = plugin_built_for(where)
    except (OSError, ValueError) as e:
        return f"cannot read {where}: {e}"
    if built is None:
        # Plugins from before the marker were built by a CMakeLists.txt that
        # accepted only the pinned DALI_VERSION.
        if running == DALI_VERSION:
            return None
        return (f"{where} does not say which DALI it was built for (no version marker: built before cqlstream "
                f"recorded it, when builds were pinned to DALI {DALI_VERSION}, or not a cqlstream plugin), and this "
                f"process has DALI {running}; {_rebuild_hint()}")
    if built != running:
        others = sorted({f"{c} (DALI {v})" for c in _candidates() if c.is_file() and str(c) != where
                         and (v := _built_for_or_none(c)) is not None})
        also = f"; other plugins found: {', '.join(others)}" if others else ""
        return (f"{where} was built for DALI {built}, but this process has DALI {running} (a plugin only runs with "
                f"the DALI it was compiled against); {_rebuild_hint()}{also}")
    return None


def load_plugin(path: str | os.PathLike[str] | None = None, *, required: bool = True) -> bool:
    """Loads the plugin into DALI (once per process).

    Returns True when ``fn.cqlstream`` is available. The plugin must have been
    built for the DALI of this process (:func:`plugin_built_for`). On failure
    raises :class:`PluginNotLoadedError` (``required=True``) or returns False
    and remembers why (:func:`plugin_error`).
    """
    global _loaded_path, _error
    with _lock:
        if _loaded_path is not None:
            return True
        try:
            import nvidia.dali as dali
            import nvidia.dali.plugin_manager as plugin_manager
        except ImportError as e:
            _error = f"nvidia-dali is not installed ({e}); install python/requirements-dali.txt"
        else:
            where = os.fspath(path) if path is not None else plugin_path()
            if where is None:
                _error = ("libcqlstream_dali.so not found (looked in: "
                          + ", ".join(str(c) for c in _candidates())
                          + "); `pip install .` with DALI installed builds it, or build it with "
                          "-DCQLSTREAM_BUILD_DALI=ON, or set CQLSTREAM_DALI_PLUGIN")
            elif (why := _version_error(where, str(dali.__version__))) is not None:
                _error = why
            else:
                try:
                    plugin_manager.load_library(where)
                except Exception as e:  # noqa: BLE001 - any load failure means: not loaded
                    _error = f"loading {where} failed: {e}"
                else:
                    _loaded_path, _error = where, None
                    return True
        if required:
            raise PluginNotLoadedError(_error)
        return False


def plugin_loaded() -> bool:
    """True when ``fn.cqlstream.reader`` is available in this process."""
    return _loaded_path is not None


def plugin_error() -> str | None:
    """Why the plugin is not loaded (None when it is)."""
    return None if _loaded_path is not None else _error


def _connection_kwargs(conn: dict[str, Any]) -> dict[str, Any]:
    unknown = set(conn) - set(_CONNECTION_ARGS)
    if "password" in unknown:
        raise TypeError("no password= argument: operator arguments end up in serialized pipelines; use "
                        "password_file=... or CQLSTREAM_PASSWORD_FILE / CQLSTREAM_PASSWORD")
    if unknown:
        raise TypeError(f"unexpected argument(s): {', '.join(sorted(unknown))}")
    out = {k: v for k, v in conn.items() if v is not None}
    if isinstance(out.get("hosts"), str):
        out["hosts"] = [h for h in out["hosts"].split(",") if h]
    for k in ("password_file", "tls_ca", "tls_cert", "tls_key", "tls_key_passphrase_file", "secure_bundle"):
        if k in out:
            out[k] = os.fspath(out[k])
    return out


def reader(
    dataset: str,
    *,
    split: str = "train",
    selection: str | os.PathLike[str] | None = None,
    shuffle: bool = True,
    seed: int = 0,
    shard_id: int = 0,
    num_shards: int = 1,
    ordered: bool = False,
    packed: bool = False,
    name: str = "Reader",
    on_missing: str = "raise",
    verify_checksums: bool = False,
    memory_bytes: int = 0,
    output_target: bool = False,
    output_keys: bool = False,
    zero_copy: bool = True,
    output: str = "bytes",
    target_output: str = "bytes",
    use_plugin: bool | None = None,
    **connection: Any,
) -> tuple[Any, ...]:
    """The samples of a dataset split as DALI data nodes: ``(data, labels[, target][, keys])``.

    Call inside a pipeline definition; the batch size is the pipeline's.
    ``use_plugin``: True requires the native reader, False forces the
    ``external_source`` fallback, None (default) uses the plugin when it is
    loaded, else falls back with a :class:`FallbackWarning` naming why (an
    error instead with CQLSTREAM_DALI_FALLBACK=error). ``seed`` is the shuffle seed, the same in every shard (passed to
    the operator as ``shuffle_seed``: DALI would overwrite an argument named
    ``seed`` with a per-pipeline value and the shards would overlap).
    ``packed``: read the split's packs (``cqlstream pack``) one per request,
    in the packed order (docs/loader.md, "Packed reads").
    ``output`` / ``target_output``: "bytes" or "npy" (typed tensors decoded
    from .npy blobs; native plugin only, see docs/dali.md).
    Connection keywords: hosts, port, keyspace, username, password_file,
    tls_ca, tls_cert, tls_key, tls_server_name, tls_insecure_skip_verify,
    local_dc, connections_per_host, max_shard_connections, io_threads;
    throttles: max_in_flight,
    max_connections_per_host, coalesce (keys per coalesced read of small
    samples: 0 automatic, 1 off, at most 100) (resolved by the same code as
    the CLI's flags and Loader's keywords).
    """
    conn = _connection_kwargs(connection)
    if use_plugin is None:
        use_plugin = plugin_loaded() or load_plugin(required=False)
        if not use_plugin:
            _fallback_allowed()
    elif use_plugin:
        load_plugin(required=True)
    if use_plugin:
        from nvidia.dali import fn

        kw: dict[str, Any] = dict(
            dataset=dataset, split=split, shuffle=shuffle, shuffle_seed=int(seed), shard_id=shard_id,
            num_shards=num_shards, ordered=ordered, packed=packed, name=name, on_missing=on_missing,
            verify_checksums=verify_checksums, memory_bytes=int(memory_bytes), output_target=output_target,
            output_keys=output_keys, zero_copy=zero_copy, output=output, target_output=target_output, **conn)
        if selection is not None:
            kw["selection"] = os.fspath(selection)
        out = fn.cqlstream.reader(**kw)
        return tuple(out) if isinstance(out, (list, tuple)) else (out,)
    if output != "bytes" or target_output != "bytes":
        raise ValueError("output='npy' / target_output='npy' need the native plugin (the external_source "
                         f"fallback hands out bytes): {plugin_error() or 'use_plugin=False'}")
    return _fallback_reader(dataset, split=split, selection=selection, shuffle=shuffle, seed=seed,
                            shard_id=shard_id, num_shards=num_shards, ordered=ordered, packed=packed,
                            on_missing=on_missing,
                            verify_checksums=verify_checksums, memory_bytes=memory_bytes,
                            output_target=output_target, output_keys=output_keys, name=name, conn=conn)


def keys_reader(
    keys: Any,
    dataset: str,
    *,
    split: str = "train",
    verify_checksums: bool = False,
    memory_bytes: int = 0,
    output_target: bool = False,
    output_keys: bool = False,
    zero_copy: bool = True,
    output: str = "bytes",
    target_output: str = "bytes",
    **connection: Any,
) -> tuple[Any, ...]:
    """Interactive mode: fetches the samples whose keys (int64/uint64 data node,
    one key per sample) it is given: ``(data, labels[, target][, keys])``.
    Needs the native plugin (e.g. in a Triton DALI backend model)."""
    load_plugin(required=True)
    from nvidia.dali import fn

    out = fn.cqlstream.keys_reader(keys, dataset=dataset, split=split, verify_checksums=verify_checksums,
                                   memory_bytes=int(memory_bytes), output_target=output_target,
                                   output_keys=output_keys, zero_copy=zero_copy, output=output,
                                   target_output=target_output, **_connection_kwargs(connection))
    return tuple(out) if isinstance(out, (list, tuple)) else (out,)


# ---------------------------------------------------------------------------
# The fallback: fn.external_source over cqlstream.Loader.


class LoaderSource:
    """A batch callable for ``fn.external_source``: each call returns the next
    batch of a :class:`cqlstream.Loader` as per-output lists of NumPy arrays
    (views into the loader's batch memory, which DALI copies once), and
    raises StopIteration at the end of each epoch (the next call starts the
    next epoch). The loader is opened on first use, so the source can be
    created before the pipeline is built.
    """

    def __init__(self, dataset: str, *, batch_size: int, outputs: Sequence[str] = ("data", "labels"),
                 **loader_kwargs: Any) -> None:
        bad = set(outputs) - set(_OUTPUTS)
        if bad or "data" not in outputs:
            raise ValueError(f"outputs must include 'data' and be among {_OUTPUTS}, got {list(outputs)}")
        self._dataset = dataset
        self._batch_size = int(batch_size)
        self._outputs = tuple(outputs)
        self._kwargs = dict(loader_kwargs)
        self._loader: Any = None
        self._multilabel = False

    @property
    def loader(self) -> Any:
        """The cqlstream.Loader (opened on first access)."""
        if self._loader is None:
            import cqlstream

            self._loader = cqlstream.Loader(self._dataset, batch_size=self._batch_size, epochs=None,
                                            **self._kwargs)
            self._multilabel = self._loader.dataset_info.get("label_kind") == "multilabel"
            if "target" in self._outputs and self._loader.dataset_info.get("label_kind") != "target":
                raise ValueError(f"output_target=True needs a dataset with label kind 'target'; "
                                 f"'{self._dataset}' has '{self._loader.dataset_info.get('label_kind')}'")
        return self._loader

    def __call__(self) -> tuple[list[Any], ...]:
        import numpy as np

        batch = self.loader.next_batch()
        if batch is None:
            raise StopIteration
        data = np.asarray(batch.data)
        offsets, sizes, image_sizes = batch.offsets, batch.sizes, batch.image_sizes
        n = len(batch)
        cols: dict[str, list[Any]] = {}
        cols["data"] = [data[int(offsets[i]):int(offsets[i]) + int(image_sizes[i])] for i in range(n)]
        if "labels" in self._outputs:
            if self._multilabel:
                cols["labels"] = [np.asarray(batch.multilabels[i], dtype=np.int32) for i in range(n)]
            else:
                cols["labels"] = [np.asarray(batch.labels[i], dtype=np.int32) for i in range(n)]
        if "target" in self._outputs:
            cols["target"] = [data[int(offsets[i]) + int(image_sizes[i]):int(offsets[i]) + int(sizes[i])]
                              for i in range(n)]
        if "keys" in self._outputs:
            cols["keys"] = [np.asarray(batch.keys[i], dtype=np.int64) for i in range(n)]
        return tuple(cols[o] for o in self._outputs)

    def close(self) -> None:
        if self._loader is not None:
            self._loader.close()


def _fallback_reader(dataset: str, *, split: str, selection: Any, shuffle: bool, seed: int, shard_id: int,
                     num_shards: int, ordered: bool, packed: bool, on_missing: str, verify_checksums: bool,
                     memory_bytes: int,
                     output_target: bool, output_keys: bool, name: str, conn: dict[str, Any]) -> tuple[Any, ...]:
    global _used_fallback
    from nvidia.dali import fn
    from nvidia.dali.pipeline import Pipeline

    pipe = Pipeline.current()
    if pipe is None:
        raise RuntimeError("cqlstream.dali.reader must be called inside a pipeline definition")
    outputs = ["data", "labels"] + (["target"] if output_target else []) + (["keys"] if output_keys else [])
    source = LoaderSource(dataset, batch_size=pipe.max_batch_size, outputs=outputs, split=split,
                          selection=selection, shuffle=shuffle, seed=seed, rank=shard_id, world_size=num_shards,
                          ordered=ordered, packed=packed, on_missing=on_missing,
                          verify_checksums=verify_checksums, memory_bytes=memory_bytes or None, **conn)
    _used_fallback = True
    nodes = fn.external_source(source=source, num_outputs=len(outputs), batch=True)
    return tuple(nodes)


# ---------------------------------------------------------------------------
# Ready-made pipeline and iterator.


def image_pipeline(
    dataset: str,
    *,
    batch_size: int,
    num_threads: int = 4,
    device_id: int | None = None,
    decode_device: str = "cpu",
    channels: int = 3,
    size: int | tuple[int, int] | None = None,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
    layout: str = "CHW",
    split: str = "train",
    shuffle: bool = True,
    seed: int = 0,
    shard_id: int = 0,
    num_shards: int = 1,
    name: str = "Reader",
    use_plugin: bool | None = None,
    prefetch_queue_depth: int = 2,
    enable_checkpointing: bool = False,
    checkpoint: Any = None,
    **reader_kwargs: Any,
) -> Any:
    """A DALI pipeline (not yet built) with outputs ``images, labels``.

    Reads with :func:`reader`, decodes on ``decode_device`` ("cpu", or
    "mixed" for nvJPEG on the GPU; needs ``device_id``), optionally resizes
    to ``size`` and, with ``mean``/``std`` (0-255 scale), normalizes to float
    in ``layout`` ("CHW" or "HWC"). Without ``mean`` the images stay uint8 HWC.
    """
    from nvidia.dali import fn, types
    from nvidia.dali.pipeline import Pipeline

    if channels not in (1, 3):
        raise ValueError(f"channels must be 1 or 3, got {channels}")
    if decode_device == "mixed" and device_id is None:
        raise ValueError("decode_device='mixed' needs a device_id (a GPU)")
    kw: dict[str, Any] = {}
    if checkpoint is not None:
        kw["checkpoint"] = checkpoint
    pipe = Pipeline(batch_size=batch_size, num_threads=num_threads, device_id=device_id,
                    prefetch_queue_depth=prefetch_queue_depth, enable_checkpointing=enable_checkpointing, **kw)
    with pipe:
        out = reader(dataset, split=split, shuffle=shuffle, seed=seed, shard_id=shard_id, num_shards=num_shards,
                     name=name, use_plugin=use_plugin, **reader_kwargs)
        data, labels = out[0], out[1]
        images = fn.decoders.image(data, device=decode_device, output_type=types.GRAY if channels == 1 else types.RGB)
        if size is not None:
            h, w = (size, size) if isinstance(size, int) else size
            images = fn.resize(images, resize_x=w, resize_y=h)
        if mean is not None or std is not None:
            m = list(mean) if mean is not None else [0.0] * channels
            s = list(std) if std is not None else [1.0] * channels
            images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout=layout, mean=m, std=s)
        pipe.set_outputs(images, labels)
    pipe.cqlstream_reader = "plugin" if (use_plugin is not False and plugin_loaded()) else "fallback"
    pipe.cqlstream_reader_name = name
    return pipe


def torch_iterator(pipelines: Any, output_map: Sequence[str] = ("images", "labels"), *,
                   last_batch_policy: Any = None, auto_reset: bool = True, **kwargs: Any) -> Any:
    """DALIGenericIterator over cqlstream pipelines with the right epoch
    accounting: ``reader_name`` for the native reader (the padding of the
    last batch is dropped with the default ``LastBatchPolicy.PARTIAL``), the
    fallback's end-of-epoch StopIteration otherwise."""
    from nvidia.dali.plugin.base_iterator import LastBatchPolicy
    from nvidia.dali.plugin.pytorch import DALIGenericIterator

    pipes = pipelines if isinstance(pipelines, (list, tuple)) else [pipelines]
    policy = LastBatchPolicy.PARTIAL if last_batch_policy is None else last_batch_policy
    kinds = {getattr(p, "cqlstream_reader", "plugin") for p in pipes}
    if kinds == {"plugin"}:
        names = {getattr(p, "cqlstream_reader_name", "Reader") for p in pipes}
        if len(names) != 1:
            raise ValueError(f"the pipelines name their readers differently: {sorted(names)}")
        return DALIGenericIterator(pipes, list(output_map), reader_name=names.pop(), last_batch_policy=policy,
                                   auto_reset=auto_reset, **kwargs)
    if kinds == {"fallback"}:
        return DALIGenericIterator(pipes, list(output_map), last_batch_policy=policy, auto_reset=auto_reset,
                                   **kwargs)
    raise ValueError("cannot mix pipelines of the native reader and of the fallback in one iterator")


# `import cqlstream.dali` loads the plugin when it can; the reason it could
# not is kept for plugin_error() (and the fallback is used).
load_plugin(required=False)
