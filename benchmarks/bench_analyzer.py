#!/usr/bin/env python3
"""DFAnalyzer end to end against LLNL dftracer-utils and a naive Dask bag, same files, one run.

    python benchmarks/bench_analyzer.py [--events 2000000] [--files 16] [--sources preload,generator]
        [--workers 2] [--repeat 3] [--scale 10000000,100000000] [--data DIR] [--json OUT]

Traces (generated once into ``--data``, default ``build/bench-analyzer``, and reused):

* ``preload``: our LD_PRELOAD tracer on real processes: ``--files`` runs of
  ``dd if=in.bin of=out.bin bs=64 count=K`` (K = events / files / 2; one ``read`` and one
  ``write`` event per block), written by the tracer's member writer;
* ``generator``: ``benchmarks/gen_traces.py`` (our member format, a POSIX/STDIO/app mix with args).

Cold (each a fresh process, wall clock of the whole command, indexes removed first; the order
of the three is rotated every repeat, medians reported):

* ours: ``python -m dfanalyzer.cli summary DIR --json --workers W --no-progress``;
* dftracer-utils (PyPI, LLNL): ``Indexer(files, force_rebuild=True).ensure_indexed()`` then
  ``TraceViewer(files).collect().to_pandas()`` (the loader the paper's successors use);
* naive: a ``LocalCluster`` of W worker processes, ``dask.bag.read_text`` + ``json.loads`` +
  ``to_dataframe`` + row count.

Warm (in this process, indexes cached): ``DFAnalyzer(files, args=()).summary()`` with the
thread pool (no cluster) and with a running ``LocalCluster`` of W processes (cluster up);
events/s per core = events / wall / W. Memory: ``memory_usage(deep=True)`` of the persisted
``events`` (``args=()``, what the summary reads) per event.

``--scale N,...``: generator traces of N events, ours only, as whole ``dfanalyzer summary``
commands: cold (indexes removed) then warm (indexes kept), with each command's wall time, CPU
time (user + system, ``wait4``) and peak RSS; the peers are not run at that size
(``--scale-peers`` runs them too, with the in-process warm runs above). ``--ours-only`` runs the
``--sources`` sets the same way (ours only, whole commands, cold then warm).

``--compare OLD_TREE NEW_TREE``: two source trees (each built in place), same run, no peers:
``--workloads`` (summary-cold, summary-warm, views, frame, views-local, frame-local; see
``_work_main``) on ``--compare-sets NAME=DIR,...`` (``DIR/old`` and ``DIR/new`` hold copies of the
same traces), ``--repeat`` rounds in alternating order, wall and CPU medians and new ÷ old
ratios; ``--ir NAME=DIR,...`` adds callgrind instruction counts (Ir) of one measured run of each
``--ir-workloads`` (needs ``valgrind`` and a C compiler). Results: ``docs/perf/analyzer.md``.

``--frame-vs-bag DIR``: cold ``DFAnalyzer(DIR).events`` (indexes removed, persisted, ``len``)
vs the naive ``read_text`` + ``json.loads`` bag (event lines counted), one ``LocalCluster`` of
``--workers`` processes, ``--repeat`` alternating rounds; CPU (client + workers) per event and
bag ÷ ours; CPU split client (+ scheduler) / workers; ``--quiet-cluster``: the cluster with
``dfanalyzer.cluster.QUIET_CONFIG``, as ``DFAnalyzer`` starts its own. Each run's window opens on a
settled cluster (the previous run's data freed, garbage collected in every process, outside the
window) and closes once the cluster has freed this run's own data (inside); ``--no-settle``: the
windows of the earlier rounds (opened and closed right around the call).

``--cluster-compare DIR``: warm summary of DIR with ``--workers`` threads vs a running loopback
cluster (``dask scheduler`` + ``--workers`` single-thread ``dask worker --no-nanny`` commands;
``--quiet-cluster``: with ``dfanalyzer.cluster.QUIET_CONFIG``), ``--repeat`` alternating rounds,
in process and as whole commands (``--no-cli``: in process only); wall and CPU of client +
scheduler + workers, the idle cluster's CPU rate, medians and paired ratios.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
#: the tree whose dfanalyzer the cluster's processes import: this source tree (built in place),
#: or $DFA_BENCH_TREE (e.g. the installed package's folder, where the source has no compiled modules)
TREE = os.environ.get("DFA_BENCH_TREE") or ROOT


# ----------------------------------------------------------------------------- traces
def preload_traces(data: str, events: int, files: int) -> list:
    d = os.path.join(data, f"preload-e{events}-f{files}")
    done = os.path.join(d, ".done")
    if not os.path.exists(done):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        work = os.path.join(d, "work")
        os.makedirs(work)
        with open(os.path.join(work, "in.bin"), "wb") as f:
            f.write(os.urandom(1 << 20))
        pre = subprocess.run(
            [sys.executable, "-m", "dftracer", "--preload-path"], capture_output=True, text=True, check=True, cwd="/"
        ).stdout.strip()
        blocks = max(1, events // files // 2)
        t = time.perf_counter()
        for i in range(files):
            env = dict(
                os.environ,
                LD_PRELOAD=pre,
                DFTRACER_ENABLE="1",
                DFTRACER_DATA_DIR="all",
                DFTRACER_LOG_FILE=os.path.join(d, f"dd-{i}"),
            )
            # a regular input file large enough for every block (/dev/zero is not traced)
            need = blocks * 64
            src = os.path.join(work, "in.bin")
            if os.path.getsize(src) < need:
                with open(src, "ab") as f:
                    f.truncate(need)
            subprocess.run(
                ["dd", f"if={src}", f"of={os.path.join(work, 'out.bin')}", "bs=64", f"count={blocks}"],
                env=env,
                check=True,
                stderr=subprocess.DEVNULL,
            )
        shutil.rmtree(work)
        open(done, "w").close()
        print(f"# preload: {files} dd runs of {blocks:,} blocks in {time.perf_counter() - t:.1f} s", flush=True)
    return sorted(glob.glob(os.path.join(d, "*.pfw.gz")))


def generator_traces(data: str, events: int, files: int) -> list:
    sys.path.insert(0, HERE)
    import gen_traces

    d = os.path.join(data, f"gen-e{events}-f{files}")
    done = os.path.join(d, ".done")
    if not os.path.exists(done):
        shutil.rmtree(d, ignore_errors=True)
        t = time.perf_counter()
        gen_traces.generate(d, events, files, fmt="member")
        open(done, "w").close()
        print(f"# generator: {events:,} events in {files} files in {time.perf_counter() - t:.1f} s", flush=True)
    return sorted(glob.glob(os.path.join(d, "*.pfw.gz")))


def _clear_indexes(d: str) -> None:
    for p in glob.glob(os.path.join(d, "*.zindex*")):
        os.unlink(p)
    shutil.rmtree(os.path.join(d, "utils-index"), ignore_errors=True)


# ----------------------------------------------------------------------------- cold commands
LAST_RUN = {}  # CPU seconds (user + system, all threads) and peak RSS bytes of the last _run's process


def _run(cmd, cwd) -> tuple:
    """Run ``cmd``; returns (wall s, stdout) and leaves its CPU time and peak RSS in LAST_RUN
    (``wait4`` rusage of that process; the peak is of the process itself, not its children)."""
    import tempfile

    t = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, cwd=cwd)
        _, status, ru = os.wait4(p.pid, 0)
        dt = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    LAST_RUN.update(cpu_s=ru.ru_utime + ru.ru_stime, peak_rss=ru.ru_maxrss * 1024)
    if p.returncode != 0:
        raise SystemExit(f"{cmd[:4]} failed:\n{stderr[-3000:]}")
    return dt, stdout


def cold_ours(d: str, workers: int, keep_index: bool = False) -> tuple:
    if not keep_index:
        _clear_indexes(d)
    dt, out = _run(
        [sys.executable, "-m", "dfanalyzer.cli", "summary", d, "--json", "--workers", str(workers), "--no-progress"],
        "/",
    )
    return dt, json.loads(out)["events"]


def cold_utils(d: str, workers: int) -> tuple:
    _clear_indexes(d)
    dt, out = _run([sys.executable, os.path.abspath(__file__), "--_utils", d], "/")
    return dt, int(out.split()[-1])


def cold_bag(d: str, workers: int) -> tuple:
    dt, out = _run([sys.executable, os.path.abspath(__file__), "--_bag", d, str(workers)], "/")
    return dt, int(out.split()[-1])


def _utils_main(d: str) -> None:
    from dftracer.utils import Indexer, TraceViewer, set_log_level

    try:
        set_log_level("error")
    except Exception:
        pass
    files = sorted(glob.glob(os.path.join(d, "*.pfw.gz")))
    ix = os.path.join(d, "utils-index")
    Indexer(files=files, index_dir=ix, force_rebuild=True).ensure_indexed()
    df = TraceViewer(files, index_path=ix).collect().to_pandas()
    print(len(df))


def _flatten(rec: dict) -> dict:
    out = {k: rec.get(k) for k in ("name", "cat", "pid", "tid", "ts", "dur", "ph")}
    out.update((f"arg_{k}", str(v)) for k, v in (rec.get("args") or {}).items())
    return out


def _is_event(line: str) -> bool:
    return line.startswith("{") and '"ph":"M"' not in line


def _bag_main(d: str, workers: int) -> None:
    import logging

    import dask.bag as db
    from distributed import Client, LocalCluster

    logging.getLogger("distributed").setLevel(logging.ERROR)
    with (
        LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cl,
        Client(cl),
    ):
        files = sorted(glob.glob(os.path.join(d, "*.pfw.gz")))
        # the naive pipeline being timed (on purpose not conftest.read_trace)
        bag = db.read_text(files).filter(_is_event).map(json.loads).map(_flatten)
        print(int(bag.to_dataframe().shape[0].compute()))


# ----------------------------------------------------------------------------- warm, memory
def warm_ours(paths, workers: int, client=None) -> tuple:
    from dfanalyzer import DFAnalyzer

    t = time.perf_counter()
    with DFAnalyzer(paths, args=(), client=client, n_workers=workers) as an:
        n = an.summary(show=False).events
    return time.perf_counter() - t, n


def held_bytes_per_event(paths, client) -> float:
    from dfanalyzer import DFAnalyzer

    with DFAnalyzer(paths, args=(), client=client) as an:
        ev = an.events
        mem = int(ev.map_partitions(lambda p: p.memory_usage(deep=True).sum()).sum().compute())
        return mem / an.stats["events"]


# ----------------------------------------------------------------------------- old vs new, same run
WORKLOADS = ("summary-cold", "summary-warm", "views", "frame", "views-local", "frame-local")
_CG_SRC = r"""
#include <valgrind/callgrind.h>
void cg_on(void) { CALLGRIND_START_INSTRUMENTATION; CALLGRIND_ZERO_STATS; }
void cg_off(void) { CALLGRIND_DUMP_STATS_AT("workload"); CALLGRIND_STOP_INSTRUMENTATION; }
"""


def _callgrind_toggle(tmp: str):
    """A ctypes handle on ``cg_on``/``cg_off`` (callgrind client requests; no-ops outside valgrind)."""
    import ctypes

    src, so = os.path.join(tmp, "cg.c"), os.path.join(tmp, "cg.so")
    with open(src, "w") as f:
        f.write(_CG_SRC)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", so, src], check=True)
    return ctypes.CDLL(so)


def _work_main(workload: str, d: str, ir_tmp: str = "") -> None:
    """One workload of the analyzer found on ``sys.path`` (``PYTHONPATH=<tree>``) on the traces in
    ``d``, after one unmeasured warm-up run (imports, indexes); prints a JSON line with the
    measured run's events, wall s and CPU s (this process, all threads). ``summary-*``: the CLI's
    streamed summary, thread pool of one worker (``summary-cold``: indexes removed first);
    ``views``: events held on an in-process one-thread Dask cluster, then ``functions()``,
    ``file_view()``, ``processes()``, ``time_windows()``, ``epochs()``, ``layers()``; ``frame``: the
    summary over the held frame. With ``ir_tmp`` only the measured run is instrumented by callgrind
    (run under ``valgrind --tool=callgrind --instr-atstart=no``)."""
    from dfanalyzer import DFAnalyzer

    files = sorted(glob.glob(os.path.join(d, "*.pfw.gz")))
    client = None
    if workload in ("views", "frame"):
        import logging

        from distributed import Client

        logging.getLogger("distributed").setLevel(logging.ERROR)
        client = Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None)

    def run() -> int:
        if workload.startswith("summary"):
            with DFAnalyzer(files, args=(), n_workers=1, progress=False) as an:
                return an.summary(show=False).events
        with DFAnalyzer(files, client=client, progress=False) as an:
            if workload == "frame":
                _ = an.events  # loads and persists the frame
                return an.summary(show=False).events
            for view in (an.functions, an.file_view, an.processes, an.time_windows, an.epochs, an.layers):
                view()
            return an.stats["events"]

    if workload.endswith("-local"):
        run = _local_workload(workload, files)
    run()  # warm-up
    if workload == "summary-cold":
        _clear_indexes(d)
    cg = _callgrind_toggle(ir_tmp) if ir_tmp else None
    if cg:
        cg.cg_on()
    t, c = time.perf_counter(), time.process_time()
    ev = run()
    dt, cpu = time.perf_counter() - t, time.process_time() - c
    if cg:
        cg.cg_off()
    if client is not None:
        client.close()
    print(json.dumps({"events": ev, "wall_s": dt, "cpu_s": cpu}))


def _local_workload(workload: str, files: list):
    """``views-local`` / ``frame-local``: the events are loaded once (an in-process Dask cluster,
    then closed) and kept as pandas partitions; the measured run is only the views' (or the
    frame summary's) partial / combine / finish code on them, Dask's synchronous scheduler, no
    cluster: what the engine refactor changed, without event-loop noise (callgrind-stable)."""
    import logging

    import dask
    import dask.dataframe as dd
    from dask import delayed
    from distributed import Client

    from dfanalyzer import DFAnalyzer, views
    from dfanalyzer import summary as _summary

    logging.getLogger("distributed").setLevel(logging.ERROR)
    with Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None) as client:
        with DFAnalyzer(files, client=client, progress=False) as an:
            parts = client.gather(client.compute(an.events.to_delayed()))
            io, cp, app = an.io_cats, an.compute_cats, an.app_io_cats
            parents = views.parents_from_metadata(an.metadata)
    dask.config.set(scheduler="synchronous")
    ev = dd.from_delayed([delayed(p) for p in parts], meta=parts[0].iloc[:0], verify_meta=False)
    rows = sum(len(p) for p in parts)

    def frame() -> int:
        part = _summary.combine_partials([_summary.partition_partial(p, io, cp, app) for p in parts])
        return _summary.finish(part, []).events

    def views_() -> int:
        views.function_metrics(ev, io)
        views.file_view(ev, io)
        views.process_view(ev, io, cp, app, parents=parents)
        views.time_view(ev, io_cats=io, compute_cats=cp)
        views.epoch_view(ev, io)
        views.layer_view(ev)
        return rows

    return frame if workload == "frame-local" else views_


def _tree_env(tree: str) -> dict:
    env = dict(os.environ, PYTHONPATH=tree, PYTHONHASHSEED="0")
    env.pop("PYTHONSAFEPATH", None)
    return env


def _work(tree: str, workload: str, d: str) -> dict:
    """One ``--_work`` process on ``tree``: its in-process figures plus the whole process's wall
    and CPU (``wait4``)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--_work", workload, d]
    t = time.perf_counter()
    p = subprocess.run(cmd, env=_tree_env(tree), cwd="/", capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{tree} {workload} failed:\n{p.stderr[-3000:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["process_wall_s"] = time.perf_counter() - t
    return r


def _ir(tree: str, workload: str, d: str, tmp: str) -> int:
    """Instructions (callgrind Ir) of one measured ``workload`` run on ``tree``."""
    name = f"{os.path.basename(os.path.dirname(d.rstrip('/')))}.{os.path.basename(tree.rstrip('/'))}.{workload}"
    out = os.path.join(tmp, f"cg.{name}.out")
    for p in glob.glob(out + "*"):
        os.unlink(p)
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--trace-children=no",
        "--instr-atstart=no",
        f"--callgrind-out-file={out}",
        sys.executable,
        os.path.abspath(__file__),
        "--_work",
        workload,
        d,
        "--_ir",
        tmp,
    ]
    p = subprocess.run(cmd, env=_tree_env(tree), cwd="/", capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"callgrind {tree} {workload} failed:\n{p.stderr[-3000:]}")
    for f in sorted(glob.glob(out + "*")):
        with open(f) as fh:
            text = fh.read()
        if "Client Request: workload" in text:
            for line in text.splitlines():
                if line.startswith(("summary:", "totals:")):
                    os.replace(f, out)  # kept for callgrind_annotate
                    return int(line.split()[1])
    raise SystemExit(f"no callgrind dump of the workload in {out}*")


def compare(old: str, new: str, sets: list, workloads: list, rounds: int, ir_sets: list, ir_workloads: list) -> None:
    """Old vs new tree, same run: ``rounds`` rounds of every (set, workload), the two trees in
    alternating order; each tree reads its own copy of the traces (``<set>/old``, ``<set>/new``: the
    two builds' index formats may differ). Prints medians and new ÷ old ratios; with ``ir_sets``
    also callgrind instruction counts of one measured run."""
    import tempfile

    trees = {"old": old, "new": new}
    print(f"# old = {old}, new = {new}; {time.strftime('%Y-%m-%d %H:%M')} UTC, load {os.getloadavg()[0]:.1f}")
    if ir_sets:
        with tempfile.TemporaryDirectory(prefix="bench-ir-") as tmp:
            print("\n| traces | workload | old Ir | new Ir | new ÷ old |\n|---|---|---:|---:|---:|")
            for name, base in ir_sets:
                for w in ir_workloads:
                    ir = {k: _ir(t, w, os.path.join(base, k), tmp) for k, t in trees.items()}
                    print(f"| {name} | {w} | {ir['old']:,} | {ir['new']:,} | {ir['new'] / ir['old']:.4f} |", flush=True)
            keep = os.path.join(ROOT, "build", "bench-ir")
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(tmp, keep)
            print(f"# callgrind dumps in {keep}")
    if not sets:
        return
    res = {}
    for r in range(rounds):
        for name, base in sets:
            for w in workloads:
                order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
                for k in order:
                    res.setdefault((name, w, k), []).append(_work(trees[k], w, os.path.join(base, k)))
        print(f"# round {r + 1}/{rounds} done, load {os.getloadavg()[0]:.1f}", flush=True)
        _compare_table(sets, workloads, res)  # after every round: a cut-short run still reports


def _compare_table(sets: list, workloads: list, res: dict) -> None:
    med = statistics.median
    print(
        "\n| traces | workload | events | old wall s | new wall s | new ÷ old wall | old CPU s | new CPU s | "
        "new ÷ old CPU | pairwise CPU ratio | process wall old / new s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, _ in sets:
        for w in workloads:
            o, n = res[(name, w, "old")], res[(name, w, "new")]
            if o[0]["events"] != n[0]["events"]:
                print(f"# {name} {w}: events differ, old {o[0]['events']:,} new {n[0]['events']:,}")
            ow, nw = med(x["wall_s"] for x in o), med(x["wall_s"] for x in n)
            oc, nc = med(x["cpu_s"] for x in o), med(x["cpu_s"] for x in n)
            pair = med(b["cpu_s"] / a["cpu_s"] for a, b in zip(o, n))
            print(
                f"| {name} | {w} | {n[0]['events']:,} | {ow:.3f} | {nw:.3f} | {nw / ow:.3f} | {oc:.3f} | {nc:.3f} | "
                f"{nc / oc:.3f} | {pair:.3f} | {med(x['process_wall_s'] for x in o):.2f} / "
                f"{med(x['process_wall_s'] for x in n):.2f} |"
            )
    print(f"\n# {time.strftime('%Y-%m-%d %H:%M')} UTC, load average {os.getloadavg()}")


# ----------------------------------------------------------------------------- threads vs a running cluster
def _proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` and its waited-for children (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def stop_processes(procs) -> None:
    """Terminate ``procs`` (a :func:`start_loopback_cluster` list) last first, wait up to 10 s
    each, kill those still running (a worker whose scheduler went first)."""
    for p in procs[::-1]:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def start_loopback_cluster(workers: int, host: str = "127.0.0.1", quiet: bool = False, tree: str | None = None):
    """A ``dask scheduler`` and ``workers`` single-thread ``dask worker --no-nanny`` processes on
    ``host``, started as commands (what a user's running cluster is), importing the dfanalyzer of
    ``tree`` (default :data:`TREE`); returns (address, processes).
    ``quiet``: with ``dfanalyzer.cluster.QUIET_CONFIG`` (as DASK_* environment variables)."""
    import tempfile

    tmp = tempfile.mkdtemp(prefix="dfa-bench-cluster-")
    sched_file = os.path.join(tmp, "scheduler.json")
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([tree or TREE, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    )
    if quiet:
        from dfanalyzer.cluster import QUIET_CONFIG

        for k, v in QUIET_CONFIG.items():
            env["DASK_" + k.upper().replace(".", "__").replace("-", "_")] = str(v)
    log = open(os.path.join(tmp, "log"), "w")
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "distributed.cli.dask_scheduler",
                "--host",
                host,
                "--port",
                "0",
                "--dashboard-address",
                ":0",
                "--scheduler-file",
                sched_file,
            ],
            env=env,
            stdout=log,
            stderr=log,
            cwd=tmp,
        )
    ]
    t = time.time()
    while not os.path.exists(sched_file):
        if time.time() - t > 60:
            raise RuntimeError("dask scheduler did not start")
        time.sleep(0.1)
    time.sleep(0.2)
    addr = json.load(open(sched_file))["address"]
    for _ in range(workers):
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "distributed.cli.dask_worker",
                    addr,
                    "--nthreads",
                    "1",
                    "--no-nanny",
                    "--host",
                    host,
                    "--dashboard-address",
                    ":0",
                    "--local-directory",
                    tmp,
                ],
                env=env,
                stdout=log,
                stderr=log,
                cwd=tmp,
            )
        )
    return addr, procs


def cluster_compare(paths, workers: int, rounds: int, cli: bool = True, quiet: bool = False) -> dict:
    """Warm ``DFAnalyzer(paths, args=()).summary()`` in this process: ``workers`` threads vs a
    running loopback cluster of ``workers`` single-thread workers (scheduler and workers started
    as commands); rounds interleaved (order alternating), wall and CPU of every process involved
    (this client + scheduler + workers), medians and cluster ÷ threads ratios."""
    from distributed import Client

    from dfanalyzer import DFAnalyzer

    addr, procs = start_loopback_cluster(workers, quiet=quiet)
    res: dict = {}
    try:
        client = Client(addr, timeout=60, set_as_default=False)  # the threads runs must not find it
        client.wait_for_workers(workers, timeout=60)

        def one(mode):
            """(wall s, CPU s of every process, summary dict, CPU s per part)."""
            before = [time.process_time()] + [_proc_cpu(p.pid) for p in procs]
            t = time.perf_counter()
            if mode.startswith("cli"):  # the whole command: start-up, imports, connecting
                cmd = [sys.executable, "-m", "dfanalyzer.cli", "summary", *paths, "--json", "--no-progress"]
                cmd += ["--scheduler", addr] if mode == "cli-cluster" else ["--workers", str(workers)]
                p = subprocess.Popen(
                    cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd="/", env=_tree_env(ROOT)
                )
                stdout = p.stdout.read()
                _, _, ru = os.wait4(p.pid, 0)
                ev = json.loads(stdout)
                ev = ev.get("summary", ev)
                child = ru.ru_utime + ru.ru_stime
            else:
                kw = dict(client=client) if mode == "cluster" else dict(n_workers=workers)
                with DFAnalyzer(paths, args=(), **kw) as an:
                    ev = an.summary(show=False).to_dict()
                child = 0.0
            dt = time.perf_counter() - t
            after = [time.process_time()] + [_proc_cpu(p.pid) for p in procs]
            parts = [b - a for a, b in zip(before, after)]
            parts[0] += child
            if "cluster" not in mode:  # the idle cluster's heartbeats are not part of a threads run
                parts = parts[:1]
            return dt, sum(parts), ev, parts

        a, b = one("threads")[2], one("cluster")[2]  # warm-up: indexes, imports on the workers
        # what the running cluster costs while idle (heartbeats, system monitor), CPU s per s
        cpu0, t0 = sum(_proc_cpu(p.pid) for p in procs), time.perf_counter()
        time.sleep(5)
        idle = (sum(_proc_cpu(p.pid) for p in procs) - cpu0) / (time.perf_counter() - t0)
        print(f"# idle cluster: {idle:.3f} CPU s per s (scheduler + {workers} workers)", flush=True)
        if json.dumps(a, sort_keys=True) != json.dumps(b, sort_keys=True):
            raise SystemExit("cluster and threads summaries differ")
        for r in range(rounds):
            pair = [("threads", "cluster"), ("cli-threads", "cli-cluster")] if cli else [("threads", "cluster")]
            for m1, m2 in pair:
                for mode in (m1, m2) if r % 2 == 0 else (m2, m1):
                    dt, cpu, ev, parts = one(mode)
                    if json.dumps(ev, sort_keys=True) != json.dumps(a, sort_keys=True):
                        raise SystemExit(f"{mode} summary differs")
                    res.setdefault(mode, []).append((dt, cpu, parts))
                    print(
                        f"# {mode}: {dt:.3f} s wall, {cpu:.3f} s CPU (client, scheduler, workers: "
                        f"{', '.join(f'{x:.2f}' for x in parts)}), load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
        client.close()
    finally:
        stop_processes(procs)
    med = statistics.median
    out = {
        "events": a["events"],
        "workers": workers,
        "quiet": quiet,
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "idle_cpu_per_s": idle,
    }
    print(
        "| run | events | workers | threads wall s | cluster wall s | wall ratio (paired) | threads CPU s | "
        "cluster CPU s (client / scheduler / workers) | CPU ratio (paired) | cluster CPU less idle s | "
        "paired ratio less idle |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    for name, t_key, c_key in (("in process", "threads", "cluster"), ("whole command", "cli-threads", "cli-cluster")):
        if c_key not in res:
            continue
        t, c = res[t_key], res[c_key]
        o = out[name] = {
            "threads": {"wall_s": med(x[0] for x in t), "cpu_s": med(x[1] for x in t)},
            "cluster": {"wall_s": med(x[0] for x in c), "cpu_s": med(x[1] for x in c)},
            "cluster_cpu_parts_s": [med(x[2][i] for x in c) for i in range(len(c[0][2]))],
            # paired ratios (round by round), less sensitive to load drifting on a shared machine
            "paired_wall_ratio": med(y[0] / x[0] for x, y in zip(t, c)),
            "paired_cpu_ratio": med(y[1] / x[1] for x, y in zip(t, c)),
            "runs": {t_key: t, c_key: c},
        }
        # the cluster's CPU less what it burns idle over the same wall (the load of a shared
        # machine stretches the wall, and with it the heartbeats' share)
        o["cluster"]["cpu_net_s"] = med(x[1] - idle * x[0] for x in c)
        o["paired_cpu_net_ratio"] = med((y[1] - idle * y[0]) / x[1] for x, y in zip(t, c))
        o["wall_ratio"] = o["cluster"]["wall_s"] / o["threads"]["wall_s"]
        o["cpu_ratio"] = o["cluster"]["cpu_s"] / o["threads"]["cpu_s"]
        parts = o["cluster_cpu_parts_s"]
        print(
            f"| {name} | {out['events']:,} | {workers} | {o['threads']['wall_s']:.3f} | {o['cluster']['wall_s']:.3f} | "
            f"{o['wall_ratio']:.2f} ({o['paired_wall_ratio']:.2f}) | {o['threads']['cpu_s']:.3f} | "
            f"{o['cluster']['cpu_s']:.3f} ({parts[0]:.2f} / {parts[1]:.2f} / {sum(parts[2:]):.2f}) | "
            f"{o['cpu_ratio']:.2f} ({o['paired_cpu_ratio']:.2f}) | {o['cluster']['cpu_net_s']:.3f} | "
            f"{o['paired_cpu_net_ratio']:.2f} |"
        )
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} UTC, load average {os.getloadavg()}, quiet cluster config: {quiet}")
    return out


# ----------------------------------------------------------------------------- frame vs naive bag
def _cpu_of(pids) -> float:
    """User + system CPU seconds so far of the processes ``pids`` (their threads included)."""
    import psutil

    tot = 0.0
    for pid in pids:
        t = psutil.Process(pid).cpu_times()
        tot += t.user + t.system
    return tot


def _cluster_holds(dask_scheduler=None) -> int:
    """On the scheduler: the tasks it still knows and the keys its workers still hold."""
    return len(dask_scheduler.tasks) + sum(len(ws.has_what) for ws in dask_scheduler.workers.values())


def _worker_holds(dask_worker=None) -> int:
    return len(dask_worker.data) + len(dask_worker.state.tasks)


def _drained(client, timeout: float = 10.0) -> None:
    """Wait until the scheduler knows no task and every worker has freed its data (what the last
    run released): the release of a run's results is asynchronous (client → scheduler → workers)."""
    end = time.monotonic() + timeout
    while (client.run_on_scheduler(_cluster_holds) or any(client.run(_worker_holds).values())) and (
        time.monotonic() < end
    ):
        time.sleep(0.01)


def _settle(client) -> None:
    """Before a measured window (not timed): the previous run's data freed, then a full garbage
    collection in the client process (client, scheduler and nannies of a ``LocalCluster``) and in
    every worker, so that no run pays for a collection the previous run's objects made due."""
    import gc

    _drained(client)
    client.run(gc.collect)
    gc.collect()
    time.sleep(0.2)


def _import_frame_libs() -> None:
    import dask.dataframe  # noqa: F401
    import pandas  # noqa: F401

    import dfanalyzer.analyzer  # noqa: F401
    import dfanalyzer.reader  # noqa: F401


def frame_vs_bag(paths, workers: int, repeat: int, quiet: bool = False, settle: bool = True) -> dict:
    """``DFAnalyzer(paths).events`` cold (indexes removed, persisted, ``len``) vs the naive
    ``dask.bag.read_text(paths).filter(event line).map(json.loads).count()``, on one
    ``LocalCluster`` of ``workers`` single-thread worker processes, ``repeat`` alternating rounds.
    Wall and CPU (client + workers, ``psutil``) of each; CPU µs per event, events/s per core
    (events / CPU s) and bag ÷ ours; medians. ``quiet``: the cluster gets
    ``dfanalyzer.cluster.QUIET_CONFIG`` (what ``DFAnalyzer`` itself starts without a client).

    What a run's CPU counts: every thread of the client process (the caller's thread, the client's
    event loop, and, a ``LocalCluster`` living there, the scheduler and the nannies) and of the
    worker processes, from the call until (``settle``) the workers have freed the run's data after
    its release (``DFAnalyzer.close`` / the bag's result dropped): the run's own frees are its cost,
    and the cluster's idle CPU while it runs too. Not counted: the cluster's start and the workers'
    import of pandas/dask.dataframe/dfanalyzer (before the first round, for both sides); with
    ``settle`` the previous run's frees and a full garbage collection before each window (the
    collection that the previous run's objects would trigger is not charged to the next run).
    Without ``settle`` the window is opened and closed right around the call (earlier rounds:
    the previous run's frees and garbage land in the next window, the run's own frees do not)."""
    import contextlib

    import dask
    import dask.bag as db
    import dask.dataframe  # noqa: F401  (as dask.bag: the client's imports are not timed on either side)
    from distributed import Client, LocalCluster

    from dfanalyzer import DFAnalyzer

    d = os.path.dirname(paths[0])
    res = {"ours": [], "bag": []}
    if quiet:
        from dfanalyzer.cluster import QUIET_CONFIG
    with (
        dask.config.set(QUIET_CONFIG) if quiet else contextlib.nullcontext(),
        LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cl,
        Client(cl) as client,
    ):
        pids = [os.getpid()] + list(client.run(os.getpid).values())
        # libraries loaded in the workers first: their import is a cost of the cluster, not of a load
        client.run(_import_frame_libs)

        def ours() -> int:
            _clear_indexes(d)
            with DFAnalyzer(paths, client=client) as an:
                return int(len(an.events))

        def bag() -> int:
            return int(db.read_text(paths).filter(_is_event).map(json.loads).count().compute())

        for r in range(repeat):
            for name, fn in (("ours", ours), ("bag", bag)) if r % 2 == 0 else (("bag", bag), ("ours", ours)):
                if settle:
                    _settle(client)
                c0, w0, t0 = _cpu_of(pids[:1]), _cpu_of(pids[1:]), time.perf_counter()
                n = fn()
                if settle:
                    _drained(client)  # this run's frees, in its window
                wall = time.perf_counter() - t0
                cc, cw = _cpu_of(pids[:1]) - c0, _cpu_of(pids[1:]) - w0
                cpu = cc + cw
                res[name].append({"events": n, "wall_s": wall, "cpu_s": cpu, "client_cpu_s": cc, "workers_cpu_s": cw})
                print(
                    f"# {name}: {n:,} events, wall {wall:.2f} s, CPU {cpu:.2f} s, "
                    f"{cpu * 1e6 / n:.3f} µs/event (client + scheduler {cc * 1e6 / n:.3f}, workers "
                    f"{cw * 1e6 / n:.3f}), {n / cpu / 1e6:.2f} M events/s/core",
                    flush=True,
                )
    out = {}
    for name, runs in res.items():
        n = runs[0]["events"]
        wall = statistics.median(x["wall_s"] for x in runs)
        cpu = statistics.median(x["cpu_s"] for x in runs)
        out[name] = {
            "events": n,
            "wall_s": wall,
            "cpu_s": cpu,
            "cpu_us_per_event": cpu * 1e6 / n,
            "events_per_s_per_core": n / cpu,
            "runs": runs,
        }
    if out["ours"]["events"] != out["bag"]["events"]:
        raise SystemExit(f"event counts differ: ours {out['ours']['events']}, bag {out['bag']['events']}")
    out["bag_over_ours_cpu"] = out["bag"]["cpu_s"] / out["ours"]["cpu_s"]
    out["bag_over_ours_wall"] = out["bag"]["wall_s"] / out["ours"]["wall_s"]
    o, b = out["ours"], out["bag"]
    print(
        "| events | workers | ours wall s | ours CPU s | ours µs/event CPU | ours M ev/s/core | bag wall s | "
        "bag CPU s | bag ÷ ours CPU (wall) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    print(
        f"| {o['events']:,} | {workers} | {o['wall_s']:.2f} | {o['cpu_s']:.2f} | {o['cpu_us_per_event']:.3f} | "
        f"{o['events_per_s_per_core'] / 1e6:.2f} | {b['wall_s']:.2f} | {b['cpu_s']:.2f} | "
        f"{out['bag_over_ours_cpu']:.1f} ({out['bag_over_ours_wall']:.1f}) |"
    )
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M')} UTC, load average {os.getloadavg()}, quiet cluster config: {quiet}, "
        f"settled windows: {settle}"
    )
    return out


# ----------------------------------------------------------------------------- main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--sources", default="preload,generator")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scale", default="", help="comma separated event counts, ours only")
    ap.add_argument("--scale-peers", action="store_true", help="also run the peers at --scale sizes")
    ap.add_argument(
        "--ours-only",
        action="store_true",
        help="--sources sets as --scale runs them: ours only, whole commands cold then warm, CPU and peak RSS",
    )
    ap.add_argument("--no-memory", action="store_true", help="skip the persisted-frame bytes/event")
    ap.add_argument(
        "--warm-only",
        action="store_true",
        help="only the in-process warm summary (thread pool, indexes cached) of each set, "
        "with wall and CPU time per run; no cold commands, peers or cluster",
    )
    ap.add_argument("--data", default=os.path.join(ROOT, "build", "bench-analyzer"))
    ap.add_argument("--json", default=None)
    ap.add_argument("--_utils", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--_bag", nargs=2, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--_work", nargs=2, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--_ir", default="", help=argparse.SUPPRESS)
    ap.add_argument(
        "--compare",
        nargs=2,
        metavar=("OLD_TREE", "NEW_TREE"),
        default=None,
        help="old vs new source tree (each built in place), same run: the --workloads on the --compare-sets, "
        "--repeat rounds in alternating order; wall and CPU medians and new/old ratios",
    )
    ap.add_argument(
        "--compare-sets",
        default="",
        help="NAME=DIR,...: trace sets for --compare; DIR holds old/ and new/ copies of the same traces",
    )
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help=f"for --compare: {', '.join(WORKLOADS)}")
    ap.add_argument(
        "--ir",
        default="",
        help="NAME=DIR,...: with --compare, also callgrind instruction counts (Ir) of one measured run of each "
        "--ir-workloads on these (small) sets, old vs new",
    )
    ap.add_argument("--ir-workloads", default="summary-warm,summary-cold")
    ap.add_argument(
        "--quiet-cluster", dest="quiet", action="store_true", help="--cluster-compare / --frame-vs-bag: QUIET_CONFIG"
    )
    ap.add_argument("--no-cli", action="store_true", help="--cluster-compare: in-process runs only")
    ap.add_argument(
        "--no-settle",
        action="store_true",
        help="--frame-vs-bag: open and close each run's CPU window right around the call (no wait for the "
        "previous run's frees, no garbage collection before it, this run's frees not waited for)",
    )
    ap.add_argument(
        "--cluster-compare",
        default=None,
        metavar="DIR",
        help="warm summary of the traces in DIR: --workers threads vs a running loopback cluster of --workers "
        "single-thread workers, --repeat interleaved rounds, wall and CPU (client + scheduler + workers)",
    )
    ap.add_argument(
        "--frame-vs-bag",
        default=None,
        metavar="DIR",
        help="cold DFAnalyzer(DIR).events (persisted, len) vs the naive bag read_text + json.loads + count, "
        "same LocalCluster of --workers processes, --repeat alternating rounds: CPU per event and the ratio",
    )
    a = ap.parse_args(argv)
    if a.frame_vs_bag:
        import logging

        logging.getLogger("distributed").setLevel(logging.ERROR)
        d = os.path.abspath(a.frame_vs_bag)
        out = frame_vs_bag(
            sorted(glob.glob(os.path.join(d, "*.pfw.gz"))),
            a.workers,
            max(1, a.repeat),
            quiet=a.quiet,
            settle=not a.no_settle,
        )
        if a.json:
            with open(a.json, "w") as fh:
                json.dump(out, fh, indent=2)
        return 0
    if a._utils:
        _utils_main(a._utils)
        return 0
    if a._bag:
        _bag_main(a._bag[0], int(a._bag[1]))
        return 0
    if a._work:
        _work_main(a._work[0], a._work[1], a._ir)
        return 0
    if a.cluster_compare:
        import logging

        logging.getLogger("distributed").setLevel(logging.ERROR)
        d = os.path.abspath(a.cluster_compare)
        paths = sorted(glob.glob(os.path.join(d, "*.pfw")) + glob.glob(os.path.join(d, "*.pfw.gz")))
        out = cluster_compare(paths, a.workers, max(1, a.repeat), cli=not a.no_cli, quiet=a.quiet)
        if a.json:
            with open(a.json, "w") as fh:
                json.dump(out, fh, indent=2)
        return 0
    if a.compare:

        def named(spec):
            return [tuple(x.split("=", 1)) for x in spec.split(",") if x]

        compare(
            os.path.abspath(a.compare[0]),
            os.path.abspath(a.compare[1]),
            named(a.compare_sets),
            [w for w in a.workloads.split(",") if w],
            max(1, a.repeat),
            named(a.ir),
            [w for w in a.ir_workloads.split(",") if w],
        )
        return 0
    import logging

    logging.getLogger("distributed").setLevel(logging.ERROR)
    w = a.workers
    sets = []
    for src in [s for s in a.sources.split(",") if s]:
        gen = preload_traces if src == "preload" else generator_traces
        sets.append((src, a.events, gen(a.data, a.events, a.files), not a.ours_only))
    for n in [int(x) for x in a.scale.split(",") if x]:
        sets.append(("generator", n, generator_traces(a.data, n, a.files), a.scale_peers))
    cold = {"ours": cold_ours, "dftracer-utils": cold_utils, "naive bag": cold_bag}
    rows = []
    scale_rows = []
    if a.warm_only:
        for src, _n, paths, _ in sets:
            warm_ours(paths, w)  # builds the indexes if needed, loads the libraries
            for _ in range(max(1, a.repeat)):
                t, c = time.perf_counter(), time.process_time()
                ev = warm_ours(paths, w)[1]
                dt, cpu = time.perf_counter() - t, time.process_time() - c
                print(
                    f"# {src} {ev:,} warm threads: {dt:.2f} s wall ({ev / dt / w / 1e6:.2f} M events/s per core), "
                    f"{cpu:.2f} s CPU ({ev / cpu / 1e6:.2f} M events per CPU-second), load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
        return 0
    for src, n, paths, peers in sets:
        d = os.path.dirname(paths[0])
        if not peers:  # --scale: whole commands only, cold then warm (indexes kept), CPU and peak RSS
            r = {"source": src, "files": len(paths), "workers": w, "date": time.strftime("%Y-%m-%d %H:%M")}
            for mode in ("cold", "warm"):
                runs = []
                for _ in range(max(1, a.repeat)):
                    dt, ev = cold_ours(d, w, keep_index=(mode == "warm"))
                    runs.append((dt, LAST_RUN["cpu_s"], LAST_RUN["peak_rss"]))
                    print(
                        f"# {src} {n:,} {mode} ours: {dt:.1f} s wall, {LAST_RUN['cpu_s']:.1f} s CPU, peak RSS "
                        f"{LAST_RUN['peak_rss'] / 2**20:.0f} MiB, {ev:,} events, load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
                r["events"] = ev
                r[mode] = {
                    "wall_s": statistics.median(x[0] for x in runs),
                    "cpu_s": statistics.median(x[1] for x in runs),
                    "peak_rss_mib": max(x[2] for x in runs) / 2**20,
                    "runs": runs,
                }
            r["loadavg"] = os.getloadavg()
            scale_rows.append(r)
            continue
        names = list(cold) if peers else ["ours"]
        times = {k: [] for k in names}
        events = {}
        for r in range(max(1, a.repeat)):
            order = names[r % len(names) :] + names[: r % len(names)]
            for k in order:
                dt, ev = cold[k](d, w)
                times[k].append(dt)
                events[k] = ev
                print(f"# {src} {n:,} cold {k}: {dt:.2f} s, {ev:,} rows", flush=True)
        _clear_indexes(d)
        warm_ours(paths, w)  # builds the indexes
        t_thr = statistics.median(warm_ours(paths, w)[0] for _ in range(max(1, a.repeat)))
        from distributed import Client, LocalCluster

        with (
            LocalCluster(n_workers=w, threads_per_worker=1, processes=True, dashboard_address=None) as cl,
            Client(cl) as client,
        ):
            warm_ours(paths, w, client)  # workers import dfanalyzer once
            t_cl = statistics.median(warm_ours(paths, w, client)[0] for _ in range(max(1, a.repeat)))
            bpe = None if a.no_memory else held_bytes_per_event(paths, client)
        med = {k: statistics.median(v) for k, v in times.items()}
        row = {
            "source": src,
            "events": events["ours"],
            "files": len(paths),
            "workers": w,
            "cold_s": med,
            "cold_all_s": times,
            "rows": events,
            "warm_threads_s": t_thr,
            "warm_cluster_s": t_cl,
            "warm_threads_events_per_s_per_core": events["ours"] / t_thr / w,
            "warm_cluster_events_per_s_per_core": events["ours"] / t_cl / w,
            "held_bytes_per_event": bpe,
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "loadavg": os.getloadavg(),
        }
        rows.append(row)
        print(f"# {src} {n:,} warm: threads {t_thr:.2f} s, cluster up {t_cl:.2f} s; held {bpe} B/event", flush=True)
    print()
    print(
        "| source | events | cold ours s | cold dftracer-utils s | cold naive bag s | ours ÷ utils | "
        "bag ÷ ours | warm s (threads / cluster up) | warm ev/s/core (threads / cluster) | B/event held |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        c = r["cold_s"]
        u, b = c.get("dftracer-utils"), c.get("naive bag")

        def f(x):
            return f"{x:.2f}" if x is not None else "—"

        print(
            f"| {r['source']} | {r['events']:,} | {c['ours']:.2f} | {f(u)} | {f(b)} | "
            f"{f(c['ours'] / u if u else None)} | {f(b / c['ours'] if b else None)} | "
            f"{r['warm_threads_s']:.2f} / {r['warm_cluster_s']:.2f} | "
            f"{r['warm_threads_events_per_s_per_core'] / 1e6:.2f} M / {r['warm_cluster_events_per_s_per_core'] / 1e6:.2f} M | "
            f"{f(r['held_bytes_per_event'])} |"
        )
    if scale_rows:
        print(
            "\n| events | files | cold wall s | cold CPU s | cold peak RSS MiB | warm wall s | warm CPU s | "
            "warm peak RSS MiB | warm M events per CPU-second |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in scale_rows:
            c, h = r["cold"], r["warm"]
            print(
                f"| {r['events']:,} | {r['files']} | {c['wall_s']:.1f} | {c['cpu_s']:.1f} | {c['peak_rss_mib']:.0f} | "
                f"{h['wall_s']:.1f} | {h['cpu_s']:.1f} | {h['peak_rss_mib']:.0f} | {r['events'] / h['cpu_s'] / 1e6:.2f} |"
            )
    print(f"\n# {time.strftime('%Y-%m-%d %H:%M')}, load average {os.getloadavg()[0]:.1f}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows + scale_rows, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
