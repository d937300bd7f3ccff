#!/usr/bin/env python3
"""Many small trace files (one per process, as in the paper's MuMMI run): ``dfanalyzer summary``
wall time with small files read whole in groups vs. the per-file path, in one run.

    python benchmarks/bench_small_files.py [--files 20000] [--events 300] [--baseline-files 1000]
        [--workers 2] [--data DIR] [--json OUT]

Traces are written by the real tracer core: forked processes call
``dftracer._dftracer.initialize(path)``, log ``--events`` POSIX/STDIO/compute events with
``log_event`` and ``finalize()`` (our gzip member format, written by ``src/core``), 100 files per
process one after the other (a fork per file costs ~10x more). They are generated once into
``--data`` (default ``build/bench-small-files``) and reused.

Timed (each a fresh ``python -m dfanalyzer.cli summary DIR --json --workers W`` process, wall
clock including cluster start-up; indexes removed before each run):

* ``grouped``: the default (files of at most 1 MiB read whole, hundreds per task, no index file);
* ``per-file`` (the old code path, ``--small-file-mb 0``): one index task, one SQLite index and
  one load task per file. It costs ~0.1 s per file here, so it runs on the first
  ``--baseline-files`` files only, and ``grouped`` runs on the same subset for a same-run ratio.

Both runs must report the same events. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _write_one(path: str, events: int, seed: int) -> None:
    """In a forked child: one traced 'process' writing ``events`` events through the tracer core."""
    from dftracer import _dftracer as core

    core.initialize(path, None, None)
    t = core.get_time()
    fnames = ["/data/sample-%d.npz" % ((seed + k) % 64) for k in range(4)]
    for i in range(events):
        k = i % 10
        if k == 0:
            core.log_event("open64", "POSIX", t, 12, {"fname": fnames[i % 4], "flags": 0, "ret": 3})
        elif k < 6:
            core.log_event("read", "POSIX", t, 40 + k, {"fname": fnames[i % 4], "size": 65536, "ret": 65536})
        elif k == 6:
            core.log_event("lseek64", "POSIX", t, 2, {"fname": fnames[i % 4], "offset": 4096 * i, "ret": 0})
        elif k == 7:
            core.log_event("fwrite", "STDIO", t, 8, {"fname": "/out/log.txt", "size": 1, "ret": 120})
        elif k == 8:
            core.log_event("compute", "compute", t, 500, {"step": i})
        else:
            core.log_event("close", "POSIX", t, 3, {"fname": fnames[i % 4], "ret": 0})
        t += 50
    core.finalize()


def generate(data: str, files: int, events: int, per_process: int = 100) -> list:
    """``files`` traces in ``data`` (reused when already there), written by forked traced children:
    each child writes ``per_process`` files one after the other (initialize, events, finalize)."""
    paths = [os.path.join(data, "rank-%05d.pfw.gz" % i) for i in range(files)]
    missing = [i for i, p in enumerate(paths) if not os.path.exists(p)]
    if missing:
        os.makedirs(data, exist_ok=True)
        os.environ["DFTRACER_ENABLE"] = "1"
        t0 = time.time()
        for start in range(0, len(missing), per_process):
            chunk = missing[start : start + per_process]
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    for i in chunk:
                        _write_one(paths[i], events, i)
                    code = 0
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            if status != 0:
                raise SystemExit("bench_small_files: tracer child failed (status %d)" % status)
        print("  generated %d files in %.0f s" % (len(missing), time.time() - t0), file=sys.stderr)
    return paths


def summary(pattern_dir: str, workers: int, extra=()) -> tuple:
    """Wall seconds and events of one ``dfanalyzer summary`` process."""
    for ix in glob.glob(os.path.join(pattern_dir, "*.zindex*")):
        os.unlink(ix)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dfanalyzer.cli",
            "summary",
            pattern_dir,
            "--json",
            "--workers",
            str(workers),
            "--no-progress",
            *extra,
        ],
        capture_output=True,
        text=True,
        cwd=os.path.dirname(pattern_dir),
    )  # not a source tree: import the installed package
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit("dfanalyzer summary failed:\n" + proc.stderr[-3000:])
    return dt, json.loads(proc.stdout)["events"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--events", type=int, default=300, help="events per file")
    ap.add_argument("--baseline-files", type=int, default=1000, help="files for the per-file baseline")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--data", default=os.path.join(ROOT, "build", "bench-small-files"))
    ap.add_argument("--json", default=None, help="also write the results here")
    a = ap.parse_args(argv)
    data = os.path.join(a.data, "e%d" % a.events)
    paths = generate(data, a.files, a.events)
    # the benchmark's files are all of data/: use a folder holding exactly the files wanted
    full = os.path.join(a.data, "f%d-e%d" % (a.files, a.events))
    sub = os.path.join(a.data, "f%d-e%d" % (a.baseline_files, a.events))
    for folder, n in ((full, a.files), (sub, a.baseline_files)):
        os.makedirs(folder, exist_ok=True)
        for p in paths[:n]:
            link = os.path.join(folder, os.path.basename(p))
            if not os.path.exists(link):
                os.link(p, link)
    rows = []
    t_base, ev_base = summary(sub, a.workers, ["--small-file-mb", "0"])
    t_sub, ev_sub = summary(sub, a.workers)
    if ev_base != ev_sub:
        raise SystemExit("event counts differ: per-file %d, grouped %d" % (ev_base, ev_sub))
    rows.append(("per-file (old path)", a.baseline_files, ev_base, t_base))
    rows.append(("grouped", a.baseline_files, ev_sub, t_sub))
    t_full, ev_full = summary(full, a.workers)
    rows.append(("grouped", a.files, ev_full, t_full))
    if ev_full != a.files * a.events:
        raise SystemExit("expected %d events, got %d" % (a.files * a.events, ev_full))
    print("| path | files | events | wall s | files/s |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, n, ev, t in rows:
        print("| %s | %d | %d | %.1f | %.0f |" % (name, n, ev, t, n / t))
    print(
        "\nsame-run ratio on %d files: per-file %.1f s / grouped %.1f s = %.1fx"
        % (a.baseline_files, t_base, t_sub, t_base / t_sub)
    )
    if a.json:
        with open(a.json, "w") as f:
            json.dump([dict(zip(("path", "files", "events", "seconds"), r)) for r in rows], f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
