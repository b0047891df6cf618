"""cqlstream.Writer against the real node (issue 11 §3): a round trip read
back with cqlstream.Loader byte-identical with its labels; resume after a
real crash (a forked child that dies mid-way) with the same source_id
writes no duplicate and loses nothing; a complete source_id writes nothing;
an exception in the with-block aborts (the segment stays open for a retry)
and an abort that fails too is a note on it, not raised in its place;
blobs; refused samples and arguments."""

from __future__ import annotations

import io
import multiprocessing
import os

import numpy as np
import pytest

import cqlstream
from conftest import CLASSES, ctrl_c_after, run_cli, unique_name, write_image_set


@pytest.fixture
def name():
    n = unique_name("py_wr")
    yield n
    run_cli("drop", n, "--yes", check=False)


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    return write_image_set(tmp_path_factory.mktemp("writer"), {"train": 10}, seed=7)


def read_all(name: str, hosts: str, split: str = "train") -> list[tuple[int, bytes, int]]:
    out = []
    with cqlstream.Loader(name, split=split, batch_size=7, epochs=1, shuffle=False, hosts=hosts) as loader:
        for b in loader:
            for i in range(len(b)):
                out.append((int(b.keys[i]), bytes(b[i]), int(b.labels[i]) if b.labels is not None else -1))
    return out


def test_round_trip_read_back_with_loader(name, samples, hosts):
    keys = []
    with cqlstream.Writer(name, split="train", label_kind="class", classes=CLASSES, source_id="job-1/part-0",
                          hosts=hosts, commit_every=4) as w:
        for i, s in enumerate(samples):
            # Labels by index or by class name.
            label = CLASSES.index(s.cls) if i % 2 else s.cls
            keys.append(w.add(s.data, label=label, path=f"{s.cls}/{s.path.name}", extra={"i": str(i)}))
        assert w.report()["action"] == "new"
    assert w.closed and w.written == len(samples) and w.resumed == 0
    assert w.report()["sealed"] and w.report()["count"] == len(samples)
    assert [cqlstream.format_key(k) for k in keys] == [f"{keys[0] >> 32}:{i}" for i in range(len(samples))]

    got = read_all(name, hosts)
    assert sorted(k for k, _, _ in got) == sorted(keys)
    by_key = {k: (data, label) for k, data, label in got}
    for k, s in zip(keys, samples):
        data, label = by_key[k]
        assert data == s.data
        assert CLASSES[label] == s.cls
    with cqlstream.Dataset(name, hosts=hosts) as ds:
        assert ds.label_kind == "class" and ds.class_names == CLASSES
        rows = ds.metadata("train")
        rows = rows.to_dict("records") if hasattr(rows, "to_dict") else rows
        assert {r["path"] for r in rows} == {f"{s.cls}/{s.path.name}" for s in samples}
        assert sorted(int(r["extra"]["i"]) for r in rows) == list(range(len(samples)))


def _crashing_child(name: str, hosts: str, data: list[bytes], crash_after: int) -> None:
    w = cqlstream.Writer(name, label_kind="class", classes=CLASSES, source_id="job-7/part-3", hosts=hosts,
                         commit_every=3)
    for i, d in enumerate(data[:crash_after]):
        w.add(d, label=i % 3, path=f"p{i:03d}")
        if i == 9:
            w.flush()  # 10 committed; later commits are periodic (behind the writes in flight)
    os._exit(3)  # a crash: no close, no abort, no destructor


def test_resume_after_crash_writes_no_duplicate(name, samples, hosts):
    data = [s.data for s in samples]
    child = multiprocessing.get_context("fork").Process(target=_crashing_child, args=(name, hosts, data, 20))
    child.start()
    child.join(120)
    assert child.exitcode == 3

    with cqlstream.Dataset(name, hosts=hosts) as ds:
        committed = ds.count("train")
    assert 10 <= committed <= 20

    with cqlstream.Writer(name, source_id="job-7/part-3", hosts=hosts) as w:  # classes: the dataset's
        r = w.report()
        assert r["action"] == "resumed" and r["start_count"] == committed
        for i, d in enumerate(data):
            w.add(d, label=i % 3, path=f"p{i:03d}")
    assert w.resumed == committed
    assert w.written == len(data) - committed

    got = read_all(name, hosts)
    assert len(got) == len(data)
    assert sorted(d for _, d, _ in got) == sorted(data)
    assert len({k for k, _, _ in got}) == len(data)

    # The same source_id again: complete, nothing written; more samples are refused.
    with cqlstream.Writer(name, source_id="job-7/part-3", hosts=hosts) as w:
        assert w.report()["action"] == "complete"
        for i, d in enumerate(data):
            w.add(d, label=i % 3, path=f"p{i:03d}")
        with pytest.raises(cqlstream.AlreadyExistsError):
            w.add(data[0], label=0)
    assert w.written == 0 and w.resumed == len(data)
    with cqlstream.Dataset(name, hosts=hosts) as ds:
        assert ds.count("train") == len(data)

    # Another source_id appends a segment.
    with cqlstream.Writer(name, source_id="job-8", hosts=hosts) as w:
        w.add(data[0], label=1)
    with cqlstream.Dataset(name, hosts=hosts) as ds:
        assert ds.count("train") == len(data) + 1


def test_exception_aborts_and_a_retry_resumes(name, samples, hosts):
    with pytest.raises(RuntimeError, match="task failed"):
        with cqlstream.Writer(name, label_kind="none", source_id="t", hosts=hosts) as w:
            for s in samples[:5]:
                w.add(s.data)
            raise RuntimeError("task failed")
    r = w.report()
    assert r["count"] == 5 and not r["sealed"]
    with cqlstream.Writer(name, source_id="t", hosts=hosts) as w:
        for s in samples[:8]:
            w.add(s.data)
    assert (w.resumed, w.written) == (5, 3)
    got = read_all(name, hosts)
    assert sorted(d for _, d, _ in got) == sorted(s.data for s in samples[:8])


class _AbortFails:
    """The writer's real handle, whose abort() aborts and then raises (a
    fault injected in addition to the real writer)."""

    def __init__(self, h):
        self._h = h

    def abort(self):
        self._h.abort()
        raise RuntimeError("abort failed: injected")

    def __getattr__(self, attr):
        return getattr(self._h, attr)


def test_a_failing_abort_does_not_hide_the_blocks_exception(name, samples, hosts):
    with pytest.raises(KeyError, match="the task's own error") as info:
        with cqlstream.Writer(name, label_kind="none", source_id="t", hosts=hosts) as w:
            w.add(samples[0].data)
            w._h = _AbortFails(w._h)
            raise KeyError("the task's own error")
    assert info.value.__notes__ == [
        "cqlstream.Writer: abort() after this exception failed too: RuntimeError: abort failed: injected"]
    # The real abort ran: the sample is committed, the segment left open.
    r = w.report()
    assert w.closed and r["count"] == 1 and not r["sealed"]


def test_blobs_are_any_bytes(name, hosts):
    arrays = [np.arange(i * 10, dtype=np.float32).reshape(2, -1) for i in range(1, 6)]
    blobs = []
    for a in arrays:
        buf = io.BytesIO()
        np.save(buf, a)
        blobs.append(buf.getvalue())
    with cqlstream.Writer(name, kind="blob", source_id="npy", hosts=hosts) as w:
        for i, b in enumerate(blobs):
            w.add(memoryview(b) if i % 2 else b, path=f"a{i}.npy")
        w.add(b"not an image, and that is fine")
    got = read_all(name, hosts)
    assert len(got) == 6
    by_key = sorted((k, d) for k, d, _ in got)  # keys follow the add order
    assert [d for _, d in by_key] == blobs + [b"not an image, and that is fine"]
    for a, (_, d) in zip(arrays, by_key):
        np.testing.assert_array_equal(cqlstream.decode_npy(d), a)
    r = run_cli("info", name)
    assert "sample kind  blob" in r.stdout


def test_refusals(name, samples, hosts):
    with pytest.raises(cqlstream.InvalidArgumentError, match="class names"):
        cqlstream.Writer(name, label_kind="class", source_id="x", hosts=hosts)  # new dataset, no classes
    with pytest.raises(TypeError, match="password_file"):
        cqlstream.Writer(name, source_id="x", password="secret")
    with pytest.raises(TypeError, match="unexpected"):
        cqlstream.Writer(name, source_id="x", batch_size=3)
    with pytest.raises(ValueError, match="source_id"):
        cqlstream.Writer(name, source_id="")
    with pytest.raises(ValueError, match="kind"):
        cqlstream.Writer(name, source_id="x", kind="audio")

    w = cqlstream.Writer(name, label_kind="class", classes=3, source_id="x", hosts=hosts)
    with pytest.raises(cqlstream.InvalidArgumentError, match="not an image"):
        w.add(b"hello", label=0, path="bad.jpg")
    with pytest.raises(ValueError, match=r"not in \[0, 3\)"):
        w.add(samples[0].data, label=3)
    with pytest.raises(ValueError, match="no label"):
        w.add(samples[0].data)
    with pytest.raises(ValueError, match="not one of the classes"):
        w.add(samples[0].data, label="cat")  # classes=3 names them "0", "1", "2"
    with pytest.raises(TypeError, match="bytes"):
        w.add("text", label=0)
    with pytest.raises(TypeError, match="extra"):
        w.add(samples[0].data, label=0, extra={"n": 1})
    key = w.add(samples[0].data, label="2")
    assert key & 0xFFFFFFFF == 0  # the refused samples took no position
    w.close()
    with pytest.raises(ValueError, match="closed"):
        w.add(samples[0].data, label=0)
    # The classes are fixed: another list is refused, as is another label kind.
    with pytest.raises(cqlstream.InvalidArgumentError, match="same list"):
        cqlstream.Writer(name, label_kind="class", classes=["a", "b", "c"], source_id="y", hosts=hosts)
    with pytest.raises(cqlstream.AlreadyExistsError, match="label kind"):
        cqlstream.Writer(name, label_kind="none", source_id="y", hosts=hosts)


def test_preprocessing_as_ingest(name, samples, hosts):
    from PIL import Image

    with cqlstream.Writer(name, source_id="p1", resize_shorter=16, center_crop=16, reencode="png",
                          hosts=hosts) as w:
        w.add(samples[0].data)
    # Another writer of the dataset applies its preprocessing without being told.
    with cqlstream.Writer(name, source_id="p2", hosts=hosts) as w:
        w.add(samples[1].data)
    got = read_all(name, hosts)
    assert len(got) == 2
    for _, data, _ in got:
        im = Image.open(io.BytesIO(data))
        assert im.format == "PNG" and im.size == (16, 16)
    with pytest.raises(cqlstream.AlreadyExistsError, match="preprocessing"):
        cqlstream.Writer(name, source_id="p3", resize_shorter=32, hosts=hosts)


@pytest.mark.parametrize("handler", ["default", "closes-the-writer"])
def test_ctrl_c_ends_an_add_waiting_for_a_write_slot(name, hosts, handler):
    # With one write slot, add() waits for the write in flight; a stalled
    # cluster (here a proxy that holds each answer 3 s) held its Ctrl-C
    # that long, up to the request timeout. The wait ends with
    # KeyboardInterrupt, the sample not taken: the next add() gets its
    # position, and close() commits both samples written. A handler of the
    # user's that calls back into the writer (which the waiting add holds)
    # gets a RuntimeError instead of a hang, and ends the add with it.
    import signal

    from slow_proxy import SlowProxy

    proxy = SlowProxy((hosts.split(",")[0], 9042), delay=0)
    try:
        w = cqlstream.Writer(name, source_id="feeder", kind="blob", concurrency=1, commit_interval=3600,
                             hosts="127.0.0.1", port=proxy.port)
        proxy.delay = 3.0  # every answer from now on is held
        first = w.add(b"first sample")

        def closes_the_writer(signum, frame):
            w.close()

        with (ctrl_c_after(0.5, signal.default_int_handler if handler == "default" else closes_the_writer) as t,
              pytest.raises(KeyboardInterrupt if handler == "default" else RuntimeError) as e):
            w.add(b"interrupted sample")
        if handler != "default":
            assert "Writer.close() called from a signal handler while another call of this writer" in str(e.value)
        assert t["waited"] < 2.0, f"add() held Ctrl-C for {t['waited']:.1f} s"
        assert w.added == 1, "the interrupted sample took a position"
        proxy.delay = 0
        second = w.add(b"second sample")
        assert (second & 0xFFFFFFFF) == (first & 0xFFFFFFFF) + 1
        w.close()
        assert w.report()["count"] == 2 and w.written == 2
    finally:
        proxy.close()
    got = read_all(name, hosts)
    assert sorted(data for _, data, _ in got) == [b"first sample", b"second sample"]


@pytest.mark.parametrize("call", ["flush", "close"])
def test_ctrl_c_ends_a_close_waiting_for_the_writes_in_flight(name, hosts, call):
    # flush() and close() wait for the writes in flight (a stalled cluster:
    # up to the request timeout). Ctrl-C ends the wait with
    # KeyboardInterrupt, nothing committed, the writer still open: a later
    # close() seals what was written.
    from slow_proxy import SlowProxy

    proxy = SlowProxy((hosts.split(",")[0], 9042), delay=0)
    try:
        w = cqlstream.Writer(name, source_id="feeder", kind="blob", commit_interval=3600, hosts="127.0.0.1",
                             port=proxy.port)
        proxy.delay = 3.0  # every answer from now on is held
        w.add(b"first sample")
        with ctrl_c_after(0.5) as t, pytest.raises(KeyboardInterrupt):
            getattr(w, call)()
        assert t["waited"] < 2.0, f"{call}() held Ctrl-C for {t['waited']:.1f} s"
        assert not w.closed and w.report()["count"] == 0, "an interrupted call committed"
        proxy.delay = 0
        w.add(b"second sample")
        w.close()
        assert w.closed and w.report()["count"] == 2 and w.report()["sealed"]
    finally:
        proxy.close()


def test_a_writer_dropped_without_close_commits_and_stays_open(name, hosts):
    # Dropped (garbage-collected) without close(): the handle's end aborts
    # it, with no signal check (a Ctrl-C there could not be raised): the
    # watermark is committed, the segment left open, so a writer with the
    # same source_id resumes after the samples written.
    import gc

    w = cqlstream.Writer(name, source_id="dropped", kind="blob", commit_interval=3600, hosts=hosts)
    for i in range(3):
        w.add(bytes([i + 1]) * 100)
    del w
    gc.collect()
    with cqlstream.Writer(name, source_id="dropped", kind="blob", hosts=hosts) as again:
        for i in range(4):
            again.add(bytes([i + 1]) * 100)
    assert again.resumed == 3 and again.written == 1
    got = read_all(name, hosts)
    assert sorted(data for _, data, _ in got) == [bytes([i + 1]) * 100 for i in range(4)]
