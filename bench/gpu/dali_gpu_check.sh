#!/usr/bin/env bash
# GPU check of the DALI front end: reads a cqlstream dataset through
# fn.cqlstream.reader with DALI's GPU ("mixed") decoding and prints images/s
# (bench/gpu/dali_gpu_check.py: read only, mixed, mixed without zero-copy,
# CPU decoding). Prepared for a machine with an NVIDIA GPU; run from the
# repository root:
#
#   bench/gpu/dali_gpu_check.sh [--dataset NAME] [--seconds S] [--file-root DIR] [...]
#
# It installs what it needs, from wheels only: nvidia-dali-cuda130 and the
# CUDA header wheels pinned in python/requirements-dali.txt, into $VENV
# (default .venv; WHEELS=DIR adds a local wheel folder for machines without
# PyPI). It builds the plugin only when none is given (CQLSTREAM_DALI_PLUGIN)
# and none is built, which needs the C++ build dependencies.
# It starts nothing else: the Cassandra node ($CQLSTREAM_HOSTS, default
# 127.0.0.1) and the dataset (default dali_gpu_synth) must exist, e.g.
#   scripts/cassandra up
#   build/bench/cqlstream-gen-images --out bench/data/synth --count 20000 --classes 100
#   build/src/cli/cqlstream ingest --dataset dali_gpu_synth bench/data/synth
# Exit status: 0 when every measurement ran; 1 otherwise; 2 when a
# prerequisite is missing (the message says which).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV=${VENV:-$ROOT/.venv}
REQ=$ROOT/python/requirements-dali.txt
BUILD=${CQLSTREAM_GPU_BUILD_DIR:-$ROOT/build-gpu}
fail() { echo "dali_gpu_check: $*" >&2; exit 2; }
step() { printf '\n== %s\n' "$*"; }

step "GPU"
command -v nvidia-smi >/dev/null || fail "nvidia-smi not found: this check needs an NVIDIA GPU"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader || fail "nvidia-smi failed"

step "Python environment ($VENV)"
if [[ ! -x $VENV/bin/python ]]; then
  python3 -m venv "$VENV" || fail "python3 -m venv failed"
fi
PY=$VENV/bin/python
if ! "$PY" -c 'import nvidia.dali, nvidia.cu13' 2>/dev/null; then
  # DALI and the CUDA header wheels; not torch (the check does not need it).
  mapfile -t pins < <(grep -E '^(nvidia-|numpy|pillow)' "$REQ" || true)
  pins+=("numpy")
  args=(-q --disable-pip-version-check)
  [[ -n ${WHEELS:-} ]] && args+=(--find-links "$WHEELS")
  "$PY" -m pip install "${args[@]}" "${pins[@]}" || fail "pip install ${pins[*]} failed (offline? set WHEELS=DIR)"
fi
"$PY" -c 'import nvidia.dali as d; print("DALI", d.__version__, "built with CUDA", d.__cuda_version__)'

step "plugin"
PLUGIN=${CQLSTREAM_DALI_PLUGIN:-}
if [[ -z $PLUGIN ]]; then
  for cand in "$BUILD" "$ROOT/build" "$ROOT/build-dali"; do
    if [[ -f $cand/plugins/dali/libcqlstream_dali.so ]]; then PLUGIN=$cand/plugins/dali/libcqlstream_dali.so; break; fi
  done
fi
if [[ -z $PLUGIN ]]; then
  command -v cmake >/dev/null && command -v ninja >/dev/null || fail "no plugin and no cmake/ninja to build one (set CQLSTREAM_DALI_PLUGIN)"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCQLSTREAM_BUILD_DALI=ON \
    -DCQLSTREAM_BUILD_TESTS=OFF -DCQLSTREAM_BUILD_BENCH=OFF -DCQLSTREAM_BUILD_CLI=OFF \
    -DCQLSTREAM_DALI_PYTHON="$PY" >"$BUILD.log" 2>&1 || { tail -n 20 "$BUILD.log"; fail "cmake failed (log: $BUILD.log)"; }
  ninja -C "$BUILD" cqlstream_dali >>"$BUILD.log" 2>&1 || { tail -n 20 "$BUILD.log"; fail "build failed (log: $BUILD.log)"; }
  PLUGIN=$BUILD/plugins/dali/libcqlstream_dali.so
fi
missing=$(LD_LIBRARY_PATH="$("$PY" -c 'import nvidia.dali.sysconfig as s; print(s.get_lib_dir())')" ldd "$PLUGIN" | grep 'not found' || true)
[[ -z $missing ]] || fail "the plugin's libraries are missing: $missing"
echo "$PLUGIN"
export CQLSTREAM_DALI_PLUGIN=$PLUGIN

step "cqlstream node"
HOST=${CQLSTREAM_HOSTS:-127.0.0.1}
HOST=${HOST%%,*}
PORT=${CQLSTREAM_PORT:-9042}
"$PY" - "$HOST" "$PORT" <<'PYEOF' || fail "no CQL node at $HOST:$PORT (this check starts none: scripts/cassandra up, then ingest a dataset)"
import socket, sys
socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()
PYEOF
echo "$HOST:$PORT answers"

step "measurements"
# dali_gpu_check.py imports cqlstream.dali from python/ (only DALI and the
# plugin are needed; the package's compiled core is not).
exec "$PY" "$ROOT/bench/gpu/dali_gpu_check.py" "$@"
