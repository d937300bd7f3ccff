"""Multi-level layers (issue 24): HDF5 > MPI-IO, HDF5 > POSIX and MPI-IO > POSIX time and bytes
(``views.nested_layer_view``, ``layers().attrs["nested"]``, the report) against the oracle
(tests/oracle.py, plain gzip + json) and against numbers worked out by hand, on a synthetic trace
written here with plain gzip + json: overlapping children, a child straddling its parent's end, a
child on another thread, a parent on another process at the same time, nesting across
partitions; and the multi-level insights across their floors."""

import gzip
import json
import math

import dask.dataframe as dd
import pandas as pd
import pytest
from oracle import Oracle

from dfanalyzer import DFAnalyzer, views

T0 = 1_700_000_000_000_000


def ev(name, cat, pid, tid, ts, dur, **args):
    return {"name": name, "cat": cat, "pid": pid, "tid": tid, "ts": T0 + ts, "dur": dur, "ph": "X", "args": args}


def write(path, host, events):
    lines = [
        {
            "name": "hostname",
            "cat": "dftracer",
            "pid": events[0]["pid"],
            "tid": 0,
            "ts": T0,
            "ph": "M",
            "args": {"name": "hostname", "value": host},
        }
    ] + events
    with gzip.open(path, "wt") as f:
        f.write("[\n" + "".join(json.dumps(r) + "\n" for r in lines))
    return str(path)


def synthetic(tmp_path):
    a = [
        # HDF5 write [1000, 1100): two overlapping pwrites inside (union 40 µs), one straddling its end
        ev("H5Dwrite", "HDF5", 10, 10, 1000, 100, fname="/d/f.h5"),
        ev("pwrite", "POSIX", 10, 10, 1010, 20, fname="/d/f.h5", ret=2048),
        ev("pwrite", "POSIX", 10, 10, 1020, 30, fname="/d/f.h5", ret=2048),
        ev("write", "POSIX", 10, 10, 1090, 20, fname="/d/f.h5", ret=10),
        # HDF5 read [2000, 2050) with a pread of exactly its span
        ev("H5Dread", "HDF5", 10, 10, 2000, 50, fname="/d/f.h5"),
        ev("pread", "POSIX", 10, 10, 2000, 50, fname="/d/f.h5", ret=4096),
        # POSIX outside every parent
        ev("read", "POSIX", 10, 10, 3000, 10, fname="/d/f.h5", ret=7),
        # MPI-IO [5000, 5200) with a pwrite inside; the same span on another thread is not nested
        ev(
            "MPI_File_write_at",
            "MPI-IO",
            10,
            10,
            5000,
            200,
            fname="/d/m.bin",
            count=2000,
            type_size=4,
            size=8000,
            ret=0,
        ),
        ev("pwrite", "POSIX", 10, 10, 5050, 50, fname="/d/m.bin", ret=8000),
        ev("pwrite", "POSIX", 10, 11, 5050, 50, fname="/d/m.bin", ret=8000),
        # HDF5 over MPI-IO over POSIX
        ev("H5Dwrite", "HDF5", 10, 10, 6000, 500, fname="/d/g.h5"),
        ev(
            "MPI_File_write_at_all",
            "MPI-IO",
            10,
            10,
            6100,
            300,
            fname="/d/g.h5",
            count=1000,
            type_size=1,
            size=1000,
            ret=0,
        ),
        ev("pwrite", "POSIX", 10, 10, 6200, 100, fname="/d/g.h5", ret=1000),
    ]
    # another process, same pid and times on another host: nothing of process 10 nests in it
    b = [
        ev("MPI_File_read_at", "MPI-IO", 10, 10, 1000, 100, fname="/d/m.bin", count=100, type_size=1, size=100, ret=0),
        ev("close", "POSIX", 10, 10, 7000, 5, fname="/d/m.bin", ret=0),
    ]
    return [write(tmp_path / "a.pfw.gz", "h1", a), write(tmp_path / "b.pfw.gz", "h2", b)]


# worked out by hand from synthetic(): (parent_events, parent_time µs, parent_bytes,
# child_events, child_time µs, child_bytes)
HAND = {
    "HDF5 > MPI-IO": (3, 650, 0, 1, 300, 1000),
    "HDF5 > POSIX": (3, 650, 0, 4, 190, 2048 + 2048 + 4096 + 1000),
    "MPI-IO > POSIX": (3, 600, 9100, 2, 150, 9000),
}


def same_frames(got, want):
    assert list(got.index) == list(want.index)
    for col in want.columns:
        for i in want.index:
            a, b = got.loc[i, col], want.loc[i, col]
            if isinstance(b, float):
                assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-12), (i, col, a, b)
            else:
                assert a == b, (i, col, a, b)


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    return synthetic(tmp_path_factory.mktemp("layers"))


def test_nested_layers_match_hand_and_oracle(traces, dask_client, tmp_path):
    want = Oracle(traces).nested_layers()
    for k, (pn, pt, pb, kn, kt, kb) in HAND.items():
        r = want.loc[k]
        assert (r.parent_events, r.parent_time_s, r.parent_bytes) == (pn, pt * 1e-6, pb)
        assert (r.child_events, r.child_time_s, r.child_bytes) == (kn, kt * 1e-6, kb)
    assert want.loc["MPI-IO > POSIX", "time_share"] == 0.25
    with DFAnalyzer(traces, client=dask_client) as a:
        lay = a.layers()
        got = views.nested_frame(lay.attrs["nested"]).sort_index()
        same_frames(got, want.sort_index())
        same_frames(a.nested_layers().sort_index(), want.sort_index())
        assert pd.concat([lay, lay]).attrs["nested"] == lay.attrs["nested"]  # plain, comparable attrs
        # the same across partitions: parents and children in different partitions
        pdf = a.events.compute(scheduler=dask_client).sort_values("ts", kind="stable").reset_index(drop=True)
        for n in (2, 5, len(pdf)):
            split = dd.from_pandas(pdf, npartitions=n, sort=False)
            same_frames(views.nested_layer_view(split).sort_index(), want.sort_index())
        a.report(str(tmp_path / "r.html"))
    html = (tmp_path / "r.html").read_text()
    assert 'id="nested-layers"' in html and "MPI-IO &gt; POSIX" in html


def test_no_parents_no_nested_rows(tmp_path, dask_client):
    p = write(tmp_path / "p.pfw.gz", "h", [ev("read", "POSIX", 1, 1, 0, 10, fname="/x", ret=3)])
    with DFAnalyzer([p], client=dask_client) as a:
        assert a.layers().attrs["nested"] == {}
        nested = a.nested_layers()
    assert len(nested) == 0 and "time_share" in nested.columns


# ----------------------------------------------------------------------------- insights
def run_insights(tmp_path, name, files, dask_client):
    paths = []
    for i, (host, events) in enumerate(files):
        paths.append(write(tmp_path / f"{name}-{i}.pfw.gz", host, events))
    with DFAnalyzer(paths, client=dask_client) as a:
        rep = a.insights(show=False)
    return {i.rule: i for i in rep.insights}, rep


def h5reads(n, nbytes, dur, pid=1):
    return [ev("H5Dread", "HDF5", pid, pid, k * dur, dur, fname="/d/x.h5", size=nbytes) for k in range(n)]


def mpi_writes(n, name, dur, pid):
    return [
        ev(name, "MPI-IO", pid, pid, k * dur, dur, fname="/d/ck.bin", count=64, type_size=8, size=512, ret=0)
        for k in range(n)
    ]


@pytest.mark.parametrize(
    "n,nbytes,dur,fires",
    [
        (200, 1000, 10_000, True),  # 200 reads of 1000 B, 2 s in them
        (100, 1000, 30_000, False),  # not more than hdf5_small_reads_absolute (100)
        (200, 1000, 1_000, False),  # 0.2 s: under the 1 s floor
        (200, 262_144, 10_000, False),  # not small (hdf5_small_bytes = 262144)
    ],
)
def test_small_hdf5_reads_rule(tmp_path, dask_client, n, nbytes, dur, fires):
    found, rep = run_insights(tmp_path, "h5", [("h", h5reads(n, nbytes, dur))], dask_client)
    assert ("small_hdf5_reads" in found) == fires
    assert "small_hdf5_reads" in rep.checked
    if fires:
        m = found["small_hdf5_reads"].evidence["metrics"]
        assert (m["h5dreads"], m["small_h5dreads"]) == (n, n)
        assert m["affected_time_s"] == n * dur / 1e6


@pytest.mark.parametrize(
    "name,procs,n,dur,fires",
    [
        ("MPI_File_write_at", 2, 101, 10_000, True),  # 202 independent writes by 2 ranks, 2.02 s
        ("MPI_File_write_at_all", 2, 101, 10_000, False),  # collective
        ("MPI_File_write_at", 1, 202, 10_000, False),  # one process: not a shared file
        ("MPI_File_write_at", 2, 40, 10_000, False),  # 80 calls: not more than mpiio_independent_absolute
        ("MPI_File_iwrite_at", 2, 101, 1_000, False),  # 0.202 s: under the 1 s floor
    ],
)
def test_independent_mpiio_rule(tmp_path, dask_client, name, procs, n, dur, fires):
    files = [(f"h{p}", mpi_writes(n, name, dur, pid=p + 1)) for p in range(procs)]
    found, rep = run_insights(tmp_path, "mpi", files, dask_client)
    assert ("independent_mpiio" in found) == fires
    if fires:
        m = found["independent_mpiio"].evidence["metrics"]
        assert (m["independent_calls"], m["data_calls"], m["shared_files"]) == (procs * n, procs * n, 1)
        assert m["affected_time_s"] == procs * n * dur / 1e6


def test_reader_arg_size_rule(tmp_path):
    """ARG_SIZE (calls.def, the MPI-IO data calls): size = args.size when ret >= 0 and args.size
    >= 0, else null; MPI_File_open (NONE) has no bytes whatever its args say."""
    from dfanalyzer import reader as R

    recs = [
        ev("MPI_File_write_at_all", "MPI-IO", 1, 1, 0, 1, size=4096, count=1024, type_size=4, ret=0),
        ev("MPI_File_iread", "MPI-IO", 1, 1, 1, 1, count=10, type_size=4, ret=5),  # failed: no size
        ev("MPI_File_read_at", "MPI-IO", 1, 1, 2, 1, size=-1, ret=0),
        ev("MPI_File_open", "MPI-IO", 1, 1, 3, 1, size=7, ret=0),
        ev("read", "POSIX", 1, 1, 4, 1, size=9, ret=3),
    ]
    p = tmp_path / "b.pfw"
    p.write_text("[\n" + "".join(json.dumps(r) + "\n" for r in recs))
    e = R.load_batch(str(p), 0, 0).events
    assert list(e["size"]) == [4096, pd.NA, pd.NA, pd.NA, 3]
