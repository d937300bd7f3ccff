"""Summary math: interval unions, exact percentiles, partial merging vs brute force pandas."""

import json

import numpy as np
import pandas as pd
import pytest

from dfanalyzer import summary as S

IO, COMPUTE, APP = ("POSIX", "STDIO"), ("compute",), ("reader",)


def synthetic_events(n=3000, seed=7):
    """Random events with the DFAnalyzer.events columns (pandas only, no parsing)."""
    rng = np.random.default_rng(seed)
    cats = np.array(["POSIX", "STDIO", "compute", "reader", "dftracer", "other"])
    names = {
        "POSIX": ["read", "write", "open", "close"],
        "STDIO": ["fread", "fwrite", "fopen"],
        "compute": ["step"],
        "reader": ["__getitem__"],
        "dftracer": ["start"],
        "other": ["misc"],
    }
    cat = cats[rng.integers(0, len(cats), n)]
    name = np.array([names[c][rng.integers(0, len(names[c]))] for c in cat])
    host = np.array(["h0", "h1"])[rng.integers(0, 2, n)]
    pid = rng.integers(100, 104, n)
    tid = pid * 10 + rng.integers(0, 3, n)
    ts = rng.integers(1_000_000, 1_000_000 + 5_000_000, n)
    dur = rng.integers(0, 20_000, n)
    dur[rng.random(n) < 0.05] = 0
    size = pd.array(
        np.where(
            np.isin(name, ["read", "write", "fread", "fwrite"]), rng.choice([0, 512, 4096, 4096, 131072, 1 << 20], n), 0
        ),
        dtype="Int64",
    )
    size[~np.isin(name, ["read", "write", "fread", "fwrite"])] = pd.NA
    size[rng.random(n) < 0.03] = pd.NA
    fname = pd.Series(np.array([f"/d/f{i}" for i in range(40)])[rng.integers(0, 40, n)], dtype=object)
    fname[rng.random(n) < 0.1] = None
    ph = np.where(rng.random(n) < 0.97, "X", "i")
    df = pd.DataFrame(
        {
            "name": pd.Categorical(name),
            "cat": pd.Categorical(cat),
            "ph": pd.Categorical(ph),
            "hostname": pd.Categorical(host),
            "fname": pd.Categorical(fname),
            "pid": pid.astype(np.int64),
            "tid": tid.astype(np.int64),
            "ts": ts.astype(np.int64),
            "dur": dur.astype(np.int64),
            "te": (ts + dur).astype(np.int64),
            "size": size,
            "offset": pd.array([None] * n, dtype="Int64"),
        }
    )
    return df


def naive_union_measure(intervals):
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(i for i in intervals if i[1] > i[0]):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def naive_set(intervals):
    pts = set()
    for s, e in intervals:
        pts.update(range(s, e))
    return pts


def brute_force(df):
    ev = df[(df["ph"].astype(object) == "X") & (df["cat"].astype(object) != "dftracer")]
    cat = ev["cat"].astype(object)
    io, cp, app = ev[cat.isin(IO)], ev[cat.isin(COMPUTE)], ev[cat.isin(APP)]

    def iv(d):
        return list(zip(d["ts"].tolist(), d["te"].tolist()))

    seti, setc, seta = naive_set(iv(io)), naive_set(iv(cp)), naive_set(iv(app))
    us = 1e-6
    funcs = {}
    for nm, g in io.groupby(io["name"].astype(object)):
        sz = g["size"].dropna().to_numpy(dtype=np.int64)
        funcs[nm] = {
            "count": len(g),
            "size": None
            if sz.size == 0
            else {
                "min": float(sz.min()),
                "p25": float(np.percentile(sz, 25)),
                "mean": float(np.float64(int(sz.sum())) / np.float64(sz.size)),
                "median": float(np.percentile(sz, 50)),
                "p75": float(np.percentile(sz, 75)),
                "max": float(sz.max()),
            },
        }
    return {
        "events": len(ev),
        "nodes": ev["hostname"].astype(object).nunique(),
        "processes": len(ev[["hostname", "pid"]].astype(object).drop_duplicates()),
        "threads": {
            "compute": len(cp[["hostname", "pid", "tid"]].astype(object).drop_duplicates()),
            "io": len(io[["hostname", "pid", "tid"]].astype(object).drop_duplicates()),
        },
        "files": io["fname"].astype(object).dropna().nunique(),
        "time": {
            "total": (int(ev["te"].max()) - int(ev["ts"].min())) * us,
            "app_io": len(seta) * us,
            "unoverlapped_app_io": len(seta - setc) * us,
            "unoverlapped_app_compute": len(setc - seta) * us,
            "compute": len(setc) * us,
            "io": len(seti) * us,
            "unoverlapped_io": len(seti - setc) * us,
            "unoverlapped_compute": len(setc - seti) * us,
        },
        "functions": dict(sorted(funcs.items())),
        "aggregated": {"records": 0, "calls": 0},  # complete events only
    }


def test_union_intervals_exact():
    s, e = S.union_intervals([5, 1, 3, 10, 12, 20, 30], [7, 3, 4, 12, 15, 20, 31])
    # [1,3)+[3,4) touch -> [1,4); [5,7); [10,12)+[12,15) -> [10,15); [20,20) empty; [30,31)
    assert s.tolist() == [1, 5, 10, 30] and e.tolist() == [4, 7, 15, 31]
    assert S.union_measure((s, e)) == 3 + 2 + 5 + 1
    a = S.union_intervals([0, 10], [5, 20])
    b = S.union_intervals([3], [12])
    assert S.difference_measure(a, b) == 3 + 8  # [0,3) and [12,20)
    assert S.difference_measure(b, a) == 5  # [5,10)
    empty = S.union_intervals([], [])
    assert S.union_measure(empty) == 0 and S.difference_measure(a, empty) == 15


def test_union_random_against_naive():
    rng = np.random.default_rng(3)
    for _ in range(20):
        s = rng.integers(0, 1000, 200)
        e = s + rng.integers(0, 30, 200)
        u = S.union_intervals(s, e)
        assert S.union_measure(u) == naive_union_measure(zip(s.tolist(), e.tolist()))
        assert np.all(u[1][:-1] < u[0][1:])
        # merging unions of halves gives the union of the whole
        h = S.merge_unions(S.union_intervals(s[:100], e[:100]), S.union_intervals(s[100:], e[100:]))
        assert h[0].tolist() == u[0].tolist() and h[1].tolist() == u[1].tolist()


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 10, 101])
def test_histogram_percentiles_match_numpy(n):
    rng = np.random.default_rng(n)
    x = rng.choice([1, 7, 512, 4096, 4097, 10**12 + 3], n)
    vals, cnt = np.unique(x, return_counts=True)
    got = S.histogram_percentiles(vals, cnt, (0.25, 0.5, 0.75, 0.0, 1.0))
    want = [float(np.percentile(x, q)) for q in (25, 50, 75, 0, 100)]
    assert got == want


def test_histogram_percentiles_empty_raises():
    with pytest.raises(ValueError):
        S.histogram_percentiles(np.array([], dtype=np.int64), np.array([], dtype=np.int64), (0.5,))


def test_partials_merged_equal_brute_force():
    df = synthetic_events()
    whole = S.finish(S.partition_partial(df, IO, COMPUTE, APP)).to_dict()
    # uneven chunks, merged in a two-level tree, give exactly the same result
    cuts = [0, 1, 700, 701, 1500, 2999, 3000]
    parts = [S.partition_partial(df.iloc[a:b], IO, COMPUTE, APP) for a, b in zip(cuts[:-1], cuts[1:])]
    tree = S.combine_partials([S.combine_partials(parts[:3]), S.combine_partials(parts[3:])])
    merged = S.finish(tree).to_dict()
    want = brute_force(df)
    assert whole == want
    assert merged == want
    assert json.loads(json.dumps(merged)) == merged
    assert want["functions"]["open"]["size"] is None and want["functions"]["read"]["size"]["max"] == 1048576.0


def test_to_dict_shape_and_panel_text():
    df = synthetic_events(400, seed=1)
    s = S.finish(
        S.partition_partial(df, IO, COMPUTE, APP),
        skipped=[{"path": "/x/bad.pfw.gz", "skipped_lines": 3, "lost_bytes": 120, "warnings": []}],
    )
    d = s.to_dict()
    assert list(d) == ["events", "nodes", "processes", "threads", "files", "time", "functions", "aggregated"]
    assert d["aggregated"] == {"records": 0, "calls": 0}  # complete events only
    assert list(d["threads"]) == ["compute", "io"]
    assert list(d["time"]) == [
        "total",
        "app_io",
        "unoverlapped_app_io",
        "unoverlapped_app_compute",
        "compute",
        "io",
        "unoverlapped_io",
        "unoverlapped_compute",
    ]
    for f in d["functions"].values():
        assert set(f) == {"count", "size"}
        assert f["size"] is None or list(f["size"]) == ["min", "p25", "mean", "median", "p75", "max"]
    text = str(s)
    for label in (
        "Scheduler Allocation Details",
        "Nodes: 2",
        "Processes:",
        "Compute:",
        "I/O:",
        "Events Recorded",
        "Description of Dataset Used",
        "Files:",
        "Behavior of Application",
        "Total Time",
        "Overall App Level I/O",
        "Unoverlapped App I/O",
        "Unoverlapped App Compute",
        "Overall I/O",
        "Unoverlapped I/O",
        "Unoverlapped Compute",
        "Metrics by function",
        "fwrite",
        "3 lines and 120 bytes skipped in 1 file",
        "/x/bad.pfw.gz",
    ):
        assert label in text, label


def test_empty_partial():
    s = S.finish(S.combine_partials([S.Partial(), S.Partial()]))
    d = s.to_dict()
    assert d["events"] == 0 and d["functions"] == {} and d["time"]["total"] == 0.0
