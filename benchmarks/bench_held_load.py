"""CPU and page faults per event of loading every batch of a trace folder in one process.

The frame path's load tasks (``dfanalyzer.analyzer._load_task``) run in a worker thread and the
worker HOLDS every result, so each batch's columns are fresh memory; Dask's nanny also starts its
workers with ``MALLOC_TRIM_THRESHOLD_=65536`` (``distributed.nanny.pre-spawn-environ``), which
makes glibc give every freed block of >= 128 KiB back to the system. This reproduces both in one
process (docs/perf/i22-reserve.md)::

    MALLOC_TRIM_THRESHOLD_=65536 python benchmarks/bench_held_load.py DIR INDEX_DIR [--drop] [--main]

``DIR``: a folder of ``*.pfw.gz`` (indexed into ``INDEX_DIR``, nothing is written next to the
data); batches of 16 MiB of text as ``DFAnalyzer`` plans them. One warm-up load first, then all
batches in one thread of a ``ThreadPoolExecutor`` (``--main``: the main thread), each result held
(``--drop``: dropped; ``--no-args``: without args columns, as the summary loads). Prints user, system and total CPU µs per event and minor page faults per
event of the process (``resource.getrusage``) over the loads, and the peak RSS.
"""

import argparse
import glob
import os
import resource
import time
from concurrent.futures import ThreadPoolExecutor


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("index_dir")
    ap.add_argument("--drop", action="store_true", help="drop each batch instead of holding it")
    ap.add_argument("--main", action="store_true", help="load in the main thread, not a pool thread")
    ap.add_argument("--no-args", action="store_true", help="no args columns (keep_args=(), as the summary loads)")
    a = ap.parse_args()

    from dfanalyzer import analyzer, reader

    files = []
    for p in sorted(glob.glob(os.path.join(a.dir, "*.pfw.gz"))):
        i = reader.build_index(p, a.index_dir)
        files.append({"path": p, "checkpoints": [(c["uncompressed_size"], c["num_lines"]) for c in i["checkpoints"]]})
    batches = analyzer.plan_batches(files, 16 * 2**20)
    kw = {"keep_args": frozenset()} if a.no_args else {}
    analyzer._load_task(batches[0], a.index_dir, **kw)  # warm-up (imports, first-use allocations)
    held = []

    def run():
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        n = 0
        for b in batches:
            ev, md, info = analyzer._load_task(b, a.index_dir, **kw)
            if info.error:
                raise SystemExit(f"{b[0]}: {info.error}")
            n += len(ev)
            if not a.drop:
                held.append((ev, md, info))
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        return (
            n,
            r1.ru_utime - r0.ru_utime,
            r1.ru_stime - r0.ru_stime,
            r1.ru_minflt - r0.ru_minflt,
            time.perf_counter() - t0,
        )

    if a.main:
        n, u, s, f, w = run()
    else:
        with ThreadPoolExecutor(1) as ex:
            n, u, s, f, w = ex.submit(run).result()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{'drop' if a.drop else 'held'} {'main' if a.main else 'thread'}{' no-args' if a.no_args else ''} trim={os.environ.get('MALLOC_TRIM_THRESHOLD_', '-')} "
        f"batches={len(batches)} events={n} user={u / n * 1e6:.3f} sys={s / n * 1e6:.3f} cpu={(u + s) / n * 1e6:.3f} µs/event "
        f"minflt/event={f / n:.4f} wall={w:.2f} s maxrss={rss:.0f} MiB"
    )


if __name__ == "__main__":
    main()
