"""HDF5 under the preload (issue 24, docs/preload.md "HDF5"): h5py's bundled libhdf5 (loaded
RTLD_LOCAL, which dlsym(RTLD_NEXT) does not search), a C program against the system libhdf5, the
same program as a plugin dlopened late, and a process that never loads HDF5. HDF5 event counts
and bytes are checked against the programs' own counts; the POSIX events HDF5 makes inside them
against ``strace -f -y`` on the .h5 file."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter

import pytest
from test_preload_helpers import (
    C_SOURCES,
    _strace_calls,
    all_events,
    have_strace,
    plain_env,
    preload_lib,
    trace_files,
    traced_env,
)

from dfanalyzer import reader as R

READS = {"read", "pread", "pread64", "readv", "preadv", "preadv64"}
WRITES = {"write", "pwrite", "pwrite64", "writev", "pwritev", "pwritev64"}
STRACED = "read,pread64,readv,preadv,write,pwrite64,writev,pwritev"

H5PY_PROG = r"""
import json, sys
import numpy as np
import h5py

path, rows, cols = sys.argv[1], 64, 1000
calls = {"H5Dwrite": [0, 0], "H5Dread": [0, 0], "H5Awrite": [0, 0], "H5Aread": [0, 0]}
with h5py.File(path, "w") as f:
    ds = f.create_dataset("grp/data", shape=(rows, cols), dtype="f8", chunks=(1, cols))
    for i in range(rows):  # one chunk per row: 64 chunks, written slice by slice
        row = np.full(cols, i, dtype="f8")
        ds[i] = row
        calls["H5Dwrite"][0] += 1
        calls["H5Dwrite"][1] += row.nbytes
    scale = np.arange(3.0)
    ds.attrs["scale"] = scale
    calls["H5Awrite"] = [1, scale.nbytes]
with h5py.File(path, "r") as f:
    ds = f["grp/data"]
    assert list(ds.attrs["scale"]) == [0.0, 1.0, 2.0]
    calls["H5Aread"] = [1, 24]
    for i in range(rows):
        row = ds[i]
        assert row[0] == i and row.shape == (cols,)
        calls["H5Dread"][0] += 1
        calls["H5Dread"][1] += row.nbytes
    block = ds[8:40, 100:300]  # one hyperslab read across 32 chunks
    calls["H5Dread"][0] += 1
    calls["H5Dread"][1] += block.nbytes
for name, (n, b) in calls.items():
    print(json.dumps({"call": name, "n": n, "bytes": b}))
# h5py's libhdf5 is outside the global scope (RTLD_LOCAL): the case dlsym(RTLD_NEXT) misses.
import ctypes
local = not hasattr(ctypes.CDLL(None), "H5Iget_name")
print(json.dumps({"call": "local_libhdf5", "n": int(local), "bytes": 0}))
"""


def _need_h5py():
    try:
        import h5py  # noqa: F401
    except ImportError:
        pytest.fail("h5py is required (pip install '.[test]')")


def _hdf5_flags() -> list[str] | None:
    """Compiler and linker flags of the system's shared libhdf5 (Debian's libhdf5-dev), from
    pkg-config (not h5cc: it links libhdf5.a statically, and calls inside an executable cannot be
    interposed), with an rpath to its directory; None when there is none."""
    try:
        out = subprocess.run(["pkg-config", "--cflags", "--libs", "hdf5"], capture_output=True, text=True)
    except FileNotFoundError:
        return None
    if out.returncode != 0:
        return None
    flags = out.stdout.split()
    return flags + ["-Wl,-rpath," + f[2:] for f in flags if f.startswith("-L")]


@pytest.fixture(scope="module")
def lib():
    return preload_lib()


@pytest.fixture(scope="module")
def hdf5_flags():
    flags = _hdf5_flags()
    assert flags is not None, "libhdf5-dev is required (scripts/system_deps.sh)"
    return flags


def _own_counts(stdout: str) -> dict[str, tuple[int, int]]:
    out = {}
    for line in stdout.splitlines():
        d = json.loads(line)
        out[d["call"]] = (d["n"], d["bytes"])
    return out


def _run(cmd, lib, tmp_path, data, strace=False, metadata=True):
    """Run cmd traced (cwd: data); returns (process, events, strace log or None)."""
    prefix = str(tmp_path / "out" / "t")
    os.makedirs(os.path.dirname(prefix), exist_ok=True)
    env = traced_env(lib, prefix, str(data), metadata=metadata)
    log = None
    if strace:
        log = str(tmp_path / "strace.log")
        st = ["strace", "-f", "-qq", "-y", "-s", "0", "-e", f"trace={STRACED}", "-o", log]
        for k, v in env.items():
            if k.startswith("DFTRACER_") or k == "LD_PRELOAD":
                st += ["-E", f"{k}={v}"]
        cmd, env = st + cmd, plain_env(env)
    r = subprocess.run(cmd, env=env, cwd=str(data), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r, all_events(prefix), log


def _hdf5_totals(events, name):
    evs = [e for e in events if e.get("cat") == "HDF5" and e["name"] == name]
    return len(evs), sum(e["args"]["size"] for e in evs)


def _posix_bytes(events, path):
    """(reads, read bytes, writes, written bytes) of the POSIX events on path."""
    r = [
        e["args"]["ret"]
        for e in events
        if e.get("cat") == "POSIX" and e["name"] in READS and e["args"].get("fname") == path
    ]
    w = [
        e["args"]["ret"]
        for e in events
        if e.get("cat") == "POSIX" and e["name"] in WRITES and e["args"].get("fname") == path
    ]
    return len(r), sum(max(x, 0) for x in r), len(w), sum(max(x, 0) for x in w)


_STRACE_FD_CALL = re.compile(r"^(\d+)\s+(\w+)\((-?\d+)<([^>]*)>.*\)\s+=\s+(-?\d+)")


def _strace_bytes(log, path):
    """(reads, read bytes, writes, written bytes) of the data system calls on path (strace -y)."""
    call_re = _STRACE_FD_CALL
    nr = br = nw = bw = 0
    for line in _strace_calls(log):
        m = call_re.match(line)
        if not m or m[4] != path:
            continue
        ret = max(int(m[5]), 0)
        if m[2] in ("read", "pread64", "readv", "preadv"):
            nr, br = nr + 1, br + ret
        elif m[2] in ("write", "pwrite64", "writev", "pwritev"):
            nw, bw = nw + 1, bw + ret
    return nr, br, nw, bw


def _nested(events, outer_name, path):
    """The POSIX data events on path that lie inside an HDF5 `outer_name` event's interval."""
    outer = [
        (e["ts"], e["ts"] + e["dur"], e["tid"]) for e in events if e.get("cat") == "HDF5" and e["name"] == outer_name
    ]
    inner = [
        e for e in events if e.get("cat") == "POSIX" and e["name"] in READS | WRITES and e["args"].get("fname") == path
    ]
    return [e for e in inner if any(t == e["tid"] and s <= e["ts"] and e["ts"] + e["dur"] <= f for s, f, t in outer)]


def test_h5py_write_and_read_back_64_chunks(lib, tmp_path):
    """h5py's bundled libhdf5: every H5Dwrite/H5Dread with its bytes, file and dataset names; the
    POSIX events under them still equal strace's on the .h5 file."""
    _need_h5py()
    assert have_strace(), "strace is required (scripts/system_deps.sh)"
    data = tmp_path / "d"
    data.mkdir()
    prog = tmp_path / "h5w.py"
    prog.write_text(H5PY_PROG)
    h5 = str(data / "x.h5")
    r, evs, log = _run([sys.executable, str(prog), "x.h5"], lib, tmp_path, data, strace=True)
    own = _own_counts(r.stdout)
    assert own.pop("local_libhdf5") == (1, 0)
    assert own == {
        "H5Dwrite": (64, 64 * 8000),
        "H5Dread": (65, 64 * 8000 + 32 * 200 * 8),
        "H5Awrite": (1, 24),
        "H5Aread": (1, 24),
    }
    for name, (n, b) in own.items():
        assert _hdf5_totals(evs, name) == (n, b), name
    h = [e for e in evs if e.get("cat") == "HDF5"]
    assert {e["args"]["fname"] for e in h} == {h5}
    for e in h:
        if e["name"] in ("H5Dwrite", "H5Dread", "H5Dcreate2"):
            assert e["args"]["dname"] == "/grp/data", e
    names = Counter(e["name"] for e in h)
    # h5py: create_dataset("grp/data") makes the intermediate group; f["grp/data"] is H5Oopen; it
    # closes files and datasets with H5Idec_ref (recorded when it drops the last reference).
    closes = Counter(e["args"]["type"] for e in h if e["name"] == "H5Idec_ref")
    assert closes["file"] == 2 and closes["dataset"] == 2, closes
    assert names["H5Fcreate"] == names["H5Fopen"] == names["H5Gcreate2"] == names["H5Dcreate2"] == 1, names
    assert names["H5Oopen"] == 1, names
    # h5py's attributes: H5Acreate_by_name and H5Aopen_by_name, on the dataset.
    assert names["H5Acreate_by_name"] == names["H5Aopen_by_name"] == 1, names
    for e in h:
        if e["name"].startswith("H5A"):
            assert (e["args"]["dname"], e["args"]["aname"]) == ("/grp/data", "scale"), e
    assert all(e["args"]["ret"] >= 0 for e in h)
    # POSIX stays exact: the .h5 file's reads and writes equal strace's, calls and bytes.
    posix = _posix_bytes(evs, h5)
    assert posix == _strace_bytes(log, h5)
    assert posix[1] >= 64 * 8000 and posix[3] >= 64 * 8000
    # The chunk reads happen inside H5Dread (nested events on the same thread).
    assert len(_nested(evs, "H5Dread", h5)) >= 64
    # The reader's byte rule (calls.def ARG_SIZE) gives the same bytes.
    batch, _ = R.load_files(trace_files(str(tmp_path / "out" / "t")))
    e = batch.events
    cat, name_col, size = e["cat"].astype(str), e["name"].astype(str), e["size"]
    for name, (n, b) in own.items():
        sel = (cat == "HDF5") & (name_col == name)
        assert int(sel.sum()) == n and int(size[sel].sum()) == b, name


@pytest.fixture(scope="module")
def hdf5_prog(tmp_path_factory, hdf5_flags):
    out = tmp_path_factory.mktemp("h5bin")
    exe = str(out / "hdf5_prog")
    plugin = str(out / "libhdf5_plugin.so")
    loader = str(out / "hdf5_dlopen")
    src = os.path.join(C_SOURCES, "hdf5_prog.c")
    subprocess.run(["gcc", "-O1", "-Wall", "-o", exe, src, *hdf5_flags], check=True)
    subprocess.run(
        ["gcc", "-O1", "-Wall", "-shared", "-fPIC", "-DHDF5_PLUGIN", "-o", plugin, src, *hdf5_flags], check=True
    )
    subprocess.run(["gcc", "-O1", "-Wall", "-o", loader, os.path.join(C_SOURCES, "hdf5_dlopen.c"), "-ldl"], check=True)
    return exe, plugin, loader


# The C program's HDF5 calls (tests/cpp/hdf5_prog.c), by name.
C_CALLS = {
    "H5Fcreate": 1,
    "H5Fopen": 1,
    "H5Fflush": 1,
    "H5Fclose": 2,
    "H5Gcreate2": 1,
    "H5Gopen2": 1,
    "H5Gclose": 2,
    "H5Dcreate2": 1,
    "H5Dopen2": 2,  # one of them fails ("missing")
    "H5Dwrite": 64,
    "H5Dread": 65,
    "H5Dclose": 2,
    "H5Acreate2": 1,
    "H5Awrite": 1,
    "H5Aopen": 1,
    "H5Aread": 1,
    "H5Aclose": 2,
}


def _check_c_run(r, evs, h5):
    own = _own_counts(r.stdout)
    assert own["H5Dwrite"] == (64, 64 * 1200) and own["H5Dread"] == (65, 2 * 64 * 1200)
    for name, (n, b) in own.items():
        assert _hdf5_totals(evs, name) == (n, b), name
    h = [e for e in evs if e.get("cat") == "HDF5"]
    assert Counter(e["name"] for e in h) == C_CALLS
    assert {e["args"]["fname"] for e in h} == {h5}
    by = {}
    for e in h:
        by.setdefault(e["name"], []).append(e["args"])
    assert all(a["dname"] == "/grp/data" for a in by["H5Dread"] + by["H5Dwrite"] + by["H5Dcreate2"])
    assert [a["dname"] for a in by["H5Gcreate2"] + by["H5Gopen2"]] == ["/grp", "/grp"]
    assert [a.get("aname") for a in by["H5Acreate2"] + by["H5Awrite"] + by["H5Aopen"] + by["H5Aread"]] == ["scale"] * 4
    assert sorted(a["ret"] < 0 for a in by["H5Dopen2"]) == [False, True]  # the failed open keeps its status
    assert by["H5Fflush"][0]["scope"] == 1  # H5F_SCOPE_GLOBAL
    posix = _posix_bytes(evs, h5)
    assert posix[1] >= 64 * 1200 and posix[3] >= 64 * 1200
    assert len(_nested(evs, "H5Dread", h5)) >= 64  # chunk reads under H5Dread


def test_c_program_against_system_libhdf5(lib, tmp_path, hdf5_prog):
    exe, _, _ = hdf5_prog
    data = tmp_path / "d"
    data.mkdir()
    r, evs, log = _run([exe, "c.h5"], lib, tmp_path, data, strace=have_strace())
    _check_c_run(r, evs, str(data / "c.h5"))
    if log is not None:
        assert _posix_bytes(evs, str(data / "c.h5")) == _strace_bytes(log, str(data / "c.h5"))


def test_hdf5_loaded_late_with_dlopen(lib, tmp_path, hdf5_prog):
    """The program does not link libhdf5; a plugin linked against it is dlopened RTLD_LOCAL."""
    _, plugin, loader = hdf5_prog
    undef = subprocess.run(["nm", "-D", "--undefined-only", loader], capture_output=True, text=True).stdout
    assert "H5" not in undef
    data = tmp_path / "d"
    data.mkdir()
    r, evs, _ = _run([loader, plugin, "late.h5"], lib, tmp_path, data)
    _check_c_run(r, evs, str(data / "late.h5"))


def test_hdf5_untraced_directory_and_no_metadata(lib, tmp_path, hdf5_prog):
    """A file outside DFTRACER_DATA_DIR records nothing; without metadata events have no args."""
    exe, _, _ = hdf5_prog
    data, other = tmp_path / "d", tmp_path / "o"
    data.mkdir()
    other.mkdir()
    r, evs, _ = _run([exe, str(other / "c.h5")], lib, tmp_path, data)
    assert [e for e in evs if e.get("cat") == "HDF5"] == []
    r2, evs2, _ = _run([exe, "c.h5"], lib, tmp_path / "nm", data, metadata=False)
    h = [e for e in evs2 if e.get("cat") == "HDF5"]
    assert Counter(e["name"] for e in h) == C_CALLS
    assert all("args" not in e or not e["args"] for e in h)
    assert r.stdout == r2.stdout


def test_process_without_hdf5_is_unchanged(lib, tmp_path, hdf5_prog):
    """A process that never loads HDF5: no HDF5 events, no HDF5 library mapped, same output."""
    data = tmp_path / "d"
    data.mkdir()
    (data / "in.bin").write_bytes(os.urandom(100_000))
    prog = "import sys; d = open('in.bin','rb').read(); open('out.bin','wb').write(d); print(len(d))"
    r, evs, _ = _run(
        [sys.executable, "-c", prog + "; print(open('/proc/self/maps').read().count('libhdf5'))"], lib, tmp_path, data
    )
    assert r.stdout.split() == ["100000", "0"]
    assert [e for e in evs if e.get("cat") == "HDF5"] == []
    posix = _posix_bytes(evs, str(data / "in.bin"))
    assert posix[1] == 100_000
    plain = subprocess.run([sys.executable, "-c", prog], cwd=str(data), capture_output=True, text=True, timeout=60)
    assert plain.stdout.split() == ["100000"]


def test_h5py_failed_open_keeps_error(lib, tmp_path):
    """h5py's error for a missing file is unchanged under the preload (the wrapper returns HDF5's
    status and leaves its error stack alone)."""
    _need_h5py()
    data = tmp_path / "d"
    data.mkdir()
    prog = (
        "import h5py\ntry:\n    h5py.File('nope.h5', 'r')\nexcept OSError as e:\n    print(type(e).__name__, e.errno)\n"
    )
    r, evs, _ = _run([sys.executable, "-c", prog], lib, tmp_path, data)
    plain = subprocess.run([sys.executable, "-c", prog], cwd=str(data), capture_output=True, text=True, timeout=60)
    assert r.stdout == plain.stdout and r.stdout.startswith("FileNotFoundError")
    opens = [e for e in evs if e.get("cat") == "HDF5"]
    assert [e["name"] for e in opens] == ["H5Fopen"] and opens[0]["args"]["ret"] < 0
