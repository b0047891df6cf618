"""examples/triton without a Triton server: make_model_repository.py writes the
model repository (CPU decoding), client.py --local serves its serialized
pipelines through DALI's input feeding and the TorchScript classifier, in
both modes (docs/triton.md says what is not run: the server itself).

Needs what tests/python/test_dali.py needs (the plugin, the CLI, the node).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import cqlstream.dali as cd
from test_dali import Dataset, drop, make_class_dataset

HOSTS = os.environ.get("CQLSTREAM_TEST_HOSTS", "127.0.0.1")
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "triton"
RUN = os.getpid() % 100000
N = 30


@pytest.fixture(scope="module")
def ds(tmp_path_factory) -> Dataset:
    assert cd.load_plugin(), cd.plugin_error()
    name = f"triton_ex{RUN}"
    d = make_class_dataset(tmp_path_factory.mktemp("triton_ex"), name, N)
    yield d
    drop(name)


def run(*args: str) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, f"{args} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r


def test_model_repository_and_local_client(ds, tmp_path):
    repo = tmp_path / "model_repository"
    run(str(EXAMPLE / "make_model_repository.py"), ds.name, "--out", str(repo), "--max-batch", "8",
        "--mini-batch", "4", "--size", "16", "--classes", "3", "--hosts", HOSTS)
    for model in ("cqlstream_images", "cqlstream_images_stream"):
        assert (repo / model / "1" / "model.dali").stat().st_size > 0
        cfg = (repo / model / "config.pbtxt").read_text()
        assert 'backend: "dali"' in cfg and "plugin_libs" in cfg and 'name: "KEYS"' in cfg
    assert "decoupled: True" in (repo / "cqlstream_images_stream" / "config.pbtxt").read_text()
    assert "decoupled: True" in (repo / "cqlstream_classify_stream" / "config.pbtxt").read_text()
    assert 'platform: "ensemble"' in (repo / "cqlstream_classify" / "config.pbtxt").read_text()
    assert (repo / "classifier" / "1" / "model.pt").stat().st_size > 0
    assert (repo / "libcqlstream_dali.so").is_file()

    keys = tmp_path / "keys.txt"
    keys.write_text("".join(f"0:{(i * 7) % N}\n" for i in range(20)))
    out = run(str(EXAMPLE / "client.py"), "--local", str(repo), "--keys", str(keys), "--request-size", "6").stdout
    lines = [l for l in out.splitlines() if l.startswith("request ")]
    assert len(lines) == 4  # 6 + 6 + 6 + 2 keys
    assert "4 requests, 20 images" in out
    for line in lines:
        labels = [int(x) for x in line.split("stored labels [")[1].rstrip("]").split(", ")]
        assert all(0 <= x < 3 for x in labels)
    stream = run(str(EXAMPLE / "client.py"), "--local", str(repo), "--keys", str(keys), "--stream",
                 "--mini-batch", "4").stdout
    responses = [l for l in stream.splitlines() if l.startswith("request 0:")]
    assert len(responses) == 5 and "1 requests, 20 images" in stream
