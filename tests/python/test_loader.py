"""cqlstream.Loader against the real node: epochs, zero-copy, checkpoints, errors."""

from __future__ import annotations

import gc
import math
import threading
import time

import numpy as np
import pytest

import cqlstream
from cqlstream import _core
from slow_proxy import SlowProxy


def read_epoch(loader) -> list:
    return list(loader)


def keys_of(batches) -> list[int]:
    return [int(k) for b in batches for k in b.keys]


def test_iterates_epochs_like_a_dataloader(images, loader_kwargs):
    n = images.count("train")
    with cqlstream.Loader(images.name, batch_size=16, epochs=2, seed=3, **loader_kwargs) as loader:
        assert len(loader) == math.ceil(n / 16)
        assert loader.samples_per_epoch == n
        assert loader.rank == 0 and loader.world_size == 1
        assert loader.dataset_info["label_kind"] == "class"
        assert loader.class_names == ["cat", "dog", "fish"]
        assert loader.dataset_info["splits"]["train"]["samples"] == n
        epochs = []
        for epoch in range(3):
            batches = list(loader)
            epochs.append(batches)
            if epoch < 2:
                assert len(batches) == len(loader)
                assert all(b.epoch == epoch for b in batches)
                assert [b.index for b in batches] == list(range(len(batches)))
                assert sum(len(b) for b in batches) == n
        assert epochs[2] == []  # only `epochs` epochs
        assert loader.done
        # Exactly once per epoch, and a fresh shuffle per epoch.
        by_content = images.by_content("train")
        for batches in epochs[:2]:
            keys = keys_of(batches)
            assert len(set(keys)) == n
            paths = [by_content[bytes(b[i])].path for b in batches for i in range(len(b))]
            assert len(set(paths)) == n
            # Labels are the class folders.
            for b in batches:
                for i in range(len(b)):
                    assert loader.class_names[b.labels[i]] == by_content[bytes(b[i])].cls
        assert keys_of(epochs[0]) != keys_of(epochs[1])
        m = loader.metrics()
        assert m["images"] == 2 * n and m["batches"] == 2 * len(loader)
        assert m["connections_wanted"] >= 1 and m["connections"] >= 1
        assert m["ignored_peer_rows"] == 0  # a real node lists no host twice
        # The batch memory's peak: at least a batch's bytes, at least what is
        # charged now, and within the budget (a batch's pages over it at most).
        assert m["memory_peak_bytes"] >= max(m["memory_bytes"], max(b.data.nbytes for b in epochs[0]))
        assert m["memory_peak_bytes"] <= m["memory_budget"] + max(b.data.nbytes for b in epochs[0]) + 4096


def test_break_resumes_the_same_epoch_and_endless(images, loader_kwargs):
    n = images.count("train")
    with cqlstream.Loader(images.name, batch_size=10, epochs=None, shuffle=False, **loader_kwargs) as loader:
        first = []
        for b in loader:
            first.append(b)
            if len(first) == 3:
                break
        rest = list(loader)
        assert sorted(keys_of(first + rest)) == sorted(set(keys_of(first + rest)))
        assert len(keys_of(first + rest)) == n
        for _ in range(3):  # endless: more epochs keep coming
            assert sum(len(b) for b in loader) == n
        assert not loader.done


def test_batch_views_are_zero_copy(images, loader_kwargs):
    import torch

    with cqlstream.Loader(images.name, batch_size=8, **loader_kwargs) as loader:
        b = next(iter(loader))
        d = b.data
        assert d.dtype == np.uint8 and d.ndim == 1
        assert not d.flags.writeable
        assert d.ctypes.data == b.address
        assert b.data.ctypes.data == b.address  # a new view, the same memory
        assert int(b.offsets[0]) == 0 and d.size == int(b.sizes.sum())
        for i in range(len(b)):
            s = b[i]
            assert s.ctypes.data == b.address + int(b.offsets[i])
            assert s.size == int(b.sizes[i])
            assert np.shares_memory(s, d)
        assert b[-1].ctypes.data == b[len(b) - 1].ctypes.data
        with pytest.raises(IndexError):
            b[len(b)]
        # Metadata arrays are views of the batch's own vectors too.
        assert b.labels.ctypes.data == b.labels.ctypes.data
        assert b.keys.dtype == np.uint64 and b.labels.dtype == np.int32
        assert (b.image_sizes == b.sizes).all()
        # DLPack: torch tensors over the same bytes.
        t = torch.from_dlpack(d)
        assert t.data_ptr() == b.address and t.dtype == torch.uint8
        assert b.torch().data_ptr() == b.address
        assert bytes(t[: int(b.sizes[0])].numpy()) == bytes(b[0])


def test_arrays_keep_memory_alive_after_batch_and_loader(images, loader_kwargs):
    kept = []
    loader = cqlstream.Loader(images.name, batch_size=8, epochs=3, **loader_kwargs)
    for b in loader:  # epoch 0: keep views, drop the batches
        kept.append((b.data, b[0], b.torch(), bytes(b.data), bytes(b[0])))
    del b
    gc.collect()
    # Two more epochs recycle the loader's buffers: ours must not be among them.
    for _ in range(2):
        for b in loader:
            pass
    loader.close()
    del loader, b
    gc.collect()
    contents = {s.data for s in images.split("train")}
    for data, first, tensor, data_copy, first_copy in kept:
        assert data.tobytes() == data_copy
        assert first.tobytes() == first_copy and first_copy in contents
        assert bytes(tensor.numpy()) == data_copy


def test_release(images, loader_kwargs):
    with cqlstream.Loader(images.name, batch_size=8, **loader_kwargs) as loader:
        b = next(iter(loader))
        data, copy = b.data, bytes(b.data)
        b.release()
        assert b.released
        for get in (lambda: b.data, lambda: len(b), lambda: b[0], lambda: b.labels, lambda: b.torch(),
                    lambda: b.epoch):
            with pytest.raises(ValueError, match="released"):
                get()
        assert data.tobytes() == copy  # arrays taken before stay valid
        b.release()  # twice is fine


def test_gil_is_released_while_next_waits(images, hosts):
    # Every response reaches the loader through Python threads that add
    # 100 ms, so next() must wait for the network, and it can only get its
    # data while it does not hold the GIL. Were the GIL held, next() would
    # wait until the request timeout and fail.
    proxy = SlowProxy((hosts.split(",")[0], 9042), delay=0.1)
    try:
        with cqlstream.Loader(images.name, batch_size=images.count("train"), hosts="127.0.0.1",
                              port=proxy.port, request_timeout=20.0) as loader:
            it = iter(loader)
            f0, t0 = proxy.forwarded, time.monotonic()
            batch = next(it)
            waited, forwarded = time.monotonic() - t0, proxy.forwarded - f0
            assert len(batch) == images.count("train")
            assert sorted(bytes(batch[i]) for i in range(len(batch))) == \
                sorted(s.data for s in images.split("train"))
    finally:
        proxy.close()
    assert waited > 0.05, f"next() returned after {waited:.3f} s: it did not wait for the network"
    assert forwarded > 0, "no response passed the proxy while next() waited"


def test_close_from_another_thread_unblocks_next(images, loader_kwargs):
    # Endless epochs: the consumer never stops by itself and spends its time
    # waiting in next() for a slow single decode thread; only close() ends it.
    loader = cqlstream.Loader(images.name, batch_size=16, decode=(1024, 1024), decode_threads=1, prefetch=1,
                              epochs=None, **loader_kwargs)
    it = iter(loader)
    errors = []

    def consume():
        try:
            for _ in it:
                pass
        except cqlstream.CancelledError as e:
            errors.append(e)

    t = threading.Thread(target=consume)
    t.start()
    time.sleep(0.2)
    loader.close()
    t.join(timeout=20)
    assert not t.is_alive(), "close() did not unblock next()"
    assert len(errors) == 1, "the consumer did not end with CancelledError"
    assert loader.closed
    with pytest.raises(ValueError, match="closed"):
        list(loader)


def test_state_dict_resumes_exactly_once_same_world(images, loader_kwargs):
    n = images.count("train")
    kw = dict(batch_size=7, seed=11, **loader_kwargs)
    with cqlstream.Loader(images.name, **kw) as a:
        it = iter(a)
        first = [next(it) for _ in range(4)]
        state = a.state_dict()
    assert state["epoch"] == 0 and state["rank"] == 0 and state["world_size"] == 1
    assert state["batches_delivered"] == 4
    assert state["samples_remaining"] == n - sum(len(b) for b in first)
    assert isinstance(state["checkpoint"], bytes)
    with cqlstream.Loader(images.name, **kw) as b:
        b.load_state_dict(state)
        rest = list(b)
        assert rest[0].index == 4
    keys = keys_of(first) + keys_of(rest)
    assert len(keys) == n and len(set(keys)) == n


def test_state_dict_resumes_on_another_world_size(images, loader_kwargs):
    n = images.count("train")
    kw = dict(batch_size=5, seed=5, **loader_kwargs)
    # Run 1: two ranks, each reads 3 batches.
    seen, states = [], []
    for rank in range(2):
        with cqlstream.Loader(images.name, rank=rank, world_size=2, **kw) as l:
            it = iter(l)
            seen += keys_of([next(it) for _ in range(3)])
            states.append(l.state_dict())
    # Run 2: three ranks finish the epoch from both states.
    rest = []
    for rank in range(3):
        with cqlstream.Loader(images.name, rank=rank, world_size=3, **kw) as l:
            l.load_state_dict(states)
            rest.append(keys_of(list(l)))
    assert all(r for r in rest)  # every rank got a share
    keys = seen + [k for r in rest for k in r]
    assert len(keys) == n and len(set(keys)) == n


def test_decoding_state_counts_only_what_the_consumer_got(images, loader_kwargs):
    # The decode pipeline reads ahead (prefetch=4); the checkpoint must not
    # count the batches still waiting in its queue.
    n = images.count("train")
    kw = dict(batch_size=6, seed=2, **loader_kwargs)
    with cqlstream.Loader(images.name, decode=(16, 16), prefetch=4, **kw) as a:
        it = iter(a)
        got = [next(it) for _ in range(2)]
        time.sleep(0.3)  # let the producer run ahead
        state = a.state_dict()
    assert state["samples_remaining"] == n - 12
    with cqlstream.Loader(images.name, **kw) as b:
        b.load_state_dict(state)
        keys = keys_of(got) + keys_of(list(b))
    assert len(keys) == n and len(set(keys)) == n


def test_load_state_dict_after_reading_is_refused(images, loader_kwargs):
    with cqlstream.Loader(images.name, batch_size=8, **loader_kwargs) as a:
        state = a.state_dict()
        next(iter(a))
        with pytest.raises(cqlstream.InvalidArgumentError, match="before the first batch"):
            a.load_state_dict(state)
    with cqlstream.Loader(images.name, batch_size=8, seed=99, **loader_kwargs) as b:
        with pytest.raises(ValueError, match="seed"):
            b.load_state_dict(state)


def test_fetch(images, loader_kwargs):
    with cqlstream.Loader(images.name, batch_size=8, **loader_kwargs) as loader:
        b = next(iter(loader))
        keys = [int(k) for k in b.keys]
        f = loader.fetch(keys[::-1])
        assert [int(k) for k in f.keys] == keys[::-1]
        for i in range(len(b)):
            assert bytes(f[len(b) - 1 - i]) == bytes(b[i])
        pairs = [(k >> 32, k & 0xFFFFFFFF) for k in keys[:2]]
        strs = [cqlstream.format_key(k) for k in keys[:2]]
        assert [int(k) for k in loader.fetch(pairs).keys] == keys[:2]
        assert [int(k) for k in loader.fetch(strs).keys] == keys[:2]
        with pytest.raises(cqlstream.NotFoundError, match="0:999999"):
            loader.fetch(["0:999999"])
    with cqlstream.Loader(images.name, batch_size=8, decode={"size": (12, 10), "channels": 1}, **loader_kwargs) as d:
        f = d.fetch(keys[:3])
        assert f.decoded and f.images.shape == (3, 12, 10, 1)


def test_connection_options_and_environment(images, monkeypatch, tmp_path):
    with pytest.raises(TypeError, match="password_file"):
        cqlstream.Loader(images.name, password="hunter2")
    with pytest.raises(TypeError, match="bogus"):
        cqlstream.Loader(images.name, bogus=1)
    # CQLSTREAM_* variables apply (ConnectionOptions::ApplyEnvironment), arguments win over them.
    monkeypatch.setenv("CQLSTREAM_HOSTS", "127.0.0.1")
    monkeypatch.setenv("CQLSTREAM_PORT", "notaport")
    with pytest.raises(cqlstream.InvalidArgumentError, match="CQLSTREAM_PORT"):
        cqlstream.Loader(images.name)
    monkeypatch.setenv("CQLSTREAM_PORT", "9042")
    monkeypatch.setenv("CQLSTREAM_KEYSPACE", "py_no_such_keyspace")
    with pytest.raises(cqlstream.Error) as e:
        cqlstream.Loader(images.name)
    assert "py_no_such_keyspace" in str(e.value)
    with cqlstream.Loader(images.name, keyspace="cqlstream", batch_size=4) as l:
        assert len(l) > 0
    monkeypatch.delenv("CQLSTREAM_KEYSPACE")
    missing = tmp_path / "no-password"
    with pytest.raises(cqlstream.FileSystemError, match="password file given by password_file") as e:
        cqlstream.Loader(images.name, username="u", password_file=missing)
    assert isinstance(e.value, OSError) and e.value.code == "IOError"
    assert "no-password" not in str(e.value)  # never echoed: it might be the password itself
    with pytest.raises(cqlstream.ConnectionError) as e:
        cqlstream.Loader(images.name, port=1, connect_timeout=2)
    assert isinstance(e.value, ConnectionError)


def test_errors_map_to_exceptions(images, loader_kwargs, tmp_path):
    with pytest.raises(cqlstream.NotFoundError, match="py_no_such_dataset") as e:
        cqlstream.Loader("py_no_such_dataset", **loader_kwargs)
    assert isinstance(e.value, LookupError) and e.value.code == "NotFound"
    with pytest.raises(LookupError, match="'nosplit'"):
        cqlstream.Loader(images.name, split="nosplit", **loader_kwargs)
    with pytest.raises(cqlstream.Error, match="nowhere.sel"):
        cqlstream.Loader(images.name, selection=tmp_path / "nowhere.sel", **loader_kwargs)
    with pytest.raises(ValueError, match="batch_size"):
        cqlstream.Loader(images.name, batch_size=0, **loader_kwargs)
    with pytest.raises(ValueError, match="on_missing"):
        cqlstream.Loader(images.name, on_missing="ignore", **loader_kwargs)
    with pytest.raises(ValueError, match="decode"):
        cqlstream.Loader(images.name, decode={"size": (8, 8), "colour": 1}, **loader_kwargs)
    with pytest.raises(ValueError, match="channels"):
        cqlstream.Loader(images.name, decode={"size": 8, "channels": 2}, **loader_kwargs)
    with pytest.raises(ValueError, match="prefetch"):
        cqlstream.Loader(images.name, decode=8, prefetch=0, **loader_kwargs)


def test_keys_and_states_helpers():
    k = cqlstream.make_key(3, 17)
    assert k == (3 << 32) | 17 and cqlstream.format_key(k) == "3:17"
    assert cqlstream.parse_keys([k, (3, 17), "3:17"]) == [k, k, k]
    with pytest.raises(cqlstream.InvalidArgumentError):
        cqlstream.describe_state(b"not a checkpoint")
    assert _core.Batch.__module__.startswith("cqlstream")
