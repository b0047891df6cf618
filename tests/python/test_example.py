"""examples/fashion_mnist_train.py, shortened: one epoch of a few batches must clearly beat chance."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conftest import ROOT, run_cli, unique_name


@pytest.fixture(scope="module")
def fashion_subset(tmp_path_factory):
    out = tmp_path_factory.mktemp("fashion")
    subprocess.run([sys.executable, str(ROOT / "scripts" / "fashion_mnist_to_png.py"), str(out), "--limit", "2000"],
                   check=True, capture_output=True, timeout=120)
    name = unique_name("py_fm")
    run_cli("ingest", "--dataset", name, str(out))
    yield name
    run_cli("drop", name, "--yes", check=False)


def test_training_example_beats_chance(fashion_subset, hosts):
    cmd = [sys.executable, str(ROOT / "examples" / "fashion_mnist_train.py"), "--dataset", fashion_subset,
           "--hosts", hosts, "--epochs", "1", "--limit-batches", "30", "--batch-size", "64",
           "--min-accuracy", "0.5"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"test accuracy ([0-9.]+)", r.stdout)
    assert m, r.stdout
    assert float(m.group(1)) > 0.5, r.stdout
