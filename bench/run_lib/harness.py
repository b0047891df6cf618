#!/usr/bin/env python3
"""The loader comparison (entry point: bench/run; docs/benchmarks.md,
"Loader comparison").

For every series (rate cap) and RTT it starts one cqlstream-wan in front of
the running Cassandra node (and of a local moto_server S3 endpoint), runs
every loader through it, one at a time, each in its own process, and
collects one JSON line per loader. While a loader runs, a monitor lists the
TCP connections of its process tree (ss -tnp) and records any that go to the
node or the S3 endpoint directly instead of to the proxy; the proxy's
per-mapping byte counters before and after each run are recorded too.

Outputs (OUT = bench/results, or bench/results/raw/quick with --quick):
  OUT/summary.csv   dataset,loader,rtt_ms,rate_mbit,images_per_s,mb_per_s,
                    fraction_of_rtt0,cpu_s_per_gb,p50_wait_ms,p99_wait_ms,peak_rss_mb
  OUT/summary.md    the same as Markdown tables, plus the checks
  OUT/throughput_<dataset>.png
  bench/results/raw/<run>/   every loader's JSON, stderr and the proxy logs
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

from bench_common import LOCAL_LOADERS, NETWORK_LOADERS, loadavg, log
from summary import load_records, series_of, summarize

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("CQLSTREAM_BENCH_BUILD_DIR", "build-bench"))
VENV_PY = os.path.join(ROOT, ".venv", "bin", "python")
STREAMING_VENV = os.path.join(ROOT, ".cache", "bench-streaming-venv")
STREAMING_PY = os.path.join(STREAMING_VENV, "bin", "python")
LOADERS = os.path.join(ROOT, "bench", "loaders")
DATA = os.path.join(ROOT, "bench", "data")

NODE = ("127.0.0.1", 9042)      # the running node (scripts/cassandra up)
# Where every loader connects; another address lets two runs (of two people)
# go side by side.
PROXY_IP = os.environ.get("CQLSTREAM_BENCH_PROXY_IP", "127.0.9.1")
S3 = ("127.0.0.1", 9570)        # moto_server

# --------------------------------------------------------------------------
# Set-up: build, virtualenvs, data
# --------------------------------------------------------------------------

def run(cmd, **kw):
    log("$ " + " ".join(cmd))
    return subprocess.run(cmd, check=True, **kw)


def build(targets):
    if not os.path.exists(os.path.join(BUILD, "build.ninja")):
        run(["cmake", "-S", ROOT, "-B", BUILD, "-G", "Ninja", "-DCQLSTREAM_BUILD_BENCH=ON",
             "-DCQLSTREAM_BUILD_TESTS=OFF"], stdout=subprocess.DEVNULL)
    run(["ninja", "-C", BUILD, "-j2"] + targets, stdout=subprocess.DEVNULL)


def binary(name):
    for sub in ("src/cli", "bench"):
        p = os.path.join(BUILD, sub, name)
        if os.path.exists(p):
            return p
    raise FileNotFoundError(name)


def python_has(py, module):
    return subprocess.run([py, "-c", f"import {module}"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def ensure_streaming_venv():
    """Makes .cache/bench-streaming-venv (numpy<2.2) with torch from .venv."""
    req = os.path.join(LOADERS, "requirements-streaming.txt")
    stamp = os.path.join(STREAMING_VENV, ".requirements")
    want = open(req).read()
    if os.path.exists(STREAMING_PY) and os.path.exists(stamp) and open(stamp).read() == want:
        return True
    try:
        if not os.path.exists(STREAMING_PY):
            run([sys.executable, "-m", "venv", STREAMING_VENV])
        run([STREAMING_PY, "-m", "pip", "install", "--disable-pip-version-check", "-q", "--no-deps", "-r", req])
        site = subprocess.check_output([STREAMING_PY, "-c", "import site; print(site.getsitepackages()[0])"],
                                       text=True).strip()
        main_site = subprocess.check_output([VENV_PY, "-c", "import site; print(site.getsitepackages()[0])"],
                                            text=True).strip()
        # Appended after this venv's own site-packages: torch comes from .venv,
        # numpy from here.
        with open(os.path.join(site, "zz_cqlstream_main_venv.pth"), "w") as f:
            f.write(main_site + "\n")
        with open(stamp, "w") as f:
            f.write(want)
        return True
    except (subprocess.CalledProcessError, OSError) as e:
        log(f"streaming venv: {e}")
        return False


def cql(query):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "lib", "cqlprobe.py"), "--host", NODE[0],
                          "-e", query], capture_output=True, text=True)
    return out.stdout


def prepare_data(cfg):
    """Generates and ingests both datasets (idempotent: ingest resumes or
    reports them complete); writes their MDS shards."""
    cq = binary("cqlstream")
    jpeg_dir = os.path.join(DATA, cfg.jpeg_name)
    if not os.path.exists(os.path.join(jpeg_dir, ".complete")):
        shutil.rmtree(jpeg_dir, ignore_errors=True)
        run([binary("cqlstream-gen-images"), "--out", jpeg_dir, "--count", str(cfg.jpeg_count), "--classes", "100",
             "--val-fraction", "0", "--threads", "2"])
        open(os.path.join(jpeg_dir, ".complete"), "w").close()
    fashion_dir = os.path.join(DATA, cfg.fashion_name)
    if not os.path.exists(os.path.join(fashion_dir, ".complete")):
        cmd = [sys.executable, os.path.join(ROOT, "scripts", "fashion_mnist_to_png.py"), fashion_dir]
        if cfg.fashion_limit:
            cmd += ["--limit", str(cfg.fashion_limit)]
        run(cmd)
        open(os.path.join(fashion_dir, ".complete"), "w").close()
    for name, folder in ((cfg.jpeg_name, jpeg_dir), (cfg.fashion_name, fashion_dir)):
        run([cq, "ingest", "--hosts", NODE[0], "--keyspace", cfg.keyspace, "--dataset", name, folder],
            stdout=subprocess.DEVNULL)
    info = {}
    for name, folder in ((cfg.jpeg_name, jpeg_dir), (cfg.fashion_name, fashion_dir)):
        files = []
        for dirpath, _, names in os.walk(os.path.join(folder, "train")):
            files += [os.path.join(dirpath, n) for n in names]
        info[name] = dict(folder=folder, train_images=len(files),
                          train_bytes=sum(os.path.getsize(f) for f in files))
        log(f"dataset {name}: {len(files)} train images, {info[name]['train_bytes'] / 1e9:.3f} GB")
    return info


# --------------------------------------------------------------------------
# S3 endpoint (moto) and the WAN emulator
# --------------------------------------------------------------------------

def wait_port(host, port, timeout=60):
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            with socket.create_connection((host, port), timeout=1):
                return True
        except OSError:
            time.sleep(0.2)
    return False


class Moto:
    def __init__(self, raw):
        self.log = open(os.path.join(raw, "moto.log"), "w")
        self.p = subprocess.Popen([STREAMING_PY, "-m", "moto.server", "-H", S3[0], "-p", str(S3[1])],
                                  stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
                                  env=s3_env(f"http://{S3[0]}:{S3[1]}"))
        if not wait_port(*S3):
            self.stop()
            raise RuntimeError("moto_server did not start (see moto.log)")

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def s3_env(endpoint):
    env = dict(os.environ)
    env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1",
               S3_ENDPOINT_URL=endpoint)
    return env


STATS_RE = re.compile(r"\[wan\]\s+(\S+)->(\S+)\s+conns (\d+) active / (\d+) total.*?up ([\d.]+) (\w+).*?"
                      r"down ([\d.]+) (\w+)")
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
# The end of a stats line: bytes the delay line released up to each bound (ms)
# after their time, and beyond the last (cqlstream-wan's kLateBucketMs).
LATE_RE = re.compile(r"(<=|>)([\d.]+)ms:(\d+)")


def late_quantile_ms(buckets, q):
    """The smallest bucket bound under which fraction q of the bytes were released; the string ">B" (B: the
    last bound) for the last bucket, None when nothing was timed. buckets: [(bound_ms, bytes)] with the last
    bound "beyond" (strings rather than inf keep records.json strict JSON)."""
    total = sum(b for _, b in buckets)
    if not total:
        return None
    seen = 0
    for i, (bound, b) in enumerate(buckets):
        seen += b
        if i + 1 < len(buckets) and seen >= q * total:
            return bound
    return f">{buckets[-1][0]:g}"


class Proxy:
    """cqlstream-wan with two mappings; parses its stats lines."""

    def __init__(self, rtt, rate, raw_dir, rt_priority=None):
        self.stats = {}
        self.cond = threading.Condition()
        self.seq = 0
        # Appended to: a tolerance pass starts one emulator per run.
        self.logf = open(os.path.join(raw_dir, f"wan_rtt{rtt}_rate{rate}.log"), "a")
        cmd = [binary("cqlstream-wan"), "--rtt-ms", str(rtt), "--window", "4MiB",
               "--map", f"{PROXY_IP}:{NODE[1]}={NODE[0]}:{NODE[1]}",
               "--map", f"{PROXY_IP}:{S3[1]}={S3[0]}:{S3[1]}"]
        if rate:
            cmd += ["--rate-mbit", str(rate)]
        if rt_priority is not None:
            cmd += ["--rt-priority", str(rt_priority)]
        log("$ " + " ".join(cmd))
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  start_new_session=True)
        self.listening = 0
        self.rt_refused = False  # it printed that it runs without the SCHED_FIFO priority asked for
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()
        t0 = time.time()
        while self.listening < 2 and time.time() - t0 < 10 and self.p.poll() is None:
            time.sleep(0.05)
        if self.listening < 2:
            self.stop()
            with open(self.logf.name) as f:
                why = (f.read().strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"cqlstream-wan did not start listening ({why}); another run's emulator on "
                               f"{PROXY_IP}? set CQLSTREAM_BENCH_PROXY_IP to another 127.x address")

    def _read(self):
        for line in self.p.stdout:
            self.logf.write(line)
            self.logf.flush()
            if "listening" in line:
                self.listening += 1
            if "no SCHED_FIFO priority" in line:
                self.rt_refused = True
            m = STATS_RE.search(line)
            if m:
                with self.cond:
                    self.stats[(m.group(1), m.group(2))] = dict(
                        total_conns=int(m.group(4)),
                        up=float(m.group(5)) * UNITS.get(m.group(6), 1),
                        down=float(m.group(7)) * UNITS.get(m.group(8), 1),
                        late=[(float(b), int(n)) for _, b, n in LATE_RE.findall(line[m.end():])])
                    self.seq += 1
                    self.cond.notify_all()

    def snapshot(self):
        """Per-mapping totals (connections, bytes up/down) right now."""
        with self.cond:
            seq = self.seq
            self.p.send_signal(signal.SIGUSR1)
            self.cond.wait_for(lambda: self.seq >= seq + 2, timeout=5)
            return {f"{k[0]}->{k[1]}": dict(v) for k, v in self.stats.items()}

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.t.join(5)
        self.logf.close()


# --------------------------------------------------------------------------
# Running one loader
# --------------------------------------------------------------------------

def tree_pids(root):
    """root and all its descendants (from /proc)."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = set(), [root]
    while todo:
        p = todo.pop()
        out.add(p)
        todo.extend(children.get(p, []))
    return out


class ConnMonitor:
    """Samples the TCP peers of a process tree every 0.5 s."""

    def __init__(self, pid):
        self.pid = pid
        self.direct = set()    # peers reached around the proxy
        self.proxied = set()
        self.samples = 0
        self.stop_ev = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        direct = {f"{NODE[0]}:{NODE[1]}", f"{S3[0]}:{S3[1]}"}
        while not self.stop_ev.wait(0.5):
            pids = tree_pids(self.pid)
            try:
                out = subprocess.run(["ss", "-tnpH"], capture_output=True, text=True, timeout=5).stdout
            except (OSError, subprocess.TimeoutExpired):
                continue
            self.samples += 1
            for line in out.splitlines():
                f = line.split()
                if len(f) < 6:
                    continue
                owners = {int(x) for x in re.findall(r"pid=(\d+)", line)}
                if not owners & pids:
                    continue
                peer = f[4]
                if peer in direct:
                    self.direct.add(f"{f[3]}->{peer}")
                elif peer.startswith(PROXY_IP + ":"):
                    self.proxied.add(f"{f[3]}->{peer}")

    def stop(self):
        self.stop_ev.set()
        self.t.join(10)


def loader_command(cfg, loader, dataset):
    common = ["--batch-size", str(cfg.batch_size), "--json"]
    host = PROXY_IP
    if loader in ("cqlstream", "cqlstream-ordered"):
        cmd = [binary("cqlstream"), "bench", dataset, "--hosts", host, "--keyspace", cfg.keyspace,
               "--epochs", str(cfg.epochs), "--warmup", str(cfg.warmup), "--batch-size", str(cfg.batch_size),
               "--json"]
        if loader == "cqlstream-ordered":
            cmd.append("--ordered")
        return cmd, None
    caps = ["--epochs", str(cfg.py_epochs), "--warmup", str(cfg.warmup), "--max-epoch-s", str(cfg.max_epoch_s),
            "--max-warmup-s", str(cfg.max_warmup_s)]
    if loader == "driver":
        return [VENV_PY, os.path.join(LOADERS, "driver_loader.py"), "--hosts", host, "--keyspace", cfg.keyspace,
                "--dataset", dataset, "--translate", f"{NODE[0]}={PROXY_IP}"] + caps + common, None
    if loader == "acsylla":
        return [VENV_PY, os.path.join(LOADERS, "acsylla_loader.py"), "--hosts", host, "--keyspace", cfg.keyspace,
                "--dataset", dataset] + caps + common, None
    if loader == "streaming":
        # Whole epochs, each from an empty cache (so no warm-up): with the
        # default shuffle a batch mixes samples of all shards of a dataset of
        # this size, so the first batch comes only after most shards are in
        # and a time cap would measure only that wait.
        return ([STREAMING_PY, os.path.join(LOADERS, "streaming_loader.py"), "read",
                 "--remote", f"s3://cqlstream-bench/{cfg.keyspace}/{dataset}",
                 "--epochs", str(cfg.streaming_epochs), "--warmup", "0"] + common,
                s3_env(f"http://{PROXY_IP}:{S3[1]}"))
    folder = os.path.join(DATA, dataset)
    kind = "torch" if loader == "torch-files" else "dali"
    return [VENV_PY, os.path.join(LOADERS, "files_loader.py"), "--folder", folder, "--kind", kind] + caps + common, None


def run_loader(cfg, loader, dataset, rtt, rate, raw, proxy):
    cmd, env = loader_command(cfg, loader, dataset)
    tag = f"{dataset}_{loader}_rtt{rtt}_rate{rate}"
    load0 = loadavg()
    before = proxy.snapshot() if proxy else {}
    log(f"{tag}: load {load0}: " + " ".join(os.path.basename(c) if i == 0 else c for i, c in enumerate(cmd)))
    t0 = time.time()
    with open(os.path.join(raw, tag + ".stderr"), "w") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env,
                             cwd=LOADERS, start_new_session=True)
        mon = ConnMonitor(p.pid) if proxy else None
        try:
            out, _ = p.communicate(timeout=cfg.loader_timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
            out = ""
            err.write(f"\n[bench] killed after {cfg.loader_timeout} s\n")
        except BaseException:
            os.killpg(p.pid, signal.SIGKILL)  # interrupted: leave nothing behind
            p.wait()
            raise
        finally:
            if mon:
                mon.stop()
    after = proxy.snapshot() if proxy else {}
    result = None
    for line in (out or "").splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                result = json.loads(line)
            except json.JSONDecodeError:
                pass
    rec = dict(dataset=dataset, loader=loader, rtt_ms=rtt, rate_mbit=rate, command=cmd, returncode=p.returncode,
               wall_s=round(time.time() - t0, 1), load_before=load0, load_after=loadavg(), result=result)
    if proxy:
        rec["proxy_before"], rec["proxy_after"] = before, after
        rec["direct_connections"] = sorted(mon.direct)
        rec["proxied_connections"] = len(mon.proxied)
        rec["monitor_samples"] = mon.samples
        key = f"{PROXY_IP}:{S3[1] if loader == 'streaming' else NODE[1]}->" \
              f"{S3[0] if loader == 'streaming' else NODE[0]}:{S3[1] if loader == 'streaming' else NODE[1]}"
        down = after.get(key, {}).get("down", 0) - before.get(key, {}).get("down", 0)
        rec["proxy_down_bytes"] = down
        measured = (result or {}).get("bytes_measured")
        if result and not measured and loader.startswith("cqlstream"):
            # cqlstream bench reads whole epochs: its measured bytes are the split's.
            measured = cfg.info[dataset]["train_bytes"] * result.get("epochs", 0)
        if measured:
            rec["proxy_down_over_measured"] = round(down / measured, 3)
    if result is None:
        tail = open(os.path.join(raw, tag + ".stderr")).read()[-600:]
        rec["error"] = tail.strip().splitlines()[-1] if tail.strip() else f"exit {p.returncode}"
        log(f"{tag}: FAILED ({rec['error']})")
    else:
        log(f"{tag}: {result['images_per_s']:.0f} images/s, {result['mb_per_s']:.1f} MB/s, "
            f"{result['cpu_s_per_gb']:.2f} CPU s/GB, wait p50 {result['p50_wait_ms']:.1f} p99 "
            f"{result['p99_wait_ms']:.1f} ms" + (f", direct connections {len(rec['direct_connections'])}, "
                                                 f"proxied {rec['proxied_connections']}" if proxy else ""))
    with open(os.path.join(raw, tag + ".json"), "w") as f:
        json.dump(rec, f, indent=1)
    return rec


# --------------------------------------------------------------------------

def parse_args():
    ap = argparse.ArgumentParser(description="cqlstream loader comparison across emulated RTTs")
    ap.add_argument("--quick", action="store_true", help="tiny data, RTT 0 and 50, one epoch: a few minutes (CI)")
    ap.add_argument("--rtts", default=None, help="comma-separated RTTs in ms (default 0,10,50,100,200)")
    ap.add_argument("--rates", default=None, help="rate series in Mbit/s, 0 = uncapped (default 0,1000)")
    ap.add_argument("--loaders", default=None, help="subset of " + ",".join(NETWORK_LOADERS + LOCAL_LOADERS))
    ap.add_argument("--datasets", default=None, help="subset: jpeg,fashion")
    ap.add_argument("--epochs", type=int, default=None,
                    help="measured epochs per point (default 2; --quick 1), median reported; "
                         "Streaming always reads one cold epoch")
    ap.add_argument("--summarize", default=None, metavar="RAW_RUN_DIR",
                    help="measure nothing: write the summary, table and plots again from a raw run's records")
    ap.add_argument("--no-build", action="store_true", help="use the binaries already in the build folder")
    ap.add_argument("--build-dir", default=None, help="build folder (default build-bench, or $CQLSTREAM_BENCH_BUILD_DIR)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--merge", default=None, metavar="RAW_RUN_DIR",
                    help="re-measure only the points of this run (--loaders, --rtts, ...) and write the summary "
                         "of an earlier run (bench/results/raw/<run>) with those points replaced")
    return ap.parse_args()


class Cfg:
    """The run's settings (make_cfg), plus what prepare_data found (info)."""


def make_cfg(a):
    cfg = Cfg()
    cfg.quick = a.quick
    cfg.keyspace = "cqlstream_benchq" if a.quick else "cqlstream_bench"
    cfg.jpeg_name, cfg.fashion_name = ("jpegq", "fashionq") if a.quick else ("jpeg", "fashion")
    cfg.jpeg_count = 300 if a.quick else 20000
    cfg.fashion_limit = 300 if a.quick else 0
    cfg.rtts = [int(x) for x in (a.rtts or ("0,50" if a.quick else "0,10,50,100,200")).split(",")]
    cfg.rates = [int(x) for x in (a.rates or ("0" if a.quick else "0,1000")).split(",")]
    # The rate cap matters for the bandwidth workload only: Fashion-MNIST
    # moves a few MB/s, far below 1000 Mbit/s.
    cfg.rate_datasets = [cfg.jpeg_name]
    cfg.batch_size = 64 if a.quick else 256
    cfg.epochs = a.epochs or (1 if a.quick else 2)
    cfg.py_epochs = cfg.epochs
    cfg.streaming_epochs = 1
    cfg.warmup = 1
    cfg.max_epoch_s = 20.0
    cfg.max_warmup_s = 10.0
    cfg.loader_timeout = 180 if a.quick else 900
    return cfg


def available_loaders(want_loaders):
    """The wanted loaders that can run here (the others are logged as skipped)."""
    available = []
    for l in want_loaders:
        ok = True
        if l == "driver":
            ok = python_has(VENV_PY, "cassandra.concurrent")
        elif l == "acsylla":
            ok = python_has(VENV_PY, "acsylla")
        elif l == "torch-files":
            ok = python_has(VENV_PY, "torch")
        elif l == "dali-files":
            ok = python_has(VENV_PY, "nvidia.dali")
        elif l == "streaming":
            ok = ensure_streaming_venv() and python_has(STREAMING_PY, "streaming")
        (available if ok else []).append(l)
        if not ok:
            log(f"loader {l}: not installed here, skipped")
    log(f"loaders: {', '.join(available)}")
    return available


def start_s3(cfg, info, datasets, raw):
    """MosaicML Streaming's data: MDS shards of each data set, uploaded to a local moto S3 endpoint (returned)."""
    for d in datasets:
        mds = os.path.join(DATA, "mds", d)
        run([STREAMING_PY, os.path.join(LOADERS, "streaming_loader.py"), "write-mds", info[d]["folder"], "train",
             mds], stdout=subprocess.DEVNULL)
    moto = Moto(raw)
    for d in datasets:
        run([STREAMING_PY, os.path.join(LOADERS, "streaming_loader.py"), "upload", os.path.join(DATA, "mds", d),
             f"s3://cqlstream-bench/{cfg.keyspace}/{d}"], env=s3_env(f"http://{S3[0]}:{S3[1]}"),
            stdout=subprocess.DEVNULL)
    return moto


def measure(cfg, available, datasets, raw):
    """Runs every loader at every point: local loaders once, network loaders through one proxy per (rate, RTT)."""
    records = []
    for d in datasets:
        for l in [l for l in available if l in LOCAL_LOADERS]:
            records.append(run_loader(cfg, l, d, 0, 0, raw, None))
    for rate in cfg.rates:
        for rtt in cfg.rtts:
            proxy = Proxy(rtt, rate, raw)
            try:
                for d in datasets:
                    if rate and d not in cfg.rate_datasets:
                        continue
                    for l in [l for l in available if l in NETWORK_LOADERS]:
                        records.append(run_loader(cfg, l, d, rtt, rate, raw, proxy))
            finally:
                proxy.stop()
            with open(os.path.join(raw, "records.json"), "w") as f:
                json.dump(records, f, indent=1)
    return records


def merge_into(merge_dir, records, cfg, meta, info, raw, run_id):
    """The records of an earlier run with this run's points replaced (--merge), and their meta."""
    old = load_records(merge_dir)
    key = lambda r: (r["dataset"], r["loader"], r["rtt_ms"], r["rate_mbit"])
    redone = {key(r) for r in records}
    kept = [r for r in old["records"] if key(r) not in redone]
    records = kept + records
    series_of(records, cfg)
    meta = dict(old["meta"], mode=old["meta"]["mode"] + f", {len(redone)} points re-measured in run {run_id}",
                run=f"{old['meta']['run']} + {run_id}",
                load_start=f"{old['meta']['load_start']} (re-run: {meta['load_start']})",
                load_end=f"{old['meta']['load_end']} (re-run: {meta['load_end']})")
    with open(os.path.join(raw, "merged-records.json"), "w") as f:
        json.dump(dict(meta=meta, info=info, records=records), f, indent=1)
    return records, meta


def report(records):
    """Logs failed runs and connections around the proxy; the exit status (1 when any)."""
    failed = [r for r in records if r.get("result") is None]
    leaked = [r for r in records if r.get("direct_connections")]
    for r in leaked:
        log(f"{r['dataset']} {r['loader']} RTT {r['rtt_ms']}: connections around the proxy: {r['direct_connections']}")
    if failed:
        log(f"{len(failed)} loader run(s) failed: " + ", ".join(f"{r['dataset']}/{r['loader']}@{r['rtt_ms']}"
                                                               for r in failed))
    return 1 if failed or leaked else 0


def main():
    a = parse_args()
    cfg = make_cfg(a)
    want_loaders = (a.loaders or ",".join(NETWORK_LOADERS + LOCAL_LOADERS)).split(",")
    want_datasets = (a.datasets or "jpeg,fashion").split(",")
    out = a.out or os.path.join(ROOT, "bench", "results", *(["raw", "quick"] if a.quick else []))
    if a.summarize:
        old = load_records(a.summarize)
        series_of(old["records"], cfg)
        summarize(old["records"], cfg, out, old["meta"])
        log(f"wrote {out}/summary.csv, summary.md, throughput_*.png from {a.summarize}")
        return 0
    run_id = datetime.datetime.now().strftime("%Y%m%d-%H%M%S") + ("-quick" if a.quick else "")
    raw = os.path.join(ROOT, "bench", "results", "raw", run_id)
    os.makedirs(raw, exist_ok=True)

    # SIGTERM (and SIGINT, also when started in the background) unwind like
    # Ctrl-C: the running loader, the proxy and moto are stopped.
    def interrupt(sig, frame):
        raise KeyboardInterrupt(f"signal {sig}")
    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)
    if a.build_dir:
        global BUILD
        BUILD = os.path.abspath(a.build_dir)
    if not a.no_build:
        build(["cqlstream_cli", "cqlstream-wan", "cqlstream-gen-images"])
    if subprocess.run([os.path.join(ROOT, "scripts", "cassandra"), "status"], stdout=subprocess.DEVNULL).returncode:
        sys.exit("the Cassandra node does not answer: scripts/cassandra up")

    available = available_loaders(want_loaders)
    info = prepare_data(cfg)
    cfg.info = info
    datasets = [d for d, k in ((cfg.jpeg_name, "jpeg"), (cfg.fashion_name, "fashion")) if k in want_datasets]
    cfg.rate_datasets = [d for d in cfg.rate_datasets if d in datasets]

    moto = start_s3(cfg, info, datasets, raw) if "streaming" in available else None
    meta = dict(mode="--quick" if a.quick else "full", run=run_id, load_start=loadavg(),
                machine=f"{os.cpu_count()} CPUs, {platform.release()}")
    try:
        records = measure(cfg, available, datasets, raw)
    finally:
        if moto:
            moto.stop()
    meta["load_end"] = loadavg()
    with open(os.path.join(raw, "records.json"), "w") as f:
        json.dump(dict(meta=meta, info=info, records=records), f, indent=1)
    if a.merge:
        records, meta = merge_into(a.merge, records, cfg, meta, info, raw, run_id)
    summarize(records, cfg, out, meta)
    log(f"wrote {out}/summary.csv, summary.md, throughput_*.png (raw: {raw})")
    return report(records)


if __name__ == "__main__":
    sys.exit(main())
