#!/usr/bin/env bash
# Three rilld nodes and a consumer group of a replicated topic (replication factor 3, 6 partitions) read by three
# `rill consume --group --follow` members (docs/consumer-groups.md, The replicated coordinator): the node of the
# group's coordinator is SIGKILLed mid-stream and started again, then another node. Every message is read, the group
# ends stable with its 3 members, the committed offsets (sampled all along) never go back, and at the end they cover
# everything.
set -euo pipefail
# shellcheck source=tests/cluster/cli_cluster_lib.sh
source "$(dirname "$0")/cli_cluster_lib.sh"
declare -A mpid
trap 'for p in "${mpid[@]}"; do kill -9 "$p" 2>/dev/null || true; done; cleanup' EXIT

# The group's coordinator node, as `rill group describe` names it.
coordinator_of() {
  r --json group describe s t g | python3 -c "import json, sys; print(json.load(sys.stdin).get('coordinator_node', 0))"
}
# How many distinct messages the members have printed.
distinct() {
  cat "$dir"/member*.out 2>/dev/null | cut -d' ' -f2 | sort -u | wc -l
}
# Waits (at most $1 s) until the consumers have printed $2 distinct messages.
consumed_distinct() {
  for _ in $(seq $(($1 * 5))); do
    [ "$(distinct)" -ge "$2" ] && return 0
    sleep 0.2
  done
  return 1
}
# The group is stable with its 3 members (every partition owned, none waiting for a release).
stable3() {
  r --json group describe s t g | python3 -c "
import json, sys
d = json.load(sys.stdin)
sys.exit(0 if d.get('stable') and len(d.get('members', [])) == 3 else 1)"
}
member() {
  r consume s t --group g --member "m$1" --follow --format '%p %s\n' >>"$dir/member$1.out" 2>>"$dir/member$1.err" &
  mpid[$1]=$!
}

for i in 1 2 3; do
  # shellcheck disable=SC2046
  "$rilld" format --data-dir "$dir/n$i" $(cluster_args "$i") >/dev/null || fail "format node $i"
  start "$i"
done
r stream create s >/dev/null || fail "stream create"
r topic create s t --partitions 6 --replication-factor 3 | grep -q "6 partitions" || fail "topic create"
r group create s t g --session-timeout-ms 3000 >/dev/null || fail "group create: $(r group create s t g 2>&1)"
for m in 1 2 3; do member "$m"; done
# Committed offsets sampled all along (through whichever node answers): per partition they never go back.
(
  while :; do
    r --json group describe s t g 2>/dev/null | python3 -c "
import json, sys
d = json.load(sys.stdin)
print(' '.join('%d:%d' % (p['partition'], p['committed']) for p in d.get('partitions', []) if p.get('committed') is not None))" \
      >>"$dir/committed" 2>/dev/null || true
    sleep 0.3
  done
) &
mpid[sampler]=$!
seq 1 600 | r produce s t >/dev/null || fail "produce 1..600"
consumed_distinct 30 600 || fail "the group read $(distinct) of 600: $(r group describe s t g)"
coord=$(coordinator_of)
[ "$coord" -ge 1 ] || fail "group describe names no coordinator: $(r group describe s t g)"
kill -9 "${pid[$coord]}"
unset "pid[$coord]"
seq 601 1200 | r produce s t >/dev/null 2>"$dir/producer.err" || fail "produce 601..1200: $(cat "$dir/producer.err")"
consumed_distinct 60 1200 || fail "after the coordinator's node died the group read $(distinct) of 1200: $(r group describe s t g)"
start "$coord"
seq 1201 1500 | r produce s t >/dev/null || fail "produce 1201..1500"
consumed_distinct 60 1500 || fail "after the node's return the group read $(distinct) of 1500"
# Then another node (members' connections to it move to the others), and its return.
other=$((coord % 3 + 1))
kill -9 "${pid[$other]}"
unset "pid[$other]"
seq 1501 1800 | r produce s t >/dev/null 2>"$dir/producer.err" || fail "produce 1501..1800: $(cat "$dir/producer.err")"
consumed_distinct 60 1800 || fail "after node $other died the group read $(distinct) of 1800"
start "$other"
seq 1801 2000 | r produce s t >/dev/null || fail "produce 1801..2000"
consumed_distinct 60 2000 || fail "after node $other's return the group read $(distinct) of 2000"
for _ in $(seq 50); do
  stable3 && break
  sleep 0.2
done
stable3 || fail "the group is not stable with 3 members: $(r group describe s t g)"
kill "${mpid[sampler]}" 2>/dev/null || true
for m in 1 2 3; do kill "${mpid[$m]}" 2>/dev/null || true; done
wait 2>/dev/null || true
python3 - "$dir/committed" <<'PY' || fail "a committed offset went back"
import sys
last, samples = {}, 0
for line in open(sys.argv[1]):
    samples += 1
    for item in line.split():
        p, c = map(int, item.split(':'))
        if c < last.get(p, 0):
            print(f"partition {p}: committed {c} after {last[p]}", file=sys.stderr)
            sys.exit(1)
        last[p] = c
if samples < 10:
    print(f"only {samples} samples of the committed offsets", file=sys.stderr)
    sys.exit(1)
PY
# Every message read; a message read twice only across a change of owner (at least once), never lost.
missing=$(comm -23 <(seq 1 2000 | sort) <(cat "$dir"/member*.out | cut -d' ' -f2 | sort -u) | wc -l)
[ "$missing" -eq 0 ] || fail "$missing messages never read"
# Committed offsets: the group's, once the members are gone, cover what was produced (never moved back: the
# coordinator refuses a commit below the committed one).
for _ in $(seq 50); do
  committed=$(r --json group describe s t g | python3 -c "
import json, sys
d = json.load(sys.stdin)
print(sum(int(p.get('committed') or 0) for p in d.get('partitions', [])))")
  [ "$committed" -ge 2000 ] && break
  sleep 0.2
done
[ "$committed" -ge 2000 ] || fail "committed offsets sum to $committed, below 2000: $(r group describe s t g)"
echo "ok: 2000 messages read by a group of 3 across SIGKILLs of its coordinator's node (node $coord), then node $other, and their returns"
