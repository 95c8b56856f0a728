#!/usr/bin/env bash
# The /ui dashboard in headless Chromium against the real rilld, after a known load (dashboard_load.sh: topic
# shop/orders with 3,000 messages and a group "billing" 2,000 behind, plus rill-bench's 3,000 over three
# partitions): the rendered page (its DOM after the script ran) shows the totals, the topic by name with the group's
# lag, uPlot's charts (embedded in rilld: the page loads nothing from elsewhere), and a tab away the shards and the
# partitions by name; a 1280x800 screenshot is taken and must be a real PNG of a drawn page. With
# DASHBOARD_SCREENSHOT=FILE the screenshot is kept there.
set -euo pipefail
rilld=$1
bench=$2
chromium=$3
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
browse() {
  timeout 60 "$chromium" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
    --user-data-dir="$dir/profile" --window-size=1280,800 --hide-scrollbars --virtual-time-budget=5000 "$@" \
    "http://$haddr/ui" 2>>"$dir/chromium.log"
}
browse --dump-dom >"$dir/dom.html" || fail "chromium --dump-dom: $(tail -5 "$dir/chromium.log")"
python3 - "$dir/dom.html" <<'PY' || fail "the rendered page"
import re, sys
dom = open(sys.argv[1]).read()
status = re.search(r'<div id="status">([^<]*)</div>', dom)
assert status, "no status line"
assert "2 shards" in status.group(1) and "6 partitions" in status.group(1), status.group(1)
samples = int(re.search(r"sample (\d+)", status.group(1)).group(1))
assert samples >= 2, f"the page sampled {samples} times"
# Totals.
cards = dom[dom.index('<div id="totals">'):dom.index('<div class="charts">')]
totals = dict((k, v) for v, k in re.findall(r'<div class="v">([^<]*)</div><div class="k">([^<]*)</div>', cards))
for key, want in {"streams": "2", "topics": "2", "partitions": "6", "messages": "6,000", "consumer groups": "1"}.items():
    assert totals.get(key) == want, f"total {key}: {totals.get(key)!r}, expected {want}"
for key in ("bytes", "msg/s in", "msg/s out", "connections"):
    assert key in totals, f"no total {key}"
# The topic by name, with its group's lag.
row = re.search(r'<tr data-topic="shop/orders">(.*?)</tr>', dom)
assert row, "no row of shop/orders"
assert '<span class="name topic">orders</span>' in row.group(1), row.group(1)
group = re.search(r'data-group="billing">(.*?)</span></span>', row.group(1))
assert group, f"no group billing in {row.group(1)}"
assert group.group(1).endswith('data-lag="2000">2,000'), group.group(1)
assert re.search(r'<tr data-topic="rill-bench-0/bench">', dom), "the bench topic"
# Charts drawn by uPlot (canvas), its legend naming the series.
assert dom.count('class="uplot') >= 2, "two uPlot charts"
assert dom.count("<canvas") >= 2, "chart canvases"
assert ">p99<" in dom and ">out<" in dom, "chart legends"
# A tab away: shards with load bars, partitions by name adding up.
runtime = dom[dom.index('<section id="runtime"'):]
assert len(re.findall(r'<span class="bar"', runtime[runtime.index('<table id="shards">'):runtime.index('<table id="actors">')])) == 2
parts = re.findall(r'<td class="l">([\w.-]+/[\w.-]+/\d+)</td><td>(\d+)</td>', runtime[runtime.index('<table id="partitions">'):])
assert len(parts) == 6, parts
assert sum(int(hw) for _, hw in parts) == 6000, parts
assert ("shop/orders/0", "3000") in parts, parts
assert re.search(r'<button id="tab-runtime"[^>]*onclick="show\(\'runtime\'\)"', dom), "the actors & shards tab"
print(f"dashboard in chromium: {samples} samples, totals {totals}, shop/orders lag 2,000")
PY
# The screenshot under a live load (produced and consumed while the page samples), so the charts have a shape.
"$bench" produce-consume --server "$addr" --producers 1 --consumers 1 --partitions 2 --rate 3000 --batch 20 \
  --duration 12 --name-prefix live >/dev/null 2>&1 &
live=$!
sleep 2
browse --screenshot="$dir/ui.png" >/dev/null || fail "chromium --screenshot"
wait "$live" || fail "the live load"
python3 - "$dir/ui.png" <<'PY' || fail "the screenshot"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
width, height = struct.unpack(">II", data[16:24])
assert (width, height) == (1280, 800), (width, height)
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
[ -z "${DASHBOARD_SCREENSHOT:-}" ] || cp "$dir/ui.png" "$DASHBOARD_SCREENSHOT"
echo "dashboard_browser_test: ok"
