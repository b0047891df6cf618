#!/usr/bin/env python3
"""An asyncio data loader on acsylla (ScyllaDB's C++ driver under asyncio):
one coroutine keeps --concurrency single-sample reads in flight over the
epoch's shuffled keys and fills batches in the order answers arrive (out of
order, like cqlstream's default mode); the training loop takes full batches
from an asyncio queue of --prefetch batches.

Driver settings are acsylla's defaults (one I/O thread, one connection per
host, token-aware, LOCAL_ONE) except the request timeout (60 s) and the
protocol version (4). No decoding: a sample is the concatenation of its
data chunks.
"""
import asyncio
import random
import sys

import common


def parse_args():
    ap = common.parser(__doc__)
    common.add_common_args(ap)
    common.add_cluster_args(ap)
    ap.add_argument("--concurrency", type=int, default=1024, help="requests in flight")
    ap.add_argument("--prefetch", type=int, default=4, help="assembled batches waiting for the consumer")
    ap.add_argument("--connections", type=int, default=1, help="core connections per host (acsylla default 1)")
    ap.add_argument("--io-threads", type=int, default=1, help="driver I/O threads (acsylla default 1)")
    return ap.parse_args()


async def setup(acsylla, a):
    """The cluster, its session, the dataset's segment rows and the prepared data query."""
    cluster = acsylla.create_cluster(a.hosts.split(","), port=a.port, protocol_version=4, request_timeout=60.0,
                                     core_connections_per_host=a.connections, num_threads_io=a.io_threads,
                                     queue_size_io=max(8192, 2 * a.concurrency))
    session = await cluster.create_session()
    q = acsylla.create_statement(
        f"SELECT seg, split, count FROM {a.keyspace}.segments WHERE dataset = '{a.dataset}'")
    res = await session.execute(q)
    rows = [(r.column_value("seg"), r.column_value("split"), r.column_value("count")) for r in res]
    stmt = await session.create_prepared(common.data_query(a.keyspace, a.dataset))
    return cluster, session, rows, stmt


async def read(session, prepared, key):
    """One sample: its data chunks joined, checked against its size."""
    st = prepared.bind(page_size=64)
    st.bind_list(list(key))
    st.set_is_idempotent(True)
    res = await session.execute(st)
    chunks = [r.column_value_by_index(7) for r in res]
    size = res.first().column_value_by_index(2)
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    if len(data) != size:
        raise RuntimeError(f"sample {key}: {len(data)} of {size} bytes")
    return data


async def producer(a, read_one, order, out):
    """Reads ``order`` with --concurrency reads in flight into batches on
    ``out``, then None (or the first error)."""
    sem = asyncio.Semaphore(a.concurrency)
    batch = []
    pending = set()
    error = []

    async def one(key):
        try:
            return await read_one(key)
        finally:
            sem.release()

    def done(t):
        pending.discard(t)
        if t.exception() is not None:
            error.append(t.exception())
            return
        batch.append(t.result())
        if len(batch) == a.batch_size:
            full = batch[:]
            batch.clear()
            out.put_nowait(full)

    try:
        for key in order:
            await sem.acquire()
            if error:
                raise error[0]
            # Back-pressure: no more than --prefetch full batches wait.
            while out.qsize() >= a.prefetch:
                await asyncio.sleep(0.0005)
            t = asyncio.ensure_future(one(key))
            pending.add(t)
            t.add_done_callback(done)
        while pending:
            await asyncio.wait(set(pending))
        if error:
            raise error[0]
        if batch:
            out.put_nowait(batch[:])
        out.put_nowait(None)
    except asyncio.CancelledError:
        for t in pending:
            t.cancel()
        raise
    except Exception as e:
        out.put_nowait(e)


class Epoch:
    """The batches of epoch ``e``: a producer task on ``loop`` over the keys
    shuffled with --seed and ``e``."""

    def __init__(self, loop, a, keys, read_one, e):
        order = list(keys)
        random.Random(a.seed * 1000003 + e).shuffle(order)
        self.loop = loop
        # Unbounded queue: the producer itself keeps it at --prefetch.
        self.q = asyncio.Queue()
        self.task = loop.create_task(producer(a, read_one, order, self.q))

    def __iter__(self):
        return self

    def __next__(self):
        b = self.loop.run_until_complete(self.q.get())
        if b is None:
            raise StopIteration
        if isinstance(b, Exception):
            raise b
        return b, len(b)

    def close(self):
        if not self.task.done():
            self.task.cancel()
            try:
                self.loop.run_until_complete(self.task)
            except (asyncio.CancelledError, Exception):
                pass


def main():
    a = parse_args()

    import acsylla

    loop = asyncio.new_event_loop()
    cluster, session, segrows, prepared = loop.run_until_complete(setup(acsylla, a))
    keys = common.dataset_keys(lambda q: segrows, a.keyspace, a.dataset, a.split)
    if not keys:
        sys.exit(f"dataset {a.dataset} split {a.split}: no samples")

    def read_one(key):
        return read(session, prepared, key)

    common.measure(a.loader_name or "acsylla", lambda e: Epoch(loop, a, keys, read_one, e), a,
                   extra=dict(driver="acsylla", concurrency=a.concurrency, connections=a.connections,
                              io_threads=a.io_threads))
    loop.run_until_complete(session.close())


if __name__ == "__main__":
    main()
