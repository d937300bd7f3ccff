#!/usr/bin/env python3
"""Filter push-down benchmark: what a selective ``query`` saves, same-run ratios.

    PYTHONPATH=$PWD python benchmarks/bench_filter.py [--events 1000000] [--files 4] [--workers 2]
        [--member-kb 256] [--keep 0.1] [--repeat 3] [--data DIR] [--json OUT]

Synthetic traces (``benchmarks/gen_traces.py``, our gzip member format, one checkpoint per
member of ``--member-kb`` KiB) are generated once into ``--data``. Indexes and per-checkpoint
stats are built first (timed once: "stats"). Then, on one ``LocalCluster``, best of ``--repeat``
each, in the same invocation:

* ``full``: ``DFAnalyzer(files)`` (load everything), then ``functions()``;
* ``pushdown``: ``DFAnalyzer(files, query="ts >= T")`` with ``T`` the ``1 - keep`` quantile of
  ``ts`` (the last ``keep`` of the run), then ``functions()``;
* ``no pushdown``: the same rows selected by ``"(ts >= T) | (ts < 0)"``, which the push-down does
  not understand (an ``or``), so every checkpoint is read and filtered after parsing.

Prints the times, the checkpoints skipped, the rows kept, and the ratios full/pushdown and
no-pushdown/pushdown (higher = push-down saves more).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.append(ROOT)
sys.path.insert(0, HERE)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--member-kb", type=int, default=256)
    ap.add_argument("--keep", type=float, default=0.1, help="fraction of the run's time span kept")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data", default=os.path.join(ROOT, "build", "bench-filter"))
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)

    import gen_traces
    from distributed import Client, LocalCluster

    from dfanalyzer import DFAnalyzer, reader

    d = os.path.join(a.data, f"e{a.events}-f{a.files}-m{a.member_kb}")
    if not os.path.exists(os.path.join(d, ".done")):
        gen_traces.generate(d, a.events, a.files, fmt="member", member_bytes=a.member_kb << 10)
        open(os.path.join(d, ".done"), "w").close()
    files = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".pfw.gz"))
    t = time.perf_counter()
    stats = [reader.checkpoint_stats(f) for f in files]  # builds the index, then the stats, once
    t_stats = time.perf_counter() - t
    n_ckpt = sum(len(s) for s in stats)
    ts_lo = min(c["min_ts"] for s in stats for c in s)
    ts_hi = max(c["max_ts"] for s in stats for c in s)
    cut = int(ts_hi - a.keep * (ts_hi - ts_lo))
    queries = {"full": None, "pushdown": f"ts >= {cut}", "no pushdown": f"(ts >= {cut}) | (ts < 0)"}

    cluster = LocalCluster(n_workers=a.workers, threads_per_worker=1, dashboard_address=None, silence_logs=40)
    client = Client(cluster)
    res = {}
    try:
        for label, q in queries.items():
            best, rows, skipped = float("inf"), 0, 0
            for _ in range(a.repeat):
                t = time.perf_counter()
                an = DFAnalyzer(files, client=client, query=q, args=())
                an.functions()
                best = min(best, time.perf_counter() - t)
                rows, skipped = an.stats["events"], an.stats["skipped_checkpoints"]
                an.close()
            res[label] = {"seconds": best, "events": rows, "skipped_checkpoints": skipped}
    finally:
        client.close()
        cluster.close()
    assert res["pushdown"]["events"] == res["no pushdown"]["events"], "push-down changed the result"
    out = {
        "events": a.events,
        "files": a.files,
        "checkpoints": n_ckpt,
        "workers": a.workers,
        "keep": a.keep,
        "stats_build_s": t_stats,
        "runs": res,
        "ratio_full_over_pushdown": res["full"]["seconds"] / res["pushdown"]["seconds"],
        "ratio_nopushdown_over_pushdown": res["no pushdown"]["seconds"] / res["pushdown"]["seconds"],
    }
    print(
        f"# {a.events:,} events, {a.files} files, {n_ckpt} checkpoints, {a.workers} workers, "
        f"keep last {a.keep:.0%} of the time span; stats built once in {t_stats:.2f} s"
    )
    print("| run | load + functions() s | events | checkpoints skipped |")
    print("| --- | ---: | ---: | ---: |")
    for label, r in res.items():
        print(f"| {label} | {r['seconds']:.3f} | {r['events']:,} | {r['skipped_checkpoints']} |")
    print(
        f"ratio full / pushdown = {out['ratio_full_over_pushdown']:.2f}x; "
        f"no-pushdown / pushdown = {out['ratio_nopushdown_over_pushdown']:.2f}x"
    )
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
