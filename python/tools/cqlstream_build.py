"""The PEP 517 build backend of cqlstream (pyproject.toml): scikit-build-core,
plus the DALI plugin when the target environment has DALI.

A DALI plugin runs only with the DALI it was compiled against, so
``pip install .`` builds ``libcqlstream_dali.so`` against the DALI installed in
the environment the package is installed into, and puts it next to the
package (``cqlstream/libcqlstream_dali.so``), where ``import cqlstream.dali``
finds it.

pip builds in an isolated environment (its own PYTHONPATH overlay in front of
the target interpreter), which hides the target environment's packages. The
target interpreter is the one running this backend (``sys.executable``, as
pip and ``python -m build --no-isolation`` run hooks); ``python -E`` ignores the
overlay, so ``python -E python/tools/dali_sysconfig.py`` sees the target's
DALI. The CUDA header wheels the plugin compiles against are build
requirements when the target lacks them (``get_requires_for_build_wheel``).

Config settings (``pip install . -C cqlstream.dali=...``):
  cqlstream.dali=auto  (wheels: default) the plugin when the target has DALI
  cqlstream.dali=on    the plugin, or fail naming why
  cqlstream.dali=off   (editable installs: default) no plugin
  cqlstream.dali-python=PATH  the interpreter whose DALI to build against
Environment: CQLSTREAM_DALI_PYTHON (as cqlstream.dali-python), for front ends
that run hooks in an interpreter of their own (e.g. ``python -m build`` with
isolation).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from scikit_build_core import build as _skb

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
import dali_sysconfig  # noqa: E402  (python/tools, beside this file)

# Passed through unchanged.
build_sdist = _skb.build_sdist
get_requires_for_build_sdist = _skb.get_requires_for_build_sdist

_OWN_KEYS = ("cqlstream.dali", "cqlstream.dali-python")


def _without_own(config_settings: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (config_settings or {}).items() if k not in _OWN_KEYS}


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    return _skb.prepare_metadata_for_build_wheel(metadata_directory, _without_own(config_settings))


def prepare_metadata_for_build_editable(metadata_directory: str,
                                        config_settings: dict[str, Any] | None = None) -> str:
    return _skb.prepare_metadata_for_build_editable(metadata_directory, _without_own(config_settings))


def _say(msg: str) -> None:
    print(f"cqlstream build: {msg}", file=sys.stderr, flush=True)


def _split(config_settings: dict[str, Any] | None, default_mode: str) -> tuple[dict[str, Any], str, str]:
    """(scikit-build-core's settings, plugin mode, target interpreter)."""
    cs = dict(config_settings or {})
    mode = str(cs.pop("cqlstream.dali", default_mode)).strip().lower()
    if mode not in ("auto", "on", "off"):
        raise ValueError(f"cqlstream.dali must be auto, on or off, got {mode!r}")
    python = str(cs.pop("cqlstream.dali-python", "") or os.environ.get("CQLSTREAM_DALI_PYTHON") or sys.executable)
    return cs, mode, python


def _target_dali(python: str) -> dict[str, str] | None:
    """What dali_sysconfig.py reports in the target environment, or None without DALI."""
    try:
        r = subprocess.run([python, "-E", str(_HERE / "dali_sysconfig.py")], capture_output=True, text=True,
                           timeout=300, check=False)
    except OSError as e:
        _say(f"cannot run {python}: {e}")
        return None
    if r.returncode != 0:
        return None
    info = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    return info if info.get("version") else None


def _plugin_plan(config_settings: dict[str, Any] | None, default_mode: str
                 ) -> tuple[dict[str, Any], dict[str, str] | None, str, str]:
    cs, mode, python = _split(config_settings, default_mode)
    if mode == "off":
        return cs, None, python, mode
    info = _target_dali(python)
    if info is None and mode == "on":
        raise RuntimeError(f"cqlstream.dali=on: {python} cannot import nvidia.dali (install a DALI wheel into the "
                           "target environment first, e.g. nvidia-dali-cuda120 or nvidia-dali-cuda130)")
    return cs, info, python, mode


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    cs, info, _, _ = _plugin_plan(config_settings, "auto")
    return list(_skb.get_requires_for_build_wheel(cs)) + _header_wheels(info)


def get_requires_for_build_editable(config_settings: dict[str, Any] | None = None) -> list[str]:
    cs, info, _, _ = _plugin_plan(config_settings, "off")
    return list(_skb.get_requires_for_build_editable(cs)) + _header_wheels(info)


def _header_wheels(info: dict[str, str] | None) -> list[str]:
    """The CUDA header wheels to install into the build environment (none when the target has them)."""
    reqs: list[str] = []
    if info is not None and not info.get("cuda_include"):
        wheels = dali_sysconfig.HEADER_WHEELS.get(info.get("cuda_major", ""))
        if wheels is None:
            raise RuntimeError(f"DALI {info['version']} ({info.get('package') or 'unknown wheel'}): no CUDA header "
                               f"wheels known for CUDA {info.get('cuda_major') or '?'} "
                               "(python/tools/dali_sysconfig.py, HEADER_WHEELS)")
        reqs += wheels
    return reqs


def _with_plugin(cs: dict[str, Any], info: dict[str, str], python: str) -> dict[str, Any]:
    cuda = info.get("cuda_include") or os.pathsep.join(dali_sysconfig.cuda_include_dirs() or [])
    if not cuda:
        raise RuntimeError(f"the CUDA headers for DALI {info['version']} were not found in the build environment "
                           "(get_requires_for_build_wheel should have installed them)")
    _say(f"building the DALI plugin against DALI {info['version']} ({info.get('package')}) of {python}")
    defines = {
        "CQLSTREAM_BUILD_DALI": "ON",
        "CQLSTREAM_DALI_PYTHON": python,
        "CQLSTREAM_DALI_CUDA_INCLUDE_DIRS": cuda,
        "CQLSTREAM_DALI_INSTALL": "ON",
    }
    for k, v in defines.items():
        cs[f"cmake.define.{k}"] = v
    cs["build.targets"] = "_core;_core_stub;cqlstream_dali"
    # One build folder per DALI: a rebuild for another DALI does not reuse
    # (or clobber) the plugin objects of this one. One level below the
    # repository, as pyproject.toml's build-dir says why.
    cs.setdefault("build-dir", f"build-py-{{wheel_tag}}-dali-{info['version']}")
    return cs


def build_wheel(wheel_directory: str, config_settings: dict[str, Any] | None = None,
                metadata_directory: str | None = None) -> str:
    cs, info, python, mode = _plugin_plan(config_settings, "auto")
    if info is not None:
        cs = _with_plugin(cs, info, python)
    elif mode == "auto":
        _say(f"{python} has no DALI: the wheel has no DALI plugin (cqlstream.dali uses its fallback; install DALI "
             "first and reinstall cqlstream to get fn.cqlstream.reader)")
    return _skb.build_wheel(wheel_directory, cs, metadata_directory)


def build_editable(wheel_directory: str, config_settings: dict[str, Any] | None = None,
                   metadata_directory: str | None = None) -> str:
    cs, info, python, _ = _plugin_plan(config_settings, "off")
    if info is not None:
        cs = _with_plugin(cs, info, python)
    return _skb.build_editable(wheel_directory, cs, metadata_directory)
