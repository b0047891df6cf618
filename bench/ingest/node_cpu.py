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


def cpu_seconds(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # After the ")" that ends comm: state is field 3, utime 14 and stime 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
