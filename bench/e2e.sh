#!/usr/bin/env bash
# bench/e2e.sh [BUILD_DIR...]: end-to-end latency (produce to consume) at a fixed rate below saturation, durable
# (--sync before-ack: acknowledged after its fdatasync) against relaxed (--sync none: durability every_ms), in one
# run, the two interleaved run by run. With two build directories, each mode runs against each build's rilld too
# (before / after a change), all interleaved.
#
# Environment: RATE (messages/s over all producers, 20000), SIZE (1024), COUNT (producers = consumers = partitions,
# 4), BATCH (100), DURATION (s, 10), RUNS (3), SCRATCH (a directory on the disk to measure; default mktemp -d).
# Prints one markdown row per build and mode: the medians over the runs of p50 / p99 / p99.9 end-to-end latency and
# of the produce rate, and the relaxed / durable p99 ratio per build (median of the run-by-run ratios).
set -euo pipefail
[ $# -ge 1 ] || set -- build
rate=${RATE:-20000}
size=${SIZE:-1024}
count=${COUNT:-4}
batch=${BATCH:-100}
duration=${DURATION:-10}
runs=${RUNS:-3}
scratch=${SCRATCH:-$(mktemp -d)}
. "$(dirname "$0")/rilld_start.sh"
for b in "$@"; do
  for tool in "$b/tools/rilld" "$b/tools/rill-bench"; do
    [ -x "$tool" ] || { echo "e2e: $tool is missing; build first" >&2; exit 1; }
  done
done
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -z "${SCRATCH:-}" ] && rm -rf "$scratch"
  return 0
}
trap cleanup EXIT

addrs=()
i=0
for b in "$@"; do
  start_rilld "$b/tools/rilld" "$scratch/rill-$i" "$scratch/rilld-$i.log" || { pids+=("$rilld_pid"); exit 1; }
  pids+=("$rilld_pid")
  addrs+=("$rilld_tcp")
  i=$((i + 1))
done

results="$scratch/e2e.jsonl"
: >"$results"
for r in $(seq "$runs"); do
  i=0
  for b in "$@"; do
    for sync in before-ack none; do
      echo "e2e: run $r, $b, --sync $sync" >&2
      "$b/tools/rill-bench" produce-consume --server "${addrs[$i]}" --producers "$count" --consumers "$count" \
        --partitions "$count" --message-size "$size" --batch "$batch" --rate "$rate" --duration "$duration" \
        --sync "$sync" --name-prefix "e2e$r-$sync" --json |
        python3 -c 'import json,sys; j=json.load(sys.stdin); j["build"]=sys.argv[1]; j["run"]=int(sys.argv[2]); print(json.dumps(j))' \
          "$b" "$r" >>"$results"
    done
    i=$((i + 1))
  done
done

python3 - "$results" "$rate" "$size" "$count" "$batch" "$duration" "$runs" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rate, size, count, batch, duration, runs = sys.argv[2:]
def e2e(j, p):
    return j["end-to-end"]["latency_us"][p]
print(f"End-to-end latency at {rate} msg/s of {size} B, {count} producers / consumers / partitions, batches of "
      f"{batch}, {duration} s per run, {runs} runs (medians):\n")
print("| build | durability | produce msg/s | e2e p50 | e2e p99 | e2e p99.9 |")
print("|---|---|---|---|---|---|")
builds = list(dict.fromkeys(j["build"] for j in rows))
for b in builds:
    for sync, label in (("before-ack", "durable (sync before ack)"), ("none", "relaxed (every_ms)")):
        sel = [j for j in rows if j["build"] == b and j["sync"] == sync]
        med = lambda f: statistics.median(f(j) for j in sel)
        print(f"| {b} | {label} | {med(lambda j: j['produce']['msgs_per_s']):,.0f} | "
              f"{med(lambda j: e2e(j, 'p50')) / 1000:.2f} ms | {med(lambda j: e2e(j, 'p99')) / 1000:.2f} ms | "
              f"{med(lambda j: e2e(j, 'p99_9')) / 1000:.2f} ms |")
print()
for b in builds:
    ratios = []
    for r in sorted(set(j["run"] for j in rows)):
        d = [j for j in rows if j["build"] == b and j["run"] == r and j["sync"] == "before-ack"]
        n = [j for j in rows if j["build"] == b and j["run"] == r and j["sync"] == "none"]
        if d and n:
            ratios.append(e2e(n[0], "p99") / e2e(d[0], "p99"))
    print(f"- {b}: relaxed / durable e2e p99 = {statistics.median(ratios):.2f} "
          f"({min(ratios):.2f}-{max(ratios):.2f})")
PY
