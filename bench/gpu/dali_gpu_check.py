#!/usr/bin/env python3
"""Images/s of fn.cqlstream.reader feeding DALI decoding (GPU "mixed", or CPU for comparison).

Runs a few short, fixed measurements and prints one line each (and --json):
  read        fn.cqlstream.reader alone (bytes into DALI, no decoding)
  mixed       reader -> fn.decoders.image(device="mixed") -> fn.resize, zero_copy=True
  mixed-copy  the same with zero_copy=False (one copy of the bytes into DALI's buffers)
  cpu         reader -> fn.decoders.image(device="cpu") -> fn.resize (the CPU baseline)
  files       fn.readers.file over --file-root -> mixed decoding (DALI's own reader, if given)
Each runs --warmup batches, then as many batches as fit in --seconds.

Usage (bench/gpu/dali_gpu_check.sh prepares the environment and calls this):
    python bench/gpu/dali_gpu_check.py --dataset dali_gpu_synth [--modes read,mixed,mixed-copy,cpu]
Without a GPU only the modes read and cpu can run (--device-id none).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

from nvidia.dali import fn, pipeline_def, types

try:
    import cqlstream.dali as cd
except ImportError:
    # The cqlstream package's compiled core is not built here: cqlstream.dali
    # needs only DALI and the plugin, so load that module on its own.
    _spec = importlib.util.spec_from_file_location(
        "cqlstream_dali", Path(__file__).resolve().parents[2] / "python" / "cqlstream" / "dali.py")
    cd = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(cd)


def build(args, mode: str):
    device_id = None if args.device_id == "none" else int(args.device_id)
    conn = {k: v for k, v in (("hosts", args.hosts), ("keyspace", args.keyspace)) if v is not None}

    @pipeline_def(batch_size=args.batch_size, num_threads=args.threads, device_id=device_id,
                  prefetch_queue_depth=args.prefetch)
    def pipe():
        if mode == "files":
            jpegs, labels = fn.readers.file(file_root=args.file_root, random_shuffle=True, name="Reader")
        else:
            jpegs, labels = cd.reader(args.dataset, split=args.split, name="Reader",
                                      zero_copy=(mode != "mixed-copy"), **conn)
        if mode == "read":
            return labels
        device = "cpu" if mode == "cpu" else "mixed"
        images = fn.decoders.image(jpegs, device=device, output_type=types.RGB)
        images = fn.resize(images, resize_x=args.size, resize_y=args.size)
        return images, labels

    p = pipe()
    p.build()
    return p


def measure(args, mode: str) -> dict:
    p = build(args, mode)
    for _ in range(args.warmup):
        p.run()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < args.seconds:
        out = p.run()
        if args.sync and mode not in ("read", "cpu"):
            out[0].as_cpu()  # wait for the GPU work of this batch
        n += args.batch_size
    dt = time.perf_counter() - t0
    meta = p.reader_meta("Reader")
    del p
    return {"mode": mode, "images": n, "seconds": round(dt, 3), "images_per_s": round(n / dt, 1),
            "batch_size": args.batch_size, "threads": args.threads, "epoch_size": meta.get("epoch_size")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="dali_gpu_synth")
    ap.add_argument("--split", default="train")
    ap.add_argument("--hosts", default=None)
    ap.add_argument("--keyspace", default=None)
    ap.add_argument("--modes", default="read,mixed,mixed-copy,cpu")
    ap.add_argument("--file-root", default=None, help="a JPEG folder for the 'files' baseline")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--device-id", default="0", help="GPU index, or 'none' (read and cpu modes only)")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--sync", action="store_true", help="copy one output to the host per batch")
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args()

    cd.load_plugin()
    modes = [m for m in args.modes.split(",") if m]
    if args.file_root:
        modes.append("files")
    results = []
    for mode in modes:
        try:
            r = measure(args, mode)
        except Exception as e:  # noqa: BLE001 - report and go on with the next mode
            r = {"mode": mode, "error": str(e).strip().splitlines()[-1][:400]}
        results.append(r)
        if "error" in r:
            print(f"{mode:>10}: ERROR {r['error']}", flush=True)
        else:
            print(f"{mode:>10}: {r['images_per_s']:>10,.0f} images/s  ({r['images']} images in {r['seconds']} s, "
                  f"batch {args.batch_size}, {args.threads} DALI threads)", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"dataset": args.dataset, "host": os.uname().nodename, "results": results}, f, indent=1)
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
