"""Tracer cost per short-lived process (issue 16: target <= 0.5 ms per process).

Runs N short-lived processes one after another, untraced and traced (LD_PRELOAD of our preload
library, DFTRACER_ENABLE=1, logs in a fresh temporary folder per run, all removed at the end;
--delete-between-runs removes each before the next run), interleaved: every repetition runs each
setup once, in a rotated order. Workloads:

  true   a small untraced C driver (bench_process_start.c) posix_spawns /bin/true N times; only
         the children get LD_PRELOAD. /bin/true makes no intercepted call: a traced run must
         leave no trace file at all.
  io     the same driver spawns a C program doing one open, one read (4 KiB) and one close of a
         file: a traced run must leave exactly N trace files, each with the events open, read,
         close in that order (no event lost).
  bash   ``bash -c 'for ((i=0; i<N; i++)); do /bin/true; done'`` with bash itself traced too (the
         measurement quoted in issue 16): each iteration is a forked bash child that records its
         execve, flushes and execs /bin/true. A traced run must hold exactly N execve events.

Reported per workload and setup: median over the repetitions of the wall time per process (ms),
of the added wall time per process against the untraced run of the same repetition, of the added
CPU time per process (user + system of every process and thread of the run, getrusage
RUSAGE_CHILDREN), and of the same-repetition ratio traced / untraced (wall).

    python benchmarks/bench_process_start.py [--procs 200] [--repeat 7] [--workloads true,io,bash]
        [--lib PATH] [--compare-lib PATH] [--json results.json] [--log-root DIR] [--delete-between-runs]

--compare-lib adds a second traced setup with another build of the preload library (e.g. the
library before a change), measured in the same invocation.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.append(ROOT)  # an explicit PYTHONPATH (e.g. a build of the package) wins
sys.path.insert(0, os.path.join(ROOT, "tests"))

from test_preload_helpers import read_trace, trace_files  # noqa: E402


def build_helper(workdir: str) -> str:
    exe = os.path.join(workdir, "bench_process_start")
    subprocess.run(["gcc", "-O2", "-Wall", "-o", exe, os.path.join(HERE, "bench_process_start.c")], check=True)
    return exe


def tracer_env(lib: str, log_dir: str) -> dict[str, str]:
    return {"LD_PRELOAD": lib, "DFTRACER_ENABLE": "1", "DFTRACER_LOG_FILE": os.path.join(log_dir, "trace")}


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not (k.startswith("DFTRACER_") or k == "LD_PRELOAD")}


def command(workload: str, helper: str, data: str, n: int, extra: dict[str, str]) -> tuple[list[str], dict]:
    """(argv, env) of one run; extra = the tracer's variables (empty: untraced)."""
    env = clean_env()
    if workload == "bash":
        env.update(extra)  # bash and everything it starts is traced
        return ["bash", "-c", f"for ((i=0; i<{n}; i++)); do /bin/true; done"], env
    child = ["/bin/true"] if workload == "true" else [helper, "io", data]
    pairs = [f"{k}={v}" for k, v in extra.items()]
    return [helper, "spawn", str(n), str(len(pairs)), *pairs, *child], env


def check_trace(workload: str, log_dir: str, n: int, data: str) -> str:
    """Raises if the traced run lost or invented events; returns a one-line summary."""
    files = trace_files(os.path.join(log_dir, "trace"))
    events = {f: [r for r in read_trace(f) if r.get("ph") in ("X", "i")] for f in files}
    if workload == "true":
        if files:
            raise AssertionError(f"/bin/true logs no event, yet {len(files)} trace files were written")
        return "0 files (expected 0)"
    if workload == "io":
        if len(files) != n:
            raise AssertionError(f"expected {n} trace files (one per process), found {len(files)}")
        pids = set()
        for f, evs in events.items():
            names = [e["name"] for e in evs]
            if names != ["open", "read", "close"]:
                raise AssertionError(f"{f}: events {names}, expected open, read, close")
            pids.add(evs[0]["pid"])
        if len(pids) != n:
            raise AssertionError(f"{len(pids)} distinct pids in {n} files")
        return f"{n} files, {3 * n} events (expected {n}, {3 * n})"
    execs = sum(1 for evs in events.values() for e in evs if e["name"] == "execve")
    if execs != n:
        raise AssertionError(f"expected {n} execve events, found {execs} in {len(files)} files")
    return f"{len(files)} files, {execs} execve events (expected {n})"


def run_once(argv: list[str], env: dict) -> tuple[float, float]:
    """(wall s, CPU s of the run's processes and threads)."""
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError(f"{argv[:4]}... exited {r.returncode}: {r.stderr[-2000:]}")
    if r.stderr.strip():
        raise RuntimeError(f"unexpected stderr output: {r.stderr[-2000:]}")
    return wall, (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=200, help="processes per run (N)")
    ap.add_argument("--repeat", type=int, default=7, help="interleaved repetitions")
    ap.add_argument("--workloads", default="true,io,bash")
    ap.add_argument("--lib", default=None, help="our libdftracer_preload.so (default: the installed one)")
    ap.add_argument("--compare-lib", default=None, help="another build, measured as setup 'compare'")
    ap.add_argument("--json", default=None, help="write all results here")
    ap.add_argument(
        "--log-root",
        default=None,
        help="make the trace folders under this directory (default: the temporary directory), e.g. a "
        "tmpfs such as /dev/shm to leave out the file system's cost of creating one file per process",
    )
    ap.add_argument(
        "--delete-between-runs",
        action="store_true",
        help="delete each run's trace files before the next run (the first rounds' method); by default "
        "they stay until the end: ext4 skips inodes freed in the last seconds when it allocates "
        "new ones (recently_deleted), which made every traced file creation scan further",
    )
    args = ap.parse_args(argv)

    if args.lib is None:
        from dftracer._paths import preload_library

        args.lib = preload_library()
    setups = {"untraced": None, "traced": args.lib}
    if args.compare_lib:
        setups["compare"] = args.compare_lib
    n = args.procs
    work = tempfile.mkdtemp(prefix="bench_process_start_")
    log_root = tempfile.mkdtemp(prefix="bench_process_start_logs_", dir=args.log_root) if args.log_root else work
    results = []
    try:
        helper = build_helper(work)
        data = os.path.join(work, "data.bin")
        with open(data, "wb") as f:
            f.write(os.urandom(4096))
        log_dir = os.path.join(log_root, "logs")
        print(
            f"{n} processes per run, {args.repeat} repetitions; traced = {args.lib}"
            + (f"; compare = {args.compare_lib}" if args.compare_lib else "")
        )
        print(f"{'workload':8} {'setup':9} {'ms/proc':>8} {'+wall ms':>9} {'+cpu ms':>8} {'ratio':>6}  check")
        for workload in args.workloads.split(","):
            wall: dict[str, list[float]] = {s: [] for s in setups}
            cpu: dict[str, list[float]] = {s: [] for s in setups}
            checks: dict[str, str] = {}
            names = list(setups)
            for rep in range(args.repeat):
                order = names[rep % len(names) :] + names[: rep % len(names)]
                for name in order:
                    lib = setups[name]
                    if args.delete_between_runs:
                        shutil.rmtree(log_dir, ignore_errors=True)
                    else:
                        log_dir = os.path.join(log_root, f"logs-{workload}-{rep}-{name}")
                    os.makedirs(log_dir)
                    cmd, env = command(workload, helper, data, n, tracer_env(lib, log_dir) if lib else {})
                    w, c = run_once(cmd, env)
                    wall[name].append(w / n * 1e3)
                    cpu[name].append(c / n * 1e3)
                    if lib:
                        checks[name] = check_trace(workload, log_dir, n, data)
            for name in names:
                added = [wall[name][i] - wall["untraced"][i] for i in range(args.repeat)]
                added_cpu = [cpu[name][i] - cpu["untraced"][i] for i in range(args.repeat)]
                ratios = [wall[name][i] / wall["untraced"][i] for i in range(args.repeat)]
                row = {
                    "workload": workload,
                    "setup": name,
                    "procs": n,
                    "repeat": args.repeat,
                    "ms_per_proc": statistics.median(wall[name]),
                    "added_wall_ms": statistics.median(added),
                    "added_cpu_ms": statistics.median(added_cpu),
                    "ratio": statistics.median(ratios),
                    "wall_ms_runs": wall[name],
                    "cpu_ms_runs": cpu[name],
                    "check": checks.get(name, ""),
                }
                results.append(row)
                print(
                    f"{workload:8} {name:9} {row['ms_per_proc']:8.3f} {row['added_wall_ms']:9.3f} "
                    f"{row['added_cpu_ms']:8.3f} {row['ratio']:6.2f}  {row['check']}",
                    flush=True,
                )
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if log_root != work:
            shutil.rmtree(log_root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
