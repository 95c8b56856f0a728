#!/usr/bin/env bash
# bench/replication.sh [BUILD_DIR]: the replicated produce path against a node alone, and partition failover, in one
# run (docs/benchmarks.md, "Replicated partitions"). Starts a node alone and a 3-node cluster on loopback ports of
# its own (scratch data directories), then:
#   1. rill-bench produce, SIZE-byte messages x COUNT producers on COUNT partitions, durable (sync before ack),
#      DURATION s after a 2 s warm-up: the node alone with replication factor 1 and the cluster with factor 3,
#      interleaved RUNS times. Prints each run and the medians, and the cluster / alone ratio per pair.
#   2. FAILOVERS times: finds the primary of partition 0 of a factor-3 topic (rill topic describe --json), SIGKILLs its
#      node, times one `rill produce` to that partition given every node (it follows not_primary), restarts the node.
# Environment: SIZE (1024), COUNT (4), BATCH (100), DURATION (10), RUNS (3), FAILOVERS (10), BASE_PORT (19600).
set -euo pipefail
build=${1:-build}
size=${SIZE:-1024}
count=${COUNT:-4}
batch=${BATCH:-100}
duration=${DURATION:-10}
runs=${RUNS:-3}
failovers=${FAILOVERS:-10}
base=${BASE_PORT:-19600}
rilld=$build/tools/rilld
rill=$build/tools/rill
bench=$build/tools/rill-bench
for tool in "$rilld" "$rill" "$bench"; do
  [ -x "$tool" ] || { echo "replication: $tool is missing; build first" >&2; exit 1; }
done
scratch=$(mktemp -d)
declare -A pids
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$scratch"
}
trap cleanup EXIT

members="1@127.0.0.1:$((base + 12)),2@127.0.0.1:$((base + 22)),3@127.0.0.1:$((base + 32))"
node_args() {  # node_args I: the cluster keys and listeners of node I
  echo --set cluster.id=7 --set cluster.node_id="$1" --set cluster.members="$members" \
    --replica 127.0.0.1:$((base + 10 * $1 + 2)) --tcp 127.0.0.1:$((base + 10 * $1)) \
    --http 127.0.0.1:$((base + 10 * $1 + 1)) --set runtime.pin_cores=false
}
start_node() {
  # shellcheck disable=SC2046
  "$rilld" --data-dir "$scratch/n$1" $(node_args "$1") >>"$scratch/n$1.log" 2>&1 &
  pids[n$1]=$!
}
for i in 1 2 3; do
  # shellcheck disable=SC2046
  "$rilld" format --data-dir "$scratch/n$i" $(node_args "$i") >/dev/null
  start_node "$i"
done
"$rilld" --data-dir "$scratch/alone" --tcp 127.0.0.1:$((base + 50)) --http 127.0.0.1:$((base + 51)) \
  --set runtime.pin_cores=false >"$scratch/alone.log" 2>&1 &
pids[alone]=$!
all="127.0.0.1:$((base + 10)),127.0.0.1:$((base + 20)),127.0.0.1:$((base + 30))"
for _ in $(seq 100); do
  "$rill" --server "$all" cluster status >/dev/null 2>&1 && "$rill" --server 127.0.0.1:$((base + 50)) ping \
    >/dev/null 2>&1 && break
  sleep 0.1
done

echo "## produce: ${size} B x ${count} producers, batches of ${batch}, durable; alone (factor 1) vs 3 nodes (factor 3)"
results=$scratch/results.txt
for k in $(seq "$runs"); do
  for sys in alone cluster; do
    if [ $sys = alone ]; then server=127.0.0.1:$((base + 50)) factor=1; else server=$all factor=3; fi
    "$bench" produce --server "$server" --producers "$count" --partitions "$count" --message-size "$size" \
      --batch "$batch" --duration "$duration" --warmup 2 --sync before-ack --replication-factor $factor \
      --name-prefix "r$k$sys" --json | sed "s/^/$sys /" >>"$results"
  done
done
python3 - "$results" <<'EOF'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    s, js = line.split(' ', 1)
    p = json.loads(js)["produce"]
    rows.setdefault(s, []).append((p["msgs_per_s"], p["latency_us"]["p50"] / 1000, p["latency_us"]["p99"] / 1000))
for s, r in rows.items():
    print(f"{s}: msg/s {[round(x[0]) for x in r]}, median {round(statistics.median(x[0] for x in r))}; "
          f"p50 {statistics.median(x[1] for x in r):.2f} ms, p99 {statistics.median(x[2] for x in r):.2f} ms")
ratios = [c[0] / a[0] for a, c in zip(rows["alone"], rows["cluster"])]
print(f"cluster / alone per pair: {[round(x, 3) for x in ratios]}, median {statistics.median(ratios):.3f}")
EOF

echo "## failover: SIGKILL of partition 0's primary to the next acknowledged produce on it"
"$rill" --server "$all" stream create failover >/dev/null
"$rill" --server "$all" topic create failover t --partitions 3 --replication-factor 3 >/dev/null
echo warm | "$rill" --server "$all" produce failover t --partition 0 >/dev/null
times=()
for k in $(seq "$failovers"); do
  primary=$("$rill" --server "$all" topic describe failover t --json | python3 -c '
import json, sys
r = json.load(sys.stdin)["replicas"]
print([x for x in r if x["partition"] == 0 and x["role"] == "primary"][0]["node_id"])')
  kill -KILL "${pids[n$primary]}"
  wait "${pids[n$primary]}" 2>/dev/null || true
  t0=$(date +%s%N)
  echo "m$k" | "$rill" --server "$all" produce failover t --partition 0 >/dev/null
  t1=$(date +%s%N)
  times+=($(((t1 - t0) / 1000000)))
  echo "kill node $primary: next acknowledged produce after ${times[-1]} ms"
  start_node "$primary"
  sleep 3
done
printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "median %d ms (%d-%d ms) over %d failovers\n", (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2), a[1], a[NR], NR}'
