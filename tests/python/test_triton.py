"""Triton-style serving (docs/triton.md) without a Triton server: the same
serialized pipelines a Triton DALI backend model would load, deserialized and
driven through DALI's own input feeding (Pipeline.feed_input by operator name,
schedule_run/outputs), against the local Cassandra node (CPU only).

fn.cqlstream.interactive_reader: variable request sizes, exactly the keys
requested in request order, byte-identical to Loader.fetch; requests queued
ahead are fetched while earlier ones are served (the operator's counters, not
timing); a bad key fails its own request only.
fn.cqlstream.decoupled_reader: one long request streams back as mini-batches,
each key exactly once; a bad key ends that request only.

Needs what tests/python/test_dali.py needs (the plugin, the CLI, the node).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import cqlstream
import cqlstream.dali as cd
import cqlstream.serving as cs
from nvidia.dali import Pipeline, pipeline_def
from test_dali import Dataset, drop, ints, key, make_class_dataset

HOSTS = os.environ.get("CQLSTREAM_TEST_HOSTS", "127.0.0.1").split(",")
RUN = os.getpid() % 100000
N = 41
MAX_BATCH = 8


@pytest.fixture(scope="module")
def ds(tmp_path_factory) -> Dataset:
    name = f"triton_t{RUN}"
    d = make_class_dataset(tmp_path_factory.mktemp("triton"), name, N)
    yield d
    drop(name)


@pytest.fixture(autouse=True, scope="module")
def plugin():
    assert cd.load_plugin(), cd.plugin_error()


def serialized(reader, ds: Dataset, name: str, **kw) -> bytes:
    """A serving pipeline (data, labels, keys) serialized as a Triton model would ship it."""

    @pipeline_def(batch_size=MAX_BATCH, num_threads=2, device_id=None, prefetch_queue_depth=1, exec_dynamic=True)
    def serve():
        return reader(ds.name, name=name, output_keys=True, hosts=HOSTS, **kw)

    return serve().serialize()


def load(blob: bytes) -> Pipeline:
    # exec_dynamic: iterations may be scheduled before the outputs of earlier ones are read.
    p = Pipeline.deserialize(serialized_pipeline=blob, batch_size=MAX_BATCH, num_threads=2, device_id=None,
                             prefetch_queue_depth=1, exec_dynamic=True)
    p.build()
    return p


def sample_bytes(tl, i: int) -> bytes:
    return np.array(tl[i]).tobytes()


def requests_of(sizes: list[int], start: int = 0) -> list[list[int]]:
    out, k = [], start
    for n in sizes:
        out.append([key(0, (k + j * 7) % N) for j in range(n)])
        k += n
    return out


def test_interactive_serialized_pipeline_returns_exactly_the_requested_keys(ds):
    p = load(serialized(cs.interactive_reader, ds, "KEYS", prefetch_requests=4))
    reqs = requests_of([3, 1, 8, 5, 2, 8, 6]) + [[key(0, 4)] * 3]  # repeats are served as asked
    seen = []
    with cqlstream.Loader(ds.name, batch_size=MAX_BATCH, hosts=",".join(HOSTS)) as loader:
        for r, out in cs.run_requests(p, "KEYS", reqs, queued=4):
            assert not isinstance(out, Exception), out
            data, labels, keys = out
            assert ints(keys) == reqs[r]
            ref = loader.fetch(reqs[r])
            for i, k in enumerate(reqs[r]):
                assert sample_bytes(data, i) == bytes(ref[i]) == ds.bytes[k & 0xFFFFFFFF]
                assert ints(labels)[i] == ds.labels[k & 0xFFFFFFFF]
            seen.append(r)
    assert seen == list(range(len(reqs)))
    s = cs.stats("KEYS")
    assert s["requests"] == len(reqs) and s["iterations"] == len(reqs) and s["failed_requests"] == 0


def overlap_counters(ds: Dataset, queued: int) -> dict[str, int]:
    name = f"KEYS_Q{queued}"
    p = load(serialized(cs.interactive_reader, ds, name, prefetch_requests=8))
    reqs = requests_of([4] * 16)
    got = [r for r, out in cs.run_requests(p, name, reqs, queued=queued) if not isinstance(out, Exception)]
    assert got == list(range(16))
    s = cs.stats(name)
    del p
    return s


def test_interactive_requests_queued_ahead_are_fetched_while_earlier_ones_are_served(ds):
    one = overlap_counters(ds, 1)
    eight = overlap_counters(ds, 8)
    # One request at a time: nothing is fetched ahead.
    assert one["issued_ahead"] == 0 and one["peak_outstanding"] == 1
    # Eight queued: the operator takes the queued requests and fetches them before the first is
    # returned (the bound is prefetch_requests=8).
    assert eight["peak_outstanding"] == 8
    assert eight["issued_ahead"] >= 7
    assert eight["fetches"] == 16 and eight["requests"] == 16


def test_interactive_bad_key_fails_only_its_request(ds):
    p = load(serialized(cs.interactive_reader, ds, "KEYS_BAD"))
    reqs = [[key(0, 1), key(0, 2)], [key(0, 3), key(0, 999)], [key(0, 5)], [key(7, 0)], [key(0, 6)]]
    results = dict(cs.run_requests(p, "KEYS_BAD", reqs, queued=3))
    assert isinstance(results[1], Exception) and "0:999" in str(results[1])
    assert isinstance(results[3], Exception) and "7:0" in str(results[3])
    for r in (0, 2, 4):
        assert not isinstance(results[r], Exception), results[r]
        assert ints(results[r][2]) == reqs[r]
    assert cs.stats("KEYS_BAD")["failed_requests"] == 2


def test_interactive_request_larger_than_the_batch_is_refused(ds):
    p = load(serialized(cs.interactive_reader, ds, "KEYS_BIG"))
    reqs = [[key(0, i) for i in range(MAX_BATCH + 1)], [key(0, 1)]]
    # DALI's own feeding refuses it before the operator sees it (the operator would fail that
    # request with "at most max_batch_size (8) per request": request_prefetcher_test.cc).
    with pytest.raises(RuntimeError, match="batch size"):
        list(cs.run_requests(p, "KEYS_BIG", reqs))


def test_decoupled_streams_each_key_exactly_once(ds):
    mbs = 5
    p = load(serialized(cs.decoupled_reader, ds, "STREAM", mini_batch_size=mbs, prefetch_requests=3))
    long_req = [key(0, i) for i in range(N)][::-1]  # 41 keys: 8 iterations of 5 and one of 1
    short_req = [key(0, i) for i in range(12)]
    reqs = [long_req, short_req]
    per = {0: [], 1: []}
    sizes = {0: [], 1: []}
    for r, out in cs.run_requests(p, "STREAM", reqs, queued=2, mini_batch_size=mbs):
        assert not isinstance(out, Exception), out
        data, labels, keys = out
        ks = ints(keys)
        sizes[r].append(len(ks))
        for i, k in enumerate(ks):
            assert sample_bytes(data, i) == ds.bytes[k & 0xFFFFFFFF]
        per[r] += ks
    assert sizes[0] == [5] * 8 + [1] and sizes[1] == [5, 5, 2]
    assert sorted(per[0]) == sorted(long_req) and len(per[0]) == len(set(per[0]))
    assert sorted(per[1]) == sorted(short_req)
    s = cs.stats("STREAM")
    assert s["peak_outstanding"] <= 3 and s["iterations"] == 12 and s["fetches"] == 9 + 3


def test_decoupled_bad_key_ends_only_that_request(ds):
    mbs = 4
    p = load(serialized(cs.decoupled_reader, ds, "STREAM_BAD", mini_batch_size=mbs, prefetch_requests=2))
    bad = [key(0, i) for i in range(6)] + [key(0, 999)] + [key(0, i) for i in range(6, 10)]  # 11 keys
    good = [key(0, i) for i in range(10, 18)]
    results = list(cs.run_requests(p, "STREAM_BAD", [bad, good], queued=1, mini_batch_size=mbs))
    bad_out = [out for r, out in results if r == 0]
    good_out = [out for r, out in results if r == 1]
    assert len(bad_out) == 3 and len(good_out) == 2
    # Mini-batches that arrived before the bad one may be delivered; from the first error on,
    # the request's iterations fail, naming the key.
    failed = [isinstance(o, Exception) for o in bad_out]
    assert any(failed) and failed == sorted(failed)
    assert all("0:999" in str(o) for o in bad_out if isinstance(o, Exception))
    for o in bad_out:
        if not isinstance(o, Exception):
            assert set(ints(o[2])) <= set(bad) - {key(0, 999)}
    assert not any(isinstance(o, Exception) for o in good_out)
    assert sorted(ints(good_out[0][2]) + ints(good_out[1][2])) == good


@pytest.mark.parametrize("bad", [np.array([key(0, 1), key(0, 2)], dtype=np.int32),  # not int64/uint64
                                 np.array([[key(0, 1), key(0, 2)]] * 2, dtype=np.int64)],  # [N, 2]: two keys a sample
                         ids=["int32", "two_keys_per_sample"])
def test_interactive_malformed_request_fails_alone_and_shifts_nothing(ds, bad):
    name = f"KEYS_MALFORMED_{bad.dtype}_{bad.ndim}"
    p = load(serialized(cs.interactive_reader, ds, name, prefetch_requests=4))
    reqs = [[key(0, 1), key(0, 2)], None, [key(0, 3)], [key(0, 4), key(0, 5), key(0, 6)]]
    for r in reqs:
        p.feed_input(name, bad if r is None else cs.keys_array(r))
    for _ in reqs:
        p.schedule_run()
    for r in reqs:
        if r is None:
            with pytest.raises(Exception, match="int64 or uint64|expected one key per sample"):
                p.outputs()
        else:
            data, _, keys = p.outputs()
            assert ints(keys) == r
            for i, k in enumerate(r):
                assert sample_bytes(data, i) == ds.bytes[k & 0xFFFFFFFF]
    # Serving goes on: a later request still gets its own samples.
    p.feed_input(name, cs.keys_array([key(0, 7)]))
    p.schedule_run()
    assert ints(p.outputs()[2]) == [key(0, 7)]
    s = cs.stats(name)
    assert s["requests"] == 5 and s["iterations"] == 5 and s["failed_requests"] == 1


def test_decoupled_malformed_request_fails_each_of_its_iterations_alone(ds):
    mbs = 2
    p = load(serialized(cs.decoupled_reader, ds, "STREAM_MALFORMED", mini_batch_size=mbs, prefetch_requests=2))
    good = [key(0, i) for i in range(4)]
    p.feed_input("STREAM_MALFORMED", cs.keys_array(good).reshape(1, -1))
    p.feed_input("STREAM_MALFORMED", np.arange(5, dtype=np.int32).reshape(1, -1))  # 3 mini-batches, all failing
    p.feed_input("STREAM_MALFORMED", cs.keys_array(good).reshape(1, -1))
    for _ in range(2 + 3 + 2):
        p.schedule_run()
    for want in (good, None, good):
        if want is None:
            for _ in range(3):
                with pytest.raises(Exception, match="int64 or uint64"):
                    p.outputs()
        else:
            got = ints(p.outputs()[2]) + ints(p.outputs()[2])
            assert sorted(got) == want


def test_stats_of_operators_sharing_a_name(ds):
    p1 = load(serialized(cs.interactive_reader, ds, "KEYS_SHARED"))
    assert [r for r, out in cs.run_requests(p1, "KEYS_SHARED", [[key(0, 1)]])] == [0]
    p2 = load(serialized(cs.interactive_reader, ds, "KEYS_SHARED"))
    assert [r for r, out in cs.run_requests(p2, "KEYS_SHARED", [[key(0, 1)], [key(0, 2)]])] == [0, 1]
    s = cs.stats("KEYS_SHARED")  # the newest operator of that name
    assert s["requests"] == 2
    del p2  # the older one still serves, and still reports (it used to be unregistered with p2: KeyError)
    s_after = cs.stats("KEYS_SHARED")
    assert s_after["requests"] == 1
    assert s["operators"] == 2 and s_after["operators"] == 1
    del p1
    with pytest.raises(KeyError):
        cs.stats("KEYS_SHARED")
