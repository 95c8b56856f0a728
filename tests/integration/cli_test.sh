#!/usr/bin/env bash
# The rill CLI against the real rilld: streams, topics, produce from stdin (--json acks), consume with strategies
# and a named consumer, offsets, describe, errors with exit codes, and a restart that keeps everything.
set -euo pipefail
rilld=$1
rill=$2
dir=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; cat "$dir/rilld.log" >&2 || true; exit 1; }

start() {
  rm -f "$dir/data/runtime/current_config.toml"
  "$rilld" --data-dir "$dir/data" --tcp 127.0.0.1:0 --http 127.0.0.1:0 --set runtime.cpu_allocation=2 --set runtime.pin_cores=false \
    >>"$dir/rilld.log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do
    if [ -f "$dir/data/runtime/current_config.toml" ]; then
      addr=$(sed -n "s/^tcp_address = ['\"]\(.*\)['\"]$/\1/p" "$dir/data/runtime/current_config.toml")
      haddr=$(sed -n "s/^http_address = ['\"]\(.*\)['\"]$/\1/p" "$dir/data/runtime/current_config.toml")
      [ -n "$addr" ] && return 0
    fi
    sleep 0.05
  done
  fail "rilld did not start"
}
r() { "$rill" --server "$addr" "$@"; }

start
r ping | grep -q "answered" || fail "ping"
r stream create shop | grep -q "created stream shop" || fail "stream create"
r topic create shop orders --partitions 3 --retention-ms 86400000 | grep -q "3 partitions" || fail "topic create"
acks=$(printf 'one\ntwo\nthree\n' | r --json produce shop orders --partition 1 --header source=cli)
[ "$(echo "$acks" | wc -l)" -eq 3 ] || fail "three acks expected: $acks"
echo "$acks" | head -1 | grep -q '"offset":0' || fail "first ack: $acks"
echo "$acks" | grep -q '"partition":1' || fail "partition in acks: $acks"
[ "$(r consume shop orders --partition 1)" = "$(printf 'one\ntwo\nthree')" ] || fail "consume all"
[ "$(r consume shop orders --partition 1 --from offset:1 --count 1)" = "two" ] || fail "from offset"
[ "$(r consume shop orders --partition 1 --from last)" = "three" ] || fail "from last: the last message"
r --json consume shop orders --partition 1 --count 1 | grep -q '"headers":{"source":"cli"}' || fail "json consume"
# A message carries bytes: a value that is not UTF-8 comes out of --json as base64, and the messages around it too.
r topic create shop bytes --partitions 1 >/dev/null || fail "topic create bytes"
printf 'plain\n\xff\xfe\x00x\nafter\n' | r produce shop bytes --partition 0 >/dev/null || fail "produce bytes"
out=$(r --json consume shop bytes --partition 0) || fail "json consume of bytes exited $?"
[ "$(echo "$out" | wc -l)" -eq 3 ] || fail "three records expected: $out"
echo "$out" | sed -n 1p | grep -q '"value":"plain"' || fail "plain value: $out"
echo "$out" | sed -n 2p | grep -q '"value":{"base64":"//4AeA=="}' || fail "base64 value: $out"
echo "$out" | sed -n 3p | grep -q '"value":"after"' || fail "value after the bytes: $out"
r topic delete shop bytes --yes >/dev/null || fail "topic delete bytes"
# A named consumer resumes where it stopped.
[ "$(r consume shop orders --partition 1 --consumer app --from next --count 2)" = "$(printf 'one\ntwo')" ] ||
  fail "consumer first read"
[ "$(r consume shop orders --partition 1 --consumer app --from next)" = "three" ] || fail "consumer resumes"
[ "$(r offset get shop orders --partition 1 --consumer app)" = "3" ] || fail "offset get"
r offset set shop orders --partition 1 --consumer app 0 | grep -q "was 3" || fail "offset set back"
# Keys go where Kafka's partitioner puts them: the same key, the same partition, every time.
k1=$(printf 'a\nb\n' | r --json produce shop orders --key customer-42 | sed 's/.*"partition":\([0-9]*\).*/\1/' | sort -u)
[ "$(echo "$k1" | wc -l)" -eq 1 ] || fail "one key, one partition: $k1"
# The partitions table: partition, start, end, messages.
r topic describe shop orders | grep -Eq "^ +1 +0 +3 +3 " || fail "describe: $(r topic describe shop orders)"
# Consumer groups: created on first use, read from the assignment, committed after what was printed.
r group create shop orders billing --strategy round_robin --session-timeout-ms 3000 | grep -q "round_robin" ||
  fail "group create"
total=$(r --json topic describe shop orders | grep -o '"high_watermark":[0-9]*' | awk -F: '{s += $2} END {print s}')
[ "$(r consume shop orders --group billing --count 2 | wc -l)" -eq 2 ] || fail "group consume --count"
[ "$(r consume shop orders --group billing | wc -l)" -eq $((total - 2)) ] || fail "group consume resumes"
[ -z "$(r consume shop orders --group billing)" ] || fail "nothing left for the group"
r group describe shop orders billing | grep -q "stable, 0 members, .* lag 0;" || fail "group describe"
r --json group list shop orders | grep -q '"name":"billing"' || fail "group list"
r consume shop orders --group fresh --count 1 >/dev/null || fail "consume creates the group"
set +e
r consume shop orders --group billing --partition 1 2>/dev/null; rc=$?
set -e
[ $rc -eq 2 ] || fail "--group with --partition is bad usage (rc $rc)"
# rill top: one view of the shards and the busiest actors, from the monitoring listener.
# On a terminal (a pseudo-terminal from script(1)), the live view quits on q: it exits 0 instead of timing out.
if command -v script >/dev/null; then
  set +e
  (sleep 1; printf q; sleep 3) | timeout 8 script -qec "$rill top --http $haddr --interval-ms 200" /dev/null >/dev/null
  rc=$?
  set -e
  [ $rc -eq 0 ] || fail "rill top should quit on q, got $rc"
fi
view=$("$rill" top --http "$haddr" --once --interval-ms 200)
echo "$view" | grep -q "^SHARD" || fail "top shards: $view"
echo "$view" | grep -q "^partition " || fail "top actors: $view"
set +e
"$rill" top --http 127.0.0.1:1 --once 2>/dev/null; rc=$?
set -e
[ $rc -eq 3 ] || fail "top against nothing should exit 3, got $rc"
# Errors: exit 1 with the reason.
set +e
r stream create "bad name" 2>"$dir/err"; rc=$?
set -e
[ $rc -eq 1 ] && grep -q "invalid_name" "$dir/err" || fail "invalid name (rc $rc)"
set +e
r consume shop nope --partition 0 2>"$dir/err"; rc=$?
set -e
[ $rc -eq 1 ] && grep -q "topic 'nope' not found" "$dir/err" || fail "unknown topic (rc $rc)"
set +e
"$rill" --server 127.0.0.1:1 ping 2>"$dir/err"; rc=$?
set -e
[ $rc -eq 3 ] || fail "unreachable server should exit 3, got $rc"
grep -q "is rilld running" "$dir/err" || fail "a refused connection gives a hint: $(cat "$dir/err")"
set +e
"$rill" --server "$haddr" ping 2>"$dir/err"; rc=$?
set -e
[ $rc -eq 3 ] && grep -q "answered in HTTP" "$dir/err" || fail "the HTTP port named as such (rc $rc): $(cat "$dir/err")"
# Restart: everything is where it was.
kill -TERM "$pid"; wait "$pid"; pid=
start
[ "$(r consume shop orders --partition 1)" = "$(printf 'one\ntwo\nthree')" ] || fail "after restart"
[ "$(r offset get shop orders --partition 1 --consumer app)" = "0" ] || fail "offset after restart"
r group describe shop orders billing | grep -q "lag 0;" || fail "group offsets after restart"
r group delete shop orders billing | grep -q "deleted group billing" || fail "group delete"
set +e
r group describe shop orders billing 2>"$dir/err"; rc=$?
set -e
[ $rc -eq 1 ] && grep -q "group_not_found" "$dir/err" || fail "deleted group (rc $rc)"
r stream list | grep -Eq "^shop +0 +1$" || fail "stream list: $(r stream list)"
r --json stats | grep -q '"streams":1' || fail "stats"
r topic delete shop orders --yes | grep -q "deleted" || fail "topic delete"
r stream delete shop | grep -q "deleted" || fail "stream delete"
echo "rill CLI test passed"
