"""``frame_schema`` and ``_is_aligned`` read the frame's dtypes from pandas' block manager and
remember ``kind_of`` per dtype (docs/perf/i27-frame.md): they must give exactly what the plain
definitions give (``df.dtypes`` walked, ``kind_of`` of each dtype, the dtype's ``str``), for the
reader's frames and for frames of every other dtype a user's columns can have."""

import gzip
import json

import numpy as np
import pandas as pd
import pytest

from dfanalyzer import analyzer, reader, schema


def _ref_schema(df):
    """The definition: args column -> ``kind_of`` of its dtype, in column order."""
    return {c: schema.kind_of(t) for c, t in df.dtypes.items() if c not in schema.CORE_KINDS}


def _ref_aligned(ev):
    """The definition of ``_is_aligned`` as it was written before the dtype fast path."""
    idx = ev.index
    if not isinstance(idx, pd.RangeIndex) or idx.start != 0 or idx.step != 1:
        return False
    names = list(ev.columns)
    if tuple(names[: len(schema.CORE_NAMES)]) != schema.CORE_NAMES or len(set(names)) != len(names):
        return False
    kinds = {**schema.CORE_KINDS, **_ref_schema(ev)}
    for c, dt in ev.dtypes.items():
        if kinds[c] == schema.CATEGORY:
            if not isinstance(dt, pd.CategoricalDtype) or dt.categories.dtype != schema._str_dtype():
                return False
        elif str(dt) != kinds[c]:
            return False
    return True


def _trace(path, n):
    lines = []
    for i in range(n):
        args = {"fname": f"/d/f{i % 7}", "hostname": "h0"}
        if i % 3:
            args["count"] = i * 11 - 5
        if i % 4 == 1:
            args["flops"] = i / 8
        if i % 5 != 2:
            args["mode"] = f"m{i % 9}"
        if i % 6 == 0:
            args["size"] = i  # renamed to arg_size
        ev = {"id": i, "name": f"n{i % 5}", "cat": "POSIX", "pid": 3, "tid": 4, "ts": 10**15 + i, "dur": i % 7}
        ev.update(ph="X", args=args)
        lines.append(json.dumps(ev))
    with open(path, "wb") as f:
        for k in range(0, n, 1500):  # several members
            f.write(gzip.compress(("\n".join(lines[k : k + 1500]) + "\n").encode()))


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    d = tmp_path_factory.mktemp("fs")
    p = str(d / "t.pfw.gz")
    _trace(p, 5000)
    last = len(reader.build_index(p, str(d / "idx"))["checkpoints"]) - 1
    return reader.load_batch(p, 0, last, index_dir=str(d / "idx")).events


def _user_frame():
    n = 4
    cols = {
        "i8": np.arange(n, dtype=np.int8),
        "i32": np.arange(n, dtype=np.int32),
        "i64": np.arange(n, dtype=np.int64),
        "u16": np.arange(n, dtype=np.uint16),
        "b": np.array([True, False, True, False]),
        "f32": np.arange(n, dtype=np.float32),
        "f64": np.arange(n, dtype=np.float64),
        "obj": np.array(["a", "b", None, "d"], dtype=object),
        "objmix": np.array([1, "b", 2.5, None], dtype=object),
        "s_py": pd.array(["a", None, "c", "d"], dtype=pd.StringDtype("python")),
        "I32": pd.array([1, None, 3, 4], dtype="Int32"),
        "I64": pd.array([1, None, 3, 4], dtype="Int64"),
        "F64": pd.array([1.5, None, 3, 4], dtype="Float64"),
        "bool_na": pd.array([True, None, False, True], dtype="boolean"),
        "cat_str": pd.Categorical(["x", "y", None, "x"]),
        "cat_int": pd.Categorical([1, 2, 1, None]),
        "dt": pd.date_range("2024-01-01", periods=n),
        "td": pd.to_timedelta(np.arange(n), unit="s"),
    }
    try:
        cols["s_arrow"] = pd.array(["a", None, "c", "d"], dtype=pd.StringDtype("pyarrow"))
    except ImportError:
        pass
    return pd.DataFrame(cols)


def test_schema_of_reader_frame(loaded):
    got = schema.frame_schema(loaded)
    assert got == _ref_schema(loaded)
    assert list(got.items()) == list(_ref_schema(loaded).items())  # same order
    assert got == {"arg_size": "Int64", "count": "Int64", "flops": "Float64", "mode": "category"}


def test_schema_of_every_dtype():
    df = _user_frame()
    for _ in range(2):  # the second time from the per-dtype cache
        assert list(schema.frame_schema(df).items()) == list(_ref_schema(df).items())
    dup = pd.concat([df[["i64", "obj"]], df[["obj"]]], axis=1)  # equal names
    assert list(schema.frame_schema(dup).items()) == list(_ref_schema(dup).items())
    assert schema.frame_schema(pd.DataFrame()) == {}


def test_kind_of_cached_is_kind_of():
    df = _user_frame()
    for t in list(df.dtypes) + [np.dtype("int64"), pd.Int64Dtype(), pd.CategoricalDtype(["a"])]:
        assert schema.kind_of_cached(t) == schema.kind_of(t)
        assert schema.kind_of_cached(t) == schema.kind_of(t)


def _variants(ev):
    core = list(schema.CORE_NAMES)
    rest = [c for c in ev.columns if c not in core]
    yield ev  # as loaded: aligned
    yield ev[core[1:2] + core[:1] + core[2:] + rest]  # core columns out of order
    yield ev[core + rest[::-1]]  # args columns in another order: still aligned
    yield ev.iloc[1:]  # index from 1
    yield ev.set_axis(pd.Index(np.arange(len(ev)) * 2), axis=0)  # not a RangeIndex
    yield ev.assign(count=ev["count"].astype("float64"))  # a kind's inexact dtype
    yield ev.assign(pid=ev["pid"].astype("int32"))
    yield ev.assign(mode=ev["mode"].astype(object))  # category column as text
    yield ev.assign(
        mode=pd.Categorical(ev["mode"].astype(object), categories=pd.Index(ev["mode"].cat.categories, dtype=object))
    )
    yield pd.concat([ev, ev[["count"]]], axis=1)  # equal names
    yield ev.assign(extra=np.arange(len(ev), dtype=np.int64))  # int64 args column: kind Int64, dtype not


def test_is_aligned_as_defined(loaded):
    seen = set()
    for v in _variants(loaded):
        want = _ref_aligned(v)
        seen.add(want)
        assert analyzer._is_aligned(v) is want
        if len(set(v.columns)) == len(v.columns):
            assert analyzer._is_aligned(v, schema.frame_schema(v)) is want
    assert seen == {True, False}
    assert analyzer._is_aligned(loaded)
    # a schema that does not cover a column never makes a frame aligned
    assert not analyzer._is_aligned(loaded, {k: v for k, v in schema.frame_schema(loaded).items() if k != "mode"})


def test_load_frame_task_stashes_the_same(loaded, tmp_path):
    p = str(tmp_path / "t.pfw.gz")
    _trace(p, 5000)
    last = len(reader.build_index(p, str(tmp_path / "idx"))["checkpoints"]) - 1
    name = "test-frame-schema-fast"
    ev = analyzer._load_frame_task((p, 0, last, 0, 0), name, 0, str(tmp_path / "idx"))
    try:
        md, info, aligned, _ = analyzer._LOADED[(name, 0)]
        assert aligned is _ref_aligned(ev) is True
        assert info.schema == _ref_schema(ev)
        pd.testing.assert_frame_equal(ev, loaded, check_exact=True)
    finally:
        analyzer._LOADED.pop((name, 0), None)


def _truth_span(path):
    """(min ts, max ts + dur) of the event lines, by plain gzip + json."""
    ts, te = [], []
    with gzip.open(path, "rt") as f:
        for line in f:
            e = json.loads(line)
            if e.get("ph") != "M":
                ts.append(e["ts"])
                te.append(e["ts"] + e.get("dur", 0))
    return min(ts), max(te)


def test_batch_span_is_json_truth(tmp_path):
    p = str(tmp_path / "s.pfw.gz")
    _trace(p, 4000)
    idx = str(tmp_path / "idx")
    ck = len(reader.build_index(p, idx)["checkpoints"])
    assert ck >= 3
    b = reader.load_batch(p, 0, ck - 1, index_dir=idx)
    assert b.span == _truth_span(p) == (10**15, 10**15 + max(i + i % 7 for i in range(4000)))
    assert all(type(x) is int for x in b.span)
    # one checkpoint alone: its own range
    first = reader.load_batch(p, 1, 1, index_dir=idx)
    ev = first.events
    assert first.span == (int(ev["ts"].min()), int(ev["te"].max()))
    # the load task's info: the batch's span before a query drops rows (as before)
    _, _, info = analyzer._load_task((p, 0, ck - 1, 0, 0), idx, query="name == 'n1'")
    assert info.span == b.span and info.rows == 800


def test_span_of_a_batch_made_without_it(tmp_path, monkeypatch):
    """A Batch made by other code (no ``span``): the load task computes it from the frame."""
    p = str(tmp_path / "s.pfw.gz")
    _trace(p, 3000)
    idx = str(tmp_path / "idx")
    ck = len(reader.build_index(p, idx)["checkpoints"])
    real = reader.load_batch

    def no_span(*a, **k):
        b = real(*a, **k)
        b.span = None
        return b

    monkeypatch.setattr(reader, "load_batch", no_span)
    _, _, info = analyzer._load_task((p, 0, ck - 1, 0, 0), idx)
    assert info.span == _truth_span(p)
