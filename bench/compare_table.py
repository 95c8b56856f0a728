#!/usr/bin/env python3
"""bench/compare_table.py RESULTS DURATION BATCH FETCH RUNS MACHINE VERSIONS: the markdown of bench/compare.

RESULTS is JSON lines: limits ({"limit": ...}) and load results (rill-bench --json, tagged with "class").
With several runs of a case, every figure is the median of its runs."""
import json
import statistics
import sys
from collections import defaultdict

results, duration, batch, fetch, runs, machine, versions = sys.argv[1:8]
limits = {}
floors = {}  # size -> rill-bench durable-floor's JSON
groups = defaultdict(list)
failures = []
for line in open(results):
    if not line.strip():
        continue
    r = json.loads(line)
    if "failure" in r:
        failures.append(r)
        continue
    if r.get("limit") == "durable_floor":
        floors[r["size"]] = r
        continue
    if "limit" in r:
        key = (r["limit"], r.get("size"))
        limits[key] = r["mb_per_s"]
        continue
    groups[(r["message_size"], r["producers"], r["class"], r["system"], r["mode"])].append(r)


def med(rows, role, field, sub=None):
    vals = [(row[role][sub][field] if sub else row[role][field]) for row in rows if role in row]
    return statistics.median(vals) if vals else None


def fmt_rate(v):
    return "-" if v is None else f"{v:,.0f}"


def fmt_mb(v):
    return "-" if v is None else f"{v:,.1f}"


def fmt_us(v):
    if v is None:
        return "-"
    return f"{v / 1000:.2f} ms" if v >= 1000 else f"{v:.0f} us"


def fmt_frac(v, limit):
    return "-" if v is None or not limit else f"{v / limit:.2f}"


def ratio(a, b):
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


loopback = limits.get(("loopback", None))
buffered = limits.get(("disk_buffered", None))
sizes = sorted({k[0] for k in groups})
counts = sorted({k[1] for k in groups})
systems = {"durable": ["rill", "redis"], "relaxed": ["rill", "nats", "redis"]}
setting = {
    ("rill", "durable"): "sync before ack (fdatasync, group commit)",
    ("redis", "durable"): "appendfsync always",
    ("rill", "relaxed"): "ack at write, background fdatasync (at most 1 s unsynced)",
    ("nats", "relaxed"): "JetStream default (fsync every 2 min)",
    ("redis", "relaxed"): "appendfsync everysec",
}

print("# rill beside NATS JetStream and Redis Streams\n")
print(f"Machine: {machine}. Versions: {versions}.\n")
print(f"Each run: {duration} s of producing (consume: the same fill, then reading it all back); batches of {batch} "
      f"messages with one batch in flight per producer (Redis: a pipeline of {batch} XADDs; NATS: {batch} async "
      f"publishes, then their acks); polls of {fetch}; one stream with as many partitions (NATS subjects, Redis "
      f"keys) as producers; {runs} run(s) per figure (medians). Latency: produce, per batch, from when it was due to "
      f"its last ack. Throughput counts message bytes (MB = 10^6 B).\n")
print("Limits measured in the same run: ", end="")
parts = []
for s in sizes:
    v = limits.get(("disk_sync", s))
    if v:
        parts.append(f"disk write + fdatasync of {s * int(batch):,} B writes (fio) {v:,.0f} MB/s")
if buffered:
    parts.append(f"buffered sequential write (fio, 1 MiB, fsync at end) {buffered:,.0f} MB/s")
if loopback:
    parts.append(f"loopback TCP (iperf3, one stream) {loopback:,.0f} MB/s")
print("; ".join(parts) + ".\n")
print("\"of limit\": produce MB/s over the disk's figure for the durability (durable: write + fdatasync; relaxed: "
      "buffered write); consume MB/s over loopback.\n")

for size in sizes:
    for n in counts:
        print(f"## {size} B messages, {n} producer(s), {n} consumer(s)\n")
        print("| durability | system | setting | produce msg/s | MB/s | of limit | p50 | p99 | p99.9 "
              "| consume msg/s | MB/s | of loopback |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        figures = {}
        syncs = {}
        for cls, names in systems.items():
            disk = limits.get(("disk_sync", size)) if cls == "durable" else buffered
            for name in names:
                prod = groups.get((size, n, cls, name, "produce"), [])
                cons = groups.get((size, n, cls, name, "consume"), [])
                f = {
                    "p": med(prod, "produce", "msgs_per_s"),
                    "pmb": med(prod, "produce", "mb_per_s"),
                    "p50": med(prod, "produce", "p50", "latency_us"),
                    "p99": med(prod, "produce", "p99", "latency_us"),
                    "p999": med(prod, "produce", "p99_9", "latency_us"),
                    "c": med(cons, "consume", "msgs_per_s"),
                    "cmb": med(cons, "consume", "mb_per_s"),
                }
                logs = [row["log"] for row in prod if row.get("log", {}).get("fdatasyncs")]
                if logs:
                    syncs[(cls, name)] = (
                        statistics.median(l["records"] / l["fdatasyncs"] for l in logs),
                        statistics.median(l["fdatasyncs"] / l["seconds"] for l in logs if l["seconds"] > 0)
                        if any(l["seconds"] > 0 for l in logs) else None)
                figures[(cls, name)] = f
                print(f"| {cls} | {name} | {setting[(name, cls)]} | {fmt_rate(f['p'])} | {fmt_mb(f['pmb'])} "
                      f"| {fmt_frac(f['pmb'], disk)} | {fmt_us(f['p50'])} | {fmt_us(f['p99'])} "
                      f"| {fmt_us(f['p999'])} | {fmt_rate(f['c'])} | {fmt_mb(f['cmb'])} "
                      f"| {fmt_frac(f['cmb'], loopback)} |")
        print()
        for (cls, name), (per_sync, per_s) in sorted(syncs.items()):
            rate = "-" if per_s is None else f"{per_s:,.0f}"
            print(f"- {name} {cls} produce: {per_sync:,.0f} records per fdatasync, {rate} fdatasyncs/s "
                  f"(its /metrics, sampled every 0.25 s)")
        if syncs:
            print()
        fl = floors.get(size)
        rill_d = figures[("durable", "rill")]["p"]
        redis_d = figures[("durable", "redis")]["p"]
        if fl and rill_d and redis_d:
            b = int(batch)
            print(f"- Durable floor for one producer, no broker (rill-bench durable-floor: a loopback round trip "
                  f"carrying {size * b:,} B, appended to a fresh file and fdatasynced before the reply): "
                  f"{fl['floor_per_s']:,.0f} batches/s ({fl['floor_prezeroed_per_s']:,.0f} over a pre-zeroed file; "
                  f"append + fdatasync alone {fl['append_per_s']:,.0f}/s, the round trip alone "
                  f"{fl['loopback_per_s']:,.0f}/s). Per producer, rill acknowledged {rill_d / b / n:,.0f} batches/s "
                  f"({rill_d / b / n / fl['floor_per_s']:.2f} of the floor); 5x Redis needs {5 * redis_d / b / n:,.0f} "
                  f"({5 * redis_d / b / n / fl['floor_per_s']:.2f} of the floor).")
            print()
        print("| ratio, matching durability | produce msg/s | p99 (peer / rill: above 1, rill is faster) "
              "| consume msg/s |")
        print("|---|---|---|---|")
        for cls, names in systems.items():
            r = figures[(cls, "rill")]
            for peer in names[1:]:
                p = figures[(cls, peer)]
                print(f"| rill / {peer}, {cls} | {ratio(r['p'], p['p'])} | {ratio(p['p99'], r['p99'])} "
                      f"| {ratio(r['c'], p['c'])} |")
        print()

if failures:
    print("## Failed runs (each tried once more)\n")
    for f in failures:
        err = " ".join(f["error"].split())
        print(f"- {f['failure']}: {err}")
    print()
