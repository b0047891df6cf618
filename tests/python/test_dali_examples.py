"""The DALI examples and the GPU check script, in the forms that run on a CPU-only machine.

* examples/fashion_mnist_train_dali.py in its shortened CI mode on a part of
  Fashion-MNIST (Debian's dataset-fashion-mnist): must clearly beat chance.
* examples/imagenet_style.py needs a GPU: its argument parsing and pipeline
  definitions must work here, and main() must refuse politely.
* bench/gpu/dali_gpu_check.py: its CPU modes (read, cpu) run; the .sh parses.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli

REPO = Path(__file__).resolve().parents[2]
HOSTS = os.environ.get("CQLSTREAM_TEST_HOSTS", "127.0.0.1")
RUN = os.getpid() % 100000


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


@pytest.fixture(scope="module")
def fashion(tmp_path_factory) -> str:
    """2,000 train and 2,000 test images of Fashion-MNIST, ingested as a dali_ dataset."""
    out = tmp_path_factory.mktemp("fashion")
    subprocess.run([sys.executable, str(REPO / "scripts/fashion_mnist_to_png.py"), str(out), "--limit", "2000"],
                   check=True, capture_output=True, timeout=300)
    name = f"dali_t{RUN}_fm"
    run_cli("drop", name, "--yes", check=False)
    run_cli("ingest", "--dataset", name, str(out))
    yield name
    run_cli("drop", name, "--yes", check=False)


def test_fashion_mnist_dali_example_beats_chance(fashion):
    r = subprocess.run(
        [sys.executable, str(REPO / "examples/fashion_mnist_train_dali.py"), "--dataset", fashion, "--hosts", HOSTS,
         "--epochs", "1", "--limit-batches", "40", "--batch-size", "32", "--threads", "2", "--min-accuracy", "0.5"],
        capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fn.cqlstream.reader (plugin)" in r.stdout
    m = re.search(r"test accuracy: ([0-9.]+) on (\d+) images", r.stdout)
    assert m, r.stdout
    assert float(m.group(1)) > 0.5 and int(m.group(2)) == 2000  # chance is 0.1


def test_imagenet_style_parses_and_defines_its_pipelines_on_cpu(fashion, tmp_path):
    m = load(REPO / "examples/imagenet_style.py", "imagenet_style")
    args = m.build_parser().parse_args(["--dataset", fashion, "--arch", "resnet18", "--batch-size", "8",
                                        "--save-every", "100", "--checkpoint-dir", str(tmp_path / "ckpt")])
    assert args.arch == "resnet18" and args.batch_size == 8 and args.val_split == "val"
    common = dict(batch_size=8, num_threads=1, device_id=None)
    train = m.train_pipeline(dataset=fashion, split="train", shard_id=0, num_shards=2, size=64, shuffle_seed=0,
                             memory_bytes=0, conn={"hosts": [HOSTS]}, enable_checkpointing=True, **common)
    val = m.val_pipeline(dataset=fashion, split="test", shard_id=1, num_shards=2, size=64, memory_bytes=0,
                         conn={"hosts": [HOSTS]}, **common)
    assert train is not None and val is not None  # defined (building needs a GPU: mixed decoding)
    assert m.main(["--dataset", fashion]) == 2  # no GPU here: a clear refusal, not a crash


def test_gpu_check_script_runs_its_cpu_modes(fashion, tmp_path):
    out = tmp_path / "r.json"
    r = subprocess.run(
        [sys.executable, str(REPO / "bench/gpu/dali_gpu_check.py"), "--dataset", fashion, "--hosts", HOSTS,
         "--device-id", "none", "--modes", "read,cpu", "--seconds", "1", "--warmup", "1", "--batch-size", "64",
         "--size", "32", "--threads", "2", "--json", str(out)],
        capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"read: +[0-9,]+ images/s", r.stdout) and re.search(r"cpu: +[0-9,]+ images/s", r.stdout)
    assert '"images_per_s"' in out.read_text()
    assert subprocess.run(["bash", "-n", str(REPO / "bench/gpu/dali_gpu_check.sh")]).returncode == 0
