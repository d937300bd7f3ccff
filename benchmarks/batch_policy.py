"""The threaded summary's batch size policy measured on the whole command (issue 22, Deliver 2;
docs/perf/i28-batch.md).

For each round, each ``--workers`` N and each batch configuration (``policy``: no
``--batch-size-mb``, so :func:`dfanalyzer.analyzer.summary_batch_bytes` decides from
``SUMMARY_MIN_THREADS`` (8) threads on, main's 16 MiB plan below; ``--batch-size-mb 64`` gives the
policy's batches at 1-2 threads for 100M events; a number: that ``--batch-size-mb``), one command ``dfanalyzer summary PATH --json --no-progress --workers N`` runs
as a child process with ``benchmarks/scaling.py``'s phase timers (``--_one``); the parent reads
its CPU (user + system) and peak RSS from ``wait4`` (that child only). Configurations alternate
inside a round, so paired ratios compare runs seconds apart. Every run's JSON must equal the
first's (byte-identical across batch sizes and worker counts).

Printed: per run wall, CPU, µs CPU per event, peak RSS, the planned batches; medians per
(workers, config); paired ratios (config ÷ the first config, same round and workers; N workers ÷
1 worker, same round and config: Deliver 2's "CPU per event within 1.1x"); and the command's
serial steps (``scaling._steps``: interpreter, imports, plan, the main thread's fold, finish,
sanity, other = printing and closing, exit) as shares of the projected wall at ``--project``
threads: ``(CPU at 1 worker less the serial steps) / S(T) + serial``, ``S(T)`` the GIL-server
speed-up of ``docs/perf/i26-gil.md`` section 4 at the GIL-held share ``--f`` (measured by
``benchmarks/gil_share.py`` at the batch size the policy plans).

    python benchmarks/batch_policy.py PATH [--workers 1 2] [--configs policy 16] [--rounds 2]
        [--index-dir D] [--project 16] [--f 0.03]
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import scaling  # noqa: E402


def gil_server_speedup(f: float, n: int) -> float:
    """Exact mean-value analysis of ``n`` threads sharing one GIL (docs/perf/i26-gil.md §4): per
    unit of work ``1 - f`` GIL-free, ``f`` queued at the GIL; returns the throughput X(n)."""
    q = 0.0
    x = 0.0
    for k in range(1, n + 1):
        r = f * (1 + q)
        x = k / ((1 - f) + r)
        q = x * r
    return x


def run_one(path: str, extra: list, tmp: str) -> dict:
    """One command as a child; wall, CPU and peak RSS of that child alone (``wait4``)."""
    phases_file = os.path.join(tmp, "phases.json")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    env["DFA_SCALING_PHASES"] = phases_file
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cmd = [sys.executable, scaling.__file__, "--_one", "summary", path, "--json", "--no-progress", *extra]
    out_path = os.path.join(tmp, "out.json")
    t = time.perf_counter()
    env["DFA_SCALING_T0"] = repr(t)
    with open(out_path, "wb") as out, open(os.path.join(tmp, "err.txt"), "wb") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd="/")
        _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(
            f"{' '.join(cmd)} failed ({p.returncode}): {open(os.path.join(tmp, 'err.txt')).read()[-2000:]}"
        )
    with open(phases_file) as f:
        phases = json.load(f)
    phases["exit"] = (wall - phases["main end"][0], 0.0)
    with open(out_path, "rb") as f:
        out = f.read()
    return {
        "wall": wall,
        "cpu": ru.ru_utime + ru.ru_stime,
        "sys": ru.ru_stime,
        "rss_mib": ru.ru_maxrss / 1024,
        "minflt": ru.ru_minflt,
        "out": out,
        "phases": phases,
    }


def planned_batches(path: str, workers: int, config: str, index_dir) -> tuple:
    """(batches, target bytes) of the threaded streamed summary's plan for this run."""
    from dfanalyzer import analyzer as A

    mb = None if config == "policy" else float(config)
    with A.DFAnalyzer(path, index_dir=index_dir, n_workers=workers, batch_size_mb=mb) as an:
        b = an._summary_batches()
        good = [i for i in an._indexes if i["error"] is None]
        total = sum(i["uncompressed_bytes"] for i in good)
        bigger = mb is None and b is not an._batches  # (else: a given size, or main's plan below SUMMARY_MIN_THREADS)
        size = A.summary_batch_bytes(total, workers) if bigger else an.batch_bytes
        return len(b), min(size, -(-total // workers)), total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--configs", nargs="+", default=["policy", "16"])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--index-dir", default=None)
    ap.add_argument("--project", type=int, default=16, help="threads of the projected wall")
    ap.add_argument("--f", type=float, default=0.03, help="GIL-held share at the policy's batches")
    a = ap.parse_args(argv)
    path = os.path.abspath(a.path)
    idx = ["--index-dir", os.path.abspath(a.index_dir)] if a.index_dir else []
    tmp = tempfile.mkdtemp(prefix="dfa-batch-policy-")
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, {os.cpu_count()} CPUs, load {os.getloadavg()}")
    print(f"# {sys.executable} {' '.join(sys.argv)}")
    plans = {}
    for n in a.workers:
        for c in a.configs:
            plans[n, c] = planned_batches(path, n, c, a.index_dir)
            print(
                f"# plan workers {n} {c}: {plans[n, c][0]} batches of ≤ {plans[n, c][1] / 2**20:.2f} MiB ({plans[n, c][2]:,} B)"
            )
    first = run_one(path, ["--workers", str(max(a.workers)), *idx], tmp)  # warm: indexes, page cache
    want = first["out"]
    events = json.loads(want)["events"]
    runs = {}
    print("\n| round | workers | config | wall s | CPU s | sys s | µs CPU/event | peak RSS MiB | minor faults |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in range(a.rounds):
        for n in a.workers if r % 2 == 0 else a.workers[::-1]:
            for c in a.configs if r % 2 == 0 else a.configs[::-1]:
                extra = ["--workers", str(n), *idx] + ([] if c == "policy" else ["--batch-size-mb", c])
                res = run_one(path, extra, tmp)
                if res["out"] != want:
                    raise SystemExit(f"summary JSON with workers {n} {c} differs from the first run's")
                runs[r, n, c] = res
                print(
                    f"| {r} | {n} | {c} | {res['wall']:.2f} | {res['cpu']:.2f} | {res['sys']:.2f} | "
                    f"{1e6 * res['cpu'] / events:.3f} | {res['rss_mib']:.0f} | {res['minflt']:,} |",
                    flush=True,
                )
    print(f"\n# {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, load {os.getloadavg()}; {events:,} events")
    print("all runs' JSON byte-identical to the first's")
    print("\nmedians\n\n| workers | config | batches | wall s | CPU s | µs CPU/event | peak RSS MiB |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n in a.workers:
        for c in a.configs:
            rs = [runs[r, n, c] for r in range(a.rounds)]
            med = {k: statistics.median(x[k] for x in rs) for k in ("wall", "cpu", "rss_mib")}
            print(
                f"| {n} | {c} | {plans[n, c][0]} | {med['wall']:.2f} | {med['cpu']:.2f} | "
                f"{1e6 * med['cpu'] / events:.3f} | {med['rss_mib']:.0f} |"
            )
    base = a.configs[0]
    print("\npaired ratios (per round)\n")
    for n in a.workers:
        for c in a.configs[1:]:
            cpu = [runs[r, n, base]["cpu"] / runs[r, n, c]["cpu"] for r in range(a.rounds)]
            wall = [runs[r, n, base]["wall"] / runs[r, n, c]["wall"] for r in range(a.rounds)]
            print(
                f"* workers {n}: {base} ÷ {c}: CPU {', '.join(f'{x:.3f}' for x in cpu)}; wall {', '.join(f'{x:.3f}' for x in wall)}"
            )
    n1 = min(a.workers)
    for n in a.workers:
        if n == n1:
            continue
        for c in a.configs:
            cpu = [runs[r, n, c]["cpu"] / runs[r, n1, c]["cpu"] for r in range(a.rounds)]
            print(f"* {c}: CPU per event at {n} ÷ {n1} workers: {', '.join(f'{x:.3f}' for x in cpu)}")
    # serial steps as shares of the projected wall at --project threads
    s = gil_server_speedup(a.f, a.project)
    print(f"\nserial steps vs the projected wall at {a.project} threads (GIL server, f = {a.f}: S = {s:.2f})\n")
    print("| config | " + " | ".join(f"{k} s" for k in scaling.SERIAL) + " | projected wall s | largest step % |")
    print("|---|" + "---:|" * (len(scaling.SERIAL) + 2))
    nmax = max(a.workers)
    for c in a.configs:
        steps = [scaling._steps(runs[r, nmax, c]["phases"]) for r in range(a.rounds)]
        st = {k: statistics.median(x[k] for x in steps) for k in scaling.SERIAL}
        cpu1 = statistics.median(runs[r, n1, c]["cpu"] for r in range(a.rounds))
        serial = sum(st.values())
        wall = max(0.0, cpu1 - serial) / s + serial
        big = max(st, key=st.get)
        cells = " | ".join(f"{st[k]:.3f} ({100 * st[k] / wall:.1f} %)" for k in scaling.SERIAL)
        print(f"| {c} | {cells} | {wall:.2f} | {big} {100 * st[big] / wall:.1f} % |")
    print(f"\n(serial steps: medians at {nmax} workers; CPU at {n1} worker: the parallel work)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
