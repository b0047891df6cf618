#!/usr/bin/env python3
"""A data loader on the Python scylla-driver, written the way people commonly
do it: the epoch's shuffled keys are cut into batches; a background thread
reads each batch with the driver's concurrent execution
(cassandra.concurrent.execute_concurrent_with_args) and puts it into a queue
of --prefetch batches, from which the training loop takes them in order.

Driver settings are the driver's defaults (protocol v4, one connection per
host, token-aware round robin, LOCAL_ONE) except the request timeout (60 s,
so that no request of a slow path fails) and --concurrency (requests in
flight per batch; the helper's default is 100). No decoding: a sample is the
concatenation of its data chunks, as `cqlstream bench` delivers it.
"""
import queue
import random
import sys
import threading

import common


class Epoch:
    """Iterator over the batches of one epoch, prefetched by a thread."""

    def __init__(self, session, stmt, batches, concurrency, prefetch):
        self.q = queue.Queue(maxsize=prefetch)
        self.stop = threading.Event()
        self.t = threading.Thread(target=self._run, args=(session, stmt, batches, concurrency), daemon=True)
        self.t.start()

    def _run(self, session, stmt, batches, concurrency):
        from cassandra.concurrent import execute_concurrent_with_args
        try:
            for keys in batches:
                if self.stop.is_set():
                    break
                res = execute_concurrent_with_args(session, stmt, keys, concurrency=concurrency,
                                                   raise_on_first_error=True)
                samples = []
                for ok, rows in res:
                    rows = list(rows)
                    # One row per chunk, in chunk order; statics repeat.
                    data = rows[0].data if len(rows) == 1 else b"".join(r.data for r in rows)
                    if len(data) != rows[0].size:
                        raise RuntimeError(f"sample {rows[0].seg}:{rows[0].idx}: {len(data)} of {rows[0].size} bytes")
                    samples.append(data)
                while not self.stop.is_set():
                    try:
                        self.q.put((samples, len(samples)), timeout=0.1)
                        break
                    except queue.Full:
                        pass
        except Exception as e:  # handed to the consumer
            self.q.put(e)
            return
        self.q.put(None)

    def __iter__(self):
        return self

    def __next__(self):
        b = self.q.get()
        if b is None:
            raise StopIteration
        if isinstance(b, Exception):
            raise b
        return b

    def close(self):
        self.stop.set()
        while self.t.is_alive():
            try:
                self.q.get(timeout=0.1)
            except queue.Empty:
                pass
        self.t.join()


def main():
    ap = common.parser(__doc__)
    common.add_common_args(ap)
    common.add_cluster_args(ap)
    ap.add_argument("--concurrency", type=int, default=100, help="requests in flight per batch (helper default 100)")
    ap.add_argument("--prefetch", type=int, default=4, help="batches read ahead by the background thread")
    ap.add_argument("--translate", default="", help="A=B[,...]: node address A (as system.local/peers name it) "
                    "is reached at B (an AddressTranslator; bench/run maps the node to the WAN emulator)")
    a = ap.parse_args()

    import cassandra
    from cassandra.cluster import Cluster, ExecutionProfile, EXEC_PROFILE_DEFAULT

    cluster = Cluster(a.hosts.split(","), port=a.port, protocol_version=4,
                      execution_profiles={EXEC_PROFILE_DEFAULT: ExecutionProfile(request_timeout=60)},
                      **common.translator_args(a.translate))
    session = cluster.connect()
    keys = common.dataset_keys(lambda q: [(r.seg, r.split, r.count) for r in session.execute(q)],
                               a.keyspace, a.dataset, a.split)
    if not keys:
        sys.exit(f"dataset {a.dataset} split {a.split}: no samples")
    stmt = session.prepare(common.data_query(a.keyspace, a.dataset))
    stmt.fetch_size = 64
    hosts = sorted(str(h.endpoint) for h in cluster.metadata.all_hosts())

    def make_epoch(e):
        order = list(keys)
        random.Random(a.seed * 1000003 + e).shuffle(order)
        batches = [order[i:i + a.batch_size] for i in range(0, len(order), a.batch_size)]
        return Epoch(session, stmt, batches, a.concurrency, a.prefetch)

    common.measure(a.loader_name or "driver", make_epoch, a,
                   extra=dict(driver=f"scylla-driver {cassandra.__version__}", hosts=hosts,
                              concurrency=a.concurrency, prefetch=a.prefetch))
    cluster.shutdown()


if __name__ == "__main__":
    main()
