"""Minor page faults and system time per event of the frame path's load tasks, against the pages the
loaded frames hold (issue 22, Deliver 4; docs/perf/i26-faults.md).

Usage::

    PYTHONPATH=TREE python benchmarks/load_faults.py process DIR INDEX_DIR [--drop] [--rounds N]
    PYTHONPATH=TREE python benchmarks/load_faults.py cluster DIR [--rounds N]

``process``: every batch of ``DIR`` (``*.pfw.gz``, indexed into ``INDEX_DIR``; 16 MiB of text per
batch as ``DFAnalyzer`` plans them) through ``dfanalyzer.analyzer._load_task`` (all columns, as
the frame path) in one pool thread, each result held (``--drop``: dropped) as a Dask worker holds
it. Run it with ``MALLOC_TRIM_THRESHOLD_=65536`` to get the allocator of a Dask worker (the
nanny sets it). ``cluster``: a quiet 2-worker ``LocalCluster`` (single-thread processes, the
nanny's environment) runs ``len(DFAnalyzer(files).events)`` cold (the indexes next to ``DIR`` are
removed first, so use a private copy), and each worker's ``_load_task`` is measured in its
thread.

Per load task: ``getrusage(RUSAGE_THREAD)`` before and after (minor faults ``ru_minflt``, user
and system seconds), the rows, and ``schema.frame_nbytes`` of the frame it returns (the bytes it
holds). Prints per round: faults/event, held pages/event (``frame_nbytes / 4096``), their ratio
(1.0 = every fault is a page the frame holds), system and user µs/event, and the peak RSS
(process mode).
"""

from __future__ import annotations

import argparse
import glob
import os
import resource
import threading
import time
from concurrent.futures import ThreadPoolExecutor


def _recs() -> list:
    """The records of this process (kept on the analyzer module: this script's functions run on
    the workers pickled by value, with their own copies of this module's globals)."""
    import dfanalyzer.analyzer as A

    if not hasattr(A, "_fault_recs"):
        A._fault_recs = []
    return A._fault_recs


def _measured(fn):
    """``fn`` (``_load_task``) wrapped: record this thread's rusage deltas and the held bytes."""
    from dfanalyzer.schema import frame_nbytes

    recs = _recs()

    def w(*a, **k):
        r0 = resource.getrusage(resource.RUSAGE_THREAD)
        out = fn(*a, **k)
        r1 = resource.getrusage(resource.RUSAGE_THREAD)
        ev = out[0]
        rows = 0 if ev is None else len(ev)
        held = 0 if ev is None else frame_nbytes(ev)
        recs.append(
            (
                rows,
                held,
                r1.ru_minflt - r0.ru_minflt,
                r1.ru_stime - r0.ru_stime,
                r1.ru_utime - r0.ru_utime,
                threading.get_native_id(),
            )
        )
        return out

    w.__wrapped__ = fn
    return w


def _install() -> bool:
    import dfanalyzer.analyzer as A

    if not hasattr(A._load_task, "__wrapped__"):
        A._load_task = _measured(A._load_task)
    return True


def _take() -> list:
    recs = _recs()
    out = list(recs)
    recs.clear()
    return out


def _summary(recs: list) -> str:
    n = sum(r[0] for r in recs) or 1
    held = sum(r[1] for r in recs)
    flt = sum(r[2] for r in recs)
    s = sum(r[3] for r in recs)
    u = sum(r[4] for r in recs)
    return (
        f"tasks={len(recs)} events={n} minflt/event={flt / n:.4f} held_pages/event={held / 4096 / n:.4f} "
        f"minflt/held_page={flt / max(1, held / 4096):.3f} held B/event={held / n:.1f} "
        f"sys={s / n * 1e6:.3f} user={u / n * 1e6:.3f} µs/event"
    )


def _process(a) -> None:
    from dfanalyzer import analyzer, reader

    files = []
    for p in sorted(glob.glob(os.path.join(a.dir, "*.pfw.gz"))):
        i = reader.build_index(p, a.index_dir)
        files.append({"path": p, "checkpoints": [(c["uncompressed_size"], c["num_lines"]) for c in i["checkpoints"]]})
    batches = analyzer.plan_batches(files, 16 * 2**20)
    task = _measured(analyzer._load_task)
    task(batches[0], a.index_dir)  # warm-up in the main thread (imports, first-use allocations)
    _take()
    with ThreadPoolExecutor(1) as ex:  # a worker's task thread: its thread-local buffers are fresh
        for r in range(a.rounds):
            held = []

            def run(keep: list) -> None:
                for b in batches:
                    out = task(b, a.index_dir)
                    if out[2].error:
                        raise SystemExit(f"{b[0]}: {out[2].error}")
                    if not a.drop:
                        keep.append(out)

            ex.submit(run, held).result()
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"round {r} {'drop' if a.drop else 'held'}: {_summary(_take())} maxrss={rss:.0f} MiB", flush=True)
            held.clear()


def _cluster(a) -> None:
    import dask
    import dask.dataframe  # noqa: F401
    from distributed import Client, LocalCluster

    from dfanalyzer import DFAnalyzer
    from dfanalyzer.cluster import QUIET_CONFIG

    with (
        dask.config.set(QUIET_CONFIG),
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl,
        Client(cl) as c,
    ):
        c.run(lambda: (__import__("dask.dataframe"), __import__("dfanalyzer.analyzer")))
        c.run(_install)
        paths = sorted(glob.glob(os.path.join(a.dir, "*.pfw.gz")))
        for r in range(a.rounds):
            for f in glob.glob(os.path.join(a.dir, "*.zindex*")):
                os.remove(f)
            time.sleep(0.5)
            c.run(_take)
            an = DFAnalyzer(paths, client=c)
            n = len(an.events)
            recs = [x for per in c.run(_take).values() for x in per]
            an.close()
            print(f"round {r}: {n:,} events, load {os.getloadavg()[0]:.1f}: {_summary(recs)}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=("process", "cluster"))
    ap.add_argument("dir")
    ap.add_argument("index_dir", nargs="?")
    ap.add_argument("--drop", action="store_true", help="process mode: drop each batch instead of holding it")
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    if a.mode == "process":
        if not a.index_dir:
            ap.error("process mode needs INDEX_DIR")
        _process(a)
    else:
        _cluster(a)


if __name__ == "__main__":
    main()
