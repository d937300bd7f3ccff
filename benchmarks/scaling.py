"""Scaling of ``dfanalyzer summary`` with workers, and its serial steps (issue 22, Deliver 2).

One command prints the table issue 22 asks for: for each N of ``--workers`` (default 1 2 4 8
16), warm (indexes cached; one untimed run first builds them):

* ``threads``: ``dfanalyzer summary DIR --json --workers N`` as a command (start-up included),
  wall and CPU (user + system of the process, ``wait4``);
* ``cluster``: the same command with ``--scheduler ADDR`` against a running loopback cluster of
  N single-thread ``dask worker --no-nanny`` processes with ``QUIET_CONFIG``
  (``bench_analyzer.start_loopback_cluster``), after one untimed run that warms the workers;
  CPU = the command's + the scheduler's + the workers' (``/proc/PID/stat`` before and after);
* CPU per event, and its ratio to 1 worker (the issue's goal: within 1.1x);
* the client's **serial steps** of each command, timed inside it (``--_one``): file patterns and
  planning (``DFAnalyzer`` constructor less the index tasks' wait), the fold of the partials on
  the client and the root's ``finish``, the input sanity checks and writing the JSON, and the
  imports before ``main`` (everything the client does while no worker computes); as seconds
  and as a share of the command's wall (the issue's goal: no serial step above 5 %).

Every run's JSON must equal the first one's. ``--no-cluster`` skips the cluster runs.

    python benchmarks/scaling.py DIR [--workers 1 2 4 8 16] [--no-cluster] [--index-dir D]

DIR: e.g. 100M events made by ``python benchmarks/gen_traces.py --events 100000000 --files 16
--out DIR --jobs 0`` (not timed here). On a 16-core machine (the issue's 100M row: 34.5 s with 1
thread, 4.8 s with 16) the whole table takes about 4–6 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _install_timers(phases: dict, marks: dict, t_spawn: float, home):
    """Wrap the summary's phases (analyzer, summary module) with timers adding (wall s, CPU s)
    to ``phases``; the fold is timed only in the ``home`` thread (the one that runs the summary:
    with threads the pool threads fold too, beside it). Returns a function that puts the
    originals back."""
    import threading

    from dfanalyzer import analyzer as A
    from dfanalyzer import summary as S

    def add(name, wall, cpu):
        w, c = phases.get(name, (0.0, 0.0))
        phases[name] = (w + wall, c + cpu)

    def timed(name, fn, home_only=False):
        def wrapper(*a, **k):
            if home_only and threading.current_thread() is not home:
                return fn(*a, **k)
            t, c = time.perf_counter(), time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                add(name, time.perf_counter() - t, time.thread_time() - c)

        return wrapper

    saved = []

    def wrap(owner, attr, name, home_only=False):
        saved.append((owner, attr, owner.__dict__[attr]))
        setattr(owner, attr, timed(name, getattr(owner, attr), home_only))

    # planning = the constructor (patterns, stat, plan) less the wait for the index tasks
    wrap(A.DFAnalyzer, "__init__", "plan")
    wrap(A.DFAnalyzer, "_map", "index tasks (parallel)")
    wrap(A.DFAnalyzer, "input_warnings", "sanity")
    wrap(S.PartialFolder, "add", "fold", home_only=True)
    wrap(S.PartialFolder, "result", "fold", home_only=True)
    if hasattr(S, "fold_in_threads"):  # the pool threads fold; the home thread combines their partials
        wrap(S, "combine_partials", "fold", home_only=True)
    wrap(S, "finish", "finish")
    if hasattr(S, "fold_in_threads"):  # the threads' first batch start and last batch end, s after the spawn
        fold_in_threads = S.fold_in_threads

        def fold_marked(pool, threads, order, run, **kw):
            def run_marked(i):
                marks.setdefault("first batch", time.perf_counter() - t_spawn)
                try:
                    return run(i)
                finally:
                    marks["last batch"] = time.perf_counter() - t_spawn

            return (yield from fold_in_threads(pool, threads, order, run_marked, **kw))

        saved.append((S, "fold_in_threads", fold_in_threads))
        S.fold_in_threads = fold_marked
    wrap(A.DFAnalyzer, "_streamed_partial", "stream (parallel)")

    def restore():
        for owner, attr, value in reversed(saved):
            setattr(owner, attr, value)

    return restore


def _parallel_less_fold(phases: dict) -> None:
    """``plan`` less the index tasks' wait, ``stream (parallel)`` less the fold in it."""
    none = (0.0, 0.0)
    if "plan" in phases:
        phases["plan"] = tuple(a - b for a, b in zip(phases["plan"], phases.get("index tasks (parallel)", none)))
    if "stream (parallel)" in phases:
        phases["stream (parallel)"] = tuple(
            a - b for a, b in zip(phases["stream (parallel)"], phases.get("fold", none))
        )


def _timed_on_worker(path: str):
    """``cli._summary_on_worker`` with the summary's phases timed on the worker that runs it
    (the ``--scheduler`` summary runs there, not in the command: ``cli.SUMMARY_ON_WORKER``); the
    phases go to ``path`` (the loopback cluster shares this machine's file system). Defined in
    the script run as ``__main__``: cloudpickle ships it by value, no import on the worker,
    where ``dfanalyzer.cli`` is not patched (the workers are other processes)."""

    def run(args):
        import threading

        phases, marks = {}, {}
        restore = _install_timers(phases, marks, time.perf_counter(), threading.current_thread())
        t, c = time.perf_counter(), time.thread_time()
        try:
            from dfanalyzer import cli

            return cli._summary_on_worker(args)
        finally:
            phases["main"] = (time.perf_counter() - t, time.thread_time() - c)
            _parallel_less_fold(phases)
            restore()  # (the worker lives on: the next run wraps the originals afresh)
            with open(path, "w") as f:
                json.dump(phases, f)

    return run


def _one(argv) -> int:
    """Run ``dfanalyzer.cli.main(argv)`` with the client's phases timed; the phases go to the file
    named by $DFA_SCALING_PHASES as JSON (seconds of wall and of this process's CPU). With
    ``--scheduler`` the summary runs on a worker: its phases are timed there
    (:func:`_timed_on_worker`) and kept under ``"remote"``; the command imports only
    ``dfanalyzer.cli``, as the console script does."""
    t_start = time.perf_counter()
    t_spawn = float(os.environ.get("DFA_SCALING_T0", t_start))  # (CLOCK_MONOTONIC: the parent's clock)
    import threading

    from dfanalyzer import cli

    phases: dict = {}
    marks: dict = {}  # the threads' first batch start and last batch end, s after the spawn
    t_imports = time.perf_counter() - t_start
    out = os.environ["DFA_SCALING_PHASES"]
    remote = "--scheduler" in argv or "--scheduler-file" in argv
    if remote:
        if os.path.exists(out + ".worker"):
            os.unlink(out + ".worker")
        cli._summary_on_worker = _timed_on_worker(out + ".worker")
        from_worker = cli._summary_from_worker

        def timed_from_worker(*a, **k):
            t = time.perf_counter()
            try:
                return from_worker(*a, **k)
            finally:
                phases["remote wait"] = (time.perf_counter() - t, 0.0)

        cli._summary_from_worker = timed_from_worker
    else:
        _install_timers(phases, marks, t_spawn, threading.main_thread())
    if hasattr(cli, "_keep_freed_memory"):  # as the console script's run() does before main
        cli._keep_freed_memory()
    t, c = time.perf_counter(), time.process_time()
    rc = cli.main(argv)
    total = (time.perf_counter() - t, time.process_time() - c)
    _parallel_less_fold(phases)
    phases["main"] = total
    phases["imports"] = (t_imports, 0.0)
    phases["interpreter"] = (t_start - t_spawn, 0.0)
    phases["main end"] = (time.perf_counter() - t_spawn, 0.0)
    phases.update({k: (v, 0.0) for k, v in marks.items()})
    if remote:
        if not os.path.exists(out + ".worker"):
            raise SystemExit("--scheduler: the summary did not run on a worker (cli._runs_on_worker)")
        with open(out + ".worker") as f:
            phases["remote"] = json.load(f)
    with open(out, "w") as f:
        json.dump(phases, f)
    if hasattr(cli, "run"):  # the console script's exit (cli.run), with this status
        cli.main = lambda: rc
        cli.run()
    return rc


def _proc_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


#: ``--index-dir D`` of every command (``--index-dir``), or nothing
INDEX_ARGS: list = []


def _command(d: str, extra: list, tmp: str) -> dict:
    """One timed command; returns wall, CPU, the summary and the client's phases."""
    phases_file = os.path.join(tmp, "phases.json")
    tree = os.environ.get("DFA_BENCH_TREE") or ROOT  # (as bench_analyzer.TREE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([tree, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    env["DFA_SCALING_PHASES"] = phases_file
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # (byte code cached, as for an installed package)
    cmd = [sys.executable, os.path.abspath(__file__), "--_one", "summary", d, "--json", "--no-progress"]
    cmd += [*INDEX_ARGS, *extra]
    t = time.perf_counter()
    env["DFA_SCALING_T0"] = repr(t)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd="/")
    out, err = p.communicate()
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {err.decode()[-2000:]}")
    with open(phases_file) as f:
        phases = json.load(f)
    phases["exit"] = (wall - phases["main end"][0], 0.0)
    return {"wall": wall, "summary": json.loads(out), "phases": phases}


def _timed(d: str, extra: list, tmp: str, others=()) -> dict:
    """:func:`_command` with CPU: the child's (rusage of children) plus ``others`` processes'."""
    import resource

    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    o0 = [_proc_cpu(p.pid) for p in others]
    res = _command(d, extra, tmp)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    o1 = [_proc_cpu(p.pid) for p in others]
    res["cpu_client"] = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    res["cpu_cluster"] = sum(b - a for a, b in zip(o0, o1))
    res["cpu"] = res["cpu_client"] + res["cpu_cluster"]
    return res


SERIAL = ("interpreter", "imports", "plan", "fold", "finish", "sanity", "other", "exit")


def _steps(ph: dict) -> dict:
    """The serial steps, s: imports and planning (wall), the fold of the partials (CPU: with
    threads it runs in the main thread beside the workers, holding the GIL; its wall there is
    mostly waiting for the GIL), the root's finish and the sanity checks (wall), and "other":
    the wall outside the timed phases (argument parsing, importing distributed and connecting,
    printing the JSON, closing); "interpreter": from the spawn to the script's first line
    (Python and its ``site``), "exit": from the end of ``main`` to the parent's wait (the
    process's exit). With ``--scheduler`` (``"remote"``: the summary ran on a worker) planning,
    fold, finish and sanity are the worker's, and "other" is the command's wall outside its wait
    for the worker plus the worker's own untimed wall."""
    none = (0.0, 0.0)
    rem = ph.get("remote")
    run = rem if rem is not None else ph  # where the summary ran

    def untimed(p, waits):
        w = sum(p.get(k, none)[0] for k in ("plan", "finish", "sanity", "fold", *waits))
        return max(0.0, p["main"][0] - w)

    other = untimed(ph, ("index tasks (parallel)", "stream (parallel)", "remote wait"))
    if rem is not None:
        other += untimed(rem, ("index tasks (parallel)", "stream (parallel)"))
    return {
        "interpreter": ph.get("interpreter", none)[0],
        "imports": ph["imports"][0],
        "plan": run.get("plan", none)[0],
        "fold": run.get("fold", none)[1],
        "finish": run.get("finish", none)[0],
        "sanity": run.get("sanity", none)[0],
        "other": other,
        "exit": ph.get("exit", none)[0],
    }


def _serial(ph: dict) -> float:
    return sum(_steps(ph).values())


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--_one":
        return _one(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--no-cluster", action="store_true")
    ap.add_argument("--index-dir", default=None, help="passed to every command (indexes kept away from DIR)")
    a = ap.parse_args(argv)
    import tempfile

    sys.path.insert(0, HERE)
    import bench_analyzer as B

    d = os.path.abspath(a.dir)
    if a.index_dir:
        INDEX_ARGS[:] = ["--index-dir", os.path.abspath(a.index_dir)]
    tmp = tempfile.mkdtemp(prefix="dfa-scaling-")
    print(f"# {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, {os.cpu_count()} CPUs, load {os.getloadavg()}")
    first = _command(d, ["--workers", str(max(a.workers))], tmp)["summary"]  # indexes built, page cache warm
    events = first["events"]
    rows = []
    for n in a.workers:
        row = {"workers": n, "threads": _timed(d, ["--workers", str(n)], tmp)}
        if not a.no_cluster:
            addr, procs = B.start_loopback_cluster(n, quiet=True)
            try:
                from distributed import Client

                with Client(addr, timeout=120) as c:
                    c.wait_for_workers(n, timeout=120)
                _command(d, ["--scheduler", addr], tmp)  # warm-up: the workers' imports
                row["cluster"] = _timed(d, ["--scheduler", addr], tmp, others=procs)
            finally:
                B.stop_processes(procs)
        for k in ("threads", "cluster"):
            if k in row and row[k]["summary"] != first:
                raise SystemExit(f"{k} summary with {n} workers differs from the first run's")
        rows.append(row)
        _print_row(row, rows[0], events, header=len(rows) == 1)
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, load {os.getloadavg()}; serial = client steps (_steps)"
    )
    print("\n| workers | run | " + " | ".join(f"{k} s" for k in SERIAL) + " | serial s | serial % of wall |")
    print("|---:|---|" + "---:|" * (len(SERIAL) + 2))
    for row in rows:
        for k in ("threads", "cluster"):
            if k in row:
                st = _steps(row[k]["phases"])
                s = sum(st.values())
                cells = " | ".join(f"{st[x]:.3f}" for x in SERIAL)
                print(f"| {row['workers']} | {k} | {cells} | {s:.3f} | {100 * s / row[k]['wall']:.1f} % |")
    print("\nthreads: before the first batch starts, and after the last batch ends (s; the pool idle)")
    print("\n| workers | wall s | spawn -> first batch | last batch -> exit |\n|---:|---:|---:|---:|")
    for row in rows:
        ph, wall = row["threads"]["phases"], row["threads"]["wall"]
        if "first batch" in ph:
            first, last = ph["first batch"][0], ph["last batch"][0]
            print(f"| {row['workers']} | {wall:.3f} | {first:.3f} | {wall - last:.3f} |")
    return 0


def _print_row(row, base, events, header) -> None:
    if header:
        print(
            "| workers | threads wall s | threads CPU s | threads CPU µs/event | vs 1 | cluster wall s | "
            "cluster CPU s (client + cluster) | cluster CPU µs/event | vs 1 | threads serial % | cluster serial % |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    t, c = row["threads"], row.get("cluster")
    t1 = base["threads"]["cpu"]
    cells = [
        str(row["workers"]),
        f"{t['wall']:.2f}",
        f"{t['cpu']:.2f}",
        f"{1e6 * t['cpu'] / events:.3f}",
        f"{t['cpu'] / t1:.2f}",
    ]
    if c is not None:
        c1 = base["cluster"]["cpu"]
        cells += [
            f"{c['wall']:.2f}",
            f"{c['cpu']:.2f} ({c['cpu_client']:.2f} + {c['cpu_cluster']:.2f})",
            f"{1e6 * c['cpu'] / events:.3f}",
            f"{c['cpu'] / c1:.2f}",
        ]
    else:
        cells += ["-"] * 4
    cells.append(f"{100 * _serial(t['phases']) / t['wall']:.1f}")
    cells.append(f"{100 * _serial(c['phases']) / c['wall']:.1f}" if c is not None else "-")
    print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
