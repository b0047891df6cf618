"""Fixtures for the Python tests: they run against the real Cassandra node.

A session fixture writes a small generated image set (PNG and JPEG, RGB and
grayscale, several sizes, two splits) and ingests it with the `cqlstream`
CLI under a dataset name of its own (py_...), dropped at the end. The CLI
comes from $CQLSTREAM_BUILD_DIR (scripts/test exports it; default build/).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import random
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest
from PIL import Image

ROOT = Path(os.environ.get("CQLSTREAM_SOURCE_DIR") or Path(__file__).resolve().parents[2])
HOSTS = os.environ.get("CQLSTREAM_TEST_HOSTS", "127.0.0.1")
CLASSES = ["cat", "dog", "fish"]


def built_binary(relative: str, env: str, target: str) -> Path:
    """A binary of the build: $<env>, else <relative> in the first of
    $CQLSTREAM_BUILD_DIR, build, build-dali (relative to the repository) that
    has it; fails the test naming every place tried and the ninja target."""
    if os.environ.get(env):
        return Path(os.environ[env])
    tried = []
    for b in (os.environ.get("CQLSTREAM_BUILD_DIR"), "build", "build-dali"):
        if not b:
            continue
        build = Path(b) if Path(b).is_absolute() else ROOT / b
        p = build / relative
        if p.is_file():
            return p
        tried.append(str(p))
    pytest.fail(f"{Path(relative).name} is not built (tried {', '.join(tried)}); run scripts/test "
                f"(or ninja -C build {target}), or set {env}")


def cli_path() -> Path:
    """The cqlstream CLI (see built_binary)."""
    return built_binary("src/cli/cqlstream", "CQLSTREAM_CLI", "cqlstream_cli")


def run_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    cmd = [str(cli_path()), *args, "--hosts", HOSTS]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def unique_name(prefix: str) -> str:
    # Dataset names: [a-z][a-z0-9_]{0,23}.
    return f"{prefix}_{uuid.uuid4().hex[:8]}"[:24]


@dataclasses.dataclass
class Sample:
    split: str
    cls: str
    path: Path
    data: bytes


@dataclasses.dataclass
class DatasetFixture:
    name: str
    root: Path
    samples: list[Sample]

    def split(self, split: str) -> list[Sample]:
        return [s for s in self.samples if s.split == split]

    def by_content(self, split: str) -> dict[bytes, Sample]:
        return {s.data: s for s in self.split(split)}

    def count(self, split: str) -> int:
        return len(self.split(split))


def _image(rng: random.Random, w: int, h: int, mode: str) -> Image.Image:
    """A smooth image with some texture (resizing matters, JPEG keeps detail)."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    a, b, c = (rng.uniform(0.02, 0.3) for _ in range(3))
    base = np.stack([128 + 100 * np.sin(a * x + b * y + k) * np.cos(c * y - k) for k in range(3)], axis=-1)
    noise = np.random.default_rng(rng.randrange(1 << 30)).integers(-20, 20, size=base.shape)
    arr = np.clip(base + noise, 0, 255).astype(np.uint8)
    im = Image.fromarray(arr, "RGB")
    return im.convert("L") if mode == "L" else im


def write_image_set(root: Path, per_class: dict[str, int], seed: int = 1) -> list[Sample]:
    rng = random.Random(seed)
    out: list[Sample] = []
    kinds = [("png", "RGB"), ("png", "L"), ("jpg", "RGB"), ("jpg", "L")]
    n = 0
    for split, count in per_class.items():
        for cls in CLASSES:
            d = root / split / cls
            d.mkdir(parents=True, exist_ok=True)
            for i in range(count):
                fmt, mode = kinds[n % len(kinds)]
                # Mostly small images, a few large ones (JPEG DCT scaling).
                if n % 11 == 5:
                    w, h = rng.randint(230, 320), rng.randint(180, 260)
                else:
                    w, h = rng.randint(20, 72), rng.randint(20, 72)
                im = _image(rng, w, h, mode)
                buf = io.BytesIO()
                if fmt == "png":
                    im.save(buf, "PNG")
                else:
                    im.save(buf, "JPEG", quality=90)
                p = d / f"{i:03d}.{fmt}"
                p.write_bytes(buf.getvalue())
                out.append(Sample(split, cls, p, buf.getvalue()))
                n += 1
    return out


@pytest.fixture(scope="session")
def hosts() -> str:
    return HOSTS


@pytest.fixture(scope="session")
def images(tmp_path_factory) -> DatasetFixture:
    """The generated image set and its dataset in the node: 90 train (3 classes x 30) and 18 test samples."""
    root = tmp_path_factory.mktemp("images")
    samples = write_image_set(root, {"train": 30, "test": 6})
    name = unique_name("py_img")
    run_cli("ingest", "--dataset", name, str(root))
    yield DatasetFixture(name, root, samples)
    run_cli("drop", name, "--yes", check=False)


@pytest.fixture()
def loader_kwargs(hosts) -> dict:
    return {"hosts": hosts}


@contextlib.contextmanager
def ctrl_c_after(seconds: float, handler: Callable[..., Any] = signal.default_int_handler) -> Iterator[dict]:
    """Sends this process SIGINT (a Ctrl-C) `seconds` into the block, with
    `handler` as its handler (Python's own by default, even where the run
    started with SIGINT ignored: a background job of a non-interactive
    shell), restored after. Yields a dict whose "waited" is set on the way
    out: the seconds from the start of the block to its end."""
    previous = signal.signal(signal.SIGINT, handler)
    timer = threading.Timer(seconds, lambda: os.kill(os.getpid(), signal.SIGINT))
    out: dict = {}
    start = time.monotonic()
    timer.start()
    try:
        yield out
    finally:
        out["waited"] = time.monotonic() - start
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
