#!/usr/bin/env bash
# rill-bench's load modes against the real rilld: produce, consume and produce-consume with their JSON and CSV
# output; keyed, round-robin, zstd and paced runs; streams removed afterwards unless --keep; bad options refused
# with the option named; one producer spreads over every partition; the progress line shows only what the mode
# measures; durable-floor measures its four figures and cleans up.
set -euo pipefail
rilld=$1
bench=$2
rill=$3
dir=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && { kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; cat "$dir/rilld.log" >&2 || true; exit 1; }

"$rilld" --data-dir "$dir/data" --tcp 127.0.0.1:0 --http 127.0.0.1:0 --set runtime.cpu_allocation=2 --set runtime.pin_cores=false \
  >>"$dir/rilld.log" 2>&1 &
pid=$!
addr=
for _ in $(seq 300); do
  if [ -f "$dir/data/runtime/current_config.toml" ]; then
    addr=$(sed -n "s/^tcp_address = ['\"]\(.*\)['\"]$/\1/p" "$dir/data/runtime/current_config.toml")
    [ -n "$addr" ] && break
  fi
  sleep 0.05
done
[ -n "$addr" ] || fail "rilld did not start"

# A JSON field of the last line of a file: field FILE PATH (dotted).
field() {
  python3 -c 'import json,sys
j=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
for k in sys.argv[2].split("."): j=j[k]
print(j)' "$1" "$2"
}

b() { "$bench" "$1" --server "$addr" "${@:2}"; }

# produce: a fixed count, so the figures are exact.
b produce --producers 2 --partitions 2 --message-size 100 --batch 50 --messages 2000 --json >"$dir/p.json" ||
  fail "produce"
[ "$(field "$dir/p.json" produce.messages)" = 2000 ] || fail "produce counted $(field "$dir/p.json" produce.messages)"
[ "$(field "$dir/p.json" produce.bytes)" = 200000 ] || fail "produce bytes"
[ "$(field "$dir/p.json" produce.latency_us.count)" = 40 ] || fail "one latency per batch"
[ "$(field "$dir/p.json" mode)" = produce ] || fail "mode"
[ "$("$rill" --server "$addr" stream list | grep -c rill-bench || true)" = 0 ] || fail "the stream was not removed"

# consume: everything produced is read back, exactly once.
b consume --producers 2 --consumers 2 --partitions 2 --message-size 64 --batch 20 --messages 3000 --fetch 100 \
  --output "$dir/c.csv" --json >"$dir/c.json" || fail "consume"
[ "$(field "$dir/c.json" consume.messages)" = 3000 ] || fail "consume read $(field "$dir/c.json" consume.messages)"
head -1 "$dir/c.csv" | grep -q "^second,role,messages,msgs_per_s,mb_per_s,p50_us" || fail "csv header"
grep -q ",consume," "$dir/c.csv" || fail "csv consume rows"
grep -q ",produce," "$dir/c.csv" || fail "csv produce rows"

# consume as a consumer group: the members share the partitions among themselves (3 members, 2 streams x 2).
b consume --consumers 3 --streams 2 --partitions 2 --message-size 64 --batch 20 --messages 3000 --fetch 100 \
  --group bench --name-prefix grp --json >"$dir/g.json" || fail "consume --group"
[ "$(field "$dir/g.json" consume.messages)" = 3000 ] || fail "group consume read $(field "$dir/g.json" consume.messages)"

# produce-consume at a paced rate: end-to-end latency for every message after the warm-up.
b produce-consume --producers 1 --consumers 1 --duration 1 --warmup 0.5 --rate 2000 --batch 10 --json \
  >"$dir/e.json" || fail "produce-consume"
produced=$(field "$dir/e.json" produce.messages)
[ "$produced" -ge 1500 ] && [ "$produced" -le 2100 ] || fail "paced at 2000 msg/s for 1 s: $produced"
[ "$(field "$dir/e.json" end-to-end.messages)" = "$produced" ] || fail "end-to-end count"
[ "$(field "$dir/e.json" end-to-end.latency_us.count)" = "$produced" ] || fail "one latency per message"

# Keys, round robin, zstd, sync none, several streams; --keep leaves the streams.
b produce-consume --producers 2 --consumers 3 --streams 2 --partitions 3 --partitioning key --keys 50 \
  --key-distribution zipf --compression zstd --messages 3000 --batch 30 --json >"$dir/k.json" || fail "keyed zstd"
[ "$(field "$dir/k.json" end-to-end.messages)" = 3000 ] || fail "keyed run lost messages"
# full STREAM: how many partitions of STREAM/bench hold offsets [0, 300).
full() {
  "$rill" --server "$addr" --json topic describe "$1" bench | grep -o '"high_watermark":300,"id":[0-9]*,"log_end":300,"log_start":0' | wc -l
}
b produce --partitions 3 --partitioning round-robin --sync none --messages 900 --batch 30 --keep \
  --name-prefix kept --json >"$dir/r.json" || fail "round robin"
# (With sync none the messages become visible at the next periodic fdatasync, within a second.)
for _ in $(seq 50); do
  [ "$(full kept-0)" = 3 ] && break
  sleep 0.1
done
[ "$(full kept-0)" = 3 ] ||
  fail "round robin spreads batches: $("$rill" --server "$addr" topic describe kept-0 bench)"
# The default partitioning with fewer producers than partitions: one producer writes all three, batch by batch.
b produce --producers 1 --partitions 3 --messages 900 --batch 30 --keep --name-prefix spread --json \
  >"$dir/f.json" || fail "one producer, three partitions"
[ "$(full spread-0)" = 3 ] ||
  fail "one producer spreads over every partition: $("$rill" --server "$addr" topic describe spread-0 bench)"
# The progress line (on a terminal only) shows what the mode measures: no consume figures in produce mode.
if command -v script >/dev/null 2>&1; then
  script -qec "$bench produce --server $addr --duration 1.5 --batch 10 --rate 2000 --name-prefix tty" /dev/null \
    >"$dir/tty.out" 2>&1 || fail "produce on a terminal: $(cat "$dir/tty.out")"
  grep -q "produce .* msg/s" "$dir/tty.out" || fail "no progress line: $(cat "$dir/tty.out")"
  ! grep -q "consume  *[0-9,]* msg/s" "$dir/tty.out" || fail "produce mode shows consume figures: $(cat "$dir/tty.out")"
fi
# A kept stream is not overwritten: a second run with the same prefix is refused by name.
if b produce --messages 10 --name-prefix kept 2>"$dir/err"; then fail "reused a kept stream"; fi
grep -q "create stream kept-0" "$dir/err" || fail "refusal names the stream: $(cat "$dir/err")"

# Bad options: refused, naming the option.
if b consume --partitions 2 --consumers 3 --messages 10 2>"$dir/err"; then fail "more consumers than units"; fi
grep -q -- "--consumers (3)" "$dir/err" || fail "consumers error: $(cat "$dir/err")"
if b produce --batch 0 --messages 10 2>"$dir/err"; then fail "batch 0"; fi
grep -q -- "--batch" "$dir/err" || fail "batch error: $(cat "$dir/err")"
if b produce --partitioning key --messages 10 2>"$dir/err"; then fail "key partitioning without keys"; fi
grep -q -- "--keys" "$dir/err" || fail "keys error: $(cat "$dir/err")"
if b produce-consume --message-size 4 --messages 10 2>"$dir/err"; then fail "too small for timestamps"; fi
grep -q -- "--message-size must be at least 8" "$dir/err" || fail "message size error: $(cat "$dir/err")"

# durable-floor (no server): every figure measured and positive, the scratch file gone, a bad size refused by name.
"$bench" durable-floor --dir "$dir/floor" --bytes 4096 --duration 0.2 --json >"$dir/floor.json" ||
  fail "durable-floor failed"
python3 - "$dir/floor.json" <<'PY' || fail "durable-floor JSON: $(cat "$dir/floor.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["bytes"] == 4096, j
for k in ("loopback_per_s", "append_per_s", "floor_per_s", "floor_prezeroed_per_s"):
    assert j[k] > 0, (k, j)
# The floor adds a round trip to each append + fdatasync: never faster than the round trip alone.
assert j["floor_per_s"] <= j["loopback_per_s"], j
PY
[ -z "$(ls -A "$dir/floor")" ] || fail "durable-floor left files: $(ls "$dir/floor")"
if "$bench" durable-floor --dir "$dir/floor" --bytes 0 2>"$dir/err"; then fail "durable-floor --bytes 0"; fi
grep -q -- "--bytes" "$dir/err" || fail "durable-floor bytes error: $(cat "$dir/err")"
echo "load_test: ok"
