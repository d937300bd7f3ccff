"""``DFAnalyzer(...).events`` on a real 2-process ``LocalCluster`` (issue 22, frame path).

The frame equals what plain gzip + json read from the files (the independent oracle), row for row
in file order, at a size with several batches per file and several partitions; the partitions are
assembled where their batches were loaded (no partition moves between the workers) and the
collection's graph is the held partitions themselves (no alias task per partition)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import read_trace

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))
import gen_traces  # noqa: E402

FILES = 3
EVENTS = 12_000  # ~0.85 MB of text per file: 8 batches per file at batch_size_mb=0.1


@pytest.fixture(scope="module")
def cluster_client():
    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40) as cl,
        Client(cl, set_as_default=False) as c,
    ):
        yield c


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    out = tmp_path_factory.mktemp("frame")
    return gen_traces.generate(str(out), EVENTS, FILES, member_bytes=16 << 10, jobs=1)


RW = {"read", "pread", "pread64", "readv", "preadv", "write", "pwrite", "pwrite64", "writev", "pwritev"}
CORE = {"name", "cat", "ph", "pid", "tid", "ts", "dur", "te", "size"}  # args keys renamed arg_<key>


def _oracle(paths) -> pd.DataFrame:
    """The events of ``paths`` (in this order, lines in file order) read by gzip + json, with the
    columns of docs/analyzer.md (``size`` = bytes moved, the trace's ``size`` as ``arg_size``)."""
    rows = []
    for p in paths:
        for r in read_trace(p):
            if r.get("ph") == "M":
                continue
            row = {k: r[k] for k in ("name", "cat", "pid", "tid", "ts", "dur")}
            args = r.get("args", {})
            row.update({f"arg_{k}" if k in CORE else k: v for k, v in args.items()})
            ret = args.get("ret")
            if r["name"] in RW and ret is not None and ret >= 0:
                row["size"] = ret
            elif r["name"] in ("fread", "fwrite") and ret is not None and "size" in args:
                row["size"] = ret * args["size"]
            rows.append(row)
    return pd.DataFrame(rows)


def test_events_equal_gzip_json_and_stay_where_loaded(traces, cluster_client):
    from distributed import get_task_stream

    from dfanalyzer import DFAnalyzer

    c = cluster_client
    with get_task_stream(client=c) as ts:
        with DFAnalyzer(
            traces, client=c, batch_size_mb=0.1, partition_size_mb=0.25, small_file_mb=0, index_dir=None
        ) as an:
            parts = an.partitions()
            holders = c.who_has(parts)
            ev = c.compute(an.events).result()  # (a client that is not the default one)
            by_part = c.gather(parts)
            st = an.stats
            md = an.metadata
            graph = dict(an.events.__dask_graph__())
            files = list(an.files)
    want = _oracle(files)
    assert st["batches"] >= 4 * FILES and st["partitions"] >= 2 * FILES, st
    assert len(parts) == st["partitions"] == an.stats["partitions"]
    assert len(ev) == len(want) == EVENTS == st["events"]
    # partitions() in order: their concatenation is the frame, row for row
    assert sum(map(len, by_part)) == len(ev)
    ev = ev.reset_index(drop=True)
    off = 0
    for p in by_part:
        want_p = ev.iloc[off : off + len(p)].reset_index(drop=True)
        pd.testing.assert_frame_equal(p.reset_index(drop=True), want_p, check_categorical=False)
        off += len(p)
    for col in want.columns:
        got = ev[col]
        exp = want[col]
        if isinstance(got.dtype, pd.CategoricalDtype) or got.dtype == object:
            a = got.astype(object).where(got.notna(), None).tolist()
            b = exp.astype(object).where(exp.notna(), None).tolist()
            assert a == b, col
        elif col in ("flops",):
            np.testing.assert_allclose(got.astype("float64").to_numpy(), exp.astype("float64").to_numpy(), rtol=1e-12)
        else:
            assert got.isna().tolist() == exp.isna().tolist(), col
            assert got.fillna(-1).astype("int64").tolist() == exp.fillna(-1).astype("int64").tolist(), col
    assert (ev["te"] == ev["ts"] + ev["dur"]).all()
    assert len(md) == 0  # gen_traces writes no metadata record
    # every partition held on one worker, assembled where its batch was loaded: no transfer of a
    # loaded batch (the dependency of a partition or a per-worker pick) between the workers
    assert all(len(w) == 1 for w in holders.values()), holders
    assert len({w[0] for w in holders.values()}) == 2  # both workers hold partitions
    moved = [
        t["key"]
        for t in ts.data
        if any(s["action"] == "transfer" for s in t["startstops"])
        and (str(t["key"]).find("dfanalyzer-events") >= 0 or str(t["key"]).startswith("_loaded_each"))
    ]
    assert moved == []
    # the collection's graph is exactly the held partitions
    assert sorted(graph) == sorted(f.key for f in parts)


def test_without_held_frame_the_persisted_fallback_is_the_same_frame(traces, cluster_client, monkeypatch):
    """With a Dask whose expression classes ``dfanalyzer._held`` does not fit (ImportError), the
    events are ``from_delayed`` persisted on the client: the same frame."""
    from dfanalyzer import DFAnalyzer

    c = cluster_client
    kw = dict(client=c, batch_size_mb=0.1, partition_size_mb=0.25, small_file_mb=0)
    with DFAnalyzer(traces[:1], **kw) as an:
        held = c.compute(an.events).result()
        assert sorted(dict(an.events.__dask_graph__())) == sorted(f.key for f in an.partitions())
    monkeypatch.setitem(sys.modules, "dfanalyzer._held", None)  # import raises ImportError
    with DFAnalyzer(traces[:1], **kw) as an:
        persisted = c.compute(an.events).result()
        assert an.events.npartitions == len(an.partitions()) >= 2
    pd.testing.assert_frame_equal(held, persisted)
