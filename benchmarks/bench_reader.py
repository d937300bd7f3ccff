#!/usr/bin/env python3
"""Reader benchmark (docs/perf/reader.md). One run measures, on the same synthetic trace:

* index time per GB compressed: member hop (our format) and inflate pass (plain gzip);
* read + parse into columns, events/s on one core (load_batch over all checkpoints);
* a plain Python baseline (gzip + json.loads into a DataFrame) on the first --baseline-events
  lines of the same file, scaled per event; the ratio of the two;
* peak RSS growth per event held.

Timings are the best of --repeat runs; "per core" rates divide by the process CPU time (the code
is single-threaded; the machine is shared), wall rates are printed too.

Usage: python benchmarks/bench_reader.py [--events 1000000] [--repeat 3] [--out /tmp/dft-bench]
"""

from __future__ import annotations

import argparse
import gc
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


def _timed(fn, repeat):
    """Best of ``repeat`` runs of fn(): (wall seconds, CPU seconds of this process, result)."""
    best = None
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        r = fn()
        w, c = time.perf_counter() - w, time.process_time() - c
        if best is None or w < best[0]:
            best = (w, c, r)
    return best


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--baseline-events", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3, help="best of N for each timing")
    ap.add_argument("--batch", type=int, default=16, help="checkpoints per load_batch")
    ap.add_argument("--out", default="/tmp/dft-bench")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    mem = os.path.join(a.out, "member-%d" % a.events)
    gz = os.path.join(a.out, "gzip-%d" % a.events)
    t = time.time()
    pm = os.path.join(mem, "synth-0.pfw.gz")
    pg = os.path.join(gz, "synth-0.pfw.gz")
    if not os.path.exists(pm):
        gen_traces.generate(mem, a.events, 1, "member")
    if not os.path.exists(pg):
        gen_traces.generate(gz, a.events, 1, "gzip")
    print("traces ready (%d events each) in %.1f s" % (a.events, time.time() - t))
    res = {}
    for label, p in (("member", pm), ("inflate", pg)):
        dt, _, idx = _timed(lambda: R.build_index(p, force=True), a.repeat)
        size = os.path.getsize(p)
        res[label] = (dt, size, idx)
        print(
            "index %-8s %8.1f MB compressed  %8.2f ms  -> %8.2f ms per 100 MB, %7.3f s per GB, %d checkpoints"
            % (label, size / 1e6, dt * 1e3, dt * 1e3 / (size / 1e8), dt / (size / 1e9), len(idx["checkpoints"]))
        )

    def read_all(path, keep=None):
        n = len(R.build_index(path)["checkpoints"])
        events = 0
        for i in range(0, n, a.batch):
            b = R.load_batch(path, i, min(n - 1, i + a.batch - 1))
            events += len(b.events)
            if keep is not None:
                keep.append(b.events)
        return events

    rates = {}
    for label, p in (("member", pm), ("inflate", pg)):
        w, c, ev = _timed(lambda: read_all(p), a.repeat)
        rates[label] = (ev / w, ev / c)
        print(
            "read+parse %-8s: %d events in %.3f s wall (%.3f s CPU) = %.2f M events/s wall, %.2f M events/s per core"
            % (label, ev, w, c, ev / w / 1e6, ev / c / 1e6)
        )
    # memory held: RSS growth while every batch's frame of the member file is kept
    gc.collect()
    rss0 = rss_mb()
    frames = []
    events = read_all(pm, frames)
    rss1 = rss_mb()
    frame_bytes = sum(int(f.memory_usage(index=False, deep=True).sum()) for f in frames)
    print(
        "memory held: %.1f MB RSS growth for %d events = %.0f bytes/event (frames: %.0f bytes/event; peak RSS %.0f MB)"
        % (
            rss1 - rss0,
            events,
            (rss1 - rss0) * 2**20 / events,
            frame_bytes / events,
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        )
    )
    print("dtypes: " + ", ".join("%s=%s" % (k, v) for k, v in frames[0].dtypes.astype(str).items()))
    del frames
    gc.collect()

    # baseline: gzip + json.loads into a DataFrame, first baseline-events lines of the same file
    # (its own plain loop on purpose: it is the naive reader being timed, not a test helper)
    import pandas as pd

    def baseline():
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
        return len(pd.DataFrame(rows))

    w, c, nb = _timed(baseline, a.repeat)
    base_w, base_c = nb / w, nb / c
    print(
        "baseline gzip+json.loads+DataFrame: %d events in %.3f s wall (%.3f s CPU) = %.3f M events/s wall, "
        "%.3f M events/s per core" % (nb, w, c, base_w / 1e6, base_c / 1e6)
    )
    for label in ("member", "inflate"):
        print(
            "ratio ours/baseline (%s file): %.1fx wall, %.1fx per core"
            % (label, rates[label][0] / base_w, rates[label][1] / base_c)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
