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
