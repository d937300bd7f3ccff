"""How fast an interrupted ``dfanalyzer summary --json --scheduler ADDR`` frees the cluster
(docs/perf/i29-cancel.md).

For one source tree (``--tree``, default this checkout: the workers and the command import
dfanalyzer from it), against a loopback cluster (a ``dask scheduler`` and ``--workers``
single-thread ``dask worker --no-nanny`` processes, started as commands):

1. the uninterrupted summary, ``--rounds`` times: wall of the command, CPU of the command, the
   scheduler and the workers together, batches the workers
   loaded (every chunk task's batch load is counted on the workers: a wrapper, no delay) and the
   SHA-256 of its stdout;
2. the same command sent SIGINT (``--kill`` for SIGKILL) once the workers have loaded
   ``--at`` of its batches: its exit status and stderr, then the seconds from the signal until the
   cluster is idle (no task on the scheduler, none held or running on any worker) and the batches
   loaded after the signal;
3. (``--check-cost``) the cost of one ``_task_released_check()()`` call in a task on a worker.

    python3 benchmarks/cancel_free.py /work/data/g5m --batch-size-mb 1 [--tree /other/tree]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _install():
    from dfanalyzer import analyzer as a

    orig = getattr(a, "_bench_orig_batch_task", None) or a._summary_batch_task
    a._bench_orig_batch_task = orig
    a._bench_batches = 0

    def counted(*args, **kw):
        a._bench_batches += 1
        return orig(*args, **kw)

    a._summary_batch_task = counted


def _switch(on: bool):
    """``--ab``: the release checks on (as shipped) or off (``_task_released_check`` gives None:
    the chunk tasks check nothing, the summary's task waits as before the change)."""
    from dfanalyzer import analyzer as a

    orig = getattr(a, "_bench_orig_check", None) or a._task_released_check
    a._bench_orig_check = orig
    a._task_released_check = orig if on else (lambda: None)


def _count():
    from dfanalyzer import analyzer as a

    return getattr(a, "_bench_batches", 0)


def _held(dask_worker):
    return len(dask_worker.state.tasks) + len(dask_worker.active_threads)


def _check_cost(n=1_000_000):
    """In a task: ns per call of the released() check a chunk task makes before every batch."""
    import time

    from dfanalyzer.analyzer import _task_released_check

    released = _task_released_check()
    assert released is not None and not released()
    t = time.perf_counter()
    for _ in range(n):
        released()
    return (time.perf_counter() - t) / n * 1e9


def _cpu(procs) -> float:
    """CPU seconds (user + system) used so far by ``procs`` (Popen objects) and by this
    process's waited-for children (the commands)."""
    import resource

    total = 0.0
    for p in procs:
        with open(f"/proc/{p.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return total + ru.ru_utime + ru.ru_stime


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", help="trace folder (copied to a temporary folder first)")
    ap.add_argument("--tree", default=ROOT)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size-mb", default="1")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--at", type=float, default=0.3, help="interrupt after this share of the batches")
    ap.add_argument("--kill", action="store_true", help="SIGKILL instead of SIGINT")
    ap.add_argument("--check-cost", action="store_true")
    ap.add_argument("--ab", action="store_true", help="rounds alternate checks on/off (this tree)")
    ap.add_argument("--index-dir", help="passed on; the data is then used in place (not copied)")
    a = ap.parse_args(argv)
    sys.path.insert(0, a.tree)
    from distributed import Client

    tmp = tempfile.mkdtemp(prefix="dfa-cancel-")
    d = a.data if a.index_dir else os.path.join(tmp, "t")
    if not a.index_dir:
        shutil.copytree(a.data, d)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_analyzer as B

    addr, procs = B.start_loopback_cluster(a.workers, tree=a.tree)
    env = dict(os.environ, PYTHONPATH=a.tree)
    cmd = [
        sys.executable,
        "-m",
        "dfanalyzer.cli",
        "summary",
        d,
        "--json",
        "--no-progress",
        "--batch-size-mb",
        a.batch_size_mb,
        "--scheduler",
        addr,
    ]
    cmd += ["--index-dir", a.index_dir] if a.index_dir else []
    res = {"tree": a.tree, "data": a.data, "batch_size_mb": a.batch_size_mb, "workers": a.workers}
    try:
        c = Client(addr, set_as_default=False, timeout=60)
        c.wait_for_workers(a.workers, timeout=60)
        subprocess.run(cmd, capture_output=True, env=env, check=True)  # (indexes the copy)
        walls, cpus, n, sha = [], [], None, None
        offs = {"wall_s": [], "cpu_s": []}
        for i in range(2 * a.rounds if a.ab else a.rounds):
            off = a.ab and i % 4 in (1, 2)  # (on, off, off, on, ...: each first in half the pairs)
            if a.ab:
                c.run(_switch, not off)
            c.run(_install)
            t, cpu = time.perf_counter(), _cpu(procs)
            r = subprocess.run(cmd, capture_output=True, env=env, check=True)
            w, x = time.perf_counter() - t, _cpu(procs) - cpu
            if off:
                offs["wall_s"].append(round(w, 3))
                offs["cpu_s"].append(round(x, 2))
            else:
                walls.append(w)
                cpus.append(x)
            n = sum(c.run(_count).values())
            if sha is not None and hashlib.sha256(r.stdout).hexdigest() != sha:
                raise SystemExit("stdout differs between rounds")
            sha = hashlib.sha256(r.stdout).hexdigest()
        if a.ab:
            c.run(_switch, True)
            res["checks_off"] = offs
        res.update(wall_s=[round(w, 3) for w in walls], cpu_s=[round(x, 2) for x in cpus], batches=n, stdout_sha256=sha)
        c.run(_install)
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        while sum(c.run(_count).values()) < a.at * n:
            time.sleep(0.01)
        p.send_signal(signal.SIGKILL if a.kill else signal.SIGINT)
        t = time.perf_counter()
        before = sum(c.run(_count).values())
        _, err = p.communicate()
        exit_s = time.perf_counter() - t
        while c.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) or sum(c.run(_held).values()):
            time.sleep(0.02)
        idle_s = time.perf_counter() - t
        after = sum(c.run(_count).values())
        res.update(
            signal="SIGKILL" if a.kill else "SIGINT",
            rc=p.returncode,
            stderr=err.decode(),
            command_exit_s=round(exit_s, 3),
            idle_after_s=round(idle_s, 3),
            batches_at_signal=before,
            batches_after_signal=after - before,
        )
        if a.check_cost and "_task_released_check" in open(os.path.join(a.tree, "dfanalyzer", "analyzer.py")).read():
            res["released_check_ns"] = round(c.submit(_check_cost, pure=False).result(), 1)
        c.close()
    finally:
        B.stop_processes(procs)
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
