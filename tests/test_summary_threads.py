"""The threaded streamed summary (issue 22, Deliver 2: its serial steps).

* ``dfanalyzer summary`` without a scheduler imports neither pandas nor pyarrow, dask.dataframe
  or matplotlib (start-up is a serial step), and its JSON equals the one the pandas frame path
  gives (``--filter`` that keeps every event: each batch becomes a DataFrame, reduced by
  ``partition_partial``), for small-file groups and for indexed batches;
* ``summary.fold_in_threads`` (every pool thread folds its own partials, one ``SharedSpill``
  bound for all) gives byte-identical results to one ``combine_partials`` of every partial, for
  1-4 threads and spill bounds from 1 interval up, with one spill store;
* ``merge_unions_parallel`` (the final merge of the threads' unions, window by window in the
  pool) gives the same arrays as ``merge_unions``;
* a batch whose task fails is reported as a ``LoadError`` naming its file and checkpoints, and
  the pool threads stop taking batches.
"""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import pythonpath_env

from dfanalyzer import DFAnalyzer
from dfanalyzer import analyzer as A
from dfanalyzer import summary as S
from dfanalyzer.records import LoadError

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))
import gen_traces  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
CM1 = os.path.join(DATA, "dftracer-v1.0.5-cm1")  # 48 per-process traces: small-file groups
V22 = os.path.join(DATA, "dftracer-v2.2.0")  # DFTracer 2.2.0 (aggregated records)

HEAVY = ("pandas", "pyarrow", "dask.dataframe", "matplotlib")
_PROBE = """
import json, sys
from dfanalyzer.cli import main
rc = main(sys.argv[1:])
sys.stdout.flush()
print(json.dumps({"rc": rc, "heavy": [m for m in %r if m in sys.modules]}), file=sys.stderr)
""" % (HEAVY,)


def _cli(args, probe=False):
    cmd = [sys.executable, "-c", _PROBE] if probe else [sys.executable, "-m", "dfanalyzer.cli"]
    r = subprocess.run(
        [*cmd, "summary", *args, "--no-progress"], env=pythonpath_env(), capture_output=True, text=True, timeout=120
    )
    return r


@pytest.mark.parametrize(
    "trace, extra",
    [(CM1, []), (CM1, ["--small-file-mb", "0", "--batch-size-mb", "0.05"]), (V22, ["--small-file-mb", "0"])],
)
def test_threaded_summary_imports_no_pandas_and_equals_frame_path(tmp_path, trace, extra):
    opts = ["--json", "--workers", "2", "--index-dir", str(tmp_path / "idx"), *extra]
    r = _cli([trace, *opts], probe=True)
    assert r.returncode == 0, r.stderr[-3000:]
    probe = json.loads(r.stderr.strip().splitlines()[-1])
    assert probe == {"rc": 0, "heavy": []}, probe
    got = json.loads(r.stdout)
    assert got["events"] > 0
    # the frame path: a filter that keeps every event makes each batch a pandas DataFrame
    ref = _cli([trace, *opts, "--filter", "ts >= 0"])
    assert ref.returncode == 0, ref.stderr[-3000:]
    assert r.stdout == ref.stdout
    # and the stderr lines (warnings) are the same as the plain command's
    plain = _cli([trace, *opts])
    assert (plain.returncode, plain.stdout) == (0, r.stdout)
    assert plain.stderr == "\n".join(r.stderr.splitlines()[:-1]) + ("\n" if len(r.stderr.splitlines()) > 1 else "")


def _batch_partials(paths, index_dir, batch_size_mb):
    """Every batch's summary partial of ``paths``, by the analyzer's own batch task."""
    with DFAnalyzer(paths, index_dir=index_dir, batch_size_mb=batch_size_mb, small_file_mb=0, n_workers=1) as a:
        kw = dict(index_dir=index_dir, query=None, io_cats=a.io_cats, compute_cats=a.compute_cats)
        kw["app_io_cats"] = a.app_io_cats
        return [A._summary_batch_task(b, raw_metadata=True, **kw)[0] for b in a._batches]


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """4 overlapping processes (benchmarks/gen_traces.py), 30,000 events in 16 KiB members."""
    d = tmp_path_factory.mktemp("threads")
    return gen_traces.generate(str(d), 30_000, 4, member_bytes=1 << 14, jobs=1)


@pytest.fixture(scope="module")
def partials(traces, tmp_path_factory):
    parts = _batch_partials(traces, str(tmp_path_factory.mktemp("idx")), 0.05)
    assert len(parts) >= 40 and sum(S._intervals(p) for p in parts) > 2000
    return parts


def _json(p: S.Partial) -> str:
    try:
        return json.dumps(S.finish(p).to_dict())
    finally:
        for sp in p.spilled:
            sp.cleanup()


@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("bound", [None, 1, 300, 1 << 40])
def test_fold_in_threads_equals_one_combine(partials, threads, bound, tmp_path, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(S, "PARALLEL_MERGE_INTERVALS", 100)  # (the threads' unions merged in windows)

    want = _json(S.combine_partials(partials))
    order = list(np.random.default_rng(threads * 7 + (bound or 0) % 97).permutation(len(partials)))
    seen = []
    with ThreadPoolExecutor(threads) as pool:
        stream = S.fold_in_threads(
            pool, threads, order, lambda i: (partials[i], i * 10), spill_intervals=bound, spill_dir=str(tmp_path)
        )
        while True:
            try:
                i, rest = next(stream)
            except StopIteration as end:
                out = end.value
                break
            assert rest == [i * 10]
            seen.append(i)
    assert sorted(seen) == list(range(len(partials)))  # every item once, with its extra values
    stores = list(out.spilled)
    if bound in (1, 300):
        assert len(stores) == 1 and sum(len(r) for r in stores[0].runs.values()) >= 2  # one store, shared
    else:
        assert stores == []
    assert _json(out) == want
    assert all(sp.file.closed for sp in stores)
    # the callers' partials are unchanged (a spill replaces the held copies' unions)
    assert _json(S.combine_partials(partials)) == want


def test_failed_batch_names_file_and_batch_and_stops_the_threads(traces, tmp_path, monkeypatch):
    paths = traces
    kw = dict(index_dir=str(tmp_path / "idx"), batch_size_mb=0.05, small_file_mb=0, n_workers=2)
    with DFAnalyzer(paths, **kw) as a:
        ref = a.summary(show=False).to_dict()
        batches = list(a._batches)
    assert len(batches) >= 20
    bad = batches[len(batches) // 2]
    real = A._summary_batch_task
    ran = []

    def task(batch, *args, **kwargs):
        if bad in ran:  # (slow after the failure: the threads must stop long before the end)
            time.sleep(0.1)
        ran.append(batch)
        if batch == bad:
            raise MemoryError("no room for the batch")
        return real(batch, *args, **kwargs)

    monkeypatch.setattr(A, "_summary_batch_task", task)
    with DFAnalyzer(paths, **kw) as a:
        assert a._client is None  # the thread pool, not a cluster
        with pytest.raises(LoadError) as e:
            a.summary(show=False)
    assert str(e.value) == (
        f"{bad[0]}: batch of checkpoints {bad[1]}-{bad[2]}: load failed: MemoryError: no room for the batch"
    )
    assert len(ran) < len(batches)  # the threads stopped (at most one batch each after the failure)
    monkeypatch.setattr(A, "_summary_batch_task", real)
    with DFAnalyzer(paths, **kw) as a:  # (and nothing is left over for the next summary)
        assert a.summary(show=False).to_dict() == ref


@pytest.mark.parametrize(
    "values",
    [
        [],
        [5],
        [3, 3, 1, 0, 7, 1, 3],
        [-(2**63), 2**63 - 1, 0, -1, 2**63 - 1],  # (wide: sorted path)
        list(range(-50, 50)) * 3,
    ],
)
def test_factorize_codes_give_back_the_values(values):
    v = np.array(values, dtype=np.int64)
    codes, uniq = S._factorize(v)
    assert uniq.tolist() == sorted(set(values))
    assert uniq[codes].tolist() == values


@pytest.mark.parametrize("seed", range(6))
def test_merge_unions_parallel_equals_merge_unions(seed):
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(seed)
    unions = []
    for _ in range(int(rng.integers(2, 6))):
        n = int(rng.integers(0, 400))
        s = rng.integers(0, 5000, n)
        e = s + rng.integers(0, 30, n)  # (empty, touching and overlapping intervals)
        unions.append(S.union_intervals(s, e))
    want = S.merge_unions(*unions)
    with ThreadPoolExecutor(3) as pool:
        for ways in (2, 3, 7, 64):
            got = S.merge_unions_parallel(unions, pool, ways, min_intervals=0)
            assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist(), ways
            assert got[0].dtype == want[0].dtype == np.int64
