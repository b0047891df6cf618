"""Triton-style serving with DALI: keys in, samples out (docs/triton.md).

Two input operators of the cqlstream DALI plugin, fed with the keys of each
request by name (``Pipeline.feed_input(name, keys)``, or the Triton model
input of that name when the serialized pipeline runs in Triton's DALI
backend):

* :func:`interactive_reader` (``fn.cqlstream.interactive_reader``): one output
  iteration per request, exactly the keys requested, in request order.
  Requests fed ahead are fetched concurrently (``prefetch_requests``), so
  back-to-back requests overlap their network round trips.
* :func:`decoupled_reader` (``fn.cqlstream.decoupled_reader``): one long
  request streams back as iterations of ``mini_batch_size`` samples (out of
  order within the request, each key exactly once), as Triton's decoupled
  mode expects.

:func:`run_requests` drives a pipeline the way a server does, keeping a
number of requests queued; :func:`stats` reads an operator's counters.
Keys are ``seg << 32 | idx`` (the ``keys`` output of the readers and the
lines of ``cqlstream select`` files).
"""

from __future__ import annotations

import ctypes
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from . import dali as _cd

__all__ = ["interactive_reader", "decoupled_reader", "keys_array", "run_requests", "stats"]

_OPTIONS = ("split", "verify_checksums", "memory_bytes", "output_target", "output_keys", "zero_copy", "blocking")


def _outputs(op: Any, dataset: str, name: str, extra: dict[str, Any], options: dict[str, Any],
             connection: dict[str, Any]) -> tuple[Any, ...]:
    _cd.load_plugin(required=True)
    if not name:
        raise ValueError("name must be set: requests are fed to the operator by name")
    unknown = set(options) - set(_OPTIONS)
    if unknown:
        raise TypeError(f"unexpected argument(s): {', '.join(sorted(unknown))}")
    kw = dict(dataset=dataset, name=name, **extra, **options, **_cd._connection_kwargs(connection))
    if "memory_bytes" in kw:
        kw["memory_bytes"] = int(kw["memory_bytes"])
    out = op(**kw)
    return tuple(out) if isinstance(out, (list, tuple)) else (out,)


def _split(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    options = {k: kwargs.pop(k) for k in list(kwargs) if k in _OPTIONS}
    return options, kwargs


def interactive_reader(dataset: str, *, name: str = "KEYS", prefetch_requests: int = 8,
                       **kwargs: Any) -> tuple[Any, ...]:
    """``(data, labels[, target][, keys])`` of the keys fed to ``name``, one
    iteration per request. Options as :func:`cqlstream.dali.keys_reader`
    (split, verify_checksums, memory_bytes, output_target, output_keys,
    zero_copy, blocking) plus the connection arguments."""
    from nvidia.dali import fn

    _cd.load_plugin(required=True)
    options, connection = _split(dict(kwargs))
    return _outputs(fn.cqlstream.interactive_reader, dataset, name, {"prefetch_requests": int(prefetch_requests)},
                    options, connection)


def decoupled_reader(dataset: str, *, name: str = "KEYS", mini_batch_size: int = -1, prefetch_requests: int = 4,
                     **kwargs: Any) -> tuple[Any, ...]:
    """Streams each request fed to ``name`` back as iterations of
    ``mini_batch_size`` samples (out of order within the request). Same
    options as :func:`interactive_reader`."""
    from nvidia.dali import fn

    _cd.load_plugin(required=True)
    options, connection = _split(dict(kwargs))
    extra = {"mini_batch_size": int(mini_batch_size), "prefetch_requests": int(prefetch_requests)}
    return _outputs(fn.cqlstream.decoupled_reader, dataset, name, extra, options, connection)


def keys_array(keys: Iterable[int]) -> np.ndarray:
    """A request: the keys as an int64 array of shape [N] (one key per sample)."""
    a = np.asarray(list(keys), dtype=np.uint64).astype(np.int64)
    if a.ndim != 1:
        raise ValueError("keys must be a flat sequence of integers")
    return a


def _check_pipeline(pipe: Any, queued: int) -> None:
    """Refuses a pipeline run_requests cannot keep ``queued`` requests ahead in."""
    depth = getattr(pipe, "prefetch_queue_depth", 1)
    if depth not in (1, {"cpu_size": 1, "gpu_size": 1}):
        raise ValueError(f"run_requests needs a pipeline with prefetch_queue_depth=1, not {depth}: each "
                         "schedule_run must start exactly one iteration (requests queue in the operator)")
    if queued > 1 and not getattr(pipe, "_exec_dynamic", True):
        raise ValueError("run_requests with queued > 1 needs DALI's dynamic executor (exec_dynamic=True, also "
                         "in Pipeline.deserialize): the legacy executor blocks a second schedule_run until the "
                         "first outputs are read")


def run_requests(pipe: Any, name: str, requests: Iterable[Sequence[int]], *, queued: int = 1,
                 mini_batch_size: int | None = None) -> Iterator[tuple[int, Any]]:
    """Serves ``requests`` through ``pipe`` (built, with the serving operator
    named ``name``) as a server does, keeping up to ``queued`` requests fed
    and scheduled ahead of the one being read. Yields ``(request_index,
    outputs)`` per output iteration, or ``(request_index, exception)`` when
    that iteration failed (the pipeline keeps serving the next requests).

    The pipeline needs ``prefetch_queue_depth=1`` and, for ``queued > 1``,
    ``exec_dynamic=True`` (both also when deserializing).

    ``mini_batch_size``: the pipeline's reader is a decoupled_reader with this
    ``mini_batch_size``; each request is then fed as one sample holding all its
    keys (it may be longer than the pipeline's batch size) and yields
    ``ceil(len(keys) / mini_batch_size)`` iterations. A server instead runs
    the pipeline until the operator's "depleted" trace is "true".
    """
    if queued < 1:
        raise ValueError("queued must be >= 1")
    if mini_batch_size is not None and mini_batch_size < 1:
        raise ValueError("mini_batch_size must be >= 1")
    it = iter(requests)
    pending: deque[int] = deque()  # request index per scheduled iteration
    index = 0
    completed = 0  # requests whose iterations were all yielded

    def feed() -> int | None:
        """Feeds the next request; returns its iteration count (None: no more requests)."""
        nonlocal index, completed
        try:
            keys = next(it)
        except StopIteration:
            return None
        a = keys_array(keys)
        if mini_batch_size is None:
            pipe.feed_input(name, a)
            n = 1
        else:
            pipe.feed_input(name, a.reshape(1, -1))
            n = -(-len(a) // mini_batch_size)
        pending.extend([index] * n)
        index += 1
        if n == 0:
            completed += 1  # an empty decoupled request yields no iteration
        return n

    def schedule(n: int) -> None:
        for _ in range(n):
            pipe.schedule_run()

    _check_pipeline(pipe, queued)
    more = True
    # The first requests are all fed before any iteration is scheduled, so the
    # operator finds them queued (as with a server that got them at once).
    first = 0
    while more and index - completed < queued:
        n = feed()
        more = n is not None
        first += n or 0
    schedule(first)
    while pending:
        r = pending.popleft()
        try:
            out = pipe.outputs()
        except Exception as e:  # noqa: BLE001 - reported for this request, serving goes on
            yield r, e
        else:
            yield r, out
        if not pending or pending[0] != r:
            completed += 1
        while more and index - completed < queued:
            n = feed()
            more = n is not None
            schedule(n or 0)


_lib_lock = threading.Lock()
_lib: Any = None


def stats(name: str) -> dict[str, int]:
    """Counters of the serving operator named ``name`` in this process
    (requests, iterations, fetches, failed_requests, issued_ahead, in_flight,
    peak_in_flight, peak_outstanding, max_outstanding, operators). ``issued_ahead``
    counts fetches started while an earlier request was still being served:
    the overlap across requests. When several live operators share the name
    (two pipelines in one process, or instances of one model), the counters
    are those of the most recently built one, and ``operators`` says how many
    there are. Raises KeyError when no such operator lives."""
    global _lib
    _cd.load_plugin(required=True)
    with _lib_lock:
        if _lib is None:
            lib = ctypes.CDLL(_cd._loaded_path)
            lib.cqlstream_serving_stats.restype = ctypes.c_int
            lib.cqlstream_serving_stats.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
            _lib = lib
    buf = ctypes.create_string_buffer(1024)
    n = _lib.cqlstream_serving_stats(name.encode(), buf, len(buf))
    if n < 0:
        raise KeyError(f"no cqlstream serving operator named {name!r} in this process")
    return {k: int(v) for k, v in (p.split("=", 1) for p in buf.value.decode().split())}
