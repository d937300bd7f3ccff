"""Where a cold ``DFAnalyzer(DIR).events`` spends its CPU on a 2-worker cluster (issue 22, frame path).

Usage: ``PYTHONPATH=TREE python benchmarks/frame_phases.py DIR [ROUNDS]`` (DIR: ``*.pfw.gz``; its
indexes are removed before every round). A quiet (``dfanalyzer.cluster.QUIET_CONFIG``) 2-worker
``LocalCluster`` of single-thread processes; each round runs ``len(DFAnalyzer(files).events)``.
Prints, per round, in CPU µs per event: each phase (the analyzer's waits and client steps) split
into the client's main thread, its other threads (event loop: client comms, scheduler, nannies)
and each worker; on the workers the thread CPU inside our tasks and inside ``dask.sizeof`` of
DataFrames and tuples (wrapped through ``client.run``, after installing dfanalyzer's DataFrame
``sizeof`` where the tree has it; calls counted); each worker thread's CPU (user, system) by
thread name (the task threads, the event loop ``MainThread``); the task stream's per-prefix time.
"""

from __future__ import annotations

import collections
import glob
import os
import re
import sys
import threading
import time

import psutil

TASKS = (
    "_load_task",
    "_load_files_task",
    "_assemble",
    "_index_task",
    "_index_files_task",
    "_pick_each",
    "_loaded_each",
)


def _install() -> bool:
    """On a worker: count thread CPU inside our tasks and inside ``dask.sizeof``."""
    import time

    import pandas as pd
    from dask.sizeof import sizeof

    import dfanalyzer.analyzer as A

    acc = collections.defaultdict(lambda: [0, 0.0])
    A._phase_acc = acc

    def wrap(fn, name):
        def w(*a, **k):
            t = time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                x = acc[name]
                x[0] += 1
                x[1] += time.thread_time() - t

        return w

    for n in TASKS:
        if hasattr(A, n):
            setattr(A, n, wrap(getattr(A, n), n))
    try:  # a tree whose DataFrame sizeof is dfanalyzer's wrapper: count it, not what it wraps
        from dfanalyzer._loaded import install_frame_sizeof

        install_frame_sizeof()
    except ImportError:
        pass
    for typ in (pd.DataFrame, tuple):
        sizeof.register(typ)(wrap(sizeof.dispatch(typ), "sizeof:" + typ.__name__))
    return True


def _thread_cpu() -> dict:
    """On a worker: CPU seconds of each thread, user and system, by thread name."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    out: dict = {}
    for t in psutil.Process().threads():
        name = names.get(t.id, "other")
        out[name + " user"] = out.get(name + " user", 0.0) + t.user_time
        out[name + " sys"] = out.get(name + " sys", 0.0) + t.system_time
    return out


def _report() -> dict:
    import dfanalyzer.analyzer as A

    out = {k: tuple(v) for k, v in A._phase_acc.items()}
    A._phase_acc.clear()
    return out


def main() -> None:
    import dask
    import dask.dataframe  # noqa: F401  (imported before timing, as the benchmark does)
    from distributed import Client, LocalCluster, get_task_stream

    import dfanalyzer.analyzer as A
    from dfanalyzer import DFAnalyzer
    from dfanalyzer.cluster import QUIET_CONFIG

    d = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    print("tree", A.__file__)
    me, main_tid, workers = psutil.Process(), threading.get_native_id(), []

    def snap():
        ths = me.threads()
        m = sum(t.user_time + t.system_time for t in ths if t.id == main_tid)
        o = sum(t.user_time + t.system_time for t in ths if t.id != main_tid)
        return [m, o] + [sum(psutil.Process(p).cpu_times()[:2]) for p in workers], time.perf_counter()

    marks = []

    def mark(label):
        marks.append((label, *snap()))

    wait = DFAnalyzer._wait

    def _wait(self, futures, what):
        wait(self, futures, what)
        mark("wait:" + what)

    DFAnalyzer._wait = _wait
    plan = DFAnalyzer._index_and_plan

    def _plan(self, force):
        plan(self, force)
        mark("index+plan")

    DFAnalyzer._index_and_plan = _plan
    for fn in ("_infos_of_loads", "_holders", "_gather_each", "_held_frame"):
        orig = getattr(A, fn, None)
        if orig is not None:

            def w(*a, _o=orig, _n=fn, **k):
                r = _o(*a, **k)
                mark(_n)
                return r

            setattr(A, fn, w)

    with (
        dask.config.set(QUIET_CONFIG),
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl,
        Client(cl) as c,
    ):
        workers[:] = list(c.run(os.getpid).values())
        c.run(
            lambda: (__import__("dask.dataframe"), __import__("dfanalyzer.analyzer"), __import__("dfanalyzer.reader"))
        )
        c.run(_install)
        paths = sorted(glob.glob(os.path.join(d, "*.pfw.gz")))
        for r in range(rounds):
            for f in glob.glob(os.path.join(d, "*.zindex*")):
                os.remove(f)
            time.sleep(0.5)
            marks.clear()
            c.run(_report)
            th0 = c.run(_thread_cpu)
            with get_task_stream(c) as ts:
                mark("start")
                an = DFAnalyzer(paths, client=c)
                n = len(an.events)
                mark("len")
                an.close()
                mark("close")
            th1 = c.run(_thread_cpu)
            print(f"round {r}: {n:,} events, load average {os.getloadavg()[0]:.1f}")
            per_thread: dict = collections.defaultdict(float)
            for w, cpu in th1.items():
                for k, v in cpu.items():
                    per_thread[re.sub(r"[-_]?\d+ ", " ", k).replace("Dask-Default-Threads", "task")] += v - th0[w].get(
                        k, 0.0
                    )
            print(
                "  worker threads (µs/event, both workers):",
                ", ".join(f"{k} {v * 1e6 / n:.3f}" for k, v in sorted(per_thread.items(), key=lambda kv: -kv[1]) if v),
            )
            inside = collections.defaultdict(lambda: [0, 0.0])
            for per in c.run(_report).values():
                for k, (cnt, s) in per.items():
                    inside[k][0] += cnt
                    inside[k][1] += s
            print(
                "  thread CPU inside (µs/event, both workers, calls):",
                ", ".join(f"{k} {s * 1e6 / n:.3f} ({cnt})" for k, (cnt, s) in sorted(inside.items())),
            )
            prev, tot = marks[0], [0.0] * len(marks[0][1])
            for m in marks[1:]:
                dc = [(b - a) * 1e6 / n for a, b in zip(prev[1], m[1])]
                tot = [t + x for t, x in zip(tot, dc)]
                ws = " ".join(f"{x:.3f}" for x in dc[2:])
                print(f"  {m[0]:20s} wall {m[2] - prev[2]:6.3f} s  main {dc[0]:.3f}  loop {dc[1]:.3f}  workers {ws}")
                prev = m
            print(
                f"  total: wall {marks[-1][2] - marks[0][2]:.3f} s, main {tot[0]:.3f}, loop {tot[1]:.3f}, "
                f"workers {sum(tot[2:]):.3f}, all {sum(tot):.3f} µs/event"
            )
            stream = collections.defaultdict(lambda: [0, 0.0])
            for t in ts.data:
                key = t["key"][0] if isinstance(t["key"], tuple) else t["key"]
                for s in t["startstops"]:
                    k = f"{key.rsplit('-', 1)[0][:28]}:{s['action']}"
                    stream[k][0] += 1
                    stream[k][1] += s["stop"] - s["start"]
            top = sorted(stream.items(), key=lambda kv: -kv[1][1])
            print("  task stream:", "; ".join(f"{k} x{cnt} {s:.3f} s" for k, (cnt, s) in top))


if __name__ == "__main__":
    main()
