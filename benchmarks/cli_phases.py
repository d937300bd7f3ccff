"""The whole ``dfanalyzer summary DIR --json`` command, phase by phase (issue 22, deliver 1).

Runs ``dfanalyzer summary DIR --json --no-progress --workers N`` and ``... --scheduler ADDR``
(against a loopback cluster of N single-thread workers it starts, as
``bench_analyzer.py --cluster-compare`` does) as child processes, each with a small tracer
installed before ``dfanalyzer.cli`` is imported (``-c``, see ``_CHILD``). The tracer writes
wall-clock timestamps (``time.time()``, comparable across processes) and the process's CPU
(``time.process_time()``) at:

* the interpreter's first line of Python (``start``: before it, the interpreter's own start-up,
  measured from the parent's timestamp right before ``Popen``);
* the start and end of each watched import (``import X``: numpy, pandas, pyarrow, yaml, rich,
  dask, distributed, tornado, msgpack, psutil, dask.dataframe, dfanalyzer.analyzer...);
* entry and exit of the client's steps: ``Client(...)`` (connect + handshake), every
  request/response round trip to the scheduler (``rpc <op>``: ``distributed.core.send_recv``)
  and every message sent on the client's batched stream (``send <op>``), ``DFAnalyzer(...)``,
  ``summary``, ``gather``, ``wait``, ``analyzer.close``, ``client.close``;
* the end of ``main()`` (the result printed), the atexit handlers, and ``os._exit`` / the
  interpreter's exit (``end``: the last timestamp the child writes; after it, the interpreter's
  teardown and thread joins, measured to the parent's ``wait4``).

The events go to a file named by ``DFA_PHASES_OUT`` (not to stdout or stderr, which are the
command's). ``--repeat`` rounds alternate the two commands; the table gives each phase's median
start offset and duration (wall) and the CPU of the main steps, per command.

    python benchmarks/cli_phases.py DIR --workers 2 --repeat 5 [--scheduler ADDR] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The tracer, run by the child before anything else (`python -c`): a meta-path hook times the
# watched imports and patches functions of the modules it sees loaded, so that nothing is
# imported earlier than the command would import it.
_CHILD = r"""
import sys, time, os, atexit
_T0 = (time.time(), time.process_time())
_EV = [("start", "B", _T0[0], _T0[1])]
_out = os.environ["DFA_PHASES_OUT"]
def _ev(name, kind):
    _EV.append((name, kind, time.time(), time.process_time()))
import gc
_GC = [0.0, 0.0, 0.0]  # time in the cyclic collector (s), collections, start of the current one
def _gc_cb(phase, info):
    if phase == "start":
        _GC[2] = time.perf_counter()
    else:
        _GC[0] += time.perf_counter() - _GC[2]
        _GC[1] += 1
gc.callbacks.append(_gc_cb)
def _flush():
    import json as _j
    with open(_out, "w") as f:
        _j.dump(_EV + [("garbage collector (total, %d collections)" % _GC[1], "G", _GC[0], 0.0)], f)
import importlib.abc, importlib.machinery
WATCH = {"numpy", "pandas", "pyarrow", "yaml", "rich", "dask", "distributed", "tornado", "msgpack",
         "psutil", "dask.dataframe", "dfanalyzer.analyzer", "dfanalyzer.summary", "dfanalyzer.cli",
         "dfanalyzer._reader", "distributed.client", "cloudpickle", "toolz", "zict", "jinja2",
         "click", "tlz", "sortedcontainers", "tblib", "urllib3", "bokeh", "scipy", "lz4", "cytoolz"}
PATCH = {}
def _wrap(obj, attr, label):
    f = getattr(obj, attr)
    def w(*a, **k):
        _ev(label, "B")
        try:
            return f(*a, **k)
        finally:
            _ev(label, "E")
    w.__wrapped__ = f
    setattr(obj, attr, w)
def _awrap(obj, attr, label):
    f = getattr(obj, attr)
    async def w(*a, **k):
        lab = label(a, k) if callable(label) else label
        _ev(lab, "B")
        try:
            return await f(*a, **k)
        finally:
            _ev(lab, "E")
    setattr(obj, attr, w)
def _p_client(m):
    C = m.Client
    for a in ("__init__", "close", "gather", "scheduler_info", "wait_for_workers", "run", "submit", "map",
              "compute", "who_has", "nthreads", "ncores", "_send_to_scheduler"):
        if hasattr(C, a):
            if a == "_send_to_scheduler":
                f = C._send_to_scheduler
                def s(self, msg, _f=f):
                    _ev("send " + str(msg.get("op")), "I")
                    return _f(self, msg)
                C._send_to_scheduler = s
            else:
                _wrap(C, a, "Client." + a)
    _awrap(C, "_ensure_connected", "Client._ensure_connected")
    _awrap(C, "_close", "Client._close")
    _awrap(C, "_handle_report", "Client._handle_report (loop)")
def _p_core(m):
    _awrap(m, "send_recv", lambda a, k: "rpc " + str(k.get("op") or (a[1] if len(a) > 1 else "")))
def _p_wait(m):
    if hasattr(m, "wait"):
        _wrap(m, "wait", "distributed.wait")
def _p_analyzer(m):
    D = m.DFAnalyzer
    for a in ("__init__", "summary", "close", "_map", "_streamed_partial", "_index_and_plan", "_start_index"):
        if hasattr(D, a):
            _wrap(D, a, "DFAnalyzer." + a)
def _p_cli(m):
    _wrap(m, "main", "cli.main")
    _wrap(m, "_start_cluster", "cli._start_cluster")
PATCH = {"distributed.client": _p_client, "distributed.core": _p_core, "distributed": _p_wait,
         "dfanalyzer.analyzer": _p_analyzer, "dfanalyzer.cli": _p_cli}
class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in WATCH and name not in PATCH:
            return None
        for f in sys.meta_path:
            if f is self:
                continue
            fs = getattr(f, "find_spec", None)
            spec = fs(name, path, target) if fs else None
            if spec is not None:
                break
        else:
            return None
        ld = spec.loader
        if ld is None or not hasattr(ld, "exec_module"):
            return spec
        ex = ld.exec_module
        def exec_module(module, _ex=ex, _n=name):
            if _n in WATCH:
                _ev("import " + _n, "B")
            try:
                _ex(module)
            finally:
                if _n in WATCH:
                    _ev("import " + _n, "E")
            if _n in PATCH:
                PATCH[_n](module)
        try:
            ld.exec_module = exec_module
        except AttributeError:
            return spec
        return spec
sys.meta_path.insert(0, _Hook())
atexit.register(lambda: (_ev("atexit (last handler)", "I"), _flush()))
_oexit = os._exit
def _exit(code):
    _ev("os._exit", "I")
    _flush()
    _oexit(code)
os._exit = _exit
import threading
_ev("before cli import", "I")
import dfanalyzer.cli as _cli
_om = _cli.main
def _main(*a, **k):
    try:
        return _om(*a, **k)
    finally:
        _ev("threads at end of main: " + ",".join(t.name for t in threading.enumerate()), "I")
        _flush()
_cli.main = _main
_ev("run", "I")
try:
    _cli.run()
finally:
    _ev("sys.exit (interpreter teardown follows)", "I")
    _flush()
"""


def run_child(cmd_args, out_path, env):
    """One command as a child with the tracer; returns (events, t_popen, t_reaped, rusage cpu, stdout)."""
    env = dict(env, DFA_PHASES_OUT=out_path)
    t = time.time()
    p = subprocess.Popen(
        [sys.executable, "-c", _CHILD, "summary", *cmd_args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd="/",
        env=env,
    )
    stdout = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    t_end = time.time()
    with open(out_path) as f:
        ev = json.load(f)
    return ev, t, t_end, ru.ru_utime + ru.ru_stime, stdout, os.waitstatus_to_exitcode(status)


def phases(ev, t_popen, t_reaped, cpu):
    """Events -> [(name, start offset s, wall s, cpu s)] with the interpreter start and end."""
    rows = [("interpreter start (Popen -> first line)", 0.0, ev[0][2] - t_popen, ev[0][3])]
    open_ = {}
    for name, kind, t, c in ev:
        if kind == "B":
            open_.setdefault(name, []).append((t, c))
        elif kind == "E":
            t0, c0 = open_[name].pop()
            rows.append((name, t0 - t_popen, t - t0, c - c0))
        elif kind == "I":
            rows.append((name, t - t_popen, 0.0, c))
        elif kind == "G":  # (the collector's wall total, anywhere in the command)
            rows.append((name.split(",")[0] + ")", 0.0, t, 0.0))
    last = max(e[2] for e in ev if e[1] != "G")
    last_cpu = max(e[3] for e in ev if e[1] != "G")
    rows.append(("exit (last event -> reaped)", last - t_popen, t_reaped - last, cpu - last_cpu))
    rows.append(("whole command", 0.0, t_reaped - t_popen, cpu))
    rows.sort(key=lambda r: r[1])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scheduler", default=None, help="a running scheduler (else a loopback cluster is started)")
    ap.add_argument("--json", default=None, help="write every round's phases here")
    ap.add_argument("--only", choices=("threads", "cluster"), default=None)
    ap.add_argument(
        "--trees",
        nargs="+",
        default=None,
        help="source trees (PYTHONPATH) to alternate in the same run, e.g. an old checkout and this one",
    )
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import bench_analyzer as b

    procs = []
    addr = a.scheduler
    if addr is None:
        addr, procs = b.start_loopback_cluster(a.workers, quiet=True)
        from distributed import Client

        with Client(addr, timeout=60, set_as_default=False) as c:
            c.wait_for_workers(a.workers, timeout=60)
    tmp = tempfile.mkdtemp(prefix="dfa-phases-")
    base = {
        "threads": [*a.paths, "--json", "--no-progress", "--workers", str(a.workers)],
        "cluster": [*a.paths, "--json", "--no-progress", "--scheduler", addr],
    }
    if a.only:
        base = {a.only: base[a.only]}
    trees = a.trees or [ROOT]
    modes, envs = {}, {}
    for t in trees:
        for m, args in base.items():
            name = m if len(trees) == 1 else f"{m} @ {t}"
            modes[name], envs[name] = args, b._tree_env(os.path.abspath(t))
    res: dict = {m: [] for m in modes}
    outs = {}
    try:
        for m, args in modes.items():  # warm-up (indexes, page cache, the workers' imports)
            run_child(args, os.path.join(tmp, "w.json"), envs[m])
        for r in range(a.repeat):
            order = list(modes) if r % 2 == 0 else list(modes)[::-1]
            for m in order:
                ev, t0, t1, cpu, stdout, rc = run_child(modes[m], os.path.join(tmp, "r.json"), envs[m])
                outs.setdefault(m, stdout)
                if stdout != outs[m] or rc != 0:
                    raise SystemExit(f"{m}: output or status differs (rc {rc})")
                res[m].append(phases(ev, t0, t1, cpu))
                print(f"# {m} round {r}: {t1 - t0:.3f} s wall, {cpu:.3f} s CPU", flush=True)
    finally:
        b.stop_processes(procs)
    if len(set(outs.values())) > 1:
        raise SystemExit("the commands' outputs differ")
    med = statistics.median
    for m, rounds in res.items():
        print(f"\n## {m} ({len(rounds)} rounds, medians; offsets from Popen)\n")
        print("| phase | start s | wall s | CPU s |\n|---|---:|---:|---:|")
        names = []
        for row in rounds[0]:
            if row[0] not in names:
                names.append(row[0])
        for n in names:
            sel = [[x for x in rr if x[0] == n] for rr in rounds]
            if not all(sel):
                continue
            k = len(sel[0])
            if any(len(s) != k for s in sel):
                k = min(len(s) for s in sel)
            for i in range(k):
                st = med(s[i][1] for s in sel)
                wl = med(s[i][2] for s in sel)
                cp = med(s[i][3] for s in sel)
                label = n if k == 1 else f"{n} #{i + 1}"
                if n.startswith("garbage collector"):  # (a wall total, anywhere in the command)
                    print(f"| {label} | | {wl:.3f} | |")
                elif wl == 0.0:  # an instant: its CPU is the process's total so far
                    print(f"| {label} | {st:.3f} | | (at {cp:.3f}) |")
                else:
                    print(f"| {label} | {st:.3f} | {wl:.3f} | {cp:.3f} |")
    print(f"\n# {time.strftime('%Y-%m-%d %H:%M')} UTC, load average {os.getloadavg()}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f)


if __name__ == "__main__":
    main()
