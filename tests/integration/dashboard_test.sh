#!/usr/bin/env bash
# The /ui dashboard against the real rilld: its page's script, run in Node with a minimal DOM, fills its tables with
# live numbers that match a load of a known size (tests/integration/dashboard_load.sh, dashboard_test.mjs): topics by
# name, the group's lag, the totals. And `rill top` names partitions by stream and topic name.
set -euo pipefail
rilld=$1
bench=$2
node=$3
rill=$4
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && { kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; cat "$dir/rilld.log" >&2 || true; exit 1; }
. "$here/rilld.sh"
. "$here/dashboard_load.sh"
start_rilld "$dir" || fail "rilld did not start"
dashboard_load
"$node" "$here/dashboard_test.mjs" "http://$haddr" 3000 shop/orders billing 2000 || fail "dashboard"
view=$("$rill" top --http "$haddr" --once --interval-ms 200 --rows 100) || fail "rill top"
echo "$view" | grep -q "^partition  *shop/orders/0 " || fail "rill top by name: $view"
echo "$view" | grep -q "^partition  *rill-bench-0/bench/2 " || fail "rill top by name: $view"
echo "dashboard_test: ok"
