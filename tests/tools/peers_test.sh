#!/usr/bin/env bash
# The peer clients of bench/compare against real servers started here: nats-bench against nats-server (JetStream)
# and redis-bench against redis-server, each on a loopback port of its own; every message produced is consumed; the
# durability each peer can and cannot offer is refused by name.
set -euo pipefail
nats_bench=$1
redis_bench=$2
dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; cat "$dir"/*.log >&2 || true; exit 1; }
for cmd in nats-server redis-server redis-cli python3; do
  command -v "$cmd" >/dev/null || fail "$cmd is missing: scripts/bootstrap installs it"
done
# Below the kernel's ephemeral range, where no client connection takes it as its source port meanwhile.
free_port() {
  python3 -c '
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
while True:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", random.randint(10000, max(low - 1, 11000))))
        print(s.getsockname()[1])
        break
    except OSError:
        s.close()'
}
field() {
  python3 -c 'import json,sys
j=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
for k in sys.argv[2].split("."): j=j[k]
print(j)' "$1" "$2"
}

nats_port=$(free_port)
nats-server -js -sd "$dir/nats" -a 127.0.0.1 -p "$nats_port" >"$dir/nats.log" 2>&1 &
pids+=($!)
redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$dir" --appendonly yes --appendfsync always --save "" \
  >"$dir/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do
  redis-cli -p "$redis_port" ping >/dev/null 2>&1 && grep -q "Server is ready" "$dir/nats.log" && break
  sleep 0.05
done

# NATS JetStream, relaxed durability only.
"$nats_bench" produce-consume --server "127.0.0.1:$nats_port" --producers 2 --consumers 2 --partitions 2 \
  --message-size 128 --batch 20 --messages 2000 --keys 10 --json >"$dir/n.json" || fail "nats produce-consume"
[ "$(field "$dir/n.json" end-to-end.messages)" = 2000 ] || fail "nats: end-to-end count"
"$nats_bench" consume --server "127.0.0.1:$nats_port" --streams 2 --consumers 1 --messages 1000 --json \
  >"$dir/n2.json" || fail "nats consume"
[ "$(field "$dir/n2.json" consume.messages)" = 1000 ] || fail "nats: consume count"
if "$nats_bench" produce --server "127.0.0.1:$nats_port" --sync before-ack --messages 10 2>"$dir/err"; then
  fail "nats accepted --sync before-ack"
fi
grep -q "cannot fsync before acknowledging" "$dir/err" || fail "nats refusal: $(cat "$dir/err")"

# Redis Streams at appendfsync always, then everysec; a mismatch is refused.
"$redis_bench" produce-consume --server "127.0.0.1:$redis_port" --sync before-ack --producers 2 --consumers 2 \
  --partitions 2 --message-size 128 --batch 20 --messages 2000 --json >"$dir/r.json" || fail "redis produce-consume"
[ "$(field "$dir/r.json" end-to-end.messages)" = 2000 ] || fail "redis: end-to-end count"
if "$redis_bench" produce --server "127.0.0.1:$redis_port" --sync none --messages 10 2>"$dir/err"; then
  fail "redis accepted --sync none at appendfsync always"
fi
grep -q "appendfsync everysec" "$dir/err" || fail "redis refusal: $(cat "$dir/err")"
redis-cli -p "$redis_port" config set appendfsync everysec >/dev/null
"$redis_bench" consume --server "127.0.0.1:$redis_port" --sync none --partitions 3 --consumers 2 --messages 1500 \
  --json >"$dir/r2.json" || fail "redis consume"
[ "$(field "$dir/r2.json" consume.messages)" = 1500 ] || fail "redis: consume count"
[ "$(redis-cli -p "$redis_port" dbsize)" = 0 ] || fail "redis: the keys were not removed"
echo "peers_test: ok"
