#!/usr/bin/env bash
# bench/storage.sh: the storage figures of docs/benchmarks.md, measured in one run against fio on the same disk.
#
#   bench/storage.sh [BUILD_DIR]            (default build dir: build)
#
# Environment: BENCH_DIR (scratch directory, default /tmp/rill-bench), RUNS (pairs per comparison, default 5),
# BATCHES (default 3000), RECOVERY_BYTES (default 1 GiB), ONLY=unsynced (comparison 2 alone).
#
# Every comparison runs rill and fio alternately RUNS times and reports the median of each and the median of the
# pairwise ratios (these machines are noisy: ratios measured side by side are what to quote, not absolute digits).
#   1. sync every batch: rill-bench storage --sync every-batch (one append in flight: one write + one fdatasync per
#      batch) against fio writing the same bytes per write with an fdatasync after each (--fdatasync=1).
#   2. no sync: rill-bench storage --sync none (final flush included) against fio's buffered sequential write
#      (--end_fsync=1, included in fio's runtime); with one append in flight and with 8 (pipelined producer), each
#      with blocking writes (pwritev on the writer's thread, rilld's default) and with io_uring writes (a kernel
#      worker thread per write). rill-bench copies each batch into the buffer it appends, timed (rilld's one copy).
#   3. preallocation: rill with 8 MiB of zeros written ahead against none, sync every batch.
#   4. recovery of a RECOVERY_BYTES partition of 128 MiB segments: fast path (sealed segments verified against their
#      index) against a full scan of every segment, page cache dropped before each open when the kernel allows it.
set -euo pipefail
build=${1:-build}
bench_dir=${BENCH_DIR:-/tmp/rill-bench}
runs=${RUNS:-5}
batches=${BATCHES:-3000}
recovery_bytes=${RECOVERY_BYTES:-1073741824}
record_size=1024
batch_records=100
rill_bench="$build/tools/rill-bench"
command -v fio >/dev/null || { echo "bench/storage.sh: fio is missing (scripts/bootstrap installs it)" >&2; exit 2; }
[ -x "$rill_bench" ] || { echo "bench/storage.sh: $rill_bench not built" >&2; exit 2; }
mkdir -p "$bench_dir"

# The exact bytes per write that rill-bench appends (one batch).
batch_bytes=$("$rill_bench" storage --dir "$bench_dir/probe" --record-size $record_size --batch-records $batch_records \
  --batches 1 --sync none --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["batch_bytes"])')
total_bytes=$((batch_bytes * batches))

rill_run() {  # sync inflight [preallocate bytes] [writes] -> MB/s
  "$rill_bench" storage --dir "$bench_dir/rill" --record-size $record_size --batch-records $batch_records \
    --batches "$batches" --sync "$1" --inflight "$2" --preallocate-bytes "${3:-0}" --writes "${4:-blocking}" --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["append_mb_per_s"])'
}
fio_run() {  # extra fio flags -> MB/s
  rm -f "$bench_dir/fio.dat"
  fio --name=w --filename="$bench_dir/fio.dat" --rw=write --bs="$batch_bytes" --size="$total_bytes" \
    --ioengine=psync --output-format=json "$@" 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["write"]["bw_bytes"] / 1e6)'
  rm -f "$bench_dir/fio.dat"
}
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }

summarize() {  # label; reads "a b" lines
  python3 -c '
import statistics, sys
label = sys.argv[1]
rows = [tuple(map(float, l.split())) for l in sys.stdin if l.strip()]
a = statistics.median(r[0] for r in rows); b = statistics.median(r[1] for r in rows)
ratio = statistics.median(r[0] / r[1] for r in rows)
lo = min(r[0] / r[1] for r in rows); hi = max(r[0] / r[1] for r in rows)
print(f"| {label} | {a:.0f} | {b:.0f} | {ratio:.2f} ({lo:.2f}-{hi:.2f}) |")
' "$1"
}

compare() {  # label, rill sync, rill inflight, rill writes, fio args...
  local label=$1 sync=$2 inflight=$3 writes=$4; shift 4
  local pairs=()
  for _ in $(seq "$runs"); do
    pairs+=("$(rill_run "$sync" "$inflight" 0 "$writes") $(fio_run "$@")")
  done
  printf '%s\n' "${pairs[@]}" | summarize "$label"
}

compare_preallocation() {  # label, inflight: rill with 8 MiB preallocation (A) against none (B)
  local pairs=()
  for _ in $(seq "$runs"); do
    pairs+=("$(rill_run every-batch "$2" 8388608) $(rill_run every-batch "$2" 0)")
  done
  printf '%s\n' "${pairs[@]}" | summarize "$1"
}

echo "batch: $batch_records records x $record_size B = $batch_bytes bytes; $batches batches ($total_bytes bytes); $runs pairs"
echo
echo "| comparison | rill MB/s (median) | fio MB/s (median) | rill/fio (median, min-max) |"
echo "|---|---|---|---|"
if [ "${ONLY:-}" != unsynced ]; then
  compare "sync every batch, 1 in flight vs fio --fdatasync=1" every-batch 1 blocking --fdatasync=1
fi
compare "no sync, 1 in flight, blocking writes vs fio buffered --end_fsync=1" none 1 blocking --end_fsync=1
compare "no sync, 1 in flight, io_uring writes vs fio buffered --end_fsync=1" none 1 ring --end_fsync=1
compare "no sync, 8 in flight, blocking writes vs fio buffered --end_fsync=1" none 8 blocking --end_fsync=1
compare "no sync, 8 in flight, io_uring writes vs fio buffered --end_fsync=1" none 8 ring --end_fsync=1
if [ "${ONLY:-}" = unsynced ]; then
  rm -rf "$bench_dir"
  exit 0
fi
compare "sync every batch, 8 in flight (group commit) vs fio --fdatasync=1" every-batch 8 blocking --fdatasync=1

echo
echo "| preallocation (sync every batch) | with 8 MiB MB/s | without MB/s | with/without |"
echo "|---|---|---|---|"
compare_preallocation "1 in flight" 1
compare_preallocation "8 in flight" 8

echo
"$rill_bench" produce-data --dir "$bench_dir/recovery" --bytes "$recovery_bytes" --segment-bytes $((128 * 1024 * 1024))
fast=()
full=()
for _ in $(seq 3); do
  drop_caches
  fast+=("$("$rill_bench" recovery --dir "$bench_dir/recovery" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["seconds"])')")
  drop_caches
  full+=("$("$rill_bench" recovery --dir "$bench_dir/recovery" --full-scan --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["seconds"])')")
done
python3 -c '
import statistics, sys
fast = [float(x) for x in sys.argv[1].split()]; full = [float(x) for x in sys.argv[2].split()]
f = statistics.median(fast); s = statistics.median(full)
print("| recovery | fast path s (median) | full scan s (median) | full/fast |")
print("|---|---|---|---|")
print(f"| {int(sys.argv[3]) / 2**30:.2f} GiB, 128 MiB segments | {f:.4f} | {s:.4f} | {s / f:.0f}x |")
' "${fast[*]}" "${full[*]}" "$recovery_bytes"
rm -rf "$bench_dir"
