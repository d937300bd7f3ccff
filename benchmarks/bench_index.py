#!/usr/bin/env python3
"""Index build rate per GB, from the command line, cold (docs/performance.md, "Index build").

One run, same machine state for every row: for a trace of our gzip member format and a plain
(single-stream) gzip trace of the same events (benchmarks/gen_traces.py), each measurement
deletes the index, evicts the trace from the page cache (posix_fadvise DONTNEED; clean pages
only, no root needed) and runs the real command in a fresh process:

* ``dftracer-index FILE``         index build (member files: headers only, no inflate)
* ``dftracer-index --scan FILE``  index build plus one parse of every line (what ``dftracer-index``
                                  did before; the stats pass)

Wall and CPU seconds (the child's user + system time, Python start-up included) per GB of
compressed trace; best of --repeat. ``python -c 'import dfanalyzer.tools'`` is timed the same
way and printed, so the start-up share is visible; the last rows time ``build_index(force=True)``
alone in this process (cold pages), i.e. the index build without the start-up.

Usage: python benchmarks/bench_index.py [--events 4000000] [--repeat 3] [--out /tmp/dft-bench-index]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_traces  # noqa: E402

INDEX = [sys.executable, "-c", "import sys; from dfanalyzer.tools import index_main; sys.exit(index_main())"]


def evict(path: str) -> None:
    """Drops the file's clean pages from the page cache (cold read)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def run(cmd, trace=None):
    """(wall s, child CPU s) of one fresh process; the trace's index removed and pages evicted."""
    if trace:
        for suffix in ("", "-wal", "-shm"):
            try:
                os.unlink(trace + ".zindex" + suffix)
            except FileNotFoundError:
                pass
        evict(trace)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def best(cmd, trace, repeat):
    runs = [run(cmd, trace) for _ in range(repeat)]
    return min(runs)  # by wall time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=4_000_000)
    ap.add_argument("--repeat", type=int, default=3, help="best of N")
    ap.add_argument("--out", default="/tmp/dft-bench-index")
    a = ap.parse_args(argv)
    traces = {}
    for fmt, label in (("member", "member"), ("gzip", "plain gzip")):
        d = os.path.join(a.out, "%s-%d" % (fmt, a.events))
        p = os.path.join(d, "synth-0.pfw.gz")
        if not os.path.exists(p):
            gen_traces.generate(d, a.events, 1, fmt)
        traces[label] = p
    start = best([sys.executable, "-c", "import dfanalyzer.tools"], None, a.repeat)
    print(
        "%s, %d events per trace, best of %d, cold (index deleted, pages evicted)"
        % (time.strftime("%Y-%m-%d"), a.events, a.repeat)
    )
    print("python start-up + import: %.3f s wall, %.3f s CPU (included below)" % start)
    print("%-11s %-26s %9s %9s %9s %12s %12s" % ("trace", "command", "MB", "wall s", "CPU s", "wall s/GB", "CPU s/GB"))
    for label, p in traces.items():
        gb = os.path.getsize(p) / 1e9
        for name, extra in (("dftracer-index", []), ("dftracer-index --scan", ["--scan"])):
            w, c = best(INDEX + extra + [p], p, a.repeat)
            print("%-11s %-26s %9.1f %9.3f %9.3f %12.2f %12.2f" % (label, name, gb * 1e3, w, c, w / gb, c / gb))
    from dfanalyzer import reader

    for label, p in traces.items():
        gb = os.path.getsize(p) / 1e9
        runs = []
        for _ in range(a.repeat):
            evict(p)
            w, c = time.perf_counter(), time.process_time()
            reader.build_index(p, force=True)
            runs.append((time.perf_counter() - w, time.process_time() - c))
        w, c = min(runs)
        print(
            "%-11s %-26s %9.1f %9.3f %9.3f %12.2f %12.2f"
            % (label, "build_index() in process", gb * 1e3, w, c, w / gb, c / gb)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
