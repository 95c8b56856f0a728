#!/usr/bin/env bash
# bench/loopback.sh [BUILD_DIR]: produce and consume throughput of 1 KiB messages through the client library over
# loopback, with sync on (acknowledged after fsync) and off (fsync every second), against a rilld started here on
# a scratch data directory. RUNS (default 3) runs of each; medians printed.
set -euo pipefail
build=${1:-build}
runs=${RUNS:-3}
messages=${MESSAGES:-200000}
dir=$(mktemp -d)
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
"$build/tools/rilld" --data-dir "$dir/data" --tcp 127.0.0.1:0 --set runtime.pin_cores=false >"$dir/log" 2>&1 &
pid=$!
for _ in $(seq 200); do
  [ -f "$dir/data/runtime/current_config.toml" ] && break
  sleep 0.05
done
addr=$(sed -n "s/^tcp_address = ['\"]\(.*\)['\"]$/\1/p" "$dir/data/runtime/current_config.toml")
echo "| sync | produce msg/s (median) | produce MB/s | consume msg/s (median) | consume MB/s |"
echo "|---|---|---|---|---|"
for sync in on off; do
  for _ in $(seq "$runs"); do
    "$build/tools/rill-bench" loopback --server "$addr" --messages "$messages" --size 1024 --producers 4 \
      --batch-records 100 --sync "$sync" --json
  done | python3 -c '
import json, statistics, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
m = lambda k: statistics.median(r[k] for r in rows)
keys = ("produce_msgs_per_s", "produce_mb_per_s", "consume_msgs_per_s", "consume_mb_per_s")
print("| " + rows[0]["sync"] + " | " + " | ".join("%.0f" % m(k) for k in keys) + " |")
'
done
