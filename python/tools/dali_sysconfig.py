"""What the DALI plugin is built against: the DALI importable by this interpreter.

Run by plugins/dali/CMakeLists.txt (``python -E dali_sysconfig.py``) and by the
build backend (python/tools/cqlstream_build.py); it prints one ``key=value``
line each:

    version        DALI's version (nvidia.dali.__version__)
    package        the distribution that installed it (nvidia-dali-cuda120, ...)
    cuda_major     the CUDA major version of that build (12, 13, ...)
    include_dir    nvidia.dali.sysconfig.get_include_dir()
    lib_dir        nvidia.dali.sysconfig.get_lib_dir()
    compile_flags  get_compile_flags() without the -I flags
    cuda_include   the folders with the CUDA headers DALI's headers include
                   (cuda_runtime.h, crt/host_config.h, cuda/std/...), ':'-separated;
                   empty when some are missing

DALI's operator headers include cuda_runtime.h. No CUDA toolkit is needed: the
CUDA header wheels provide the headers (``header_requirements`` says which).
Standard library only; imports nothing but DALI's sysconfig.
"""

from __future__ import annotations

import os
import re
import sys

# The CUDA header wheels per CUDA major version (pip requirement strings).
# CUDA 12: the runtime wheel lacks crt/ (in the nvcc wheel); CUDA 13 wheels
# share the nvidia/cu13 folder. Versions: the newest of each major here.
HEADER_WHEELS = {
    "12": ["nvidia-cuda-runtime-cu12==12.9.79", "nvidia-cuda-nvcc-cu12==12.9.86", "nvidia-cuda-cccl-cu12==12.9.27"],
    "13": ["nvidia-cuda-runtime==13.2.86", "nvidia-cuda-crt==13.2.86", "nvidia-cuda-cccl==13.3.5.0.6"],
}

# (header that must exist, folders below an nvidia/ package that may hold it)
_NEEDED = (
    ("cuda_runtime.h", ("cu13/include", "cuda_runtime/include")),
    ("crt/host_config.h", ("cu13/include", "cuda_nvcc/include", "cuda_crt/include", "cuda_runtime/include")),
    ("nv/target", ("cu13/include", "cuda_cccl/include")),  # CCCL's, included by cuda_fp16.h
)
# Added when present (CCCL's cuda/std, cub and thrust of the CUDA 13 wheels).
_OPTIONAL = (("cuda/std/cstdint", ("cu13/include/cccl", "cuda_cccl/include")),)


def _nvidia_roots(extra_paths: list[str]) -> list[str]:
    """The nvidia/ namespace folders on sys.path (and below extra_paths)."""
    roots: list[str] = []
    for base in list(extra_paths) + list(sys.path):
        d = os.path.join(base or ".", "nvidia")
        if os.path.isdir(d) and d not in roots:
            roots.append(d)
    return roots


def cuda_include_dirs(extra_paths: list[str] | None = None) -> list[str] | None:
    """The include folders that together provide the headers of _NEEDED, or None."""
    found: list[str] = []
    roots = _nvidia_roots(extra_paths or [])
    for needed, group in ((True, _NEEDED), (False, _OPTIONAL)):
        for header, subdirs in group:
            hit = next((os.path.join(r, s) for r in roots for s in subdirs
                        if os.path.isfile(os.path.join(r, s, header))), None)
            if hit is None and needed:
                return None
            if hit is not None and hit not in found:
                found.append(hit)
    return found


def dali_distribution() -> tuple[str, str]:
    """(distribution name, CUDA major) of the installed DALI wheel, e.g. ('nvidia-dali-cuda120', '12')."""
    from importlib import metadata

    for dist in metadata.distributions():
        name = (dist.metadata.get("Name") or "").lower().replace("_", "-")
        m = re.fullmatch(r"nvidia-dali-(?:nightly-|weekly-)?cuda(\d+?)0", name)
        if m:
            return name, m.group(1)
    return "", ""


def main(argv: list[str]) -> int:
    extra = argv[1:]  # more site-packages folders to search for CUDA headers
    try:
        import nvidia.dali as dali
        import nvidia.dali.sysconfig as sysconfig
    except ImportError as e:
        print(f"nvidia.dali cannot be imported by {sys.executable}: {e}", file=sys.stderr)
        return 1
    package, cuda_major = dali_distribution()
    flags = [f for f in sysconfig.get_compile_flags() if not f.startswith("-I")]
    cuda = cuda_include_dirs(extra) or []
    print(f"version={dali.__version__}")
    print(f"package={package}")
    print(f"cuda_major={cuda_major}")
    print(f"include_dir={sysconfig.get_include_dir()}")
    print(f"lib_dir={sysconfig.get_lib_dir()}")
    print(f"compile_flags={' '.join(flags)}")
    print(f"cuda_include={os.pathsep.join(cuda)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
