"""Where the threaded streamed summary holds the GIL (issue 22, Deliver 2: what stops threads).

The threaded ``dfanalyzer summary`` runs, per batch, in a pool thread: ``_reader.load_batch``
(C++ inflate + parse, the GIL released), the Python glue that wraps its columns and counts its
problems, and ``partial_from_columns`` (NumPy/pandas reduction); the main thread folds the
partials (``PartialFolder.add``) and at the end ``finish``es the root. This script runs exactly
those calls (the ones of ``dfanalyzer.analyzer._summary_batch_task``, no filter) on the batches
``DFAnalyzer`` plans for DIR, in ``--threads`` pool threads, and times every section in the
thread that runs it. ``--fold threads`` (the default, what the analyzer does since issue 22's
fourth round) folds each partial in the pool thread that made it
(``dfanalyzer.summary.fold_in_threads``; the main thread then only combines one partial per
thread: section ``final``); ``--fold main`` folds every partial in the main thread as before:

* ``cpu``: the thread's CPU time (``time.thread_time``) inside the section;
* ``gil wait``: wall time the thread spent neither running nor runnable, i.e. blocked, inside
  the section (wall − run time − run-queue wait, from ``/proc/thread-self/schedstat``). The
  sections do no I/O that blocks (warm page cache), so this is time spent waiting for the GIL
  (with 1 thread it is ~0: the check of the method).

A section that holds the GIL for its whole CPU time serialises the threads: by Amdahl the
summary cannot run faster than ``1 / f`` times one thread, ``f`` = GIL-held CPU ÷ all CPU.
``load_batch`` is counted GIL-free (it releases the GIL for the inflate + parse and takes it
only to build the result dict); the other sections as GIL-held (an upper bound: NumPy releases
the GIL inside some loops over big arrays).

    python benchmarks/gil_profile.py DIR [--threads 1 2] [--batch-size-mb 16] [--fold threads|main] [--index-dir D]

Prints one table per thread count: per section CPU s, share of the CPU, GIL wait s; then the
GIL-held fraction and its Amdahl bound. The partial is checked against ``DFAnalyzer.summary``.
"""

from __future__ import annotations

import argparse
import os
import queue
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

SECTIONS = ("load_batch", "glue", "partial", "fold", "final", "finish")
GIL_FREE = ("load_batch",)


def _sched() -> tuple:
    """(run ns, run-queue wait ns) of the calling thread."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            a, b, _ = f.read().split()
        return int(a), int(b)
    except OSError:
        return 0, 0


class Clock:
    """Per-section CPU and blocked time of the threads that use it."""

    def __init__(self):
        self.cpu = dict.fromkeys(SECTIONS, 0.0)
        self.blocked = dict.fromkeys(SECTIONS, 0.0)
        self.lock = threading.Lock()

    def section(self, name):
        clock = self

        class _S:
            def __enter__(self):
                self.t, self.c, self.s = time.perf_counter(), time.thread_time(), _sched()

            def __exit__(self, *exc):
                wall, cpu, s = time.perf_counter() - self.t, time.thread_time() - self.c, _sched()
                run, wait = (s[0] - self.s[0]) / 1e9, (s[1] - self.s[1]) / 1e9
                with clock.lock:
                    clock.cpu[name] += cpu
                    clock.blocked[name] += max(0.0, wall - run - wait)

        return _S()


def batch_partial(batch, io, cp, app, clock: Clock):
    """dfanalyzer.analyzer._summary_batch_task without a filter, section by section."""
    from dfanalyzer import _reader, reader
    from dfanalyzer import schema as _schema
    from dfanalyzer import summary as _summary
    from dfanalyzer.records import BatchInfo

    path, first, last, _, _ = batch
    with clock.section("load_batch"):
        r = _reader.load_batch(os.fspath(path), int(first), int(last), None, list(_summary.AGGREGATE_COLUMNS))
    with clock.section("glue"):
        cols = _summary.ReaderColumns(r)
        warnings, lost_bytes, lost_lines = reader.batch_problems(r, path)
        BatchInfo(
            rows=cols.rows,
            schema={k: _schema.kind_of_reader(d) for k, d, _ in r["args"] if k in _summary.AGGREGATE_COLUMNS},
            skipped_lines=int(r["skipped_lines"]),
            lost_bytes=lost_bytes,
            lost_lines=lost_lines,
            unresolved_hashes=int(r["unresolved_hashes"]),
            warnings=[str(w) for w in warnings],
        )
        md = r["metadata"] if len(r["metadata"]["name"]) else None  # (the reader's lists, as the analyzer)
    with clock.section("partial"):
        part = _summary.partial_from_columns(cols, io, cp, app)
    del r, cols, md
    return part


def run(d: str, threads: int, batch_size_mb: float, fold_in: str = "threads", index_dir=None) -> dict:
    from dfanalyzer import DFAnalyzer
    from dfanalyzer import summary as _summary
    from dfanalyzer.analyzer import _round_robin_by_file

    kw = dict(args=(), n_workers=threads, batch_size_mb=batch_size_mb, index_dir=index_dir)
    with DFAnalyzer(d, **kw) as an:
        batches, io, cp, app = an._batches, an.io_cats, an.compute_cats, an.app_io_cats
        assert not an._groups, "gil_profile: small files (groups) are not profiled; use bigger files"
    clock = Clock()
    t0, c0 = time.perf_counter(), time.process_time()
    spill = _summary.SPILL_INTERVALS
    with ThreadPoolExecutor(max_workers=threads) as pool:
        if fold_in == "threads":
            real_add, real_result = _summary.PartialFolder.add, _summary.PartialFolder.result
            real_combine = _summary.combine_partials
            main = threading.main_thread()

            def add(self, part):  # (the pool threads' folds)
                with clock.section("fold"):
                    real_add(self, part)

            def result(self):
                with clock.section("fold"):
                    return real_result(self)

            def combine(parts):  # (the main thread's: one partial per pool thread)
                if threading.current_thread() is not main:
                    return real_combine(parts)
                with clock.section("final"):
                    return real_combine(parts)

            _summary.PartialFolder.add, _summary.PartialFolder.result = add, result
            _summary.combine_partials = combine
            try:
                stream = _summary.fold_in_threads(
                    pool,
                    threads,
                    _round_robin_by_file(batches),
                    lambda i: (batch_partial(batches[i], io, cp, app, clock),),
                    spill_intervals=spill,
                )
                root = _drain(stream)
            finally:
                _summary.PartialFolder.add, _summary.PartialFolder.result = real_add, real_result
                _summary.combine_partials = real_combine
        else:
            done: queue.Queue = queue.Queue()
            for i in _round_robin_by_file(batches):
                pool.submit(lambda b: done.put(batch_partial(b, io, cp, app, clock)), batches[i])
            fold = _summary.PartialFolder(spill_intervals=spill)
            for _ in batches:
                p = done.get()
                with clock.section("fold"):
                    fold.add(p)
            with clock.section("final"):
                root = fold.result()
    with clock.section("finish"):
        result = _summary.finish(root, [])
    for sp in root.spilled:
        sp.cleanup()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    with DFAnalyzer(d, **kw) as an:
        assert result.to_dict() == an.summary(show=False).to_dict(), "gil_profile: partial differs from summary()"
    return {"threads": threads, "batches": len(batches), "wall": wall, "cpu": cpu, "clock": clock, "fold": fold_in}


def _drain(stream):
    """Run a :func:`dfanalyzer.summary.fold_in_threads` generator to its end; its value."""
    while True:
        try:
            next(stream)
        except StopIteration as end:
            return end.value


def report(r: dict) -> None:
    c = r["clock"]
    total = sum(c.cpu.values())
    print(
        f"\n{r['threads']} thread(s), fold in {r['fold']}, {r['batches']} batches: wall {r['wall']:.2f} s, process CPU {r['cpu']:.2f} s, "
        f"sections {total:.2f} s CPU"
    )
    print("| section | GIL | CPU s | share of CPU | GIL wait s |\n|---|---|---:|---:|---:|")
    for s in SECTIONS:
        held = "released" if s in GIL_FREE else "held"
        print(f"| {s} | {held} | {c.cpu[s]:.3f} | {c.cpu[s] / total:.1%} | {c.blocked[s]:.3f} |")
    f = sum(v for k, v in c.cpu.items() if k not in GIL_FREE) / total
    print(f"GIL-held fraction f = {f:.1%}: threads at most {1 / f:.1f}x one thread (Amdahl, 1/f)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--batch-size-mb", type=float, default=16)
    ap.add_argument("--fold", choices=("threads", "main"), default="threads")
    ap.add_argument("--index-dir", default=None)
    a = ap.parse_args(argv)
    print(f"# {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, load average {os.getloadavg()}")
    for n in a.threads:
        report(run(a.dir, n, a.batch_size_mb, a.fold, a.index_dir))
    print(f"# load average {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
