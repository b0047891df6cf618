"""What the bench modules share (harness.py, summary.py, tolerance.py,
node_settings.py, and bench/ingest/node_cpu.py): the loaders the comparison
knows, its log lines, the load average and a process's CPU seconds."""
import os
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

NETWORK_LOADERS = ["cqlstream", "cqlstream-ordered", "driver", "acsylla", "streaming"]
LOCAL_LOADERS = ["torch-files", "dali-files"]


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def loadavg():
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


_TICK = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid):
    """utime + stime of a running process, in seconds; None for pid None or a process that is gone."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # After the ")" that ends comm: state is field 3, utime 14 and stime 15.
    return (int(fields[11]) + int(fields[12])) / _TICK


def default_node_pid():
    """The pid of the default profile's node (scripts/cassandra's pid file); None while it has none."""
    try:
        with open(os.path.join(ROOT, ".state", "cassandra", "default", "node1", "cassandra.pid")) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None
