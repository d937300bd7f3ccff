"""How long the threaded ``dfanalyzer summary`` takes before its first batch starts, code A vs
code B (issue 22, Deliver 2: start-up is a serial step that threads cannot shorten).

Each round starts, per code, a fresh interpreter (``PYTHONPATH=ROOT``, ``PYTHONSAFEPATH=1``, run
from ``/``, byte code written and used as for an installed package) that runs the command's own
``dfanalyzer.cli.main`` with a probe that writes the monotonic clock and the process CPU time
(user + system, all threads) to a pipe at the end of each phase: the interpreter (up to the
probe's first line: ``site`` included), ``import numpy``, ``import dfanalyzer.cli``, ``import
dfanalyzer.analyzer`` (summary, sanity, schema, engine), the command up to
``DFAnalyzer._index_and_plan`` (argument parsing, patterns), indexing and planning, and the first
call of ``_reader.load_batch`` or ``_reader.load_files``. The parent reads the clock just before it starts the child, so "first
batch" = wall from the exec of the interpreter to the first load call (interpreter, ``site``,
imports, argument parsing, planning and indexing); also the whole command's wall and CPU
(``wait4``) and, once per code, the same for ``python -c pass`` and ``python -c "import
numpy"`` (the floor: an interpreter that only imports NumPy). The probe imports
``dfanalyzer._reader`` (a compiled module, ~2 ms) and NumPy before the command's modules (which
import them first anyway). stdout of A and B must be
identical in every round.

    python benchmarks/first_batch.py A_ROOT B_ROOT [--rounds 7] -- summary TRACES --json [--workers N]

Prints per code: median (min-max) of the wall and CPU to the first batch and of the whole
command, and the median of the paired ratios B/A.
"""

from __future__ import annotations

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
from dfanalyzer import _reader
import numpy
mark("numpy")
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
def first(fn):
    def wrapped(*a, **k):
        global fd
        with lock:  # (pool threads: one writes and closes the pipe)
            if fd >= 0:
                mark("first-load")
                os.write(fd, ("\n".join(marks) + "\n").encode())
                os.close(fd)
                fd = -1
        return fn(*a, **k)
    return wrapped
_reader.load_batch = first(_reader.load_batch)
_reader.load_files = first(_reader.load_files)
sys.exit(cli.main(sys.argv[1:]))
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
    # phase -> (wall s since the exec, process CPU s) at its end
    first = {name: (float(t) - t0, float(c)) for name, t, c in got}
    if p.returncode != 0:
        raise SystemExit(f"{root}: exit {p.returncode}: {err.decode()[-2000:]}")
    return first, wall, cpu, out


PHASES = ("interpreter", "numpy", "cli", "analyzer", "setup", "index+plan", "first-load")


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
            res[root].append((*first["first-load"], wall, cpu))
            phases.setdefault(root, []).append(first)
        if outs[a.a] != outs[a.b]:
            import difflib

            diff = difflib.unified_diff(outs[a.a].decode().splitlines(True), outs[a.b].decode().splitlines(True))
            raise SystemExit(f"round {k}: the outputs of {a.a} and {a.b} differ:\n{''.join(list(diff)[:60])}")
        for what, args in (("python -c pass", ["-c", "pass"]), ("python -c 'import numpy'", ["-c", "import numpy"])):
            _, wall, cpu, _ = _child(a.a, args, False)
            floor.setdefault(what, []).append((wall, cpu))
    print("| code | to first batch: wall s | CPU s | whole command: wall s | CPU s |\n|---|---:|---:|---:|---:|")
    for root in roots:
        cols = list(zip(*res[root]))
        print(f"| {root} | " + " | ".join(_med(c) for c in cols) + " |")
    for what, xs in floor.items():
        w, c = zip(*xs)
        print(f"| {what} | | | {_med(w)} | {_med(c)} |")
    print("\n| code | phase (ends when) | wall s | CPU s (medians of the phase's own share) |\n|---|---|---:|---:|")
    for root in roots:
        for j, ph in enumerate(PHASES):
            prev = PHASES[j - 1] if j else None
            w = [r[ph][0] - (r[prev][0] if prev else 0.0) for r in phases[root]]
            c = [r[ph][1] - (r[prev][1] if prev else 0.0) for r in phases[root]]
            print(f"| {root} | {ph} | {statistics.median(w):.3f} | {statistics.median(c):.3f} |")
    for i, name in enumerate(("first-batch wall", "first-batch CPU", "command wall", "command CPU")):
        ratios = [y[i] / x[i] for x, y in zip(res[a.a], res[a.b])]
        print(f"paired {name} B/A: median {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
