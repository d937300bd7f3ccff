"""Where a frame-path load task's CPU goes: C++ load (with the binding) vs the pandas frame vs the
rest of the task, and ``dask.sizeof`` of its result; two source trees, same run, alternating.

``dfanalyzer.analyzer._load_task`` (what ``DFAnalyzer(...).events`` runs per batch) is run on every
16 MiB batch of a trace folder (``DIR``, indexed into ``INDEX_DIR``: nothing is written next to the
data), after one warm-up batch; each result is held (as a worker holds it). Per step, thread CPU
(``time.thread_time``) and minor page faults (``RUSAGE_THREAD``), per event:

* ``cxx``: ``dfanalyzer._reader.load_batch`` (inflate + parse + the binding's NumPy handoff);
* ``frame``: ``dfanalyzer.reader._batch`` (the events and metadata DataFrames, counts, warnings);
* ``rest``: the rest of ``_load_task`` (sanity span, schema, ``BatchInfo``);
* ``sizeof``: ``dask.sizeof`` of the task's result (a worker computes it for every result).

Modes (each tree runs in its own child process, ``PYTHONPATH=TREE``; ``--rounds`` rounds, the
trees in alternating order; medians and the pairwise new ÷ old ratio of each step)::

    python benchmarks/bench_frame_build.py DIR INDEX_DIR OLD_TREE NEW_TREE [--rounds 4]
        [--trim]      # MALLOC_TRIM_THRESHOLD_=65536 in the child, as Dask's nanny sets it
        [--cluster]   # the tasks inside the workers of a 2-worker LocalCluster (nanny)

``--whole``: instead of the steps, the whole cold frame path ``len(DFAnalyzer(DIR, client).events)``
(indexes in a fresh private folder each round) on a 2-worker ``LocalCluster`` with
``dfanalyzer.cluster.QUIET_CONFIG``, after one unmeasured round: CPU µs per event of client (+
scheduler) and workers (``psutil``), as ``bench_analyzer.py --frame-vs-bag`` measures ours.

With ``--cluster`` each task runs on a worker of a fresh 2-process ``LocalCluster`` (default Dask
config, one thread per worker) started by the child; the worker keeps the result in a module-level
list (held, as the frame path holds it) and returns the step figures.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import statistics
import subprocess
import sys
import time

STEPS = ("cxx", "frame", "rest", "task", "sizeof")


def _now():
    return time.thread_time(), resource.getrusage(resource.RUSAGE_THREAD).ru_minflt


def _instrument():
    """Wrap ``reader._reader.load_batch`` and ``reader._batch`` with per-thread step timers."""
    import threading

    from dfanalyzer import reader

    acc = threading.local()

    def add(step, t0):
        t1 = _now()
        d = acc.__dict__.setdefault("d", {})
        c, f = d.get(step, (0.0, 0))
        d[step] = (c + t1[0] - t0[0], f + t1[1] - t0[1])

    class Proxy:
        def __init__(self, mod):
            self._mod = mod

        def __getattr__(self, name):
            return getattr(self._mod, name)

        def load_batch(self, *a, **k):
            t0 = _now()
            try:
                return self._mod.load_batch(*a, **k)
            finally:
                add("cxx", t0)

    if not isinstance(reader._reader, Proxy):
        reader._reader = Proxy(reader._reader)
        batch = reader._batch

        def timed_batch(*a, **k):
            t0 = _now()
            try:
                return batch(*a, **k)
            finally:
                add("frame", t0)

        reader._batch = timed_batch
    return acc, add


def _task(batch, index_dir):
    """One measured ``_load_task``: ``{step: (cpu s, faults)}`` and the rows; the result is held."""
    from dask.sizeof import sizeof

    from dfanalyzer import analyzer

    acc, add = _instrument()
    acc.d = {}
    t0 = _now()
    res = analyzer._load_task(batch, index_dir)
    add("task", t0)
    if res[2].error:
        raise RuntimeError(res[2].error)
    t0 = _now()
    sizeof(res)
    add("sizeof", t0)
    # held as a worker holds it (a module-level list would be copied with this function when it is
    # pickled by value for a worker)
    sys.__dict__.setdefault("_bench_frame_held", []).append(res)
    return dict(acc.d), len(res[0])


def _batches(d, index_dir):
    from dfanalyzer import analyzer, reader

    files = []
    for p in sorted(glob.glob(os.path.join(d, "*.pfw.gz"))):
        i = reader.build_index(p, index_dir)
        files.append({"path": p, "checkpoints": [(c["uncompressed_size"], c["num_lines"]) for c in i["checkpoints"]]})
    return analyzer.plan_batches(files, 16 * 2**20)


def child(d, index_dir, cluster):
    batches = _batches(d, index_dir)
    tot: dict = {}
    rows = 0
    if cluster:
        import logging

        from distributed import Client, LocalCluster

        logging.getLogger("distributed").setLevel(logging.ERROR)
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc:
            with Client(lc) as c:
                c.run(lambda: __import__("dfanalyzer.analyzer"))
                w = list(c.scheduler_info()["workers"])
                # one warm-up batch on each worker, then every batch, round robin
                c.gather([c.submit(_task, batches[0], index_dir, workers=[x], pure=False) for x in w])
                fs = [c.submit(_task, b, index_dir, workers=[w[i % 2]], pure=False) for i, b in enumerate(batches)]
                out = c.gather(fs)
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as ex:
            ex.submit(_task, batches[0], index_dir).result()
            out = ex.submit(lambda: [_task(b, index_dir) for b in batches]).result()
    for steps, n in out:
        rows += n
        for k, (c_, f) in steps.items():
            a = tot.setdefault(k, [0.0, 0])
            a[0] += c_
            a[1] += f
    res = {k: {"us": v[0] / rows * 1e6, "faults": v[1] / rows} for k, v in tot.items()}
    res["rest"] = {
        "us": res["task"]["us"] - res["cxx"]["us"] - res["frame"]["us"],
        "faults": res["task"]["faults"] - res["cxx"]["faults"] - res["frame"]["faults"],
    }
    print(json.dumps({"events": rows, "batches": len(batches), "steps": res}))


def child_whole(d, rounds=2):
    import contextlib
    import logging
    import shutil
    import tempfile

    import dask
    import dask.dataframe  # noqa: F401  (imported before timing, as bench_analyzer.py does)
    import psutil
    from distributed import Client, LocalCluster

    from dfanalyzer import DFAnalyzer
    from dfanalyzer.cluster import QUIET_CONFIG

    logging.getLogger("distributed").setLevel(logging.ERROR)
    paths = sorted(glob.glob(os.path.join(d, "*.pfw.gz")))
    out = []
    with (
        dask.config.set(QUIET_CONFIG),
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl,
        Client(cl) as c,
    ):
        procs = [psutil.Process()] + [psutil.Process(p) for p in c.run(os.getpid).values()]
        c.run(lambda: __import__("dfanalyzer.analyzer"))

        def cpu():
            return [sum(p.cpu_times()[:2]) for p in procs]

        for r in range(rounds + 1):
            idx = tempfile.mkdtemp(prefix="bench-frame-idx-")
            c0 = cpu()
            with contextlib.closing(DFAnalyzer(paths, index_dir=idx, client=c)) as an:
                n = len(an.events)
            c1 = cpu()
            shutil.rmtree(idx)
            if r:
                out.append(
                    {
                        "events": n,
                        "client": (c1[0] - c0[0]) / n * 1e6,
                        "workers": sum(c1[1:]) / n * 1e6 - sum(c0[1:]) / n * 1e6,
                    }
                )
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("index_dir")
    ap.add_argument("old", nargs="?")
    ap.add_argument("new", nargs="?")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--trim", action="store_true", help="MALLOC_TRIM_THRESHOLD_=65536 (as Dask's nanny)")
    ap.add_argument("--cluster", action="store_true", help="inside the workers of a 2-worker LocalCluster")
    ap.add_argument("--whole", action="store_true", help="the whole cold frame path, client + workers CPU")
    ap.add_argument("--_child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    d, idx = os.path.abspath(a.dir), os.path.abspath(a.index_dir)
    if a._child:
        child_whole(d) if a.whole else child(d, idx, a.cluster)
        return
    trees = {"old": os.path.abspath(a.old), "new": os.path.abspath(a.new)}
    res: dict = {"old": [], "new": []}
    mode = ("whole frame path" if a.whole else "cluster" if a.cluster else "in process") + (
        ", MALLOC_TRIM_THRESHOLD_=65536" if a.trim else ""
    )
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, {mode}, load {os.getloadavg()[0]:.1f}")
    for r in range(a.rounds):
        for k in ("old", "new") if r % 2 == 0 else ("new", "old"):
            env = dict(os.environ, PYTHONPATH=trees[k])
            env.pop("PYTHONSAFEPATH", None)
            if a.trim:
                env["MALLOC_TRIM_THRESHOLD_"] = "65536"
            cmd = [sys.executable, os.path.abspath(__file__), d, idx, "--_child"] + (["--cluster"] if a.cluster else [])
            cmd += ["--whole"] if a.whole else []
            p = subprocess.run(cmd, env=env, cwd="/", capture_output=True, text=True)
            if p.returncode:
                raise SystemExit(f"{k} failed:\n{p.stderr[-3000:]}")
            out = json.loads(p.stdout.strip().splitlines()[-1])
            if a.whole:
                for x in out:
                    res[k].append(x)
                    print(
                        f"# round {r + 1} {k}: client {x['client']:.3f} workers {x['workers']:.3f} µs/event", flush=True
                    )
                continue
            res[k].append(out)
            s = out["steps"]
            print(f"# round {r + 1} {k}: " + ", ".join(f"{x} {s[x]['us']:.3f}" for x in STEPS), flush=True)
    med = statistics.median
    if a.whole:
        print(
            "\n| tree | rounds | client µs/event | workers µs/event | total µs/event (median) |\n|---|---:|---:|---:|---:|"
        )
        for k in ("old", "new"):
            tot = [x["client"] + x["workers"] for x in res[k]]
            print(
                f"| {k} | {len(tot)} | {med(x['client'] for x in res[k]):.3f} | {med(x['workers'] for x in res[k]):.3f} | "
                f"{med(tot):.3f} |"
            )
        pair = med((n["client"] + n["workers"]) / (o["client"] + o["workers"]) for o, n in zip(res["old"], res["new"]))
        print(f"\npairwise new ÷ old total: {pair:.3f}; {res['new'][0]['events']:,} events")
        print(f"# {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, load {os.getloadavg()[0]:.1f}")
        return
    print(f"\n{res['new'][0]['events']:,} events, {res['new'][0]['batches']} batches; µs CPU / minor faults per event")
    print("\n| step | old µs | new µs | pairwise new ÷ old | old faults | new faults |\n|---|---:|---:|---:|---:|---:|")
    for x in STEPS:
        o = [r["steps"][x] for r in res["old"]]
        n = [r["steps"][x] for r in res["new"]]
        pair = med(b["us"] / a["us"] for a, b in zip(o, n)) if all(a["us"] > 0 for a in o) else float("nan")
        print(
            f"| {x} | {med(v['us'] for v in o):.3f} | {med(v['us'] for v in n):.3f} | {pair:.3f} | "
            f"{med(v['faults'] for v in o):.4f} | {med(v['faults'] for v in n):.4f} |"
        )
    print(f"\n# {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
