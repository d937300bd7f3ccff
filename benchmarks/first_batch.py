"""How long the threaded ``dfanalyzer summary`` takes before its first batch starts, code A vs
code B (issue 22, Deliver 2: start-up is a serial step that threads cannot shorten).

Each round starts, per code, a fresh interpreter (``PYTHONPATH=ROOT``, ``PYTHONSAFEPATH=1``, run
from ``/``, byte code written and used as for an installed package) that runs the command's own
``dfanalyzer.cli.main`` with a probe that writes the monotonic clock and the process CPU time
(user + system, all threads) to a pipe at the end of each phase: the interpreter (up to the
probe's first line: ``site`` included), ``import dfanalyzer.cli``, ``import
dfanalyzer.analyzer``, the command up to ``DFAnalyzer._index_and_plan`` (argument parsing,
patterns), indexing and planning, the first load (the first call of ``_reader.load_batch``,
``_reader.load_files`` or, where the code has it, ``_reader.Prefetch``: loads started in native
threads, docs/perf/i27-start.md) and the pool's first summary task ("pool": NumPy and the
summary's modules imported, partials start). NumPy is imported wherever the code imports it
(the probe imports only the compiled ``dfanalyzer._reader``, ~2 ms, which imports no NumPy);
the probe says in how many runs it was imported before the first load. The parent reads the
clock just before it starts the child, so "to the first load" = wall from the exec of the
interpreter to the first load (the serial start-up that threads cannot shorten). For native
loads, "loaders busy" = the share of threads x (first load -> pool) that they spent loading
(1.0: the imports after the first load overlap loads on every thread). Also the whole
command's wall and CPU (``wait4``) and, once per code, the same for ``python -c pass`` and
``python -c "import numpy"``. stdout of A and B must be identical in every round.

    python benchmarks/first_batch.py A_ROOT B_ROOT [--rounds 7] -- summary TRACES --json [--workers N]

Prints per code: median (min-max) of the wall and CPU to the first load, to the pool's first
task and of the whole command, the phases, and the median of the paired ratios B/A.
"""

from __future__ import annotations

import math
import os
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from startup import ab_arguments  # noqa: E402

_PROBE = r"""
import os, sys, time
fd = int(sys.argv.pop(1))
marks = []
def mark(what):
    marks.append("%s %r %r" % (what, time.monotonic(), time.process_time()))
mark("interpreter")
from dfanalyzer import _reader  # (compiled, ~2 ms; imports no NumPy)
from dfanalyzer import cli
mark("cli")
from dfanalyzer import analyzer
mark("analyzer")
iap = analyzer.DFAnalyzer._index_and_plan
def index_and_plan(self, *a, **k):
    mark("setup")
    iap(self, *a, **k)
    mark("index+plan")
analyzer.DFAnalyzer._index_and_plan = index_and_plan
import threading
lock = threading.Lock()
flags = {}
def once(what, fn, extra=None):
    def wrapped(*a, **k):
        with lock:  # (pool threads: one marks it)
            if what not in flags:
                flags[what] = 1
                mark(what)
                if extra:
                    extra()
        return fn(*a, **k)
    return wrapped
def numpy_state():
    marks.append("numpy-at-first-load %d 0" % ("numpy" in sys.modules))
_reader.load_batch = once("first-load", _reader.load_batch, numpy_state)
_reader.load_files = once("first-load", _reader.load_files, numpy_state)
prefetches = []
if hasattr(_reader, "Prefetch"):  # (code B: loads started in native threads, docs/perf/i27-start.md)
    made = _reader.Prefetch
    def prefetch(*a, **k):
        p = once("first-load", made, numpy_state)(*a, **k)
        prefetches.append((p, int(a[1] if len(a) > 1 else k.get("threads", 1))))
        return p
    _reader.Prefetch = prefetch
# the pool's first summary task: NumPy and the summary's modules imported, partials start
analyzer._summary_batch_task = once("pool", analyzer._summary_batch_task)
analyzer._summary_files_task = once("pool", analyzer._summary_files_task)
try:
    status = cli.main(sys.argv[1:])
finally:
    for p, threads in prefetches:
        for a, z in p.times():
            marks.append("prefetch-load %r %r %d" % (a / 1e9, z / 1e9, threads))
    os.write(fd, ("\n".join(marks) + "\n").encode())
    os.close(fd)
sys.exit(status)
"""


def _child(root: str, args: list, probe: bool) -> tuple:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(root), PYTHONSAFEPATH="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    r, w = os.pipe()
    cmd = [sys.executable, "-c", _PROBE, str(w), *args] if probe else [sys.executable, *args]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, cwd="/", stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(w,))
    os.close(w)
    out, err = p.communicate()
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    with os.fdopen(r) as f:
        got = [line.split() for line in f.read().splitlines()]
    if p.returncode != 0:
        raise SystemExit(f"{root}: exit {p.returncode}: {err.decode()[-2000:]}")
    # phase -> (wall s since the exec, process CPU s) at its end; the native loads started before
    # the pool: (start, end) wall s since the exec, and their thread count
    first = {g[0]: (float(g[1]) - t0, float(g[2])) for g in got if len(g) == 3 and g[0] != "numpy-at-first-load"}
    first["numpy at first load"] = sum(int(g[1]) for g in got if g[0] == "numpy-at-first-load")
    loads = [(float(g[1]) - t0, float(g[2]) - t0, int(g[3])) for g in got if g[0] == "prefetch-load" and float(g[2])]
    first["loaders busy"] = _busy(loads, first.get("first-load"), first.get("pool"))
    first["native loads"] = (len(loads), statistics.median([z - a for a, z, _ in loads]) if loads else 0.0)
    return first, wall, cpu, out


def _busy(loads: list, start, end) -> tuple:
    """Share of ``threads`` x the wall from the first load to the pool's first task that the
    native loads filled (1.0: every loader thread loaded the whole time the imports ran), and
    that wall; (nan, 0) without native loads."""
    if not loads or not start or not end or end[0] <= start[0]:
        return (float("nan"), 0.0)
    a, z = start[0], end[0]
    filled = sum(max(0.0, min(e, z) - max(b, a)) for b, e, _ in loads)
    return (filled / (loads[0][2] * (z - a)), z - a)


PHASES = ("interpreter", "cli", "analyzer", "setup", "index+plan", "first-load", "pool")


def _med(xs) -> str:
    return f"{statistics.median(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})"


def main(argv=None) -> int:
    a, cmd = ab_arguments(argv, __doc__, 7)
    roots = (a.a, a.b)
    for root in roots:  # warm-up: byte code written, page cache warm, indexes built
        _child(root, cmd, True)
    floor = {}
    phases = {}
    res = {root: [] for root in roots}
    for k in range(a.rounds):
        outs = {}
        for root in roots if k % 2 == 0 else roots[::-1]:
            first, wall, cpu, outs[root] = _child(root, cmd, True)
            res[root].append((*first["first-load"], *first["pool"], wall, cpu))
            phases.setdefault(root, []).append(first)
        if outs[a.a] != outs[a.b]:
            import difflib

            diff = difflib.unified_diff(outs[a.a].decode().splitlines(True), outs[a.b].decode().splitlines(True))
            raise SystemExit(f"round {k}: the outputs of {a.a} and {a.b} differ:\n{''.join(list(diff)[:60])}")
        for what, args in (("python -c pass", ["-c", "pass"]), ("python -c 'import numpy'", ["-c", "import numpy"])):
            _, wall, cpu, _ = _child(a.a, args, False)
            floor.setdefault(what, []).append((wall, cpu))
    print(
        "| code | to the first load: wall s | CPU s | to the pool's first task: wall s | CPU s "
        "| whole command: wall s | CPU s |\n|---|---:|---:|---:|---:|---:|---:|"
    )
    for root in roots:
        cols = list(zip(*res[root]))
        print(f"| {root} | " + " | ".join(_med(c) for c in cols) + " |")
    for what, xs in floor.items():
        w, c = zip(*xs)
        print(f"| {what} | | | | | {_med(w)} | {_med(c)} |")
    print("\n| code | phase (ends when) | wall s | CPU s (medians of the phase's own share) |\n|---|---|---:|---:|")
    for root in roots:
        for j, ph in enumerate(PHASES):
            prev = PHASES[j - 1] if j else None
            w = [r[ph][0] - (r[prev][0] if prev else 0.0) for r in phases[root]]
            c = [r[ph][1] - (r[prev][1] if prev else 0.0) for r in phases[root]]
            print(f"| {root} | {ph} | {statistics.median(w):.3f} | {statistics.median(c):.3f} |")
        busy = [r["loaders busy"][0] for r in phases[root]]
        if not any(math.isnan(b) for b in busy):
            print(f"| {root} | native loaders busy, share of threads x (first load -> pool) | {_med(busy)} | |")
            nl = [r["native loads"] for r in phases[root]]
            print(
                f"| {root} | native loads per run; wall s per load (median) | {_med([n for n, _ in nl])} | {_med([w for _, w in nl])} |"
            )
        at = [r["numpy at first load"] for r in phases[root]]
        print(f"| {root} | runs with NumPy imported before the first load (of {len(at)}) | {sum(at)} | |")
    names = ("first-load wall", "first-load CPU", "pool wall", "pool CPU", "command wall", "command CPU")
    for i, name in enumerate(names):
        ratios = [y[i] / x[i] for x, y in zip(res[a.a], res[a.b])]
        print(f"paired {name} B/A: median {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
