"""CPU and wall of whole ``dfanalyzer`` commands, code A vs code B, alternating (issue 22:
start-up is a serial step of the threaded summary).

Each round runs the same command line once with ``PYTHONPATH=A`` and once with ``PYTHONPATH=B``
(order alternating between rounds; ``PYTHONSAFEPATH=1``, run from ``/``, so that only the given
trees are imported), and records the child's wall and CPU (user + system, ``wait4``). Byte code
is written and used (``PYTHONDONTWRITEBYTECODE`` is removed from the environment), as for an
installed package. stdout and stderr of A and B must be identical in every round.

    python benchmarks/startup.py A_ROOT B_ROOT [--rounds 10] -- summary --json TRACES [options]

Prints per code: median wall and CPU (min-max), and the median of the paired CPU ratios B/A.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time


def _run(root: str, cmd: list) -> tuple:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(root), PYTHONSAFEPATH="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "dfanalyzer.cli", *cmd], capture_output=True, env=env, cwd="/")
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall, cpu, (p.returncode, p.stdout, p.stderr)


def ab_arguments(argv, doc: str, rounds: int) -> tuple:
    """``A B [--rounds N] -- COMMAND...`` of the A-vs-B benchmarks (this one, first_batch.py):
    (parsed A, B and rounds, the command's argument list); prints the run's header line."""
    argv = sys.argv[1:] if argv is None else argv
    cut = argv.index("--") if "--" in argv else len(argv)
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rounds", type=int, default=rounds)
    a = ap.parse_args(argv[:cut])
    cmd = argv[cut + 1 :]
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, load {os.getloadavg()}: {' '.join(cmd)}")
    return a, cmd


def main(argv=None) -> int:
    a, cmd = ab_arguments(argv, __doc__, 10)
    for root in (a.a, a.b):  # warm-up: byte code written, page cache warm
        _run(root, cmd)
    res = {a.a: [], a.b: []}
    for k in range(a.rounds):
        pair = (a.a, a.b) if k % 2 == 0 else (a.b, a.a)
        out = {}
        for root in pair:
            wall, cpu, out[root] = _run(root, cmd)
            res[root].append((wall, cpu))
        if out[a.a] != out[a.b]:
            raise SystemExit(f"round {k}: the outputs of {a.a} and {a.b} differ")
    print("| code | wall s (median, min-max) | CPU s (median, min-max) |\n|---|---:|---:|")
    for root in (a.a, a.b):
        w = [x[0] for x in res[root]]
        c = [x[1] for x in res[root]]
        print(
            f"| {root} | {statistics.median(w):.3f} ({min(w):.3f}-{max(w):.3f}) | "
            f"{statistics.median(c):.3f} ({min(c):.3f}-{max(c):.3f}) |"
        )
    ratios = [b[1] / x[1] for x, b in zip(res[a.a], res[a.b])]
    print(f"paired CPU ratio B/A: median {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
    print(f"# load {os.getloadavg()}; outputs identical in all {a.rounds} rounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
