#!/usr/bin/env bash
# Three rilld nodes and a consumer group of a replicated topic (replication factor 3, 6 partitions) read by three
# `rill consume --group --follow` members (docs/consumer-groups.md, The replicated coordinator), a producer writing
# all along: the node of the group's coordinator is SIGKILLed mid-stream, then a member's node (one node is left: no
# quorum), then both start again. Every message is read, never by two members in one generation (each member prints
# the generation it read in: --format %g), the group ends stable with its 3 members, the committed offsets (sampled
# all along) never go back, and at the end they are every partition's end. Deleted and created again at once, the
# group starts without the old one's offsets.
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
  cat "$dir"/member*.out 2>/dev/null | cut -d' ' -f4 | sort -u | wc -l
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
# Member $1 connects to node $1 first (the CLI tries its list in order), so that node $1 is that member's node.
member() {
  local m=$1 list="127.0.0.1:$(tcp "$1")"
  for n in 1 2 3; do [ "$n" = "$1" ] || list="$list,127.0.0.1:$(tcp "$n")"; done
  "$rill" --server "$list" consume s t --group g --member "m$m" --follow --format '%p %o %g %s\n' \
    >>"$dir/member$m.out" 2>>"$dir/member$m.err" &
  mpid[$m]=$!
}
total=3000
# The producer, all along: 60 requests of 50 messages, each retried until the cluster takes it (a retry after a
# request that did land writes its messages twice: they are read at least once, counted once).
producer() {
  for c in $(seq 0 59); do
    for try in $(seq 200); do
      seq $((c * 50 + 1)) $((c * 50 + 50)) | r produce s t >/dev/null 2>>"$dir/producer.err" && break
      [ "$try" -lt 200 ] || { echo "chunk $c never taken" >>"$dir/producer.err"; exit 1; }
      sleep 0.2
    done
    sleep 0.1
  done
}

start_cluster
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
producer &
producer_pid=$!
mpid[producer]=$producer_pid
consumed_distinct 60 300 || fail "the group read $(distinct) of the first 300: $(r group describe s t g)"
# Mid-stream: the coordinator's node dies; the group goes on with the other two.
coord=$(coordinator_of)
[ "$coord" -ge 1 ] || fail "group describe names no coordinator: $(r group describe s t g)"
kill -9 "${pid[$coord]}"
unset "pid[$coord]"
seen=$(distinct)
consumed_distinct 60 $((seen + 300)) || fail "after the coordinator's node $coord died the group read $(distinct)"
# Then a member's node (member $other's, never restarted: it is still that member's): one node is left, no quorum.
other=$((coord % 3 + 1))
kill -9 "${pid[$other]}"
unset "pid[$other]"
sleep 2
# Both return.
start "$coord"
start "$other"
wait "$producer_pid" || fail "the producer gave up: $(tail -5 "$dir/producer.err")"
unset "mpid[producer]"
consumed_distinct 90 "$total" || fail "after nodes $coord and $other returned the group read $(distinct) of $total"
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
# One reader per partition and generation: no record read by two members in one generation.
python3 - "$dir" <<'PY' || fail "two members read one partition in one generation"
import sys, collections
readers = collections.defaultdict(set)
for m in (1, 2, 3):
    for line in open(f"{sys.argv[1]}/member{m}.out"):
        p, o, g, v = line.split(' ', 3)
        if int(g) < 1:
            print(f"member {m}: partition {p} offset {o} read in generation {g}", file=sys.stderr)
            sys.exit(1)
        readers[(int(p), int(g))].add(m)
shared = {k: v for k, v in readers.items() if len(v) > 1}
if shared:
    print(f"(partition, generation) read by several members: {shared}", file=sys.stderr)
    sys.exit(1)
print(f"{len(readers)} (partition, generation) pairs, one reader each")
PY
# Every message read; a message read twice only across a change of owner (at least once), never lost.
missing=$(comm -23 <(seq 1 "$total" | sort) <(cat "$dir"/member*.out | cut -d' ' -f4 | sort -u) | wc -l)
[ "$missing" -eq 0 ] || fail "$missing messages never read"
# Committed offsets: the group's, once the members are gone, are every partition's end (nothing left unread, nothing
# committed twice over: the coordinator refuses a commit below the committed one).
done_all() {
  r --json group describe s t g | python3 -c "
import json, sys
d = json.load(sys.stdin)
ps = d.get('partitions', [])
sys.exit(0 if len(ps) == 6 and all(p.get('committed') == p['high_watermark'] for p in ps) else 1)"
}
for _ in $(seq 50); do
  done_all && break
  sleep 0.2
done
done_all || fail "committed offsets are not every partition's end: $(r group describe s t g)"
# Deleted and created again at once under its name: another incarnation, which starts without the old offsets.
r group delete s t g >/dev/null || fail "group delete: $(r group delete s t g 2>&1)"
r group create s t g >/dev/null || fail "group create again: $(r group create s t g 2>&1)"
r --json group describe s t g | python3 -c "
import json, sys
ps = json.load(sys.stdin).get('partitions', [])
sys.exit(0 if len(ps) == 6 and all(p.get('committed') is None for p in ps) else 1)" ||
  fail "the group created again kept offsets: $(r group describe s t g)"
echo "ok: $total messages read by a group of 3 across SIGKILLs of its coordinator's node (node $coord), then member m$other's node, and their returns"
