#!/usr/bin/env bash
# Three rilld nodes on loopback and the rill CLI, as a user runs them (docs/replication.md): a topic of replication
# factor 3; `rill produce` (from stdin) and `rill consume --follow` on partition 0 run while the partition's primary
# is killed (SIGKILL) and then started again. The consumer gets every message once, in order; `rill cluster status`
# counts under-replicated partitions while the node is away and none once it is back (with nothing produced: the
# primaries' probes); every partition's primary is its preferred node again; `rill topic describe` agrees.
set -euo pipefail
rilld=$1
rill=$2
dir=$(mktemp -d)
declare -A pid
cpid=
cleanup() {
  [ -n "$cpid" ] && kill -9 "$cpid" 2>/dev/null
  for p in "${pid[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for i in 1 2 3; do echo "== node $i" >&2; tail -20 "$dir/n$i.log" >&2 || true; done
  exit 1
}

# Nine free loopback ports: client, HTTP and replica plane of each node (fixed, so a restart keeps its address).
read -r -a ports <<<"$(python3 -c '
import socket
s = [socket.socket() for _ in range(9)]
for x in s: x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))')"
tcp() { echo "${ports[$((3 * ($1 - 1)))]}"; }
http() { echo "${ports[$((3 * ($1 - 1) + 1))]}"; }
rep() { echo "${ports[$((3 * ($1 - 1) + 2))]}"; }
members="1@127.0.0.1:$(rep 1),2@127.0.0.1:$(rep 2),3@127.0.0.1:$(rep 3)"
cluster_args() { echo "--set cluster.id=5 --set cluster.node_id=$1 --set cluster.members=$members --replica 127.0.0.1:$(rep "$1")"; }

start() {
  # shellcheck disable=SC2046
  "$rilld" --data-dir "$dir/n$1" $(cluster_args "$1") --tcp "127.0.0.1:$(tcp "$1")" --http "127.0.0.1:$(http "$1")" \
    --set runtime.cpu_allocation=2 --set runtime.pin_cores=false >>"$dir/n$1.log" 2>&1 &
  pid[$1]=$!
  disown "$!"  # (killed on purpose: no job notice)
  for _ in $(seq 300); do
    "$rill" --server "127.0.0.1:$(tcp "$1")" ping >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  fail "node $1 did not start"
}
servers="127.0.0.1:$(tcp 1),127.0.0.1:$(tcp 2),127.0.0.1:$(tcp 3)"
r() { "$rill" --server "$servers" "$@"; }
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

for i in 1 2 3; do
  # shellcheck disable=SC2046
  "$rilld" format --data-dir "$dir/n$i" $(cluster_args "$i") >/dev/null || fail "format node $i"
  start "$i"
done
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
