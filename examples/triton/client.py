#!/usr/bin/env python3
"""Asks the model repository of make_model_repository.py to classify images
stored in Cassandra, by key (docs/triton.md).

With a Triton server (pip install tritonclient[grpc]):
    client.py --url localhost:8001 --keys keys.txt                 # interactive, cqlstream_classify
    client.py --url localhost:8001 --keys keys.txt --stream        # decoupled, cqlstream_classify_stream
Without one (what was run here): the same serialized DALI pipelines
(model.dali) driven through DALI's input feeding, then the TorchScript
classifier, in this process:
    client.py --local model_repository --keys keys.txt [--stream]

keys.txt: one key per line, "seg:idx" or an integer (seg << 32 | idx), as
written by `cqlstream select`. Prints one line per response and requests/s.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np


def read_keys(path: Path) -> list[int]:
    keys = []
    for line in path.read_text().split("\n"):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if ":" in line:
            seg, idx = line.split(":", 1)
            keys.append((int(seg) << 32) | int(idx))
        else:
            keys.append(int(line))
    return keys


def chunks(keys: list[int], n: int) -> list[list[int]]:
    return [keys[i:i + n] for i in range(0, len(keys), n)]


def run_local(repo: Path, keys: list[int], *, stream: bool, request_size: int, queued: int,
              mini_batch: int) -> int:
    """The serialized pipelines through DALI feeding + the TorchScript classifier."""
    import torch

    import cqlstream.dali as cd
    import cqlstream.serving as cs
    from nvidia.dali import Pipeline

    cd.load_plugin(required=True)
    model = "cqlstream_images_stream" if stream else "cqlstream_images"
    blob = (repo / model / "1" / "model.dali").read_bytes()
    pipe = Pipeline.deserialize(serialized_pipeline=blob, prefetch_queue_depth=1, exec_dynamic=True)
    pipe.build()
    net = torch.jit.load(str(repo / "classifier" / "1" / "model.pt"))
    requests = [keys] if stream else chunks(keys, request_size)
    # A server runs a decoupled model until its "depleted" trace says so; here the number of
    # iterations of a request is known: ceil(keys / mini_batch_size).
    t0 = time.perf_counter()
    n_out = errors = 0
    for r, out in cs.run_requests(pipe, "KEYS", requests, queued=queued,
                                  mini_batch_size=mini_batch if stream else None):
        if isinstance(out, Exception):
            print(f"request {r}: error: {out}".splitlines()[0])
            errors += 1
            continue
        images = torch.stack([torch.from_numpy(np.array(out[0][i])) for i in range(len(out[0]))])
        scores = net(images)
        labels = [int(np.array(out[1][i]).reshape(-1)[0]) for i in range(len(out[1]))]
        n_out += len(labels)
        print(f"request {r}: {len(labels)} images, predicted {scores.argmax(1).tolist()}, stored labels {labels}")
    dt = time.perf_counter() - t0
    print(f"{len(requests)} requests, {n_out} images in {dt:.3f} s: {len(requests) / dt:.1f} requests/s "
          f"({cs.stats('KEYS')})")
    return 1 if errors else 0


def run_triton(url: str, keys: list[int], *, stream: bool, request_size: int) -> int:
    try:
        import tritonclient.grpc as grpcclient
    except ImportError:
        print("tritonclient is not installed: pip install tritonclient[grpc] (or use --local)", file=sys.stderr)
        return 2
    client = grpcclient.InferenceServerClient(url=url)
    t0 = time.perf_counter()
    if not stream:
        requests = chunks(keys, request_size)
        for r, req in enumerate(requests):
            inp = grpcclient.InferInput("KEYS", [len(req), 1], "INT64")
            inp.set_data_from_numpy(np.array(req, dtype=np.int64).reshape(-1, 1))
            res = client.infer("cqlstream_classify", [inp])
            print(f"request {r}: predicted {res.as_numpy('SCORES').argmax(1).tolist()}")
        n = len(requests)
    else:
        import queue

        results: queue.Queue = queue.Queue()
        client.start_stream(callback=lambda result, error: results.put(error or result))
        inp = grpcclient.InferInput("KEYS", [len(keys)], "INT64")
        inp.set_data_from_numpy(np.array(keys, dtype=np.int64))
        client.async_stream_infer("cqlstream_classify_stream", [inp], enable_empty_final_response=True)
        got = 0
        while got < len(keys):
            res = results.get()
            if isinstance(res, Exception):
                print(f"error: {res}")
                return 1
            if res.get_response().parameters.get("triton_final_response", None) is not None and \
                    res.as_numpy("SCORES") is None:
                break
            got += len(res.as_numpy("SCORES"))
            print(f"response: {len(res.as_numpy('SCORES'))} images")
        client.stop_stream()
        n = 1
    dt = time.perf_counter() - t0
    print(f"{n} requests in {dt:.3f} s: {n / dt:.1f} requests/s")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="Triton gRPC endpoint, e.g. localhost:8001")
    where.add_argument("--local", type=Path, help="model repository: run its pipelines in this process")
    ap.add_argument("--keys", type=Path, required=True)
    ap.add_argument("--stream", action="store_true", help="decoupled: one request with every key")
    ap.add_argument("--request-size", type=int, default=8, help="keys per interactive request")
    ap.add_argument("--queued", type=int, default=8, help="--local: requests kept queued ahead")
    ap.add_argument("--mini-batch", type=int, default=16,
                    help="--local --stream: the mini_batch_size the repository was made with")
    a = ap.parse_args(argv)
    keys = read_keys(a.keys)
    if not keys:
        print(f"{a.keys}: no keys", file=sys.stderr)
        return 2
    if a.local:
        return run_local(a.local, keys, stream=a.stream, request_size=a.request_size, queued=a.queued,
                         mini_batch=a.mini_batch)
    return run_triton(a.url, keys, stream=a.stream, request_size=a.request_size)


if __name__ == "__main__":
    sys.exit(main())
