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

start() {  # [TCP_ADDRESS]: a restart on the port it had
  rm -f "$dir/data/runtime/current_config.toml"
  "$rilld" --data-dir "$dir/data" --tcp "${1:-127.0.0.1:0}" --http 127.0.0.1:0 --set runtime.cpu_allocation=2 --set runtime.pin_cores=false \
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
# --json: one object per view, with the same figures (and the RILL_HTTP variable instead of --http).
top_json=$(RILL_HTTP=$haddr "$rill" top --once --json --interval-ms 200)
echo "$top_json" | grep -q '"shards":\[{"actors":' || fail "top --json: $top_json"
echo "$top_json" | grep -q '"kind":"partition"' || fail "top --json actors: $top_json"
set +e
"$rill" --json top --http 127.0.0.1:1 --once 2>"$dir/err"; rc=$?
set -e
[ $rc -eq 3 ] && grep -q '"exit":3' "$dir/err" || fail "top --json against nothing: rc $rc, $(cat "$dir/err")"
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
# consume without --partition reads every partition; --count counts across them; a named consumer per partition.
r topic create shop multi --partitions 3 >/dev/null || fail "topic create multi"
for p in 0 1 2; do printf 'p%s-a\np%s-b\n' $p $p | r produce shop multi --partition $p >/dev/null; done
[ "$(r consume shop multi | sort | tr '\n' ' ')" = "p0-a p0-b p1-a p1-b p2-a p2-b " ] ||
  fail "consume of every partition: $(r consume shop multi 2>&1)"
[ "$(r consume shop multi --count 4 | wc -l)" -eq 4 ] || fail "--count across partitions"
[ "$(r consume shop multi --partition 2)" = "$(printf 'p2-a\np2-b')" ] || fail "--partition still reads one"
# Round robin: a busy partition has its turn (1000 records at most) and then the quiet one has its own.
r topic create shop busy --partitions 2 >/dev/null || fail "topic create busy"
seq 1500 | r produce shop busy --partition 0 2>/dev/null
echo quiet | r produce shop busy --partition 1 2>/dev/null
[ "$(r consume shop busy --count 1001 --format '%p\n' | grep -c '^1$')" -eq 1 ] || fail "the quiet partition starved"
[ "$(r consume shop multi --consumer allp --from next --count 4 | wc -l)" -eq 4 ] || fail "named consumer, 4"
[ "$(r consume shop multi --consumer allp --from next | wc -l)" -eq 2 ] || fail "named consumer resumes each partition"
for p in 0 1 2; do
  [ "$(r offset get shop multi --partition $p --consumer allp)" = "2" ] || fail "offset of partition $p stored"
done
# Start positions: end (only what comes after the start), ISO-8601 and relative times; bad values are usage errors.
[ -z "$(r consume shop multi --from end)" ] || fail "--from end reads nothing old"
[ "$(r consume shop multi --from last | wc -l)" -eq 3 ] || fail "--from last: the last of each partition"
[ "$(r consume shop multi --from timestamp:2000-01-01T00:00:00Z | wc -l)" -eq 6 ] || fail "ISO timestamp (Z)"
[ "$(r consume shop multi --from timestamp:2000-01-01T01:00:00.5+01:00 | wc -l)" -eq 6 ] || fail "ISO with offset"
[ -z "$(r consume shop multi --from timestamp:2999-01-01T00:00:00-05:30)" ] || fail "ISO timestamp in the future"
[ "$(r consume shop multi --since 1h | wc -l)" -eq 6 ] || fail "--since 1h"
[ "$(r consume shop multi --since 1h30m | wc -l)" -eq 6 ] || fail "--since 1h30m"
sleep 0.3
[ -z "$(r consume shop multi --since 100ms)" ] || fail "--since 100ms: nothing that recent"
for bad in "--since 5x" "--since h" "--from timestamp:2026-13-01T00:00:00Z" "--from timestamp:2026-12-02T08:00:00" \
  "--from offset:x" "--from nowhere" "--value-format octal" "--format %q" "--value-format raw"; do
  set +e
  # shellcheck disable=SC2086
  r --json consume shop multi $bad 2>"$dir/err" >/dev/null; rc=$?
  set -e
  flag=$(echo "$bad" | grep -o -- '--[a-z-]*' | tail -1)
  [ $rc -eq 2 ] && grep -q -- "$flag" "$dir/err" || fail "$bad: exit 2 naming $flag expected (rc $rc): $(cat "$dir/err")"
done
# Safe text: control bytes and invalid UTF-8 escaped, valid UTF-8 as is; raw, hex and base64 on request.
r topic create shop raw --partitions 1 >/dev/null || fail "topic create raw"
printf 'tab\there\\ \x01\xff \xc3\xa9\n' | r produce shop raw --partition 0 >/dev/null
[ "$(r consume shop raw)" = 'tab\there\\ \x01\xff é' ] || fail "escaped text: $(r consume shop raw)"
# Not UTF-8 (overlong, a surrogate, above U+10FFFF, cut short), DEL and a 4-byte character that is.
printf '\xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \x7f \xe2\x82 \xf0\x9f\x99\x82\n' | r produce shop raw --partition 0 >/dev/null
[ "$(r consume shop raw --from offset:1)" = '\xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \x7f \xe2\x82 🙂' ] ||
  fail "escaped invalid UTF-8: $(r consume shop raw --from offset:1)"
[ "$(r consume shop raw --count 1 --value-format raw | od -An -tx1 | tr -d ' \n')" = "74616209686572655c2001ff20c3a90a" ] ||
  fail "raw value"
[ "$(r consume shop raw --count 1 --value-format hex)" = "74616209686572655c2001ff20c3a9" ] || fail "hex value"
r --json consume shop raw --count 1 --value-format base64 | grep -q '"value":"dGFiCWhlcmVcIAH/IMOp"' || fail "JSON base64 value"
r --json consume shop raw --count 1 | grep -q '"value":{"base64":"dGFiCWhlcmVcIAH/IMOp"}' || fail "JSON default value"
# --format templates, in partition mode and with --group.
[ "$(r consume shop orders --partition 1 --count 1 --format '%p %o %k|%h|%s %S %K %g%%\n')" = "1 0 |source=cli|one 3 0 0%" ] ||
  fail "--format: $(r consume shop orders --partition 1 --count 1 --format '%p %o %k|%h|%s %S %K %g%%\n')"
times=$(r consume shop orders --partition 1 --count 1 --format '%T\t%t')
ms=${times%%$'\t'*}
iso=${times#*$'\t'}
[ "$iso" = "$(date -u -d "@$((ms / 1000))" +%Y-%m-%dT%H:%M:%S).$(printf %03d $((ms % 1000)))Z" ] || fail "%t: $times"
[ "$(r consume shop multi --group fmt --format '%p:%s\n' | sort | tr '\n' ' ')" = \
  "0:p0-a 0:p0-b 1:p1-a 1:p1-b 2:p2-a 2:p2-b " ] || fail "--format with --group"
# %g: the generation each message was read in (one member alone: one generation, never 0).
gens=$(r consume shop multi --group fmt-gen --format '%g\n' | sort -u)
if [ "$(echo "$gens" | wc -l)" -ne 1 ] || [ "$gens" -lt 1 ]; then fail "--format %g with --group: $gens"; fi
# --follow from the end: only new messages; SIGINT exits 0 and stores the named consumer's offset.
"$rill" --server "$addr" consume shop multi --from end --follow --consumer tail --format '%p:%s\n' >"$dir/tail.out" 2>"$dir/tail.err" &
fpid=$!
# It has connected (the stats call is the other connection), and so read the high watermarks just after.
for _ in $(seq 100); do
  [ "$(r --json stats | grep -o '"connections":[0-9]*' | cut -d: -f2)" -ge 2 ] && break
  sleep 0.1
done
sleep 0.5
printf 'fresh\n' | r produce shop multi --partition 2 >/dev/null
for _ in $(seq 100); do grep -q fresh "$dir/tail.out" && break; sleep 0.1; done
kill -INT $fpid
set +e
wait $fpid; rc=$?
set -e
[ $rc -eq 0 ] || fail "SIGINT during --follow should exit 0, got $rc: $(cat "$dir/tail.err")"
[ "$(cat "$dir/tail.out")" = "2:fresh" ] || fail "--from end --follow: $(cat "$dir/tail.out")"
[ "$(r offset get shop multi --partition 2 --consumer tail)" = "3" ] || fail "offset stored at SIGINT"
# --follow across a server restart (SIGKILL, down for longer than the client library's own retries, back on the
# same port): says so on stderr, reconnects, and every message comes exactly once, in order; with --group too.
r topic create shop live --partitions 2 >/dev/null || fail "topic create live"
printf 'l1\nl2\n' | r produce shop live --partition 0 >/dev/null
printf 'l3\n' | r produce shop live --partition 1 >/dev/null
"$rill" --server "$addr" consume shop live --follow --format '%p:%s\n' >"$dir/follow.out" 2>"$dir/follow.err" &
fpid=$!
"$rill" --server "$addr" consume shop live --group live --follow --format '%p:%s\n' >"$dir/gfollow.out" \
  2>"$dir/gfollow.err" &
gpid=$!
for f in follow gfollow; do
  for _ in $(seq 100); do [ "$(wc -l <"$dir/$f.out")" -ge 3 ] && break; sleep 0.1; done
done
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
pid=
sleep 10
start "$addr"
printf 'l4\nl5\n' | r produce shop live --partition 0 >/dev/null
printf 'l6\n' | r produce shop live --partition 1 >/dev/null
for f in follow gfollow; do
  for _ in $(seq 300); do [ "$(wc -l <"$dir/$f.out")" -ge 6 ] && break; sleep 0.1; done
done
sleep 0.5
kill -INT $fpid $gpid
for f in follow gfollow; do
  set +e
  wait "$([ $f = follow ] && echo $fpid || echo $gpid)"; rc=$?
  set -e
  [ $rc -eq 0 ] || fail "$f across a restart exited $rc: $(cat "$dir/$f.err")"
  [ "$(grep '^0:' "$dir/$f.out" | tr '\n' ' ')" = "0:l1 0:l2 0:l4 0:l5 " ] ||
    fail "$f: partition 0 across the restart: $(cat "$dir/$f.out")"
  [ "$(grep '^1:' "$dir/$f.out" | tr '\n' ' ')" = "1:l3 1:l6 " ] || fail "$f: partition 1: $(cat "$dir/$f.out")"
  [ "$(wc -l <"$dir/$f.out")" -eq 6 ] || fail "$f: six lines: $(cat "$dir/$f.out")"
  grep -q "^rill: lost the server (.*), reconnecting$" "$dir/$f.err" || fail "$f lost: $(cat "$dir/$f.err")"
  grep -q "^rill: reconnected$" "$dir/$f.err" || fail "$f reconnected: $(cat "$dir/$f.err")"
done
for t in multi busy raw live; do r topic delete shop $t --yes >/dev/null || fail "topic delete $t"; done
# Restart: everything is where it was.
kill -TERM "$pid"; wait "$pid"; pid=
start
[ "$(r consume shop orders --partition 1)" = "$(printf 'one\ntwo\nthree')" ] || fail "after restart"
[ "$(r offset get shop orders --partition 1 --consumer app)" = "0" ] || fail "offset after restart"
r group describe shop orders billing | grep -q "lag 0;" || fail "group offsets after restart"
r group delete shop orders billing | grep -q "deleted group billing" || fail "group delete"
# --json on group delete too: one object naming what was deleted; a second delete is a JSON error on stderr, exit 1.
r group create shop orders audit >/dev/null || fail "group create audit"
[ "$(r group delete shop orders audit --json)" = '{"deleted":"audit"}' ] || fail "group delete --json"
set +e
r group delete shop orders audit --json 2>"$dir/err" >/dev/null; rc=$?
set -e
[ $rc -eq 1 ] && grep -q '"error"' "$dir/err" && grep -q "group_not_found" "$dir/err" || fail "group delete --json again (rc $rc)"
set +e
r group describe shop orders billing 2>"$dir/err"; rc=$?
set -e
[ $rc -eq 1 ] && grep -q "group_not_found" "$dir/err" || fail "deleted group (rc $rc)"
r stream list | grep -Eq "^shop +0 +1$" || fail "stream list: $(r stream list)"
r --json stats | grep -q '"streams":1' || fail "stats"
r topic delete shop orders --yes | grep -q "deleted" || fail "topic delete"
r stream delete shop | grep -q "deleted" || fail "stream delete"
echo "rill CLI test passed"
