#!/usr/bin/env bash
# Three rilld nodes on loopback and the rill CLI, as a user runs them (docs/replication.md): a topic of replication
# factor 3; `rill produce` (from stdin) and `rill consume --follow` on partition 0 run while the partition's primary
# is killed (SIGKILL) and then started again. The consumer gets every message once, in order; `rill cluster status`
# counts under-replicated partitions while the node is away and none once it is back (with nothing produced: the
# primaries' probes); every partition's primary is its preferred node again; `rill topic describe` agrees.
set -euo pipefail
# shellcheck source=tests/cluster/cli_cluster_lib.sh
source "$(dirname "$0")/cli_cluster_lib.sh"
# The node whose replica of partition $1 is primary, as the replicas report it.
primary_of() {
  r --json topic describe s t | python3 -c "
import json, sys
d = json.load(sys.stdin)
print(next((x['node_id'] for x in d['replicas'] if x['partition'] == $1 and x['role'] == 'primary'), 0))"
}
# Waits (at most $2 s) until `rill cluster status` says "$1 partition(s) under-replicated" (a regex).
under_replicated() {
  for _ in $(seq $(($2 * 5))); do
    r cluster status 2>/dev/null | head -1 | grep -Eq ", $1 partitions? under-replicated" && return 0
    sleep 0.2
  done
  return 1
}

start_cluster
r stream create s >/dev/null || fail "stream create"
r topic create s t --partitions 3 --replication-factor 3 | grep -q "3 partitions" || fail "topic create"

r consume s t --partition 0 --from first --follow >"$dir/consumed" 2>"$dir/consumer.err" &
cpid=$!
seq 1 500 | r produce s t --partition 0 2>/dev/null || fail "produce 1..500"
killed=$(primary_of 0)
[ "$killed" -ge 1 ] || fail "partition 0 has no primary"
(seq 501 3000 | r produce s t --partition 0 >/dev/null 2>"$dir/producer.err") &
producer=$!
sleep 0.3
kill -9 "${pid[$killed]}"
unset "pid[$killed]"
wait "$producer" || fail "the producer failed across the failover: $(cat "$dir/producer.err")"
# The partitions the dead node held a replica of (all three) are under-replicated on their primaries.
under_replicated "[1-9][0-9]*" 15 || fail "cluster status counts no under-replicated partition: $(r cluster status)"
start "$killed"
seq 3001 3500 | r produce s t --partition 0 2>/dev/null || fail "produce 3001..3500"
for _ in $(seq 200); do
  [ "$(wc -l <"$dir/consumed")" -ge 3500 ] && break
  sleep 0.1
done
kill "$cpid" 2>/dev/null || true
wait "$cpid" 2>/dev/null || true
cpid=
diff <(seq 1 3500) "$dir/consumed" >"$dir/diff" || fail "the consumer missed or repeated messages: $(head "$dir/diff")"
# Back: nothing under-replicated (nothing is produced: the probes show the returned replicas have kept up), and
# every partition's primary is its preferred node again, one each.
under_replicated 0 40 || fail "still under-replicated after the node's return: $(r cluster status)"
for _ in $(seq 200); do
  leads=$(r cluster status | awk '$1 ~ /^[0-9]+$/ {print $(NF-1)}' | tr '\n' ' ')
  [ "$leads" = "1 1 1 " ] && break
  sleep 0.2
done
[ "$leads" = "1 1 1 " ] || fail "partitions led per node: $leads (one each expected): $(r cluster status; r topic describe s t)"
r topic describe s t | grep -q "replicas" || fail "topic describe"
echo "ok: 3500 messages once each across a SIGKILL of the primary and its return; leads $leads"
