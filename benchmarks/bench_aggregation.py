"""Trace size and whole-process CPU of hot loops with and without aggregation (issue 23).

Two programs, each run in every setup, interleaved, ``--repeat`` times:

* C: ``bench_preload.c`` under the LD_PRELOAD library, one process: ROUNDS x (open, 1000 reads of
  64 B, close), i.e. ``--rounds 2000`` = 2,000,000 reads.
* Python: a ``dft_fn``-decorated function called ``--py-calls`` times plus a ``with dft_fn(...)``
  region of the same count (our Python API, no preload).

Setups: ``baseline`` (no tracing), ``full`` (every call an event), ``FULL``
(``DFTRACER_ENABLE_AGGREGATION=1``), ``SELECTIVE`` (the rule file below: POSIX reads and short
app calls folded, everything else full), all with ``DFTRACER_INC_METADATA=1`` and the default
bucket of ``DFTRACER_TRACE_INTERVAL_MS`` (1000 ms). With ``--original-lib`` (upstream DFTracer
2.2.0's libdftracer_preload.so, e.g. from a scratch venv with PyPI ``dftracer==2.2.0``) the C
program also runs under it with ``DFTRACER_ENABLE_AGGREGATION=1`` (FULL).

Reported per (program, setup): median over the repeats of the whole-process CPU time (user +
system of the process and all its threads: os.wait4's rusage), the CPU added over the baseline,
the trace bytes on disk and the trace lines, plus ratios to ``full``.

    python benchmarks/bench_aggregation.py [--rounds 2000] [--py-calls 200000] [--repeat 3]
        [--original-lib /tmp/up/lib/python3.11/site-packages/dftracer/lib64/libdftracer_preload.so]
        [--json results.json]
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

RULES = """\
inclusion:
  - "cat == 'POSIX' AND name IN {read, read64}"
  - "cat == 'app' AND dur < 1000"
exclusion:
  - "name LIKE 'open%'"
"""

PY_LOOP = """
import sys
from dftracer.logger import dftracer, dft_fn
log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)
app = dft_fn("app")

@app.log
def step(i):
    return i

for i in range(int(sys.argv[1])):
    step(i)
    with dft_fn("app", name="inner", step=i):
        pass
log.finalize()
"""


def preload_path() -> str:
    out = subprocess.run([sys.executable, "-m", "dftracer", "--preload-path"], capture_output=True, text=True)
    return out.stdout.strip()


def run(cmd, env) -> float:
    """Whole-process CPU seconds (user + system, all threads) of one run."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd[0]} failed: {err}")
    return ru.ru_utime + ru.ru_stime


def trace_size(prefix: str) -> tuple[int, int]:
    """(bytes on disk, lines) of every trace file of a run (plain gzip reading)."""
    size = lines = 0
    for f in glob.glob(prefix + "*.pfw*"):
        if f.endswith(".zindex"):
            continue
        size += os.path.getsize(f)
        opener = gzip.open if f.endswith(".gz") else open
        with opener(f, "rb") as fh:
            lines += sum(1 for _ in fh)
    return size, lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=2000, help="C: rounds of 1000 reads (2000: 2,000,000 reads)")
    ap.add_argument("--py-calls", type=int, default=200000, help="Python: loop iterations (2 events each)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--original-lib", default=None, help="upstream DFTracer 2.2.0 libdftracer_preload.so")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()

    work = tempfile.mkdtemp(prefix="bench-agg-")
    try:
        exe = os.path.join(work, "bench_preload")
        subprocess.run(["gcc", "-O2", "-o", exe, os.path.join(HERE, "bench_preload.c")], check=True)
        data = os.path.join(work, "data")
        os.makedirs(data)
        infile = os.path.join(data, "input.bin")
        with open(infile, "wb") as f:
            f.write(os.urandom(64 * 1000))
        script = os.path.join(work, "loop.py")
        with open(script, "w") as f:
            f.write(PY_LOOP)
        rules = os.path.join(work, "rules.yaml")
        with open(rules, "w") as f:
            f.write(RULES)
        lib = preload_path()
        common = {"DFTRACER_ENABLE": "1", "DFTRACER_INC_METADATA": "1", "DFTRACER_DATA_DIR": data}
        agg = {"DFTRACER_ENABLE_AGGREGATION": "1"}
        sel = dict(agg, DFTRACER_AGGREGATION_TYPE="SELECTIVE", DFTRACER_AGGREGATION_FILE=rules)
        modes = {"baseline": None, "full": {}, "FULL": agg, "SELECTIVE": sel}
        c_cmd = [exe, infile, "1", "1000", "64", str(a.rounds)]
        py_cmd = [sys.executable, script, str(a.py_calls)]
        jobs = []  # (program, setup, cmd, env or None, preload lib)
        for m, extra in modes.items():
            jobs.append(("C", m, c_cmd, extra, lib))
            jobs.append(("Python", m, py_cmd, extra, None))
        if a.original_lib:
            jobs.append(("C", "upstream220 FULL", c_cmd, agg, a.original_lib))
            jobs.append(("C", "upstream220 full", c_cmd, {}, a.original_lib))
        res: dict[tuple[str, str], dict] = {}
        for rep in range(a.repeat):
            for prog, setup, cmd, extra, plib in jobs:
                env = dict(os.environ)
                env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
                # no '.' in the prefix: upstream takes what follows one as the extension
                prefix = os.path.join(work, f"t-{prog}-{setup.replace(' ', '_')}-{rep}")
                if extra is not None:
                    env.update(common, DFTRACER_LOG_FILE=prefix, **extra)
                    if plib:
                        env.update(LD_PRELOAD=plib, DFTRACER_INIT="PRELOAD")
                cpu = run(cmd, env)
                size, lines = trace_size(prefix) if extra is not None else (0, 0)
                r = res.setdefault((prog, setup), {"cpu": [], "bytes": [], "lines": []})
                r["cpu"].append(cpu)
                r["bytes"].append(size)
                r["lines"].append(lines)
                for f in glob.glob(prefix + "*"):
                    os.remove(f)
        out = []
        for (prog, setup), r in res.items():
            base = statistics.median(res[(prog, "baseline")]["cpu"])
            full = res[(prog, "full")]
            row = {
                "program": prog,
                "setup": setup,
                "cpu_s": statistics.median(r["cpu"]),
                "added_cpu_s": statistics.median(r["cpu"]) - base,
                "trace_bytes": int(statistics.median(r["bytes"])),
                "lines": int(statistics.median(r["lines"])),
            }
            fb, fa = statistics.median(full["bytes"]), statistics.median(full["cpu"]) - base
            row["bytes_vs_full"] = row["trace_bytes"] / fb if fb else None
            row["added_cpu_vs_full"] = row["added_cpu_s"] / fa if fa > 0 else None
            out.append(row)
        print(
            f"{'program':8} {'setup':22} {'cpu s':>8} {'added s':>8} {'bytes':>11} {'lines':>9} {'bytes/full':>10} {'add/full':>9}"
        )
        for r in out:
            bf = "" if r["bytes_vs_full"] is None else f"{r['bytes_vs_full']:.5f}"
            cf = "" if r["added_cpu_vs_full"] is None else f"{r['added_cpu_vs_full']:.3f}"
            print(
                f"{r['program']:8} {r['setup']:22} {r['cpu_s']:8.3f} {r['added_cpu_s']:8.3f} "
                f"{r['trace_bytes']:11,} {r['lines']:9,} {bf:>10} {cf:>9}"
            )
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f, indent=1)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
