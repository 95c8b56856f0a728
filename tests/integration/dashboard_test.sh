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
. "$(dirname "$0")/rilld.sh"
start_rilld "$dir" || fail "rilld did not start"
"$bench" produce --server "$addr" --producers 2 --partitions 3 --messages 3000 --batch 50 --keep --json >/dev/null ||
  fail "produce"
"$node" "$here/dashboard_test.mjs" "http://$haddr" 3000 || fail "dashboard"
echo "dashboard_test: ok"
