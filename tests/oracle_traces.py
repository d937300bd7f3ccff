"""Traces for the oracle's differential tests (tests/test_oracle_diff.py).

``real_run`` runs tests/oracle_app.py under the preload with the Python API and a 4 KiB write
buffer, so the real tracer writes many small gzip members (a parent with a reader thread and a
forked worker child). ``rehost`` turns a real file into the file of another node with plain
gzip + json: the hostname record says another host, the same pid, every timestamp shifted (clock
skew), the hostname record moved to a later member. ``aggregated`` repeats the records of the real
upstream DFTracer 2.2.0 aggregated trace (tests/data/dftracer-v2.2.0/c-agg.pfw) over many members,
with its HH/FH hash records in the first member only. Members are written by the tracer's own
encoder (``dftracer._dftracer.encode_member``) at a size that does not divide the batch sizes, so
members straddle batch boundaries.
"""

import gzip
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")


def _env_pythonpath():
    import dfanalyzer

    root = os.path.dirname(os.path.dirname(os.path.abspath(dfanalyzer.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def real_run(workdir: str, steps: int = 40) -> list:
    """Run oracle_app.py traced; returns the trace files (parent first, then the forked workers)."""
    data = os.path.join(workdir, "data")
    out = os.path.join(workdir, "real")
    os.makedirs(data, exist_ok=True)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(data, "shared.bin"), "wb") as f:
        f.write(bytes(range(256)) * 1600)  # 400 KiB
    lib = subprocess.run(
        [sys.executable, "-m", "dftracer", "--preload-path"], capture_output=True, text=True, check=True
    ).stdout.strip()
    env = _env_pythonpath()
    env.update(
        LD_PRELOAD=lib,
        DFTRACER_ENABLE="1",
        DFTRACER_INIT="PRELOAD",
        DFTRACER_LOG_FILE=os.path.join(out, "app"),
        DFTRACER_DATA_DIR=data,
        DFTRACER_INC_METADATA="1",
        DFTRACER_WRITE_BUFFER_SIZE="4K",
    )
    subprocess.run(
        [sys.executable, os.path.join(HERE, "oracle_app.py"), data, str(steps)], env=env, check=True, timeout=120
    )
    files = sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".pfw.gz"))
    assert len(files) == 3, files  # the parent and its forked workers (``<parent>-<child pid>``)
    return sorted(files, key=len)


def _lines(path: str) -> list:
    with open(path, "rb") as f:
        raw = f.read()
    data = gzip.decompress(raw) if path.endswith(".gz") else raw
    return [ln for ln in data.split(b"\n") if ln.strip() and ln.strip() != b"["]


def write_members(path: str, lines: list, member_bytes: int = 3000) -> int:
    """``[`` then ``lines`` as gzip members of about ``member_bytes`` (tracer encoder, level 1)."""
    from dftracer import _dftracer

    chunks, cur, size = [], [b"["], 2
    for ln in lines:
        cur.append(ln)
        size += len(ln) + 1
        if size >= member_bytes:
            chunks.append(cur)
            cur, size = [], 0
    if cur:
        chunks.append(cur)
    with open(path, "wb") as f:
        for c in chunks:
            f.write(_dftracer.encode_member(b"\n".join(c) + b"\n", 1))
    return len(chunks)


def rehost(src: str, dst: str, host: str, skew_us: int) -> str:
    """``src`` as if traced on ``host`` with a clock ``skew_us`` ahead; its hostname record is moved
    to the middle of the file (a later member than most of its events)."""
    recs = [json.loads(ln) for ln in _lines(src)]
    hostrec = None
    body = []
    for r in recs:
        if "ts" in r:
            r["ts"] += skew_us
        if r.get("ph") == "M" and r.get("name") == "hostname":
            r["args"]["value"] = host
            hostrec = r
            continue
        if r.get("ph") == "M" and r.get("name") == "start_time":
            r["args"]["value"] = str(int(r["args"]["value"]) + skew_us)
        body.append(r)
    assert hostrec is not None, src
    body.insert(len(body) // 2, hostrec)
    write_members(dst, [json.dumps(r, separators=(",", ":")).encode() for r in body])
    return dst


def _first_ts(path: str) -> int:
    return min(r["ts"] for r in map(json.loads, _lines(path)) if "ts" in r and r.get("ph") not in ("M", 4))


def aggregated(dst: str, t0: int, copies: int = 40) -> str:
    """The records of the real DFTracer 2.2.0 aggregated C trace, moved to start at ``t0`` (µs), its
    aggregated (ph 3) records repeated ``copies`` times 2 ms apart (two threads alternating); the
    hash records (HH/FH/SH) stay in the first member only."""
    src = os.path.join(DATA, "dftracer-v2.2.0", "c-agg.pfw")
    recs = [json.loads(ln) for ln in _lines(src)]
    shift = t0 - _first_ts(src)
    head = [r for r in recs if r.get("ph") != 3]
    agg = [r for r in recs if r.get("ph") == 3]
    for r in head:
        if "ts" in r:
            r["ts"] += shift
    out = [json.dumps(r, separators=(",", ":")).encode() for r in head]
    for k in range(copies):
        for r in agg:
            r2 = json.loads(json.dumps(r))
            r2["ts"] += shift + k * 2000
            r2["tid"] += k % 2
            out.append(json.dumps(r2, separators=(",", ":")).encode())
    write_members(dst, out)
    return dst


def shifted(src: str, dst: str, t0: int) -> str:
    """``src`` (any format) with every timestamp moved so that its first event is at ``t0``."""
    shift = t0 - _first_ts(src)
    recs = [json.loads(ln) for ln in _lines(src)]
    for r in recs:
        if "ts" in r:
            r["ts"] += shift
    write_members(dst, [json.dumps(r, separators=(",", ":")).encode() for r in recs])
    return dst


def build(workdir: str) -> dict:
    """Trace sets under ``workdir``: ``hosts`` (the real parent and child, the parent as node
    ``nodeB``), ``agg`` (aggregated records of two upstream files beside the real parent)."""
    parent, *children = real_run(workdir)
    d = os.path.join(workdir, "derived")
    os.makedirs(d, exist_ok=True)
    other = rehost(parent, os.path.join(d, "nodeB-" + os.path.basename(parent)), "nodeB", 2_500_000)
    t0 = _first_ts(parent)
    agg = aggregated(os.path.join(d, "c-agg-many.pfw.gz"), t0 + 1000)
    py_agg = shifted(os.path.join(DATA, "dftracer-v2.2.0", "py-agg.pfw.gz"), os.path.join(d, "py-agg.pfw.gz"), t0 + 500)
    synth = _synthetic(os.path.join(workdir, "synth"))
    return {"hosts": [parent, *children, other], "agg": [agg, py_agg, parent], "synth": synth}


def _synthetic(out: str) -> list:
    """Two files of benchmarks/gen_traces.py (host and file names in every event's args, the
    tracer's member encoder, 16 KiB members): a control set on which today's analyzer is right."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_traces", os.path.join(HERE, "..", "benchmarks", "gen_traces.py"))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen.generate(out, 2400, files=2, member_bytes=16384, jobs=1)
