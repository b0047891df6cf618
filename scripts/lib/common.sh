# Shared helpers for the scripts in scripts/. Source it; do not run it.
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
#
# Defines the repository root, the cache folder, the pinned Cassandra version,
# logging helpers and a monotonic clock. Scripts that source it run with
# `set -euo pipefail` themselves.

CQLSTREAM_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CQLSTREAM_CACHE="${CQLSTREAM_CACHE:-${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}/.cache/cqlstream}"
CASSANDRA_VERSION="5.0.9"
CASSANDRA_HOME_DIR="$CQLSTREAM_CACHE/cassandra-$CASSANDRA_VERSION"
# PySpark for examples/spark_ingest.py (scripts/install --spark; scripts/test spark).
PYSPARK_VERSION="3.5.9"
PYSPARK_DIR="$CQLSTREAM_CACHE/pyspark-$PYSPARK_VERSION"
CQLSTREAM_VENV="$CQLSTREAM_ROOT/.venv"
CQLSTREAM_STATE="$CQLSTREAM_ROOT/.state"

# Output helpers: `say` to stdout, `warn`/`die` to stderr.
say() { printf '%s\n' "$*"; }
warn() { printf '%s: warning: %s\n' "${0##*/}" "$*" >&2; }
die() {
  printf '%s: error: %s\n' "${0##*/}" "$*" >&2
  exit 1
}

# Milliseconds since an arbitrary point (monotonic enough for timings).
now_ms() {
  local s ns
  read -r s ns < <(date '+%s %N')
  printf '%d\n' $((s * 1000 + 10#$ns / 1000000))
}

# Seconds with one decimal between two now_ms values.
elapsed_s() {
  local ms=$(($2 - $1))
  printf '%d.%d\n' $((ms / 1000)) $(((ms % 1000) / 100))
}

# Run a command as root (directly, or through sudo when we are not root).
as_root() {
  if [[ $(id -u) -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null; then
    sudo "$@"
  else
    die "need root for: $* (no sudo available)"
  fi
}

# A Python interpreter for the stdlib-only helpers (the CQL probe).
python_bin() {
  if [[ -x $CQLSTREAM_VENV/bin/python ]]; then
    printf '%s\n' "$CQLSTREAM_VENV/bin/python"
  elif command -v python3 >/dev/null; then
    command -v python3
  else
    die "python3 not found"
  fi
}

# ccache_launcher ARRAY: sets the named array to the CMake launcher flags for
# ccache when it is installed (empty otherwise; nothing depends on it) and
# makes its paths relative to the repository, so clones and build folders
# share objects. Asked when a tree is configured, not when a script starts:
# on a fresh machine scripts/install puts ccache there mid-run.
ccache_launcher() {
  local -n out=$1
  out=()
  if command -v ccache >/dev/null; then
    out=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    export CCACHE_BASEDIR=$CQLSTREAM_ROOT CCACHE_NOHASHDIR=1
  fi
}

# pip_ccache_args ARRAY: the same for a `pip install` of the package
# (scikit-build-core's -C cmake.define.*), with the compilers named cc/c++
# as CMake names them for build/: scikit-build-core would name them gcc/g++,
# the same compilers, but ccache hashes the name, and no library object of
# build/ would be reused.
pip_ccache_args() {
  local -n pip_out=$1
  local launcher=()
  ccache_launcher launcher
  pip_out=()
  ((${#launcher[@]})) || return 0
  pip_out=(-C cmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache -C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache
    -C cmake.define.CMAKE_C_COMPILER=cc -C cmake.define.CMAKE_CXX_COMPILER=c++)
}

# configure_check_build DIR [CMAKE ARGS...]: the one clang-14 "check" build
# that three stages of scripts/test share, configured (idempotently) in DIR:
#  - its compile with -Wthread-safety -Werror is the lock-annotation check
#    (stage threads);
#  - ASan + UBSan (-DCQLSTREAM_SANITIZE=ON) for the unit and integration tests
#    (stage sanitize);
#  - libFuzzer coverage on every object and the tests/fuzz targets
#    (-DCQLSTREAM_FUZZ=ON) for scripts/fuzz (stage fuzz).
# One tree instead of three compiles the library once instead of three times
# (about half of CI's build time). -O1 -g1 with assertions on: much faster to
# compile than -O2 -g, close to it under ASan, and traces keep file:line.
# A unity build (CMake's, batches of 8 files of a target in one compile):
# the shared headers (GoogleTest, Asio, the standard library) are parsed and
# their templates instantiated once per batch, not once per file. Measured
# on 2 cores without ccache: the test binaries 329 -> 188 s, the library
# 236 -> ~130 s; in CI with a cold cache the threads stage (this build)
# 740 -> 400 s and tsan 371 -> 206 s.
# In a full scripts/test run every file is still compiled alone by the build
# stage (GCC, no unity: that is what checks that each file includes what it
# uses) and the tests run in both builds. A batch is one translation unit and
# batches are positional (adding a file moves the later ones), so a name at
# namespace scope in an unnamed namespace (a helper, a constant, an alias, a
# using-declaration) is best unique within its target, and must never shadow
# a name of a header the target includes.
configure_check_build() {
  local dir=$1
  shift
  command -v clang++-14 >/dev/null || die "clang++-14 is needed (apt-get install clang-14)"
  local launcher=()
  ccache_launcher launcher
  cmake -S "$CQLSTREAM_ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" \
    -DCQLSTREAM_SANITIZE=ON -DCQLSTREAM_FUZZ=ON -DCQLSTREAM_BUILD_TESTS=ON \
    -DCQLSTREAM_BUILD_BENCH=OFF -DCQLSTREAM_BUILD_CLI=ON -DCMAKE_UNITY_BUILD=ON "${launcher[@]}" "$@"
}
