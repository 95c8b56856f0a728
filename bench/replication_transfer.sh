#!/usr/bin/env bash
# bench/replication_transfer.sh [SECONDS] [BUILD_DIR]: a wiped node's catch-up by state transfer (docs/benchmarks.md,
# "Replicated partitions"). A 3-node cluster on loopback ports 194x0-194x2 (journal ring of 64 ops, so that the
# returning node is behind it), one topic of 1 partition and factor 3 filled by rill-bench (1 KiB x 4 producers,
# durable) for SECONDS (default 8); node 3 killed, its directory wiped, `rilld recover`, started again; the time from
# that start until its replica's high watermark equals node 1's, against the produce rate of the same run.
# Scratch directories under /tmp/rill-transfer (removed first).
set -u
BUILD=$(cd "${2:-build}" && pwd)
mkdir -p /tmp/rill-transfer && cd /tmp/rill-transfer || exit 1
R=$BUILD/tools/rilld; B=$BUILD/tools/rill-bench; C=$BUILD/tools/rill
M="1@127.0.0.1:19412,2@127.0.0.1:19422,3@127.0.0.1:19432"; DUR=${1:-8}
stop() { for i in 1 2 3; do pkill -f "data-dir n$i " 2>/dev/null; done; }
stop; sleep 0.5; rm -rf n1 n2 n3 n*.log bench.json
trap stop EXIT
for i in 1 2 3; do
  $R format --data-dir n$i --set cluster.id=77 --set cluster.node_id=$i --set cluster.members=$M --replica 127.0.0.1:194${i}2 >/dev/null
  nohup $R --data-dir n$i --set cluster.id=77 --set cluster.node_id=$i --set cluster.members=$M --replica 127.0.0.1:194${i}2 --tcp 127.0.0.1:194${i}0 --http 127.0.0.1:194${i}1 --set cluster.partition_journal_slots=64 >> n$i.log 2>&1 &
done
sleep 3
S=127.0.0.1:19410,127.0.0.1:19420,127.0.0.1:19430
$B produce --server $S --producers 4 --partitions 1 --message-size 1024 --batch 100 --duration $DUR --warmup 0 --sync before-ack --replication-factor 3 --name-prefix t --keep --json > bench.json
sleep 1
du -sh n1/streams n2/streams n3/streams
pkill -9 -f "data-dir n3 "; sleep 0.3; rm -rf n3
$R recover --data-dir n3 --set cluster.id=77 --set cluster.node_id=3 --set cluster.members=$M --replica 127.0.0.1:19432 >/dev/null
t0=$(date +%s.%N)
nohup $R --data-dir n3 --set cluster.id=77 --set cluster.node_id=3 --set cluster.members=$M --replica 127.0.0.1:19432 --tcp 127.0.0.1:19430 --http 127.0.0.1:19431 --set cluster.partition_journal_slots=64 >> n3.log 2>&1 &
hw() { $C --server $S --json topic describe t-0 bench 2>/dev/null | python3 -c "
import json,sys
d=json.load(sys.stdin)
print(max([x['high_watermark'] for x in d['replicas'] if x['node_id']==$1] or [0]))"; }
target=$(hw 1)
deadline=$((SECONDS + 120))
while :; do
  h=$(hw 3); [ -n "$h" ] && [ "$h" -ge "$target" ] && [ "$target" -gt 0 ] && break
  [ $SECONDS -lt $deadline ] || { echo "node 3 did not catch up within 120 s"; exit 1; }
  sleep 0.05
done
t1=$(date +%s.%N)
bytes=$($C --server $S --json topic describe t-0 bench | python3 -c 'import json,sys; print(json.load(sys.stdin)["partitions"][0]["bytes"])')
python3 -c "
import json
p=json.load(open('bench.json'))['produce']['mb_per_s']
t=$t1-$t0; mb=$bytes/1e6
print(f'{mb:.0f} MB, $target records: produced at {p:.1f} MB/s; the wiped node caught up in {t:.2f} s ({mb/t:.1f} MB/s, {mb/t/p:.2f}x the produce rate)')
"
echo "state transfers in node 3's log: $(grep -c 'state transfer' n3.log)"
