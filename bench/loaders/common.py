"""Shared measurement for the Python loaders of the comparison (bench/run).

Every loader is a separate process run by bench/run. It produces epochs as
iterators of batches (a batch: (list of sample byte strings or a byte count,
number of images)), and `measure()` times them the way `cqlstream bench`
does: per epoch the wall time, images, payload bytes and the process's CPU
time (user + system of all threads, plus that of worker processes reaped
during the epoch); per batch the time the consumer waited for it. The first
`warmup` epochs are excluded; the summary holds medians over the measured
epochs and the batch-wait percentiles over all measured batches.

A measured epoch may be cut short after `max_epoch_s` seconds (slow loaders
at high RTT): the rates are then over the batches read until then, and the
JSON says how many epochs were partial.
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time


def cpu_seconds():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def peak_rss_mb():
    """Peak RSS of this process; of worker processes, the largest one."""
    s = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    c = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
    return s, c


def percentile(v, p):
    if not v:
        return 0.0
    v = sorted(v)
    return v[min(len(v) - 1, int(p / 100.0 * len(v)))]


def add_common_args(ap):
    ap.add_argument("--loader-name", default=None, help="name in the JSON output")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=3, help="measured epochs")
    ap.add_argument("--warmup", type=int, default=1, help="warm-up epochs (not measured)")
    ap.add_argument("--max-epoch-s", type=float, default=0,
                    help="cut a measured epoch after this many seconds (0: never)")
    ap.add_argument("--max-warmup-s", type=float, default=0,
                    help="cut a warm-up epoch after this many seconds (0: never)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")


def add_cluster_args(ap):
    ap.add_argument("--hosts", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9042)
    ap.add_argument("--keyspace", default="cqlstream")
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--split", default="train")


def batch_bytes(batch):
    samples, _ = batch
    if isinstance(samples, int):
        return samples
    return sum(len(s) for s in samples)


def measure(name, make_epoch, a, extra=None):
    """make_epoch(epoch_number) -> iterator of (samples, n_images).

    The iterator may have a close() that stops background work."""
    epochs = []
    waits = []
    partial = 0
    for e in range(a.warmup + a.epochs):
        warm = e < a.warmup
        cap = a.max_warmup_s if warm else a.max_epoch_s
        it = make_epoch(e)
        cpu0, t0 = cpu_seconds(), time.monotonic()
        images = nbytes = 0
        ew = []
        cut = False
        while True:
            w0 = time.monotonic()
            try:
                b = next(it)
            except StopIteration:
                break
            ew.append((time.monotonic() - w0) * 1000.0)
            images += b[1]
            nbytes += batch_bytes(b)
            if cap and time.monotonic() - t0 >= cap:
                cut = True
                break
        t1 = time.monotonic()
        close = getattr(it, "close", None)
        if close:
            close()
        cpu1 = cpu_seconds()
        # Worker processes (torch DataLoader) are reaped by close(): their
        # CPU counts in RUSAGE_CHILDREN from then on.
        secs = t1 - t0
        r = dict(seconds=secs, images=images, bytes=nbytes, cpu=cpu1 - cpu0, cut=cut)
        if not a.json:
            print(f"epoch {e}{' (warm-up)' if warm else ''}{' (cut)' if cut else ''}: {images} images, "
                  f"{nbytes / 1e6:.1f} MB in {secs:.2f} s: {images / secs:.0f} images/s, "
                  f"{nbytes / 1e6 / secs:.1f} MB/s, CPU {r['cpu']:.2f} s", file=sys.stderr, flush=True)
        if not warm:
            epochs.append(r)
            waits.extend(ew)
            partial += cut
    ips = [r["images"] / r["seconds"] for r in epochs]
    mbs = [r["bytes"] / 1e6 / r["seconds"] for r in epochs]
    cpg = [r["cpu"] / (r["bytes"] / 1e9) for r in epochs if r["bytes"]]
    rss_self, rss_child = peak_rss_mb()
    out = dict(loader=name, images_per_s=round(statistics.median(ips), 1), mb_per_s=round(statistics.median(mbs), 2),
               cpu_s_per_gb=round(statistics.median(cpg), 3) if cpg else 0.0,
               p50_wait_ms=round(percentile(waits, 50), 3), p99_wait_ms=round(percentile(waits, 99), 3),
               peak_rss_mb=round(rss_self, 1), worker_peak_rss_mb=round(rss_child, 1), epochs=len(epochs),
               partial_epochs=partial, images_measured=sum(r["images"] for r in epochs),
               bytes_measured=sum(r["bytes"] for r in epochs))
    if extra:
        out.update(extra)
    print(json.dumps(out) if a.json else out, flush=True)
    return out


def dataset_keys(session_execute, keyspace, dataset, split):
    """Committed keys (seg, idx) of a split, from the segments table."""
    keys = []
    for seg, sp, count in session_execute(
            f"SELECT seg, split, count FROM {keyspace}.segments WHERE dataset = '{dataset}'"):
        if sp == split and count:
            keys.extend((seg, i) for i in range(count))
    keys.sort()
    return keys


def data_query(keyspace, dataset):
    # The loader's query (store::DataReadQuery, docs/schema.md).
    return (f"SELECT seg, idx, size, image_size, checksum, label, labels, data FROM {keyspace}.d_{dataset} "
            "WHERE seg = ? AND idx = ?")


def parser(doc):
    return argparse.ArgumentParser(description=doc.split("\n")[0])


def env_int(name, default):
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def translator_args(spec):
    """Cluster(**translator_args("A=B,...")) for the Python driver.

    The driver takes the address a node advertises in system.local /
    system.peers (rpc_address) as the address to open its pools to, even for
    the contact point it reached through a proxy; an AddressTranslator (the
    driver's hook for NAT) maps it back to the proxy's address."""
    if not spec:
        return {}
    from cassandra.policies import AddressTranslator
    table = dict(kv.split("=", 1) for kv in spec.split(","))

    class MapTranslator(AddressTranslator):
        def translate(self, addr):
            return table.get(addr, addr)

    return dict(address_translator=MapTranslator())
