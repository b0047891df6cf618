"""examples/lightning_fashion_mnist.py on CPU: two DDP processes (gloo) train
part of an epoch, are stopped mid-epoch with a checkpoint, and a second run
resumes it: across both runs every rank trains each of its samples exactly
once, the ranks step together, and the model beats chance."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, run_cli, unique_name

N = 2000  # Fashion-MNIST images per split (--limit)
BATCH = 64
WORLD = 2
STOP = 6  # steps before the simulated preemption


@pytest.fixture(scope="module")
def fashion_subset(tmp_path_factory):
    out = tmp_path_factory.mktemp("fashion_lightning")
    subprocess.run([sys.executable, str(ROOT / "scripts" / "fashion_mnist_to_png.py"), str(out), "--limit", str(N)],
                   check=True, capture_output=True, timeout=120)
    name = unique_name("py_lt")
    run_cli("ingest", "--dataset", name, str(out))
    yield name
    run_cli("drop", name, "--yes", check=False)


def run_example(*args: str) -> str:
    cmd = [sys.executable, str(ROOT / "examples" / "lightning_fashion_mnist.py"), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{' '.join(cmd)}:\n{r.stdout}\n{r.stderr[-6000:]}"
    return r.stdout


def trained_keys(keys_dir: Path, rank: int) -> list[list[int]]:
    lines = (keys_dir / f"rank{rank}.txt").read_text().splitlines()
    return [[int(k) for k in line.split()[1:]] for line in lines]


def test_ddp_epoch_interrupted_and_resumed_trains_each_sample_once(fashion_subset, hosts, tmp_path):
    ckpt, keys = tmp_path / "ckpt.pt", tmp_path / "keys"
    common = ["--dataset", fashion_subset, "--hosts", hosts, "--devices", str(WORLD), "--batch-size", str(BATCH),
              "--keys-out", str(keys)]
    out1 = run_example(*common, "--interrupt-after", str(STOP), "--checkpoint", str(ckpt))
    assert ckpt.is_file()
    first = [trained_keys(keys, r) for r in range(WORLD)]
    assert [len(b) for b in first] == [STOP] * WORLD, out1

    out2 = run_example(*common, "--resume", str(ckpt), "--min-accuracy", "0.3")
    batches = [trained_keys(keys, r) for r in range(WORLD)]
    per_rank = (N // WORLD) // BATCH  # drop_last: full batches only, the same number on every rank
    assert [len(b) for b in batches] == [per_rank] * WORLD, out2
    assert all(len(batch) == BATCH for rank in batches for batch in rank)
    everything = [k for rank in batches for batch in rank for k in batch]
    assert len(everything) == WORLD * per_rank * BATCH
    assert len(set(everything)) == len(everything), "a sample was trained twice across the interruption"
    m = re.search(r"test accuracy ([0-9.]+)", out2)
    assert m and float(m.group(1)) > 0.3, out2
