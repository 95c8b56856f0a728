#!/usr/bin/env bash
# The /ui dashboard against the real rilld: its page's script, run in Node with a minimal DOM, fills its tables with
# live numbers that match a load of a known size (tests/integration/dashboard_test.mjs).
set -euo pipefail
rilld=$1
bench=$2
node=$3
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && { kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; cat "$dir/rilld.log" >&2 || true; exit 1; }
"$rilld" --data-dir "$dir/data" --tcp 127.0.0.1:0 --http 127.0.0.1:0 --set runtime.cpu_allocation=2 \
  --set runtime.pin_cores=false >>"$dir/rilld.log" 2>&1 &
pid=$!
for _ in $(seq 300); do
  [ -f "$dir/data/runtime/current_config.toml" ] && break
  sleep 0.05
done
addr=$(sed -n "s/^tcp_address = ['\"]\(.*\)['\"]$/\1/p" "$dir/data/runtime/current_config.toml")
haddr=$(sed -n "s/^http_address = ['\"]\(.*\)['\"]$/\1/p" "$dir/data/runtime/current_config.toml")
[ -n "$addr" ] && [ -n "$haddr" ] || fail "rilld did not start"
"$bench" produce --server "$addr" --producers 2 --partitions 3 --messages 3000 --batch 50 --keep --json >/dev/null ||
  fail "produce"
"$node" "$here/dashboard_test.mjs" "http://$haddr" 3000 || fail "dashboard"
echo "dashboard_test: ok"
