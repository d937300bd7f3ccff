"""Reader on the real DFTracer fixtures, our member format, and the CLI tools."""

import glob
import gzip
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import gen_traces  # noqa: E402

from dfanalyzer import reader as R  # noqa: E402
from dfanalyzer.tools import cat_main, index_main  # noqa: E402

CM1 = os.path.join(ROOT, "tests", "data", "dftracer-v1.0.5-cm1")
LEGACY = os.path.join(ROOT, "tests", "data", "dftracer-legacy")


@pytest.fixture()
def cm1(tmp_path):
    d = tmp_path / "cm1"
    shutil.copytree(CM1, d)
    return sorted(glob.glob(str(d / "*.pfw.gz")))


@pytest.fixture()
def legacy(tmp_path):
    d = tmp_path / "legacy"
    shutil.copytree(LEGACY, d)
    return str(d / "test.pfw"), str(d / "test.pfw.gz")


def test_cm1_event_counts_and_hash_resolution(cm1):
    assert len(cm1) == 48
    total = 0
    for f in cm1:
        idx = R.build_index(f)
        assert idx["kind"] == "inflate"
        b = R.load_batch(f, 0, len(idx["checkpoints"]) - 1)
        total += len(b.events)
        assert b.skipped_lines == 0
        assert b.events["fname"].isna().sum() == 0 or "fname" in b.events
        assert b.events["hostname"].notna().all()
        assert set(b.metadata["name"]) >= {"FH", "HH", "SH", "start", "end"}
    assert total == 283945


def test_cm1_first_file_values(cm1):
    f = cm1[0]
    b = R.load_batch(f, 0, 0)
    ev = b.events
    assert len(ev) == 8080
    row = ev.iloc[1]  # {"name":"fread", ... "ret":3107,"fhash":33084,"count":8192,"size":1}
    assert row["name"] == "fread" and row["cat"] == "STDIO" and row["ph"] == "X"
    assert row["ts"] == 1727387307985825 and row["dur"] == 10 and row["te"] == 1727387307985835
    assert row["size"] == 3107 and row["arg_size"] == 1 and row["count"] == 8192
    assert row["hostname"] == "corona173"
    assert row["fname"].endswith("/etc/openmpi-mca-params.conf")
    assert list(ev.columns[:12]) == R.CORE_COLUMNS
    for c, d in R.EVENT_META.items():
        assert str(ev[c].dtype) == d
    assert str(ev["mode"].dtype) == "category"


def test_batch_arrays_are_zero_copy(cm1):
    b = R.load_batch(cm1[0], 0, 0)
    ts = b.events["ts"].to_numpy()
    assert not ts.flags.owndata and ts.base is not None


def test_legacy_numbers_as_strings(legacy):
    for f in legacy:
        idx = R.build_index(f)
        assert idx["kind"] == ("plain" if f.endswith(".pfw") else "inflate")
        b = R.load_batch(f, 0, len(idx["checkpoints"]) - 1)
        assert len(b.events) == 1012 and b.skipped_lines == 0
        assert b.events["pid"].dtype == np.int64 and (b.events["pid"] == 1338896).all()
        w = b.events[b.events["name"] == "write"].iloc[0]
        assert w["size"] == 3276800 and w["count"] == 3276800
        assert (b.events["hostname"] == "corona237").all()


def test_member_format_hop_and_read(tmp_path):
    paths = gen_traces.generate(str(tmp_path), 30000, files=1, fmt="member", member_bytes=256 << 10)
    idx = R.build_index(paths[0])
    assert idx["kind"] == "member" and idx["rebuilt"]
    with gzip.open(paths[0], "rb") as fh:
        raw = fh.read()
    assert idx["lines"] == raw.count(b"\n") == 30001
    assert idx["uncompressed_bytes"] == len(raw)
    n = len(idx["checkpoints"])
    assert n > 5
    b = R.load_batch(paths[0], 0, n - 1)
    assert len(b.events) == 30000 and b.warnings == []
    # per-checkpoint batches give the same rows
    rows = sum(len(R.load_batch(paths[0], i, i).events) for i in range(n))
    assert rows == 30000
    assert R.read_checkpoints(paths[0], 0, n - 1) == raw
    lines = raw.split(b"\n")
    assert R.read_lines(paths[0], 1234, 3) == [x.decode() for x in lines[1234:1237]]
    # second call loads the stored index
    assert R.build_index(paths[0])["rebuilt"] is False
    ev = b.events
    rd = ev[ev["name"] == "read"]
    assert (rd["size"] == rd["ret"]).all()
    fr = ev[ev["name"] == "fread"]
    assert (fr["size"] == fr["ret"] * 4096).all()
    assert ev[ev["name"] == "open64"]["size"].isna().all()
    assert str(ev["flops"].dtype) == "Float64" and str(ev["epoch"].dtype) == "Int64"


def test_batches_aligned_to_union_schema_match_meta(tmp_path):
    """The one schema path: each batch's args kinds, merged by the union rule, give partitions
    whose dtypes are exactly the Dask meta (dfanalyzer.schema)."""
    from dfanalyzer import schema as S

    paths = gen_traces.generate(str(tmp_path), 5000, files=1, fmt="member", member_bytes=64 << 10)
    batches = [R.load_batch(paths[0], i, i).events for i in (0, 1)]
    kinds = S.union_schema([S.frame_schema(ev) for ev in batches])
    assert kinds["flops"] == "Float64" and kinds["mode"] == "category" and kinds["arg_size"] == "Int64"
    meta = S.make_meta(kinds)
    for ev in batches:
        got = S.align_frame(ev, kinds)
        assert list(got.columns) == list(meta.columns)
        assert [str(t) for t in got.dtypes] == [str(t) for t in meta.dtypes]
    assert R.scan(paths[0])["events"] == sum(map(len, batches)) + len(
        R.load_batch(paths[0], 2, len(R.build_index(paths[0])["checkpoints"]) - 1).events
    )


def test_inflate_kind_random_access(tmp_path):
    paths = gen_traces.generate(str(tmp_path), 60000, files=1, fmt="gzip")
    idx = R.build_index(paths[0])
    assert idx["kind"] == "inflate" and len(idx["checkpoints"]) > 3
    with gzip.open(paths[0], "rb") as fh:
        raw = fh.read()
    n = len(idx["checkpoints"])
    got = b"".join(R.read_checkpoints(paths[0], i, i) for i in range(n))
    assert got == raw
    assert sum(len(R.load_batch(paths[0], i, i).events) for i in range(n)) == 60000


def test_v2_integer_phase_lines(tmp_path):
    p = tmp_path / "v2.pfw"
    p.write_text(
        '{"id":1,"name":"read","cat":"POSIX","pid":5,"tid":6,"ts":100,"dur":7,"ph":1,'
        '"args":{"fname":"/a","ret":10,"hostname":"h1"}}\n'
        '{"id":2,"name":"mark","cat":"app","pid":5,"tid":6,"ts":200,"ph":3}\n'
    )
    b = R.load_batch(str(p), 0, 0)
    assert list(b.events["ph"]) == ["X", "A"]  # DFTracer 2.2.0: 3 is an aggregated record
    assert list(b.events["size"]) == [10, pd.NA]


def test_cli_index_counts(cm1, legacy, capsys):
    # A fresh index (member headers or one inflate pass) does not parse: events unknown (null, "-").
    assert index_main(cm1 + ["--force", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["total"]["events"] is None and all(r["events"] is None for r in doc["files"])
    assert doc["total"]["uncompressed_bytes"] == sum(len(gzip.open(f).read()) for f in cm1)
    # --scan parses every line once and keeps the counts in the index
    assert index_main(cm1 + ["--scan", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["file"] for r in doc["files"]] == cm1
    assert doc["total"]["files"] == 48 and doc["total"]["events"] == 283945
    assert doc["total"]["uncompressed_bytes"] == sum(len(gzip.open(f).read()) for f in cm1)
    assert doc["total"]["lines"] == sum(r["lines"] for r in doc["files"])
    assert index_main([legacy[1], "--scan", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["files"] == [
        {
            "file": legacy[1],
            "kind": "inflate",
            "lines": 1013,
            "events": 1012,
            "compressed_bytes": 8947,
            "uncompressed_bytes": 253630,
            "checkpoints": 1,
        }
    ]
    # the rich table (stdout not a terminal: one line per row, numbers with thousands separators);
    # the scanned indexes still know their events
    assert index_main(cm1) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == [
        "file",
        "kind",
        "lines",
        "events",
        "compressed_bytes",
        "uncompressed_bytes",
        "checkpoints",
    ]
    assert len(out) == 1 + 48 + 1 and out[1].split()[0] == cm1[0]  # header, rows, total
    assert out[-1].split()[-5:] == [
        "{:,}".format(doc["total"][k])
        for k in ("lines", "events", "compressed_bytes", "uncompressed_bytes", "checkpoints")
    ]
    assert out[-1].startswith("total (48 files)")


def test_cli_cat_matches_zcat_sed(legacy, cm1, capsys):
    assert cat_main([legacy[1], "--lines", "10:20"]) == 0
    out = capsys.readouterr().out
    want = gzip.open(legacy[1]).read().decode().split("\n")[9:20]
    assert out == "\n".join(want) + "\n"
    assert cat_main([cm1[0], "--lines", "8000:8793"]) == 0
    out = capsys.readouterr().out
    want = subprocess.run("zcat %s | sed -n 8000,8793p" % cm1[0], shell=True, capture_output=True).stdout.decode()
    assert out.rstrip("\n") == want.rstrip("\n") and out.count("\n") == 794


def test_no_sqlite_side_files_stay_beside_traces(legacy):
    plain, gz = legacy
    for path in (plain, gz):
        info = R.build_index(path, force=True)
        R.load_batch(path, 0, len(info["checkpoints"]) - 1)
    left = sorted(p for p in os.listdir(os.path.dirname(gz)) if p.endswith(("-wal", "-shm")))
    assert left == []
    assert sorted(p for p in os.listdir(os.path.dirname(gz)) if p.endswith(".zindex")) == [
        "test.pfw.gz.zindex",
        "test.pfw.zindex",
    ]
