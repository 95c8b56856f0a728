#!/usr/bin/env python3
"""bench/metrics_watch.py URL: samples rilld's /metrics every 0.25 s until SIGTERM, then prints one JSON object with
what the partitions that existed meanwhile did: the records they hold and the fdatasyncs of their logs.

A benchmark run creates its streams and deletes them at its end, so their series vanish: the figures are those of
the last sample that had them (at most 0.25 s before the deletion). Per partition series (stream, topic,
partition), the largest value seen is kept, so a series that disappears still counts.
  records     sum of rill_partition_log_end_offset (every record the run's partitions hold)
  fdatasyncs  sum of rill_partition_sync_seconds_count (relaxed policies' syncs, and any sync of the whole log)
              plus, under sync_before_ack, rill_partition_write_seconds_count (each group's own fdatasync)
  seconds     time from the first sample with a series to the last one
Usage: metrics_watch.py URL durable|relaxed"""
import json
import re
import signal
import sys
import time
import urllib.request

url, durability = sys.argv[1], sys.argv[2]
line_re = re.compile(r'^(rill_partition_(?:log_end_offset|sync_seconds_count|write_seconds_count))\{([^}]*)\} (\S+)$')
peak = {}  # (name, labels) -> largest value
first = last = None
stop = False


def on_term(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)
while not stop:
    try:
        text = urllib.request.urlopen(url, timeout=2).read().decode()
    except OSError:
        time.sleep(0.25)
        continue
    now = time.monotonic()
    seen = False
    for line in text.splitlines():
        m = line_re.match(line)
        if m:
            key = (m.group(1), m.group(2))
            peak[key] = max(peak.get(key, 0.0), float(m.group(3)))
            seen = True
    if seen:
        first = now if first is None else first
        last = now
    time.sleep(0.25)


def total(name):
    return sum(v for (n, _), v in peak.items() if n == name)


syncs = total("rill_partition_sync_seconds_count")
if durability == "durable":
    syncs += total("rill_partition_write_seconds_count")
seconds = (last - first) if first is not None else 0.0
print(json.dumps({"records": total("rill_partition_log_end_offset"), "fdatasyncs": syncs, "seconds": seconds}))
