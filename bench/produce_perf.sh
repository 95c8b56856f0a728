#!/usr/bin/env bash
# bench/produce_perf.sh [BUILD_DIR] [before-ack|none]: where rilld's time goes under produce load.
#
# Starts rilld (BUILD_DIR, default build) on a scratch directory, runs `rill-bench produce` against it (PRODUCERS
# producers and partitions, default 4; SIZE bytes, default 1024; BATCH, default 100; DURATION s, default 10) with
# the given --sync (default before-ack), records rilld with `perf record -g` meanwhile, and prints the produce figures
# and the 25 symbols with the most samples of their own (perf report --no-children), then the share of samples in
# the kernel. Needs perf and a kernel that lets root profile (perf_event_paranoid).
set -euo pipefail
build=${1:-build}
sync=${2:-before-ack}
producers=${PRODUCERS:-4}
size=${SIZE:-1024}
batch=${BATCH:-100}
duration=${DURATION:-10}
scratch=$(mktemp -d)
command -v perf >/dev/null || { echo "produce_perf: perf is missing" >&2; exit 2; }
. "$(dirname "$0")/rilld_start.sh"
rilld_pid=
trap '[ -n "$rilld_pid" ] && { kill -TERM $rilld_pid 2>/dev/null; wait $rilld_pid 2>/dev/null; }; rm -rf "$scratch"' EXIT
start_rilld "$build/tools/rilld" "$scratch/rill" "$scratch/rilld.log" || exit 1
rilld=$rilld_pid
addr=$rilld_tcp
perf record -q -g -o "$scratch/perf.data" -p "$rilld" -- sleep "$((duration + 1))" >/dev/null 2>&1 &
perf_pid=$!
"$build/tools/rill-bench" produce --server "$addr" --producers "$producers" --partitions "$producers" \
  --message-size "$size" --batch "$batch" --duration "$duration" --sync "$sync" --json |
  python3 -c 'import json,sys; p=json.load(sys.stdin)["produce"]; print("produce: {:,.0f} msg/s, {:.1f} MB/s, p99 {:.0f} us".format(p["msgs_per_s"], p["mb_per_s"], p["latency_us"]["p99"]))'
wait "$perf_pid" || true
perf report -i "$scratch/perf.data" --no-children --sort sym --stdio -g none 2>/dev/null |
  grep -E '^ +[0-9.]+%' | head -25
perf report -i "$scratch/perf.data" --no-children --sort dso --stdio -g none 2>/dev/null |
  grep -E '^ +[0-9.]+%' | head -6
