"""MPI-IO under the preload (issue 24): an mpi4py program (tests/mpiio_app.py) run by OpenMPI's
``mpirun`` with 2 to 4 ranks, independent and collective, blocking and non-blocking I/O on one
shared file. Every rank prints its own counts (calls and bytes per MPI call); the trace of each
rank must hold exactly those MPI-IO events, with those bytes (args.size and the reader's
``size``), the file name, the rank as its ``process_id`` metadata, and the POSIX calls MPI made
underneath nested in time inside them."""

import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict

import pandas as pd
import pytest
from conftest import read_trace
from test_preload_helpers import preload_lib, trace_files

from dfanalyzer import reader as R

HERE = os.path.dirname(os.path.abspath(__file__))
MPIRUN = shutil.which("mpirun")
try:
    import mpi4py  # noqa: F401

    HAVE_MPI4PY = True
except ImportError:  # pragma: no cover - CI installs it (pyproject [test])
    HAVE_MPI4PY = False

pytestmark = pytest.mark.skipif(
    MPIRUN is None or not HAVE_MPI4PY,
    reason="needs OpenMPI's mpirun (scripts/system_deps.sh: openmpi-bin libopenmpi-dev) and mpi4py",
)


def run_app(tmp_path, ranks, mode, blocks, elems, metadata=True):
    data = tmp_path / "data"
    data.mkdir()
    prefix = str(tmp_path / "trace")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_plm_rsh_agent="")
    traced = {
        "LD_PRELOAD": preload_lib(),
        "DFTRACER_ENABLE": "1",
        "DFTRACER_INIT": "PRELOAD",
        "DFTRACER_LOG_FILE": prefix,
        "DFTRACER_DATA_DIR": str(data),
        "DFTRACER_INC_METADATA": "1" if metadata else "0",
    }
    cmd = [MPIRUN, "--oversubscribe", "-n", str(ranks)]
    for k, v in traced.items():  # only the ranks are traced, not mpirun itself
        cmd += ["-x", f"{k}={v}"]
    cmd += [
        sys.executable,
        os.path.join(HERE, "mpiio_app.py"),
        str(data / "shared.bin"),
        mode,
        str(blocks),
        str(elems),
        str(tmp_path),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=50)
    assert proc.returncode == 0, proc.stderr[-3000:]
    outs = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(ranks)]
    assert sorted(o["rank"] for o in outs) == list(range(ranks))
    # the rank processes' traces: those with MPI-IO events (OpenMPI's helper children write others)
    traces = {}
    for f in trace_files(prefix):
        recs = read_trace(f)
        if any(r.get("cat") == "MPI-IO" for r in recs):
            traces[f] = recs
    return {o["rank"]: o for o in outs}, traces, data / "shared.bin"


def check(outs, traces, path, ranks):
    assert len(traces) == ranks
    seen_ranks = set()
    posix_written = mpi_written = 0
    for f, recs in traces.items():
        meta = {r["name"]: r["args"].get("value") for r in recs if r.get("ph") == "M"}
        rank = int(meta["process_id"])  # the rank, recorded by the MPI_Init_thread hook
        seen_ranks.add(rank)
        want = outs[rank]["calls"]
        mpi = [r for r in recs if r.get("cat") == "MPI-IO"]
        got = defaultdict(lambda: [0, 0])
        for r in mpi:
            got[r["name"]][0] += 1
            got[r["name"]][1] += r["args"].get("size", 0)
            assert r["args"]["fname"] == str(path)
            assert r["args"]["ret"] == 0
        assert {k: list(v) for k, v in got.items()} == want
        # the reader's byte rule: size == args.size for the data calls, null for the others
        e = R.load_batch(f, 0, 0).events
        e = e[e["cat"].astype(str) == "MPI-IO"]
        sizes = defaultdict(int)
        for name, size in zip(e["name"].astype(str), e["size"]):
            if "read" in name or "write" in name:
                assert not pd.isna(size), name
                sizes[name] += int(size)
            else:
                assert pd.isna(size), name
        assert dict(sizes) == {k: v[1] for k, v in want.items() if "read" in k or "write" in k}
        # POSIX underneath: OpenMPI's pwrite/pread calls on the file lie inside an MPI-IO event
        posix = [r for r in recs if r.get("cat") == "POSIX" and r.get("args", {}).get("fname") == str(path)]
        spans = [(r["ts"], r["ts"] + r["dur"]) for r in mpi]
        moved = [r for r in posix if "read" in r["name"] or "write" in r["name"]]
        # (collective I/O: only OpenMPI's aggregator ranks write the file, others may move nothing)
        posix_written += sum(r["args"]["ret"] for r in moved if "write" in r["name"])
        # blocking calls only: OpenMPI starts MPI_File_i* with POSIX AIO (aio_write), not intercepted
        mpi_written += sum(r["args"].get("size", 0) for r in mpi if "write" in r["name"] and "iwrite" not in r["name"])
        for r in moved:
            assert any(a <= r["ts"] and r["ts"] + r["dur"] <= b for a, b in spans), r
    assert seen_ranks == set(range(ranks))
    assert mpi_written > 0 and posix_written >= mpi_written


@pytest.mark.parametrize("ranks,mode,blocks,elems", [(2, "independent", 5, 1000), (4, "collective", 3, 777)])
def test_mpiio_counts_bytes_and_ranks(tmp_path, dask_client, ranks, mode, blocks, elems):
    outs, traces, path = run_app(tmp_path, ranks, mode, blocks, elems)
    check(outs, traces, path, ranks)
    # the program's data reached the file through the wrappers (4-byte ints, ranks' blocks)
    assert os.path.getsize(path) == (blocks + 1) * ranks * elems * 4
    suffix = "_all" if mode == "collective" else ""
    for o in outs.values():
        assert o["calls"]["MPI_File_write_at" + suffix] == [blocks, blocks * elems * 4]
    # the analyzer: ranks from the process_id records, MPI-IO > POSIX nesting of the real run
    from dfanalyzer import DFAnalyzer

    with DFAnalyzer(sorted(traces), client=dask_client) as a:
        pids = {next(r["pid"] for r in recs if r.get("cat") == "MPI-IO"): f for f, recs in traces.items()}
        ranks = a.ranks()
        assert sorted(ranks.tolist()) == list(range(ranks.size)) and set(ranks.index) == set(pids)
        row = a.layers().attrs["nested"]["MPI-IO > POSIX"]
    row = pd.Series(row)
    want = sum(v[0] for o in outs.values() for v in o["calls"].values())
    assert row.parent_events == want
    assert row.parent_bytes == sum(v[1] for o in outs.values() for v in o["calls"].values())
    assert 0 < row.child_time_s <= row.parent_time_s and 0 < row.time_share <= 1


def test_mpiio_without_metadata_records_names_only(tmp_path):
    """DFTRACER_INC_METADATA=0: the same events (name, cat, pid, tid, ts, dur), no args."""
    outs, traces, path = run_app(tmp_path, 2, "independent", 2, 64, metadata=False)
    for recs in traces.values():
        mpi = [r for r in recs if r.get("cat") == "MPI-IO"]
        assert all("args" not in r for r in mpi)
        names = defaultdict(int)
        for r in mpi:
            names[r["name"]] += 1
        assert dict(names) == {k: v[0] for k, v in outs[0]["calls"].items()}


def test_mpiio_from_a_library_loaded_rtld_local(tmp_path):
    """libmpi outside the global scope when the first MPI call comes (a library linked with it,
    dlopened RTLD_LOCAL, as a Python extension is): PMPI_* is found in the loaded object."""
    mpicc = shutil.which("mpicc")
    if mpicc is None:
        pytest.skip("needs mpicc (libopenmpi-dev)")
    src = os.path.join(HERE, "cpp")
    lib, exe = tmp_path / "libapp.so", tmp_path / "main"
    subprocess.run([mpicc, "-shared", "-fPIC", "-o", str(lib), os.path.join(src, "mpiio_local_lib.c")], check=True)
    subprocess.run(["gcc", "-o", str(exe), os.path.join(src, "mpiio_local_main.c"), "-ldl"], check=True)
    data = tmp_path / "data"
    data.mkdir()
    prefix = str(tmp_path / "trace")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [MPIRUN, "--oversubscribe", "-n", "2"]
    for k, v in {
        "LD_PRELOAD": preload_lib(),
        "DFTRACER_ENABLE": "1",
        "DFTRACER_LOG_FILE": prefix,
        "DFTRACER_DATA_DIR": str(data),
        "DFTRACER_INC_METADATA": "1",
    }.items():
        cmd += ["-x", f"{k}={v}"]
    proc = subprocess.run(
        cmd + [str(exe), str(lib), str(data / "x.bin")], env=env, capture_output=True, text=True, timeout=50
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("global PMPI before: (nil)") == 2, proc.stdout  # the fallback path ran
    assert os.path.getsize(data / "x.bin") == 2 * 1024
    ranks = set()
    for f in trace_files(prefix):
        recs = read_trace(f)
        mpi = [(r["name"], r["args"].get("size")) for r in recs if r.get("cat") == "MPI-IO"]
        if not mpi:
            continue
        assert mpi == [("MPI_File_open", None), ("MPI_File_write_at", 1024), ("MPI_File_close", None)]
        ranks |= {r["args"]["value"] for r in recs if r.get("name") == "process_id"}
    assert ranks == {"0", "1"}
