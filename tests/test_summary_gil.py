"""The threaded summary's per-batch reduction with fewer GIL-held NumPy calls (issue 22, Deliver 2):
``(host, pid, tid)`` sets from packed int64 keys and ``(name, size)`` histograms from one sort of
packed keys, with the general paths kept for values that do not pack (pids or tids outside
``[0, 2**22)``, negative or huge sizes). Checked against plain-Python truth per row (sets and
``collections.Counter``), and packed vs general path on the same rows, at sizes that make the
run-start and dense/wide factorize branches differ."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from dfanalyzer import summary as S

CATS = ["POSIX", "COMPUTE", "STDIO", "dftracer"]
NAMES = ["read", "write", "open64", "compute", "fread"]
HOSTS = ["h0", "h1", "h2"]


def _batch(rng, n: int, pids, tids, sizes, null_host: bool = False) -> dict:
    """A reader batch (the dict ``_reader.load_batch`` returns, core columns only) of ``n`` rows."""
    cat = rng.integers(0, len(CATS), n)
    host = rng.integers(-1 if null_host else 0, len(HOSTS), n)
    ts = rng.integers(0, 10**6, n)
    te = ts + rng.integers(0, 500, n)
    size = rng.choice(sizes, n)
    null = rng.random(n) < 0.2
    return {
        "rows": n,
        "args": [],
        "core": {
            "ph": (np.zeros(n, dtype=np.int8), ["X"]),
            "cat": (cat.astype(np.int8), list(CATS)),
            "name": (rng.integers(-1, len(NAMES), n).astype(np.int16), list(NAMES)),
            "hostname": (host.astype(np.int8), list(HOSTS)),
            "fname": (rng.integers(-1, 7, n).astype(np.int16), [f"/f{i}" for i in range(7)]),
            "ts": ts.astype(np.int64),
            "te": te.astype(np.int64),
            "pid": rng.choice(pids, n).astype(np.int64),
            "tid": rng.choice(tids, n).astype(np.int64),
            "size": (size.astype(np.int64), null),
        },
    }


def _truth(r: dict):
    """processes, threads_io, threads_compute, files and {name: (count, Counter(size))} by row."""
    c = r["core"]
    hosts = [None, *HOSTS]
    procs, t_io, t_cp, files, funcs = set(), set(), set(), set(), {}
    for i in range(r["rows"]):
        cat = CATS[c["cat"][0][i]]
        if cat == "dftracer":
            continue
        key = (hosts[c["hostname"][0][i] + 1], int(c["pid"][i]))
        procs.add(key)
        tkey = (*key, int(c["tid"][i]))
        if cat in S_IO:
            t_io.add(tkey)
            f = c["fname"][0][i]
            if f >= 0:
                files.add(f"/f{f}")
            n = c["name"][0][i]
            if n >= 0:
                cnt, hist = funcs.setdefault(NAMES[n], [0, collections.Counter()])
                funcs[NAMES[n]][0] += 1
                if not c["size"][1][i]:
                    hist[int(c["size"][0][i])] += 1
        if cat in S_CP:
            t_cp.add(tkey)
    return procs, t_io, t_cp, files, funcs


S_IO = ("POSIX", "STDIO")
S_CP = ("COMPUTE",)


def _partial(r: dict):
    return S.partial_from_columns(S.ReaderColumns(r), S_IO, S_CP, ("STDIO",))


def _same(a: S.Partial, b: S.Partial) -> None:
    for k in ("events", "min_ts", "max_te", "hosts", "processes", "threads_io", "threads_compute", "files"):
        assert getattr(a, k) == getattr(b, k), k
    for k in ("io", "compute", "app_io"):
        for x, y in zip(getattr(a, k), getattr(b, k)):
            assert x.dtype == y.dtype and np.array_equal(x, y), k
    assert sorted(a.functions) == sorted(b.functions)
    for n, (ca, (va, na), sa) in a.functions.items():
        cb, (vb, nb), sb = b.functions[n]
        assert (ca, sa) == (cb, sb)
        assert va.dtype == vb.dtype == np.int64 and np.array_equal(va, vb), n
        assert na.dtype == nb.dtype == np.int64 and np.array_equal(na, nb), n


SMALL_IDS = ([10, 11, 4_194_303, 0], [0, 7, 12345, 4_194_303])
BIG_IDS = ([10, 2**22, 2**40], [-1, 3, 2**31 + 5])
SMALL_SIZES = [0, 1, 4096, 65536, 2**43 - 1]
WIDE_SIZES = [-5, 0, 4096, 2**43, 2**62]


@pytest.mark.parametrize("n", [1, 2, 1000, 40_000])
@pytest.mark.parametrize("ids", [SMALL_IDS, BIG_IDS], ids=["packed-ids", "general-ids"])
@pytest.mark.parametrize("sizes", [SMALL_SIZES, WIDE_SIZES], ids=["packed-sizes", "general-sizes"])
def test_partial_matches_rows(n, ids, sizes, monkeypatch):
    rng = np.random.default_rng(n + len(ids[0]) + len(sizes))
    r = _batch(rng, n, *ids, sizes, null_host=n > 2)
    got = _partial(r)
    procs, t_io, t_cp, files, funcs = _truth(r)
    assert got.processes == procs
    assert got.threads_io == t_io
    assert got.threads_compute == t_cp
    assert got.files == files
    assert {k: v[0] for k, v in got.functions.items()} == {k: v[0] for k, v in funcs.items()}
    for k, (_, (vals, cnts), _) in got.functions.items():
        assert dict(zip(vals.tolist(), cnts.tolist())) == dict(funcs[k][1]), k
        assert list(vals) == sorted(funcs[k][1])
    # and the packed paths give exactly what the general paths give on the same rows
    monkeypatch.setattr(S, "_packed_ids", lambda *a: None)
    monkeypatch.setattr(S, "_PAIR_NAMES", -1)
    _same(got, _partial(r))


def test_packing_is_taken_only_when_values_fit(monkeypatch):
    """The packed paths run for Linux-sized ids and sizes below 2**43, not otherwise."""
    calls = collections.Counter()
    real_packed, real_distinct = S._distinct_packed, S._distinct
    monkeypatch.setattr(S, "_distinct_packed", lambda *a: calls.update(["packed"]) or real_packed(*a))
    monkeypatch.setattr(S, "_distinct", lambda *a: calls.update(["general"]) or real_distinct(*a))
    rng = np.random.default_rng(1)
    _partial(_batch(rng, 5000, *SMALL_IDS, SMALL_SIZES))
    assert calls == {"packed": 3}
    calls.clear()
    _partial(_batch(rng, 5000, *BIG_IDS, SMALL_SIZES))
    assert calls == {"general": 3}


def test_merge_histograms_matches_counter():
    """The folds' histogram merge (a stable argsort and sums per run of equal values) against
    ``collections.Counter`` sums, with empty, single and overlapping histograms."""
    from dfanalyzer.engine.intervals import merge_histograms

    rng = np.random.default_rng(7)
    for _ in range(200):
        hists, truth = [], collections.Counter()
        for _ in range(int(rng.integers(1, 6))):
            vals = np.unique(rng.integers(-50, 50, int(rng.integers(0, 30)))).astype(np.int64)
            cnts = rng.integers(1, 2**40, vals.size).astype(np.int64)
            hists.append((vals, cnts))
            truth.update(dict(zip(vals.tolist(), cnts.tolist())))
        v, c = merge_histograms(*hists)
        assert v.dtype == c.dtype == np.int64
        assert v.tolist() == sorted(truth)
        assert c.tolist() == [truth[x] for x in sorted(truth)]
