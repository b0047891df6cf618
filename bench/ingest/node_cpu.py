"""CPU seconds of the local Cassandra node, for the ingest benchmarks.

The node is the process listening on HOST:9042 (found with `ss -ltnp`);
its CPU is utime + stime from /proc/PID/stat. On a machine shared with other
work the node's CPU per byte or per key is steadier than the wall time.
None when the node is not a local process (or ss cannot see it).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "run_lib"))
from bench_common import process_cpu_s as cpu_seconds  # noqa: E402,F401  (utime + stime, None once gone)


def node_pid(host: str, port: int = 9042) -> int | None:
    try:
        out = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 4 and cols[3] in (f"{host}:{port}", f"*:{port}", f"0.0.0.0:{port}"):
            m = re.search(r"pid=(\d+)", line)
            if m:
                return int(m.group(1))
    return None
