#!/usr/bin/env bash
# The /ui dashboard in headless Chromium against the real rilld: after a load of 3,000 messages over three
# partitions the rendered page (its DOM after the script ran) shows the shards, the partitions' high watermarks
# adding up to 3,000 and a sample counter that moved; a screenshot is taken and must be a real PNG of a drawn page.
set -euo pipefail
rilld=$1
bench=$2
chromium=$3
dir=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && { kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; cat "$dir/rilld.log" >&2 || true; exit 1; }
. "$(dirname "$0")/rilld.sh"
start_rilld "$dir" || fail "rilld did not start"
"$bench" produce --server "$addr" --producers 3 --partitions 3 --messages 3000 --batch 50 --keep --json >/dev/null ||
  fail "produce"
browse() {
  timeout 60 "$chromium" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
    --user-data-dir="$dir/profile" --window-size=1200,900 --virtual-time-budget=5000 "$@" "http://$haddr/ui" \
    2>>"$dir/chromium.log"
}
browse --dump-dom >"$dir/dom.html" || fail "chromium --dump-dom: $(tail -5 "$dir/chromium.log")"
python3 - "$dir/dom.html" <<'PY' || fail "the rendered page"
import re, sys
dom = open(sys.argv[1]).read()
status = re.search(r'<div id="status">([^<]*)</div>', dom)
assert status, "no status line"
assert "2 shards" in status.group(1) and "3 partitions" in status.group(1), status.group(1)
samples = int(re.search(r"sample (\d+)", status.group(1)).group(1))
assert samples >= 2, f"the page sampled {samples} times"
table = dom[dom.index('<table id="partitions">'):]
rows = re.findall(r'<td class="l">(\d+/\d+/\d+)</td><td>(\d+)</td>', table)
assert len(rows) == 3, rows
total = sum(int(hw) for _, hw in rows)
assert total == 3000, f"high watermarks add up to {total}"
shards = dom[dom.index('<table id="shards">'):dom.index('<table id="actors">')]
assert len(re.findall(r'<span class="bar"', shards)) == 2, "shard load bars"
assert dom.count("<polyline") >= 3, "charts"
print(f"dashboard in chromium: {samples} samples, partitions {rows}")
PY
browse --screenshot="$dir/ui.png" >/dev/null || fail "chromium --screenshot"
python3 - "$dir/ui.png" <<'PY' || fail "the screenshot"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
width, height = struct.unpack(">II", data[16:24])
assert (width, height) == (1200, 900), (width, height)
# Decode the image rows and count distinct pixel colours: a blank or failed page has one or two.
pos, idat = 8, b""
while pos < len(data):
    length, kind = struct.unpack(">I4s", data[pos:pos + 8])
    if kind == b"IDAT":
        idat += data[pos + 8:pos + 8 + length]
    pos += 12 + length
raw = zlib.decompress(idat)
bpp = (len(raw) // height - 1) // width
colours = set()
stride = width * bpp + 1
for y in range(0, height, 7):
    row = raw[y * stride + 1:(y + 1) * stride]  # filtered bytes: enough to tell a drawn page from an empty one
    colours.update(row[i:i + bpp] for i in range(0, len(row), bpp * 5))
assert len(colours) > 20, f"only {len(colours)} colours: an empty page?"
print(f"screenshot: {width}x{height}, {len(colours)} colours sampled")
PY
echo "dashboard_browser_test: ok"
