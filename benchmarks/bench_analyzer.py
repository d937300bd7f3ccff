#!/usr/bin/env python3
"""DFAnalyzer end-to-end benchmark against a naive Dask baseline, in one run.

    PYTHONPATH=$PWD python benchmarks/bench_analyzer.py [--sizes 1000000,10000000] [--files 16]
        [--workers 1,2] [--baseline-events 200000] [--repeat 2] [--core-only] [--data DIR] [--json OUT]

Synthetic traces come from ``benchmarks/gen_traces.py`` (our gzip member format), generated once
into ``--data`` (default ``build/bench-analyzer``) and reused. For every size and worker count a
fresh ``LocalCluster`` (worker processes, 1 thread each) runs:

* ours: ``DFAnalyzer(files, force_index=True)`` (index + load + balanced repartition + persist),
  then ``events.shape[0].compute()`` -> "load" time; then ``summary()`` -> "summary" time;
  best (smallest) of ``--repeat`` runs, each a fresh analyzer with a forced index rebuild;
  with ``--core-only`` also ``DFAnalyzer(..., args=())`` (only the 12 core columns);
* memory: the held partitions' ``memory_usage(deep=True)`` summed, divided by events;
* baseline (naive, as in the paper's comparisons): ``dask.bag.read_text`` + ``json.loads`` +
  flatten args + ``to_dataframe`` + ``shape[0].compute()`` on a ``--baseline-events`` subset
  (same generator, same files count; best of ``--repeat``), scaled by its events/s rate. Ratio = our events/s over the
  baseline's events/s at the same worker count.

Rates are events/s per core (worker count = cores used). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.append(ROOT)  # an explicit PYTHONPATH (e.g. a build of the package) wins
sys.path.insert(0, HERE)


def traces(data: str, events: int, files: int) -> list:
    import gen_traces

    d = os.path.join(data, f"e{events}-f{files}")
    done = os.path.join(d, ".done")
    if not os.path.exists(done):
        shutil.rmtree(d, ignore_errors=True)
        t = time.perf_counter()
        gen_traces.generate(d, events, files, fmt="member")
        open(done, "w").close()
        print(f"# generated {events:,} events in {files} files in {time.perf_counter() - t:.1f} s", flush=True)
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".pfw.gz"))


def _flatten(rec: dict) -> dict:
    out = {k: rec.get(k) for k in ("name", "cat", "pid", "tid", "ts", "dur", "ph")}
    out.update((f"arg_{k}", str(v)) for k, v in (rec.get("args") or {}).items())
    return out


def _is_event(line: str) -> bool:
    return line.startswith("{")


def baseline(client, paths) -> tuple:
    import dask.bag as db

    t = time.perf_counter()
    bag = db.read_text(paths).filter(_is_event).map(json.loads).map(_flatten)
    df = bag.to_dataframe()
    n = int(df.shape[0].compute())
    return n, time.perf_counter() - t


def ours(client, paths, args=None) -> dict:
    from dfanalyzer import DFAnalyzer

    t = time.perf_counter()
    an = DFAnalyzer(paths, client=client, force_index=True, args=args)
    n = int(an.events.shape[0].compute())
    t_load = time.perf_counter() - t
    t = time.perf_counter()
    s = an.summary(show=False)
    t_sum = time.perf_counter() - t
    mem = int(an.events.map_partitions(lambda p: p.memory_usage(deep=True).sum()).sum().compute())
    core = [c for c in an.events.columns if c in ("name", "cat", "ph", "hostname", "fname", "pid", "tid",
                                                      "ts", "dur", "te", "size", "offset")]
    mem_core = int(an.events[core].map_partitions(lambda p: p.memory_usage(deep=True).sum()).sum().compute())
    assert s.events > 0
    r = {"events": n, "load_s": t_load, "summary_s": t_sum, "bytes_per_event": mem / n,
         "core_bytes_per_event": mem_core / n, "columns": len(an.events.columns),
         "partitions": an.stats["partitions"], "batches": an.stats["batches"]}
    an.close()
    return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--baseline-events", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=1, help="runs per configuration; the best is kept")
    ap.add_argument("--core-only", action="store_true", help="also run with args=() (12 core columns)")
    ap.add_argument("--data", default=os.path.join(ROOT, "build", "bench-analyzer"))
    ap.add_argument("--json", default=None, help="also write the results here")
    a = ap.parse_args(argv)
    import logging

    from distributed import Client, LocalCluster

    logging.getLogger("distributed").setLevel(logging.ERROR)
    sizes = [int(x) for x in a.sizes.split(",")]
    workers = [int(x) for x in a.workers.split(",")]
    sets = {n: traces(a.data, n, a.files) for n in sizes}
    base_paths = traces(a.data, a.baseline_events, a.files)
    rows = []
    for w in workers:
        with LocalCluster(n_workers=w, threads_per_worker=1, processes=True, dashboard_address=None) as cl, \
                Client(cl) as client:
            bn, bt = min((baseline(client, base_paths) for _ in range(max(1, a.repeat))), key=lambda x: x[1])
            brate = bn / bt
            print(f"# baseline w={w}: {bn:,} events in {bt:.2f} s = {brate / w:,.0f} events/s/core", flush=True)
            for n, args in [(n, x) for n in sizes for x in ([None, ()] if a.core_only else [None])]:
                runs = [ours(client, sets[n], args) for _ in range(max(1, a.repeat))]
                r = min(runs, key=lambda x: x["load_s"] + x["summary_s"])
                r.update(workers=w, baseline_events=bn, baseline_s=bt, args="all" if args is None else "none",
                         all_load_s=[x["load_s"] for x in runs], all_summary_s=[x["summary_s"] for x in runs])
                rate = r["events"] / r["load_s"]
                r["events_per_s_per_core"] = rate / w
                r["e2e_events_per_s_per_core"] = r["events"] / (r["load_s"] + r["summary_s"]) / w
                r["baseline_events_per_s_per_core"] = brate / w
                r["ratio"] = rate / brate
                rows.append(r)
                print(f"# ours w={w} n={n:,} args={r['args']}: load {r['load_s']:.2f} s, summary {r['summary_s']:.2f} s, "
                      f"{r['events_per_s_per_core']:,.0f} ev/s/core, x{r['ratio']:.1f}, "
                      f"{r['bytes_per_event']:.1f} B/event", flush=True)
    print()
    print("| events | workers | args | load s | summary s | load ev/s/core | load+summary ev/s/core | "
          "baseline ev/s/core | ratio (load) | bytes/event held | bytes/event (12 core cols) |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['events']:,} | {r['workers']} | {r['args']} | {r['load_s']:.2f} | {r['summary_s']:.2f} | "
              f"{r['events_per_s_per_core']:,.0f} | {r['e2e_events_per_s_per_core']:,.0f} | "
              f"{r['baseline_events_per_s_per_core']:,.0f} | {r['ratio']:.1f}x | {r['bytes_per_event']:.1f} | "
              f"{r['core_bytes_per_event']:.1f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
