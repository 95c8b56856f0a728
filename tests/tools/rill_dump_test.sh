#!/usr/bin/env bash
# rill-dump on a real partition written by rill-bench: --verify passes on intact data and, after a byte is flipped
# in a log or an index, exits 1 naming the file and the byte position of the problem.
set -euo pipefail
bench=$1
dump=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bench" produce-data --dir "$dir/p" --bytes 3000000 --segment-bytes 1048576 >/dev/null
out=$("$dump" --verify -q "$dir/p") || fail "verify of intact data failed: $out"
grep -q "verify: OK" <<<"$out" || fail "no OK line: $out"
listing=$("$dump" "$dir/p")
grep -q "batch @0 offsets 0..99 records 100" <<<"$listing" || fail "dump does not list the first batch"
grep -q "entry 0: relative offset 0 position 0" <<<"$listing" || fail "dump does not list index entries"

flip() {  # file, byte offset
  python3 - "$1" "$2" <<'PY'
import sys
path, at = sys.argv[1], int(sys.argv[2])
with open(path, "r+b") as f:
    f.seek(at); b = f.read(1); f.seek(at); f.write(bytes([b[0] ^ 0x10]))
PY
}

cp -r "$dir/p" "$dir/q"
log="$dir/p/00000000000000000000.log"
flip "$log" 5000
set +e
err=$("$dump" --verify -q "$dir/p" 2>&1 >/dev/null)
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "expected exit 1 after a flipped log byte, got $rc"
grep -q "00000000000000000000.log at byte " <<<"$err" || fail "the error does not name the file and byte: $err"

index="$dir/q/00000000000000000000.index"
flip "$index" 20
set +e
err=$("$dump" --verify -q "$dir/q" 2>&1 >/dev/null)
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "expected exit 1 after a flipped index byte, got $rc"
grep -q "00000000000000000000.index at byte " <<<"$err" || fail "the error does not name the index: $err"

set +e
"$dump" "$dir/does-not-exist" >/dev/null 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "expected exit 2 for a missing path, got $rc"
echo "rill-dump test passed"
