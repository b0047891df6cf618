#!/usr/bin/env bash
# Before/after of the node's serving settings (docs/cassandra.md "Serving
# large blobs"). One command:
#
#   bench/node_settings.sh [--configs stock:1G,serving:2G] [--runs 3] [--epochs 3]
#                          [--data bench/data/jpeg] [--build-dir build-bench]
#
# For each TUNING:HEAP[:DISK_ACCESS_MODE] configuration (default: stock:1G,
# the node as it ran before, and serving:2G, what scripts/cassandra starts
# now; serving:2G:mmap adds memory-mapped data files) it starts a FRESH node
# of the `scratch` profile (127.0.4.1), ingests the JPEG set 3 times, waits
# for compaction, reads it 3 times with `cqlstream bench` (batch 512, 1
# warm-up + 3 measured epochs), then stops the node and PURGES the scratch
# profile's state. It never stops, restarts or writes to the default node
# (127.0.0.1) or any other profile; it refuses to start while a scratch node
# runs. Prints the table of medians (with the load average of each run) and
# writes it to bench/results/node_settings-<time>.md.
#
# Needs bench/data/jpeg (bench/run makes it: 20,000 JPEGs, 2.2 GB) and the
# CLI in the build folder. Wall time on this 2-core machine: 8.6 minutes with
# the defaults on a quiet machine (per configuration: start 20 s, 3 ingests of
# 2.2 GB ~35 s each, compaction wait ~1 min (up to 3), 3 reads of 4 epochs
# ~30 s each); up to 25 minutes under load. Meant for a quiet machine: other work on the cores moves every
# number.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=$ROOT/.venv/bin/python
[[ -x $PY ]] || PY=python3
case ${1:-} in -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exec "$PY" "$ROOT/bench/run_lib/node_settings.py" --help ;; esac
if "$ROOT/scripts/cassandra" status --profile scratch >/dev/null 2>&1; then
  echo "bench/node_settings.sh: a scratch node runs (someone's experiment?); stop it first: scripts/cassandra down --profile scratch" >&2
  exit 1
fi
exec "$PY" "$ROOT/bench/run_lib/node_settings.py" "$@"
