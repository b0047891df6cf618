"""Which DALI a plugin is for, and `pip install .` into an environment with DALI.

Without a marker (the python stage, .venv): the plugin of the build says the
DALI it was built for; a plugin for another DALI is refused before it is
loaded, naming both versions and how to rebuild; unreadable markers are
treated as none.

Marked ``dali_versions`` (deselected by default; scripts/test's dali-versions
stage runs them inside each DALI virtualenv after `pip install .` there, with
CQLSTREAM_EXPECT_DALI set to the DALI it installed): the installed package
carries a plugin built for exactly that DALI, found without environment
variables, and an epoch reads through fn.cqlstream.reader.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nvidia.dali as nvidia_dali

import cqlstream.dali as cd


def fake_plugin(tmp_path: Path, marker: bytes, name: str = "libcqlstream_dali.so") -> Path:
    p = tmp_path / name
    p.write_bytes(b"\x7fELF not really a library " + marker + b"\0 more bytes")
    return p


def load_in_child(path: Path, **env: str) -> subprocess.CompletedProcess:
    """load_plugin(path) in a fresh interpreter (a process loads the plugin only once)."""
    code = ("import cqlstream.dali as cd\n"
            "try:\n"
            f"    cd.load_plugin({str(path)!r})\n"
            "except cd.PluginNotLoadedError as e:\n"
            "    print('REFUSED', e)\n"
            "else:\n"
            "    print('LOADED')\n")
    # The same path through the environment: `import cqlstream.dali` must not
    # load another (matching) plugin first.
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "CQLSTREAM_DALI_PLUGIN": str(path), **env})


def test_the_built_plugin_says_which_dali_it_is_for():
    path = cd.plugin_path()
    assert path is not None, cd.plugin_error()
    assert cd.plugin_built_for(path) == nvidia_dali.__version__


@pytest.mark.parametrize("marker", [b"", b"cqlstream-dali-built-for:", b"cqlstream-dali-built-for:2.4.0",
                                    b"cqlstream-dali-built-for:../../etc;", b"cqlstream-dali-built-for:" + b"9" * 100])
def test_unreadable_markers_are_none(tmp_path, marker):
    assert cd.plugin_built_for(fake_plugin(tmp_path, marker)) is None
    (tmp_path / "empty.so").write_bytes(b"")
    assert cd.plugin_built_for(tmp_path / "empty.so") is None


def test_markers_are_read_without_loading(tmp_path):
    p = fake_plugin(tmp_path, b"cqlstream-dali-built-for:1.53.0;package=nvidia-dali-cuda120;cqlstream=0.1.0;")
    assert cd.plugin_built_for(p) == "1.53.0"
    with pytest.raises(OSError):
        cd.plugin_built_for(tmp_path / "absent.so")


def test_a_plugin_for_another_dali_is_refused_naming_both_versions(tmp_path):
    other = "1.53.0" if nvidia_dali.__version__ != "1.53.0" else "2.4.0"
    p = fake_plugin(tmp_path, f"cqlstream-dali-built-for:{other};".encode())
    r = load_in_child(p)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("REFUSED"), out
    assert f"built for DALI {other}" in out and f"this process has DALI {nvidia_dali.__version__}" in out, out
    assert "pip install --force-reinstall --no-deps" in out and "CQLSTREAM_DALI_PYTHON" in out, out


def test_reader_falls_back_loudly_or_fails_with_the_version_reason(tmp_path):
    other = "1.53.0" if nvidia_dali.__version__ != "1.53.0" else "2.4.0"
    p = fake_plugin(tmp_path, f"cqlstream-dali-built-for:{other};".encode())
    code = ("import warnings, cqlstream.dali as cd\n"
            "from nvidia.dali import pipeline_def\n"
            "@pipeline_def(batch_size=2, num_threads=1, device_id=None)\n"
            "def pipe():\n"
            "    return cd.reader('nonexistent_ds')[:2]\n"
            "try:\n"
            "    pipe()\n"
            "except cd.PluginNotLoadedError as e:\n"
            "    print('ERROR', e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "CQLSTREAM_DALI_PLUGIN": str(p), "CQLSTREAM_DALI_FALLBACK": "error"})
    assert r.stdout.startswith("ERROR"), r.stdout + r.stderr
    assert f"built for DALI {other}" in r.stdout, r.stdout


# ---------------------------------------------------------------------------
# Inside a DALI virtualenv after `pip install .` (scripts/test, stage dali-versions).


@pytest.mark.dali_versions
def test_pip_installed_plugin_is_for_this_dali_and_found_without_environment():
    expected = os.environ.get("CQLSTREAM_EXPECT_DALI")
    assert expected, "set CQLSTREAM_EXPECT_DALI (scripts/test --only dali-versions runs this test)"
    assert nvidia_dali.__version__ == expected
    for var in ("CQLSTREAM_DALI_PLUGIN", "CQLSTREAM_BUILD_DIR"):
        assert var not in os.environ, f"{var} must not be needed"
    import cqlstream

    package = Path(cqlstream.__file__).resolve().parent
    assert "site-packages" in package.parts, f"cqlstream is not the installed package: {package}"
    path = cd.plugin_path()
    assert path is not None and Path(path).parent == package, path
    assert cd.plugin_built_for(path) == expected
    assert cd.load_plugin(), cd.plugin_error()


@pytest.mark.dali_versions
def test_pip_installed_plugin_reads_an_epoch(images, hosts):
    from nvidia.dali import fn, pipeline_def, types

    assert cd.load_plugin(), cd.plugin_error()
    n, b = images.count("train"), 8

    @pipeline_def(batch_size=b, num_threads=2, device_id=None)
    def pipe():
        data, labels, keys = cd.reader(images.name, hosts=hosts.split(","), output_keys=True, use_plugin=True)
        decoded = fn.decoders.image(data, device="cpu", output_type=types.RGB)
        return decoded, labels, keys

    p = pipe()
    p.build()
    assert p.reader_meta("Reader")["epoch_size"] == n
    keys: list[int] = []
    for _ in range(-(-n // b)):
        decoded, labels, k = p.run()
        keys += [int(np.array(k[i]).reshape(-1)[0]) for i in range(len(k))]
        assert all(np.array(decoded[i]).shape[2] == 3 for i in range(len(decoded)))
    real = keys[:n]
    assert len(set(real)) == n  # every sample of the split once; the rest is padding
