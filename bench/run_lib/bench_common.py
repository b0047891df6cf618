"""What the loader comparison's modules share (harness.py, summary.py): the
loaders it knows and its log lines."""
import os
import time

NETWORK_LOADERS = ["cqlstream", "cqlstream-ordered", "driver", "acsylla", "streaming"]
LOCAL_LOADERS = ["torch-files", "dali-files"]


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def loadavg():
    return "/".join(f"{x:.1f}" for x in os.getloadavg())
