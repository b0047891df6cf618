#!/usr/bin/env bash
# Start-up of the loader at long round trips (issue 13 part 3;
# docs/benchmarks-startup.md). One command:
#
#   bench/startup.sh DATASET [--rtts "10 200"] [--runs 3] [--epochs 6]
#                    [--batch-size 512] [--build-dir build] [--keyspace cqlstream]
#                    [--proxy-ip 127.0.9.7] [--node 127.0.0.1:9042]
#
# For each RTT it starts one cqlstream-wan (W = 4 MiB per connection, the
# Linux default TCP window) between PROXY-IP:9042 and the running node, then
# runs `cqlstream bench DATASET --warmup 0` RUNS times through it: a fresh
# loader each run, so each run starts cold. It prints each run's time to 90%
# (from the first request until every 1-s window for the next second carries
# >= 90% of the steady state, the median 1-s rate of the run's last half),
# steady-state MB/s, connections and window at the end, and the load average
# before the run; then the median time to 90% and steady MB/s per RTT.
#
# DATASET must exist on the node (e.g. the 20,000-JPEG set `bench/run` ingests,
# or any dataset `cqlstream ls` shows); a run must last >= 4 s for time to 90%
# to be defined (raise --epochs for small datasets). The node must not
# advertise another address (the loader then reaches it through the proxy:
# the single-node setup of bench/run). Never stops or restarts the node.
#
# Wall time: about RUNS x (EPOCHS x dataset / rate) per RTT plus 2 s per
# proxy; the 5,000-JPEG set (522 MB) with --epochs 4 took 1 min 41 s here
# (under heavy load from other work). Meant for a quiet machine: other work on the cores moves every number.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
DATASET=""
RTTS="10 200"
RUNS=3
EPOCHS=6
BATCH=512
BUILD_DIR=${CQLSTREAM_BUILD_DIR:-build}
KEYSPACE=${CQLSTREAM_KEYSPACE:-cqlstream}
PROXY_IP=127.0.9.7
NODE=127.0.0.1:9042
while [[ $# -gt 0 ]]; do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --rtts) RTTS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --batch-size) BATCH=$2; shift 2 ;;
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    --keyspace) KEYSPACE=$2; shift 2 ;;
    --proxy-ip) PROXY_IP=$2; shift 2 ;;
    --node) NODE=$2; shift 2 ;;
    -*) echo "startup.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) DATASET=$1; shift ;;
  esac
done
[[ -n $DATASET ]] || { echo "startup.sh: no DATASET given" >&2; usage >&2; exit 2; }
[[ $BUILD_DIR = /* ]] || BUILD_DIR=$ROOT/$BUILD_DIR
CQ=$BUILD_DIR/src/cli/cqlstream
WAN=$BUILD_DIR/bench/cqlstream-wan
for b in "$CQ" "$WAN"; do
  [[ -x $b ]] || { echo "startup.sh: $b is missing (ninja -C $BUILD_DIR cqlstream_cli cqlstream-wan)" >&2; exit 1; }
done
NODE_PORT=${NODE##*:}
TMP=$(mktemp -d)
WAN_PID=""
cleanup() {
  [[ -n $WAN_PID ]] && kill "$WAN_PID" 2>/dev/null && wait "$WAN_PID" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT

median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "n/a"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

echo "dataset $DATASET, RTTs ($RTTS) ms, $RUNS runs of $EPOCHS epochs, batch $BATCH, W = 4 MiB per connection"
SUMMARY=""
for rtt in $RTTS; do
  "$WAN" --rtt-ms "$rtt" --window 4MiB --map "$PROXY_IP:$NODE_PORT=$NODE" >"$TMP/wan$rtt.log" 2>&1 &
  WAN_PID=$!
  for _ in $(seq 100); do grep -q listening "$TMP/wan$rtt.log" && break; sleep 0.1; done
  grep -q listening "$TMP/wan$rtt.log" || { cat "$TMP/wan$rtt.log" >&2; echo "startup.sh: cqlstream-wan did not start" >&2; exit 1; }
  : >"$TMP/t90" ; : >"$TMP/steady"
  for run in $(seq "$RUNS"); do
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    out=$TMP/run-$rtt-$run.txt
    "$CQ" bench "$DATASET" --hosts "$PROXY_IP" --port "$NODE_PORT" --keyspace "$KEYSPACE" --epochs "$EPOCHS" \
      --warmup 0 --batch-size "$BATCH" >"$out" 2>&1 || { cat "$out" >&2; echo "startup.sh: bench failed" >&2; exit 1; }
    line=$(grep '^time to 90%' "$out" || true)
    t90=$(sed -n 's/^time to 90%: \([0-9.]*\) s.*/\1/p' <<<"$line")
    steady=$(sed -n 's/.*steady state \([0-9.]*\) MB\/s.*/\1/p' <<<"$line")
    last=$(grep '^epoch ' "$out" | tail -1 | sed -n 's/.*window \([0-9]*\) in flight [0-9]* connections \([0-9]*\);.*/window \1, connections \2/p')
    if [[ -n $t90 ]]; then
      echo "rtt $rtt ms run $run: time to 90% $t90 s, steady $steady MB/s, at the end $last; load average before: $load"
    else
      echo "rtt $rtt ms run $run: ${line:-no time-to-90% line}, at the end $last; load average before: $load"
    fi
    [[ -n $t90 ]] && echo "$t90" >>"$TMP/t90"
    [[ -n $steady ]] && echo "$steady" >>"$TMP/steady"
  done
  kill "$WAN_PID" 2>/dev/null; wait "$WAN_PID" 2>/dev/null || true
  WAN_PID=""
  SUMMARY+="rtt $rtt ms: median time to 90% $(median <"$TMP/t90") s over $(wc -l <"$TMP/t90") runs, median steady $(median <"$TMP/steady") MB/s"$'\n'
done
echo
printf '%s' "$SUMMARY"
