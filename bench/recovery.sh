#!/usr/bin/env bash
# bench/recovery.sh [BUILD_DIR]: what recovering a wiped node moves, and how long it takes (docs/benchmarks.md,
# "Recovery of a wiped node"; issue 38, finding 12). A 3-node cluster on loopback ports BASE_PORT.. (scratch data
# directories), one topic of PARTITIONS partitions with replication factor 3 filled by rill-bench (MSGS messages of
# SIZE bytes, BATCH per request, durable); node 3 killed, its directory wiped, `rilld recover`, started again. Then:
#   - the seconds from that start until every partition's replica on node 3 has the high watermark of node 1's;
#   - the bytes and messages nodes 1 and 2 sent node 3 meanwhile (/api/cluster, before and after), and the messages
#     their peer queues refused;
#   - what node 3 then holds: its partitions' log bytes (topic describe), their .meta entries (64 bytes a batch) and
#     journal headers (128 bytes an op) as the moved bytes' yardstick;
#   - copying node 1's data directory with cp -a (journals and preallocated space included), as the floor of a copy.
# Environment: MSGS (10000), SIZE (100), BATCH (1), PARTITIONS (6), PRODUCERS (2), BASE_PORT (19700).
# The 10,000 x 100 B x 1 default is the case the finding reported: every op repaired one by one (below a checkpoint).
set -uo pipefail
build=$(cd "${1:-build}" && pwd)
msgs=${MSGS:-10000}
size=${SIZE:-100}
batch=${BATCH:-1}
partitions=${PARTITIONS:-6}
producers=${PRODUCERS:-2}
base=${BASE_PORT:-19700}
rilld=$build/tools/rilld
rill=$build/tools/rill
bench=$build/tools/rill-bench
for tool in "$rilld" "$rill" "$bench"; do
  [ -x "$tool" ] || { echo "recovery: $tool is missing; build first" >&2; exit 1; }
done
scratch=$(mktemp -d)
declare -A pids
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$scratch"
}
trap cleanup EXIT
cd "$scratch" || exit 1

members="1@127.0.0.1:$((base + 12)),2@127.0.0.1:$((base + 22)),3@127.0.0.1:$((base + 32))"
ident() { echo --set cluster.id=7 --set cluster.node_id="$1" --set cluster.members="$members" \
  --replica 127.0.0.1:$((base + 10 * $1 + 2)); }
start() {
  # shellcheck disable=SC2046
  "$rilld" --data-dir "n$1" $(ident "$1") --tcp 127.0.0.1:$((base + 10 * $1)) --http 127.0.0.1:$((base + 10 * $1 + 1)) \
    --set runtime.pin_cores=false >>"n$1.log" 2>&1 &
  pids[$1]=$!
}
http() { echo "127.0.0.1:$((base + 10 * $1 + 1))"; }
for i in 1 2 3; do
  # shellcheck disable=SC2046
  "$rilld" format --data-dir "n$i" $(ident "$i") >/dev/null || exit 1
  start "$i"
done
servers="127.0.0.1:$((base + 10)),127.0.0.1:$((base + 20)),127.0.0.1:$((base + 30))"
for _ in $(seq 1 100); do
  "$rill" --server "$servers" cluster status >/dev/null 2>&1 && break
  sleep 0.1
done
"$bench" produce --server "$servers" --producers "$producers" --streams 1 --partitions "$partitions" \
  --replication-factor 3 --message-size "$size" --batch "$batch" --messages "$msgs" --partitioning round-robin \
  --sync before-ack --keep --name-prefix rec --json >bench.json || { echo "recovery: rill-bench failed" >&2; exit 1; }
stream=rec-0  # (rill-bench's names: <prefix>-<i>, topic bench)
topic=bench
# Each partition's high watermark on node N (0 when it has no replica there yet).
watermarks() {
  "$rill" --server "$servers" --json topic describe "$stream" "$topic" 2>/dev/null | python3 -c "
import json,sys
d=json.load(sys.stdin)
hw={}
for r in d.get('replicas',[]):
  if r['node_id']==$1: hw[r['partition']]=max(hw.get(r['partition'],0), r['high_watermark'])
print(' '.join(str(hw.get(p,0)) for p in range($partitions)))"
}
sleep 1
target=$(watermarks 1)
for i in 1 2; do curl -s "$(http "$i")/api/cluster" >"before$i.json"; done
kill -9 "${pids[3]}" 2>/dev/null
wait "${pids[3]}" 2>/dev/null
unset 'pids[3]'
rm -rf n3
# shellcheck disable=SC2046
"$rilld" recover --data-dir n3 $(ident 3) >/dev/null || exit 1
t0=$(date +%s.%N)
start 3
deadline=$((SECONDS + 600))
while :; do
  [ "$(watermarks 3)" = "$target" ] && break
  [ $SECONDS -lt $deadline ] || { echo "recovery: node 3 did not catch up within 600 s" >&2; exit 1; }
  sleep 0.05
done
t1=$(date +%s.%N)
for i in 1 2; do curl -s "$(http "$i")/api/cluster" >"after$i.json"; done
"$rill" --server "$servers" --json topic describe "$stream" "$topic" >describe.json
c0=$(date +%s.%N)
cp -a n1 copy
sync
c1=$(date +%s.%N)
copied=$(du -sb copy | cut -f1)
python3 - "$t0" "$t1" "$c0" "$c1" "$copied" "$batch" <<'PY'
import json, sys
t0, t1, c0, c1, copied, batch = (float(x) for x in sys.argv[1:])
sent = msgs = refused = 0
for i in (1, 2):
    b = {p['node_id']: p for p in json.load(open(f'before{i}.json')).get('peers', [])}
    a = {p['node_id']: p for p in json.load(open(f'after{i}.json')).get('peers', [])}
    sent += a[3]['bytes_sent'] - b.get(3, {}).get('bytes_sent', 0)
    msgs += a[3]['messages_sent'] - b.get(3, {}).get('messages_sent', 0)
    refused += a[3]['refused'] - b.get(3, {}).get('refused', 0)
d = json.load(open('describe.json'))
log_bytes = sum(p['bytes'] for p in d['partitions'])
records = sum(p['high_watermark'] for p in d['partitions'])
ops = records / batch
held = log_bytes + ops * (64 + 128)
print(f'node 3 holds {held / 1e6:.2f} MB ({log_bytes / 1e6:.2f} MB of batches, {records:.0f} records in about {ops:.0f} ops)')
print(f'recovery: {t1 - t0:.2f} s; peers sent node 3 {sent / 1e6:.2f} MB in {msgs} messages ({sent / held:.2f}x what it holds), '
      f'{refused} refused')
print(f'copying node 1\'s data directory (cp -a, {copied / 1e6:.1f} MB with journals and preallocated space): {c1 - c0:.2f} s')
PY
