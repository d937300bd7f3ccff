"""DFAnalyzer pipeline logic (batching, union schema, balanced partitions, bad input).

These tests swap ``dfanalyzer.reader`` for a stand-in that returns generated DataFrames (no
parsing), so the pipeline's own logic is checked with exact, hand-made expectations. The real
reader on the real fixtures is exercised in ``test_analyzer_fixtures.py``.
"""

import os
import sys
import types
from collections import namedtuple

import numpy as np
import pandas as pd
import pytest
from test_analyzer_summary import brute_force, synthetic_events

import dfanalyzer
from dfanalyzer import DFAnalyzer
from dfanalyzer import analyzer as A

Batch = namedtuple("Batch", "events metadata skipped_lines lost_bytes warnings")
CKPT_LINES = 50


def _fake_reader():
    mod = types.ModuleType("dfanalyzer.reader")

    def build_index(path, index_dir=None, force=False):
        base = os.path.basename(path)
        if base.startswith("bad"):
            raise ValueError(f"{path}: not a gzip file")
        n = 4 if base.startswith("a") else 3
        ck = [{"number": i, "uncompressed_size": 1000, "num_lines": CKPT_LINES} for i in range(n)]
        return {
            "path": path,
            "kind": "member",
            "lines": n * CKPT_LINES,
            "compressed_bytes": 300 * n,
            "uncompressed_bytes": 1000 * n,
            "checkpoints": ck,
        }

    def load_batch(path, first, last, index_dir=None, columns=None):
        base = os.path.basename(path)
        if base.startswith("half") and first <= 1 <= last:
            # unreadable input, as the reader raises it (ReaderError is an OSError): counted lost
            # lines; any other exception is a failed task (LoadError, tests/test_hostile_native.py)
            raise OSError("corrupt member")
        seed = sum(map(ord, base))
        rows = []
        for ck in range(first, last + 1):
            df = synthetic_events(CKPT_LINES, seed=seed * 100 + ck).reset_index(drop=True)
            rows.append(df)
        ev = pd.concat(rows, ignore_index=True)
        # per-file categoricals with their own categories
        for c in ("name", "cat", "ph", "hostname", "fname"):
            ev[c] = pd.Categorical(ev[c].astype(object))
        n = len(ev)
        if base.startswith("a"):
            ev["ret"] = pd.array(np.arange(n), dtype="Int64")
            ev["mode"] = pd.Categorical(["r"] * n)
        else:
            ev["ret"] = pd.array(np.arange(n) + 0.5, dtype="Float64")
            ev["epoch"] = pd.array([1] * n, dtype="Int64")
            ev["mode"] = pd.array(np.arange(n) % 3, dtype="Int64")
        core = [c for c, _ in A.CORE_COLUMNS]
        if columns is not None:  # args-column projection, as the C++ reader applies it
            ev = ev[[c for c in ev.columns if c in core or c in columns]]
        md = pd.DataFrame({"name": ["FH"], "value": [base]})
        skipped = 2 if base.startswith("half") else 0
        return Batch(ev, md, skipped, 0, [f"{path}: 2 lines skipped"] if skipped else [])

    mod.build_index, mod.load_batch = build_index, load_batch
    return mod


@pytest.fixture
def fake_reader(monkeypatch):
    mod = _fake_reader()
    monkeypatch.setitem(sys.modules, "dfanalyzer.reader", mod)
    monkeypatch.setattr(dfanalyzer, "reader", mod, raising=False)
    return mod


def _touch(d, *names):
    for n in names:
        (d / n).write_bytes(b"x" * 300)
    return str(d / "*.pfw.gz")


def expected_frame(reader, files, batches):
    return pd.concat([reader.load_batch(f, a, b).events for f, a, b in batches], ignore_index=True)


def test_plan_batches_aligned():
    files = [{"path": "f", "checkpoints": [(600, 1), (600, 2), (100, 3), (2000, 4), (10, 5)]}]
    assert A.plan_batches(files, 1000) == [("f", 0, 1, 1200, 3), ("f", 2, 3, 2100, 7), ("f", 4, 4, 10, 5)]
    assert A.plan_batches(files, 1) == [("f", i, i, s, n) for i, (s, n) in enumerate(files[0]["checkpoints"])]
    assert A.plan_batches([{"path": "e", "checkpoints": []}], 10) == []


def test_plan_batches_balanced_within_file():
    # 10 checkpoints of 100 bytes, 400-byte target -> round(2.5) = 3 batches cut at 1/3, 2/3
    files = [{"path": "g", "checkpoints": [(100, 1)] * 10}]
    assert A.plan_batches(files, 400) == [("g", 0, 3, 400, 4), ("g", 4, 6, 300, 3), ("g", 7, 9, 300, 3)]
    # a file smaller than half a batch is one batch
    assert A.plan_batches(files, 10_000) == [("g", 0, 9, 1000, 10)]


def test_plan_partitions_whole_batches():
    # batches that fit are never split; small neighbours are packed; empty ones dropped
    assert A.plan_partitions([5, 0, 3, 2, 5, 1], 5) == [[(0, 0, 5)], [(2, 0, 3), (3, 0, 2)], [(4, 0, 5)], [(5, 0, 1)]]
    # a batch larger than the target is cut into equal slices
    assert A.plan_partitions([9, 2], 4) == [[(0, 0, 3)], [(0, 3, 6)], [(0, 6, 9)], [(1, 0, 2)]]
    assert A.plan_partitions([2], 5) == [[(0, 0, 2)]]
    assert A.plan_partitions([0, 0], 4) == [[]]


def test_union_schema_rules():
    s = A.union_schema([{"a": "Int64", "b": "category"}, {"a": "Float64", "c": "Int64"}, {"b": "Int64", "c": "Int64"}])
    assert s == {"a": "Float64", "b": "category", "c": "Int64"}


def test_pattern_matching_nothing_names_pattern(tmp_path, dask_client):
    pat = str(tmp_path / "nothing-*.pfw.gz")
    with pytest.raises(FileNotFoundError, match="nothing-"):
        DFAnalyzer(pat, client=dask_client)


def test_pipeline_union_schema_and_bad_files(tmp_path, fake_reader, dask_client):
    pat = _touch(tmp_path, "a1.pfw.gz", "b2.pfw.gz", "half3.pfw.gz", "bad4.pfw.gz")
    (tmp_path / "a1.pfw.gz.zindex").write_bytes(b"idx")  # sidecars never count as traces
    # partition bound of 7000 B / (100 + 9 * 3 args) B per row = 55 rows: 100-row batches are cut
    # in the middle, 50-row batches stay whole
    an = DFAnalyzer(
        pat, client=dask_client, batch_size_mb=2000 / 2**20, partition_size_mb=7000 / 2**20, small_file_mb=0
    )  # every file through the (fake) index path
    files = sorted(str(p) for p in tmp_path.glob("*.pfw.gz"))
    assert an.files == files
    # 2000-byte batches: a1 has 4 checkpoints -> (0,1),(2,3); 3-checkpoint files -> (0,1),(2,2)
    a1, b2, bad, half = files[0], files[1], files[2], files[3]
    good = [(a1, 0, 1), (a1, 2, 3), (b2, 0, 1), (b2, 2, 2), (half, 2, 2)]
    want = expected_frame(fake_reader, files, good)
    ev = an.events
    assert list(ev.columns) == [c for c, _ in A.CORE_COLUMNS] + ["ret", "mode", "epoch"]
    dt = dict(ev.dtypes)
    assert str(dt["ret"]) == "Float64" and str(dt["epoch"]) == "Int64" and dt["mode"] == "category"
    assert str(dt["ts"]) == "int64" and str(dt["size"]) == "Int64" and dt["name"] == "category"
    assert ev.shape[0].compute(scheduler=dask_client) == len(want) == 8 * CKPT_LINES
    parts = [p.compute(scheduler=dask_client) for p in ev.to_delayed()]
    assert an.stats["partitions"] == len(parts) == 8
    assert [len(p) for p in parts] == [CKPT_LINES] * 8
    for p in parts:
        assert [str(t) for t in p.dtypes] == [str(t) for t in ev._meta.dtypes]
    got = pd.concat(parts, ignore_index=True)
    assert got["ts"].tolist() == want["ts"].tolist()
    assert got["name"].astype(object).tolist() == want["name"].astype(object).tolist()
    assert got["mode"].astype(object).tolist()[:10] == ["r"] * 10
    assert got["mode"].astype(object).tolist()[-3:] == ["2", "0", "1"]
    assert got["epoch"].isna().sum() == 4 * CKPT_LINES
    assert got["ret"].tolist()[:2] == [0.0, 1.0] and got["ret"].tolist()[-1] == 49.5
    # stats: per-file skipped lines / lost bytes and the failed file
    st = an.stats
    assert st["files"] == 4 and st["events"] == 8 * CKPT_LINES and st["batches"] == 6
    per = st["per_file"].set_index("path")
    assert per.loc[bad, "lost_bytes"] == 300 and per.loc[bad, "events"] == 0
    # the batch that failed to load: its lines are lost (with the reason), not skipped as invalid
    assert per.loc[half, "skipped_lines"] == 2 and per.loc[half, "lost_lines"] == 2 * CKPT_LINES
    assert per.loc[half, "lost_bytes"] == 2000
    assert per.loc[a1, "skipped_lines"] == 0 and per.loc[a1, "events"] == 4 * CKPT_LINES
    skipped = {s["path"]: s for s in an.skipped_files()}
    assert set(skipped) == {bad, half}
    # summary equals brute force over exactly the loaded events
    s = an.summary(show=False)
    assert s.to_dict() == brute_force(want)
    assert [x["path"] for x in s.skipped] == [bad, half]
    md = an.metadata
    assert sorted(set(md["value"])) == ["a1.pfw.gz", "b2.pfw.gz", "half3.pfw.gz"]


def test_groupby_name_size(tmp_path, fake_reader, dask_client):
    pat = _touch(tmp_path, "a1.pfw.gz", "b1.pfw.gz")
    an = DFAnalyzer(pat, client=dask_client, small_file_mb=0)
    got = an.events.groupby("name", observed=True)["size"].sum().compute(scheduler=dask_client).sort_index()
    full = an.events.compute(scheduler=dask_client)
    want = full.groupby("name", observed=True)["size"].sum().sort_index()
    assert got.to_dict() == want.to_dict()
