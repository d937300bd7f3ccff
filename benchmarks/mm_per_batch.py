"""Memory-map system calls and page faults per batch of the threaded streamed summary.

Runs ``python -m dfanalyzer.cli summary DIR --json --workers N`` (the console script's process,
``cli.run``) in a child, once per data set, and reports, for each run: the batches the summary
loaded (counted in the child), the mm system calls (``strace -f``: mmap, munmap, mprotect, brk,
mremap, madvise by advice; the ones that take ``mmap_lock`` for writing, and the populates), the
child's minor faults, user and system CPU (``wait4``'s rusage), and the machine's TLB-shootdown
interrupts (``/proc/interrupts``, all processes: noisy on a shared machine).

With two data sets (the second with more batches, e.g. the first one's files twice under other
names) it also prints the **steady state per batch**: (second − first) / (batches second −
batches first), i.e. what one more batch costs, without the start-up, the early loads and the
first batches of each thread. strace slows the run, so CPU is taken from a second run without it.

    python benchmarks/mm_per_batch.py TREE DIR_SMALL DIR_BIG [--workers 2] [--runs 1] [--strace-runs 1] [-- extra args]

``TREE``: a folder whose ``dfanalyzer`` package is run (PYTHONPATH), e.g. the work tree or a
copy of main with its own ``_reader`` .so. Several trees (``TREE1,TREE2``) are run alternately, and
the CPU runs are paired (new ÷ old per pair).
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

# the child: counts the summary's batch tasks, then runs the console script's own process
CHILD = r"""
import atexit, os, sys
import dfanalyzer.analyzer as A, dfanalyzer._reader as R
n = [0]
orig = A._summary_batch_task
def counted(*a, **k):
    n[0] += 1
    return orig(*a, **k)
A._summary_batch_task = counted
atexit.register(lambda: os.write(int(os.environ["MM_FD"]), b"%d %s\n" % (n[0], R.__file__.encode())))
from dfanalyzer import cli
sys.argv = ["dfanalyzer"] + sys.argv[1:]
cli.run()
"""

MM = ("mmap", "munmap", "mprotect", "brk", "mremap", "madvise")
# mmap_lock taken for writing (every other thread's page faults and mm calls wait); madvise
# POPULATE_* and the like take it for reading, DONTNEED/FREE for reading but send TLB shootdowns
WRITERS = ("mmap", "munmap", "mprotect", "brk", "mremap")


def tlb() -> int:
    try:
        with open("/proc/interrupts") as f:
            for line in f:
                if line.strip().startswith("TLB:"):
                    return sum(int(x) for x in line.split()[1:] if x.isdigit())
    except OSError:
        pass
    return -1


def run_once(tree: str, data: str, workers: int, extra: list, strace: bool) -> dict:
    r, w = os.pipe()
    # (PYTHONSAFEPATH, cwd /: the tree's package, not one in the current folder)
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree), PYTHONSAFEPATH="1", MM_FD=str(w))
    cmd = [sys.executable, "-c", CHILD, "summary", os.path.abspath(data), "--json", "--workers", str(workers), *extra]
    out = None
    if strace:
        out = tempfile.NamedTemporaryFile(prefix="mm-", suffix=".txt", delete=False).name
        cmd = ["strace", "-f", "-qq", "-o", out, "-e", "trace=" + ",".join(MM), *cmd]
    t0 = tlb()
    p = subprocess.Popen(cmd, env=env, cwd="/", stdout=subprocess.DEVNULL, pass_fds=(w,))
    os.close(w)
    _, status, ru = os.wait4(p.pid, 0)
    t1 = tlb()
    with os.fdopen(r) as f:
        said = f.read().split()
    batches, so = int(said[0]), said[1]
    if not so.startswith(os.path.abspath(tree)):
        raise SystemExit(f"{tree}: the child ran {so}")
    if status != 0:
        raise SystemExit(f"child failed ({status}): {' '.join(cmd)}")
    res = dict(
        batches=batches, minflt=ru.ru_minflt, maxrss=ru.ru_maxrss >> 10, user=ru.ru_utime, sys=ru.ru_stime, tlb=t1 - t0
    )
    if out:
        calls = collections.Counter()
        with open(out) as f:
            for line in f:
                m = re.match(r"\d+ +(\w+)\(", line)  # ("<... x resumed>": the rest of a call counted)
                if not m or m.group(1) not in MM:
                    continue
                name = m.group(1)
                if name == "madvise":
                    a = re.search(r"MADV_(\w+)", line)
                    name += ":" + (a.group(1) if a else "?")
                calls[name] += 1
        os.unlink(out)
        res["calls"] = calls
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trees")
    ap.add_argument("small")
    ap.add_argument("big", nargs="?")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--runs", type=int, default=1, help="CPU runs (no strace) per tree and data set")
    ap.add_argument("--strace-runs", type=int, default=1, help="strace runs per tree and data set")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a, extra = ap.parse_args(argv[:cut]), argv[cut + 1 :]
    trees = a.trees.split(",")
    sets = [a.small] + ([a.big] if a.big else [])
    have_strace = shutil.which("strace") is not None
    for tree in trees:
        print(f"== {tree}")
        steady = collections.defaultdict(list)
        for _ in range(a.strace_runs if have_strace else 0):
            rs = []
            for d in sets:
                r = run_once(tree, d, a.workers, extra, strace=True)
                rs.append(r)
                calls = r["calls"]
                wr = sum(v for k2, v in calls.items() if k2 in WRITERS)
                print(
                    f"{d}: batches {r['batches']}  minflt {r['minflt']}  peak RSS {r['maxrss']} MiB  mm writers {wr}  "
                    + "  ".join(f"{k2} {v}" for k2, v in sorted(calls.items())),
                    flush=True,
                )
            if len(rs) == 2 and rs[1]["batches"] > rs[0]["batches"]:
                nb = rs[1]["batches"] - rs[0]["batches"]
                keys = set(rs[0]["calls"]) | set(rs[1]["calls"]) | {"madvise:POPULATE_WRITE"}
                per = {k2: (rs[1]["calls"].get(k2, 0) - rs[0]["calls"].get(k2, 0)) / nb for k2 in keys}
                per["mm writers"] = sum(v for k2, v in per.items() if k2 in WRITERS)
                per["minflt"] = (rs[1]["minflt"] - rs[0]["minflt"]) / nb
                for k2, v in per.items():
                    steady[k2].append(v)
        if steady:
            # (medians over the strace runs: which thread frees what first varies from run to run)
            med = {k2: sorted(v)[len(v) // 2] for k2, v in steady.items()}
            print(
                f"steady state per batch, median of {len(steady['minflt'])} pairs of runs: "
                + "  ".join(f"{k2} {med[k2]:.2f}" for k2 in sorted(med))
            )
    if a.runs:
        print("== CPU (no strace): user+sys s, sys s, minflt, TLB shootdowns (machine-wide), peak RSS")
        cpu = collections.defaultdict(list)
        for i in range(a.runs):
            order = trees if i % 2 == 0 else trees[::-1]
            for tree in order:
                for d in sets:
                    r = run_once(tree, d, a.workers, extra, strace=False)
                    cpu[(tree, d)].append(r)
                    print(
                        f"run {i} {tree} {d}: {r['user'] + r['sys']:.3f} {r['sys']:.3f} {r['minflt']} {r['tlb']} "
                        f"peak RSS {r['maxrss']} MiB",
                        flush=True,
                    )
        if len(trees) == 2:
            for d in sets:
                ra = [x["user"] + x["sys"] for x in cpu[(trees[0], d)]]
                rb = [x["user"] + x["sys"] for x in cpu[(trees[1], d)]]
                ratios = sorted(b / x for x, b in zip(ra, rb))
                print(f"{d}: CPU {trees[1]} / {trees[0]} per pair: " + " ".join(f"{x:.3f}" for x in ratios))


if __name__ == "__main__":
    main()
