"""Overhead of the LD_PRELOAD interception: the DFTracer paper's microbenchmark (SC24, §V-A).

Each of P processes opens a file, does 1000 reads of 4 KiB and closes it (repeated ROUNDS times
so a run is long enough to time), in C (bench_preload.c) and in Python (bench_preload_py.py).
All setups run interleaved in one invocation: baseline (no preload), our preload without
metadata, our preload with metadata, and, with --original-lib, the original DFTracer's
libdftracer_preload.so (pip package ``dftracer``, e.g. 2.2.0 in a scratch venv) in the same two
modes, and with --darshan-lib, Darshan's runtime library (libdarshan.so) with DXT tracing on
(DXT_ENABLE_IO_TRACE=1). Darshan's B/event is its log size / intercepted calls (its DXT log is
not parsed: a default build keeps only the first ~2 MiB of DXT records, see docs/perf/preload.md).

Reported per (variant, P, setup): median over --repeat runs of the mean per-process wall time,
the overhead in % and in ns per intercepted call ((t - t_baseline) / calls per process); the same
for CPU time (user + system of all processes and threads of the run, incl. the trace writer and
compression: (cpu - cpu_baseline) / (calls per process x P)), which a shared, loaded machine
disturbs less than wall time; and trace bytes per event (on-disk size of all trace files / number
of POSIX events in them). "app ns/call" is the added CPU time of the worker's own thread per
call (CLOCK_THREAD_CPUTIME_ID): the cost the application pays inline, without the writer thread.

    python benchmarks/bench_preload.py [--procs 1,2,4] [--rounds 100] [--repeat 5]
        [--original-lib /tmp/dfvenv/lib/python3.11/site-packages/dftracer/lib64/libdftracer_preload.so]
        [--darshan-lib /path/to/lib/libdarshan.so] [--breakdown] [--json results.json]
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def build_c(workdir: str) -> str:
    exe = os.path.join(workdir, "bench_preload")
    subprocess.run(["gcc", "-O2", "-o", exe, os.path.join(HERE, "bench_preload.c")], check=True)
    return exe


def count_events(files: list[str], foreign: bool = False) -> int:
    """POSIX events in a run's trace files: ours through tests/conftest.read_trace (the layout is
    checked); the original DFTracer's by a line count, as its layout is not ours (numeric "ph")."""
    if not foreign:
        sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
        from conftest import read_trace

        return sum(1 for f in files for r in read_trace(f) if r.get("cat") == "POSIX")
    n = 0
    for f in files:
        opener = gzip.open if f.endswith(".gz") else open
        with opener(f, "rt", errors="replace") as fh:
            n += sum(1 for line in fh if '"cat":"POSIX"' in line)
    return n


def setups(ours: str, original: str | None, breakdown: bool, darshan: str | None = None) -> dict[str, dict | None]:
    out: dict[str, dict | None] = {"baseline": None}
    if breakdown:
        # where the cost goes: wrappers on an untraced file (fast path only), then events
        # without compression (formatting + write), then the full setups below
        out["ours:untraced"] = {
            "LD_PRELOAD": ours,
            "DFTRACER_ENABLE": "1",
            "DFTRACER_INIT": "PRELOAD",
            "DFTRACER_INC_METADATA": "1",
            "_DATA_DIR": "/nonexistent-dir",
        }
        out["ours+meta:gzip-off"] = {
            "LD_PRELOAD": ours,
            "DFTRACER_ENABLE": "1",
            "DFTRACER_INIT": "PRELOAD",
            "DFTRACER_INC_METADATA": "1",
            "DFTRACER_TRACE_COMPRESSION": "0",
        }
        out["ours+meta:gzip-6"] = {
            "LD_PRELOAD": ours,
            "DFTRACER_ENABLE": "1",
            "DFTRACER_INIT": "PRELOAD",
            "DFTRACER_INC_METADATA": "1",
            "DFTRACER_COMPRESSION_LEVEL": "6",
        }
    for name, lib in (("ours", ours), ("original", original)):
        if not lib:
            continue
        for meta in (0, 1):
            out[f"{name}{'+meta' if meta else ''}"] = {
                "LD_PRELOAD": lib,
                "DFTRACER_ENABLE": "1",
                "DFTRACER_INIT": "PRELOAD",
                "DFTRACER_INC_METADATA": str(meta),
            }
            if name == "original":
                out[f"{name}{'+meta' if meta else ''}"]["_FOREIGN"] = "1"
    if darshan:
        # DXT: a trace record per read/write; log written to the run's log dir at exit
        out["darshan-dxt"] = {
            "LD_PRELOAD": darshan,
            "DARSHAN_ENABLE_NONMPI": "1",
            "DXT_ENABLE_IO_TRACE": "1",
            "_DARSHAN": "1",
        }
    return out


def run_once(cmd: list[str], extra: dict | None, data_dir: str, log_dir: str) -> tuple[dict, int, int]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith(("DFTRACER_", "DARSHAN_", "DXT_")) or k == "LD_PRELOAD")
    }
    shutil.rmtree(log_dir, ignore_errors=True)
    os.makedirs(log_dir)
    darshan = bool(extra and extra.get("_DARSHAN"))
    foreign = False
    if darshan:
        env.update({k: v for k, v in extra.items() if not k.startswith("_")})
        env["DARSHAN_LOGPATH"] = log_dir  # a build configured --with-log-path-by-env=DARSHAN_LOGPATH
    elif extra:
        env.update(extra)
        foreign = bool(env.pop("_FOREIGN", ""))
        env["DFTRACER_DATA_DIR"] = env.pop("_DATA_DIR", data_dir)
        env["DFTRACER_LOG_FILE"] = os.path.join(log_dir, "bench")
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_ns = ((ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)) * 1e9
    if r.returncode != 0:
        raise RuntimeError(f"{cmd} failed ({r.returncode}): {r.stderr[-2000:]}")
    res = json.loads(r.stdout.strip().splitlines()[-1])
    res["cpu_ns"] = cpu_ns  # user + system CPU of every process and thread of the run
    files = [f for f in glob.glob(os.path.join(log_dir, "**"), recursive=True) if os.path.isfile(f)]
    nbytes = sum(os.path.getsize(f) for f in files)
    if darshan:  # its log is not parsed: bytes per intercepted call
        return res, nbytes, res["calls"] * res["procs"]
    return res, nbytes, count_events(files, foreign) if extra else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", default="1,2,4")
    ap.add_argument("--reads", type=int, default=1000)
    ap.add_argument("--bs", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=100, help="open/1000 reads/close cycles per process (C)")
    ap.add_argument("--py-rounds", type=int, default=30, help="same, Python variant")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--variants", default="c,py")
    ap.add_argument("--original-lib", default=None, help="the original DFTracer's libdftracer_preload.so")
    ap.add_argument("--ours-lib", default=None, help="our libdftracer_preload.so (default: the installed one)")
    ap.add_argument("--darshan-lib", default=None, help="Darshan's libdarshan.so (runs it with DXT tracing on)")
    ap.add_argument("--json", default=None, help="write all results here")
    ap.add_argument(
        "--breakdown", action="store_true", help="add setups: preload on an untraced file, and with compression off"
    )
    args = ap.parse_args(argv)

    from dftracer._paths import preload_library

    ours = args.ours_lib or preload_library()
    work = tempfile.mkdtemp(prefix="bench_preload_")
    try:
        data_dir = os.path.join(work, "data")
        os.makedirs(data_dir)
        data = os.path.join(data_dir, "file.bin")
        with open(data, "wb") as f:
            f.write(os.urandom(args.reads * args.bs))
        with open(data, "rb") as f:  # page cache
            f.read()
        exe = build_c(work)
        log_dir = os.path.join(work, "logs")
        conf = setups(ours, args.original_lib, args.breakdown, args.darshan_lib)
        results = []
        print(
            f"{'variant':7} {'P':>2} {'setup':14} {'ms/proc':>9} {'overhead':>9} {'ns/call':>8} "
            f"{'cpu ovh':>8} {'cpu ns/call':>11} {'app ns/call':>11} {'B/event':>8}"
        )
        for variant in args.variants.split(","):
            for procs in [int(p) for p in args.procs.split(",")]:
                rounds = args.rounds if variant == "c" else args.py_rounds
                base = [data, str(procs), str(args.reads), str(args.bs), str(rounds)]
                cmd = (
                    [exe, *base]
                    if variant == "c"
                    else [sys.executable, os.path.join(HERE, "bench_preload_py.py"), *base]
                )
                times: dict[str, list[float]] = {k: [] for k in conf}
                cpus: dict[str, list[float]] = {k: [] for k in conf}
                tcpus: dict[str, list[float]] = {k: [] for k in conf}
                sizes: dict[str, tuple[int, int]] = {}
                calls = 0
                for rep in range(args.repeat):
                    names = list(conf)
                    names = names[rep % len(names) :] + names[: rep % len(names)]  # rotate order
                    for name in names:
                        res, nbytes, nev = run_once(cmd, conf[name], data_dir, log_dir)
                        times[name].append(statistics.mean(res["ns_per_proc"]))
                        cpus[name].append(res["cpu_ns"])
                        tcpus[name].append(statistics.mean(res["thread_cpu_ns_per_proc"]))
                        calls = res["calls"]
                        if conf[name]:
                            sizes[name] = (nbytes, nev)
                t_base = statistics.median(times["baseline"])
                c_base = statistics.median(cpus["baseline"])
                a_base = statistics.median(tcpus["baseline"])
                for name in conf:
                    t = statistics.median(times[name])
                    c = statistics.median(cpus[name])
                    row = {
                        "variant": variant,
                        "procs": procs,
                        "setup": name,
                        "calls_per_proc": calls,
                        "ns_per_proc": t,
                        "overhead_pct": 100.0 * (t / t_base - 1.0),
                        "ns_per_call": (t - t_base) / calls,
                        "runs_ns": times[name],
                        "cpu_ns": c,
                        "cpu_overhead_pct": 100.0 * (c / c_base - 1.0),
                        "cpu_ns_per_call": (c - c_base) / (calls * procs),
                        "app_thread_ns_per_call": (statistics.median(tcpus[name]) - a_base) / calls,
                    }
                    if name in sizes and sizes[name][1] and "untraced" not in name:
                        row["trace_bytes"], row["events"] = sizes[name]
                        row["bytes_per_event"] = sizes[name][0] / sizes[name][1]
                    results.append(row)
                    bpe = f"{row['bytes_per_event']:8.2f}" if "bytes_per_event" in row else f"{'-':>8}"
                    print(
                        f"{variant:7} {procs:2d} {name:14} {t / 1e6:9.2f} {row['overhead_pct']:8.1f}% "
                        f"{row['ns_per_call']:8.1f} {row['cpu_overhead_pct']:7.1f}% {row['cpu_ns_per_call']:11.1f} {row['app_thread_ns_per_call']:11.1f} {bpe}",
                        flush=True,
                    )
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
