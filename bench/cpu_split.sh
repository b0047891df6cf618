#!/usr/bin/env bash
# Where the CPU goes in one `cqlstream bench` run through the WAN emulator:
# CPU seconds of the Cassandra node, of cqlstream-wan and of the loader, and
# the wall time (docs/benchmarks.md, "Loader comparison": the per-image CPU
# at RTT 0 vs 100 ms).
#
#   bench/cpu_split.sh RTT_MS [EPOCHS] [-- extra cqlstream bench options]
#
# Needs the local node (scripts/cassandra up), the bench build (build-bench,
# as bench/run makes it) and the `jpeg` dataset of bench/run in keyspace
# cqlstream_bench. It starts its own cqlstream-wan (W = 4 MiB, uncapped) on
# 127.0.9.1 (or $CQLSTREAM_BENCH_PROXY_IP) and stops it at the end. Node
# and emulator CPU come from /proc/PID/stat (utime + stime); the loader's
# from the shell's `times`.
# bench/run --tolerance takes the same split for every point of its table,
# 3 runs each, with medians.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${CQLSTREAM_BENCH_BUILD_DIR:-$ROOT/build-bench}
rtt=${1:?usage: bench/cpu_split.sh RTT_MS [EPOCHS] [-- bench options]}
epochs=${2:-4}
shift $(( $# >= 2 ? 2 : 1 ))
[[ ${1:-} == -- ]] && shift
# The default profile's node (the one the emulator forwards to), from its pid
# file: other profiles' nodes (secure, cluster, scratch) may run beside it.
pidfile=$ROOT/.state/cassandra/default/node1/cassandra.pid
node=$(cat "$pidfile" 2>/dev/null) && [[ -r /proc/$node/stat ]] ||
  { echo "no default Cassandra node running: scripts/cassandra up" >&2; exit 1; }
proxy=${CQLSTREAM_BENCH_PROXY_IP:-127.0.9.1}
tmp=$(mktemp)
"$BUILD/bench/cqlstream-wan" --rtt-ms "$rtt" --window 4MiB --map "$proxy:9042=127.0.0.1:9042" >/dev/null 2>&1 &
wan=$!
trap 'kill $wan 2>/dev/null || true; rm -f "$tmp"' EXIT
sleep 1
tick=$(getconf CLK_TCK)
cpu() { awk -v t="$tick" '{printf "%.2f", ($14 + $15) / t}' "/proc/$1/stat"; }
n0=$(cpu "$node"); w0=$(cpu "$wan"); s0=$(date +%s.%N)
# The loader's CPU: user + system time of this shell's finished children
# (bash `times`, second line), before and after. `times` must run in this
# shell, not in a $(...) subshell; the emulator is still running, so it is
# not counted.
children_cpu() {
  times > "$tmp"
  REPLY=$(awk 'NR == 2 { split($1, u, /[ms]/); split($2, k, /[ms]/); printf "%.2f", u[1] * 60 + u[2] + k[1] * 60 + k[2] }' "$tmp")
}
children_cpu; c0=$REPLY
"$BUILD/src/cli/cqlstream" bench jpeg --hosts "$proxy" --keyspace cqlstream_bench --epochs "$epochs" --warmup 1 \
  "$@" 2>&1 | grep -E "^summary"
children_cpu; c1=$REPLY
n1=$(cpu "$node"); w1=$(cpu "$wan"); s1=$(date +%s.%N)
awk -v r="$rtt" -v n0="$n0" -v n1="$n1" -v w0="$w0" -v w1="$w1" -v c0="$c0" -v c1="$c1" -v s0="$s0" -v s1="$s1" \
  'BEGIN { printf "RTT %s ms: wall %.1f s, CPU s: node %.1f, emulator %.1f, loader %.1f\n",
           r, s1 - s0, n1 - n0, w1 - w0, c1 - c0 }'
