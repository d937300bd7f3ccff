"""The pandas frames of the reader (docs/perf/i22-bind.md): built from pandas blocks and cached
category dtypes, from codes the binding narrows to pandas' code width and from int32 code
vectors each thread reuses across batches. Every value, null, dtype and category order must be
what plain gzip + json gives; the metadata frame must be the one ``pd.DataFrame`` of Series
gives; a load task's result must keep Dask's size (within its per-column overhead)."""

import gzip
import json

import numpy as np
import pandas as pd
import pytest

from dfanalyzer import analyzer, reader, schema


def _events(n, n_names, n_fnames, seed):
    out = []
    for i in range(n):
        args = {"fname": f"/d/f{(i + seed) % n_fnames}", "hostname": f"h{(i // 3) % 2}"}
        if i % 3:
            args["count"] = i * 11 - 5
        if i % 4 == 1:
            args["flops"] = i / 8
        if i % 5 != 2:
            args["mode"] = f"m{i % 9}"
        out.append(
            {
                "id": i,
                "name": f"n{(i + seed) % n_names}",
                "cat": "POSIX" if i % 2 else "app",
                "pid": 100 + i % 3,
                "tid": 7 + i % 5,
                "ts": 10**15 + i * 10,
                "dur": i % 13,
                "ph": "X",
                "args": args,
            }
        )
    return out


META = [
    {"id": 0, "name": "process_name", "cat": "x", "ph": "M", "pid": 5, "tid": 6, "ts": 10**15, "args": {"name": "app"}},
    {"id": 1, "name": "thread_name", "ph": "M", "pid": 5, "tid": 7, "args": {"name": "t1"}},
]


def _write(path, events, meta=()):
    lines = [json.dumps(e) for e in list(meta) + events]
    with open(path, "wb") as f:  # members of 2,000 lines: several checkpoints per file
        for k in range(0, len(lines), 2000):
            f.write(gzip.compress(("\n".join(lines[k : k + 2000]) + "\n").encode()))


def _cat(values):
    cats = pd.Index(list(dict.fromkeys(v for v in values if v is not None)), dtype=str)
    return pd.Categorical(values, categories=cats)


def _expected(events):
    """The events frame from json: core columns, then the args keys sorted by name."""

    def col(k):
        return [e["args"].get(k) for e in events]

    cols = {
        "name": _cat([e["name"] for e in events]),
        "cat": _cat([e["cat"] for e in events]),
        "ph": _cat([e["ph"] for e in events]),
        "hostname": _cat(col("hostname")),
        "fname": _cat(col("fname")),
        "pid": np.array([e["pid"] for e in events], dtype=np.int64),
        "tid": np.array([e["tid"] for e in events], dtype=np.int64),
        "ts": np.array([e["ts"] for e in events], dtype=np.int64),
        "dur": np.array([e["dur"] for e in events], dtype=np.int64),
        "te": np.array([e["ts"] + e["dur"] for e in events], dtype=np.int64),
        "size": pd.array([None] * len(events), dtype="Int64"),
        "offset": pd.array([None] * len(events), dtype="Int64"),
        "count": pd.array(col("count"), dtype="Int64"),
        "flops": pd.array(col("flops"), dtype="Float64"),
        "mode": _cat(col("mode")),
    }
    return pd.DataFrame(cols)


def _code_dtype(n):
    """pandas' code dtype for ``n`` categories."""
    return pd.Categorical.from_codes([], categories=[str(i) for i in range(n)]).codes.dtype


# (name categories, fname categories, events): the code-width limits of pandas (int8 below 127,
# int16 below 32,767), in an order that hands each batch's code vectors a reused, differently
# sized vector of the batch before
CASES = [(126, 127, 1000), (127, 32767, 32800), (5, 32766, 32766), (3, 126, 300), (2, 32768, 32768)]


def test_frames_equal_json(tmp_path):
    paths, expected = [], []
    for k, (nn, nf, n) in enumerate(CASES):
        p = str(tmp_path / f"t{k}.pfw.gz")
        ev = _events(n, nn, nf, k)
        _write(p, ev, META if k == 1 else ())
        paths.append(p)
        expected.append(_expected(ev))
    for _ in range(2):  # the second round: every batch gets the vectors of another file's batch
        for k, p in enumerate(paths):
            nn, nf, n = CASES[k]
            last = len(reader.build_index(p, str(tmp_path / "idx"))["checkpoints"]) - 1
            b = reader.load_batch(p, 0, last, index_dir=str(tmp_path / "idx"))
            exp = expected[k]
            pd.testing.assert_frame_equal(b.events, exp, check_exact=True, check_categorical=True)
            assert b.events.columns.dtype == pd.Index(["a"]).dtype
            assert b.events["name"].cat.codes.dtype == _code_dtype(nn)
            assert b.events["fname"].cat.codes.dtype == _code_dtype(nf)
            assert b.arg_counts == {
                "count": int(exp["count"].notna().sum()),
                "flops": int(exp["flops"].notna().sum()),
                "mode": int(exp["mode"].notna().sum()),
            }
            # batches of a few checkpoints: the same rows
            b2 = reader.load_batch(p, last // 2, last, index_dir=str(tmp_path / "idx"))
            assert len(b2.events) and b2.events["ts"].iloc[-1] == exp["ts"].iloc[-1]
            if k == 1:
                assert len(b.metadata) == len(META)
                m = {c: b.metadata[c].tolist() for c in ("name", "cat", "ph", "pid", "tid", "key", "value", "args")}
                ref = pd.DataFrame(
                    {
                        "name": pd.Series(m["name"], dtype=object),
                        "cat": pd.Series(m["cat"], dtype=object),
                        "ph": pd.Series(m["ph"], dtype=object),
                        "pid": pd.Series(m["pid"], dtype="int64"),
                        "tid": pd.Series(m["tid"], dtype="int64"),
                        "ts": pd.array([10**15, None], dtype="Int64"),
                        "dur": pd.array([None, None], dtype="Int64"),
                        "key": pd.Series(m["key"], dtype=object),
                        "value": pd.Series(m["value"], dtype=object),
                        "args": pd.Series(m["args"], dtype=object),
                    }
                )
                pd.testing.assert_frame_equal(b.metadata, ref, check_exact=True)
                assert m["name"] == ["process_name", "thread_name"] and m["pid"] == [5, 5] and m["tid"] == [6, 7]
            else:
                assert len(b.metadata) == 0
                pd.testing.assert_frame_equal(b.metadata, reader.metadata_frame({c: [] for c in b.metadata.columns}))
                assert list(b.metadata.dtypes.astype(str)) == [t for _, t in reader._METADATA_COLUMNS]


def test_frame_of_columns_is_the_constructor():
    n = 5
    cols = {
        "a": np.arange(n, dtype=np.int64),
        "b": pd.arrays.IntegerArray(np.arange(n, dtype=np.int64), np.array([0, 1, 0, 0, 1], dtype=bool)),
        "c": schema.categorical(np.array([0, -1, 1, 0, 1], dtype=np.int8), ["x", "y"]),
        "d": np.arange(n, dtype=np.int64) * 3,
        "e": np.array(list("abcde"), dtype=object),
    }
    ref = pd.DataFrame({**cols, "e": pd.Series(cols["e"], dtype=object)}, index=pd.RangeIndex(n), copy=False)
    for consolidate in (False, True):
        got = schema.frame_of_columns(list(cols), list(cols.values()), n, consolidate=consolidate)
        pd.testing.assert_frame_equal(got, ref, check_exact=True)
    # without consolidation every NumPy column is a view of its array (no copy)
    got = schema.frame_of_columns(list(cols), list(cols.values()), n)
    assert np.shares_memory(got["a"].to_numpy(), cols["a"])
    # equal names: the constructor's rule (the last one wins)
    got = schema.frame_of_columns(["a", "a"], [cols["a"], cols["d"]], n)
    pd.testing.assert_frame_equal(got, pd.DataFrame({"a": cols["d"]}))


def test_load_task_result_size(tmp_path):
    sizeof = pytest.importorskip("dask.sizeof").sizeof
    p = str(tmp_path / "t.pfw.gz")
    _write(p, _events(5000, 10, 50, 0), META)
    last = len(reader.build_index(p, str(tmp_path / "idx"))["checkpoints"]) - 1
    res = analyzer._load_task((p, 0, last), str(tmp_path / "idx"))
    ev, md, info = res
    assert info.error is None and len(ev) == 5000 and len(md) == len(META)
    dask_size = sizeof(tuple(res))  # Dask's own estimate of the same objects
    # Dask adds up to 1,200 bytes of overhead per column of the events frame (the metadata frame,
    # of object columns, is Dask's own estimate on both sides), plus the column names and the
    # categories' hash tables where pandas < 3 keeps them as object Index: 2.7 % here on pandas
    # 3.1, 3.5 % on 2.2 (0.2 % on a 76k-event batch, docs/perf/i22-bind.md)
    assert abs(sizeof(res) - dask_size) <= 1200 * len(ev.columns)
    assert sizeof(res) >= sum(ev[c].array.nbytes for c in ev.columns)
