"""Helpers shared by tests/test_preload_*.py (no tests here).

Traces are read with conftest.read_trace (plain gzip + json: the layout is checked).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys

from conftest import read_trace  # noqa: F401  (re-exported for the preload tests)

HERE = os.path.dirname(os.path.abspath(__file__))
C_SOURCES = os.path.join(HERE, "cpp")


def preload_lib() -> str:
    out = subprocess.run(
        [sys.executable, "-m", "dftracer", "--preload-path"], capture_output=True, text=True, check=True
    )
    path = out.stdout.strip()
    assert os.path.isfile(path), path
    return path


def compile_c(name: str, outdir: str) -> str:
    """Compile tests/cpp/<name>.c with gcc into outdir; returns the executable path."""
    exe = os.path.join(outdir, name)
    if not os.path.exists(exe):
        subprocess.run(
            ["gcc", "-O1", "-Wall", "-o", exe, os.path.join(C_SOURCES, name + ".c"), "-lpthread"],
            check=True,
        )
    return exe


def trace_files(prefix: str) -> list[str]:
    return sorted(f for f in glob.glob(prefix + "*.pfw*") if not f.endswith(".zindex"))


def events_by_file(prefix: str) -> dict[str, list[dict]]:
    """{file: events (ph X/i)} over every file of the run; asserts one pid per file."""
    out: dict[str, list[dict]] = {}
    for f in trace_files(prefix):
        recs = read_trace(f)
        pids = {r["pid"] for r in recs}
        assert len(pids) == 1, (f, pids)
        out[f] = [r for r in recs if r.get("ph") in ("X", "i")]
    return out


def events_by_pid(prefix: str) -> dict[int, list[dict]]:
    """{pid: events (ph X/i)} over every file of the run. A pid may own several files (a forked
    child, then the program it exec'ed); their events are concatenated in ts order."""
    out: dict[int, list[dict]] = {}
    for evs in events_by_file(prefix).values():
        if evs:
            out.setdefault(evs[0]["pid"], []).extend(evs)
    for evs in out.values():
        evs.sort(key=lambda e: e["ts"])
    return out


def all_events(prefix: str) -> list[dict]:
    return [e for evs in events_by_pid(prefix).values() for e in evs]


def traced_env(lib: str, prefix: str, data_dir: str, metadata: bool = True, **extra) -> dict:
    env = dict(os.environ)
    env.update(
        LD_PRELOAD=lib,
        DFTRACER_ENABLE="1",
        DFTRACER_INIT="PRELOAD",
        DFTRACER_LOG_FILE=prefix,
        DFTRACER_DATA_DIR=data_dir,
        DFTRACER_INC_METADATA="1" if metadata else "0",
    )
    env.update({k: str(v) for k, v in extra.items()})
    return env


_STRACE_LINE = re.compile(r"^(\d+)\s+(\w+)\((.*)\)\s+=\s+(-?\d+)")


def strace_reads(log: str, path: str) -> tuple[int, int]:
    """(number of read/pread64 syscalls on fds naming `path`, sum of their results) from an
    ``strace -f`` log, following the fd through open/openat, dup/dup2/dup3/fcntl and close."""
    fds: dict[tuple[int, int], bool] = {}
    n = total = 0
    for line in _strace_calls(log):
        m = _STRACE_LINE.match(line)
        if not m:
            continue
        pid, call, args, ret = int(m[1]), m[2], m[3], int(m[4])
        first = args.split(",")[0].strip()
        if call in ("open", "openat") and ret >= 0:
            fds[(pid, ret)] = f'"{path}"' in args
        elif call in ("dup", "dup2", "dup3") and ret >= 0:
            fds[(pid, ret)] = fds.get((pid, int(first)), False)
        elif call == "fcntl" and "F_DUPFD" in args and ret >= 0:
            fds[(pid, ret)] = fds.get((pid, int(first)), False)
        elif call == "close":
            fds.pop((pid, int(first)), None)
        elif call in ("read", "pread64") and fds.get((pid, int(first))):
            n += 1
            total += max(ret, 0)
    return n, total


_UNFINISHED = " <unfinished ...>"
_RESUMED = re.compile(r"^(\d+)\s+<\.\.\. \w+ resumed>(.*)$")


def _strace_calls(log: str):
    """Lines of an ``strace -f`` log with each call interrupted by another thread's
    (``<unfinished ...>`` ... ``<... x resumed>``) joined back into one line."""
    pending: dict[str, str] = {}
    with open(log) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.endswith(_UNFINISHED):
                pending[line.split(None, 1)[0]] = line[: -len(_UNFINISHED)]
                continue
            m = _RESUMED.match(line)
            if m and m[1] in pending:
                line = pending.pop(m[1]) + m[2]
            yield line


def strace_cmd(log: str, env: dict) -> list[str]:
    """strace -f prefix that gives the DFTRACER_*/LD_PRELOAD variables of env to the traced
    command only (strace itself stays untraced)."""
    cmd = ["strace", "-f", "-qq", "-s", "0", "-o", log]
    for k, v in env.items():
        if k.startswith("DFTRACER_") or k == "LD_PRELOAD":
            cmd += ["-E", f"{k}={v}"]
    return cmd


def plain_env(env: dict) -> dict:
    return {k: v for k, v in env.items() if not (k.startswith("DFTRACER_") or k == "LD_PRELOAD")}


def have_strace() -> bool:
    return shutil.which("strace") is not None
