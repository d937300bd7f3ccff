#!/usr/bin/env python3
"""Reader benchmark (docs/perf/reader.md). One run measures, on the same synthetic trace:

* index time per GB compressed: member hop (our format) and inflate pass (plain gzip);
* read + parse into columns, events/s on one core (load_batch over all checkpoints);
* a plain Python baseline (gzip + json.loads into a DataFrame) on the first --baseline-events
  lines of the same file, scaled per event; the ratio of the two;
* peak RSS growth per event held.

Usage: python benchmarks/bench_reader.py [--events 2000000] [--out /tmp/dft-bench]
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_traces  # noqa: E402

from dfanalyzer import reader as R  # noqa: E402


def rss_mb():
    with open("/proc/self/status") as f:
        for ln in f:
            if ln.startswith("VmRSS"):
                return int(ln.split()[1]) / 1024
    return 0.0


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--baseline-events", type=int, default=100_000)
    ap.add_argument("--out", default="/tmp/dft-bench")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    mem = os.path.join(a.out, "member")
    gz = os.path.join(a.out, "gzip")
    t = time.time()
    pm = gen_traces.generate(mem, a.events, 1, "member")[0]
    pg = gen_traces.generate(gz, a.events, 1, "gzip")[0]
    print("generated %d events x2 in %.1f s" % (a.events, time.time() - t))
    res = {}
    for label, p in (("member", pm), ("inflate", pg)):
        for ext in (".zindex",):
            if os.path.exists(p + ext):
                os.unlink(p + ext)
        t = time.perf_counter()
        idx = R.build_index(p, force=True)
        dt = time.perf_counter() - t
        size = os.path.getsize(p)
        res[label] = (dt, size, idx)
        print("index %-8s %8.1f MB compressed  %7.1f ms  -> %8.2f ms per 100 MB, %6.2f s per GB, %d checkpoints"
              % (label, size / 1e6, dt * 1e3, dt * 1e3 / (size / 1e8), dt / (size / 1e9), len(idx["checkpoints"])))
    # read + parse (single thread), whole file in batches of 16 checkpoints
    idx = res["member"][2]
    n = len(idx["checkpoints"])
    rss0 = rss_mb()
    t = time.perf_counter()
    frames = []
    events = 0
    for i in range(0, n, 16):
        b = R.load_batch(pm, i, min(n - 1, i + 15))
        events += len(b.events)
        frames.append(b.events)
    dt_parse = time.perf_counter() - t
    rss1 = rss_mb()
    ours = events / dt_parse
    print("read+parse member : %d events in %.2f s = %.2f M events/s (1 core)" % (events, dt_parse, ours / 1e6))
    print("memory held: %.1f MB RSS for %d events = %.0f bytes/event (peak RSS %.0f MB)"
          % (rss1 - rss0, events, (rss1 - rss0) * 2**20 / events,
             resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
    del frames
    idxg = res["inflate"][2]
    t = time.perf_counter()
    ev2 = 0
    ng = len(idxg["checkpoints"])
    for i in range(0, ng, 16):
        ev2 += len(R.load_batch(pg, i, min(ng - 1, i + 15)).events)
    dt2 = time.perf_counter() - t
    print("read+parse inflate: %d events in %.2f s = %.2f M events/s (1 core)" % (ev2, dt2, ev2 / dt2 / 1e6))
    # baseline: gzip + json.loads into a DataFrame, first baseline-events lines of the same file
    import pandas as pd
    t = time.perf_counter()
    rows = []
    with gzip.open(pm, "rt") as f:
        for ln in f:
            ln = ln.strip()
            if not ln or ln in "[]":
                continue
            d = json.loads(ln)
            args = d.pop("args", {})
            d.update(args)
            rows.append(d)
            if len(rows) >= a.baseline_events:
                break
    df = pd.DataFrame(rows)
    dt_base = time.perf_counter() - t
    base = len(df) / dt_base
    print("baseline gzip+json.loads+DataFrame: %d events in %.2f s = %.3f M events/s" % (len(df), dt_base, base / 1e6))
    print("ratio ours/baseline (member file): %.1fx" % (ours / base))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
