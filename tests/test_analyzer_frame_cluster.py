"""``DFAnalyzer(...).events`` on a real 2-process ``LocalCluster`` (issue 22, frame path).

The frame equals what plain gzip + json read from the files (the independent oracle), row for row
in file order, at a size with several batches per file and several partitions; the partitions are
assembled where their batches were loaded (no partition moves between the workers) and the
collection's graph is the held partitions themselves (no alias task per partition)."""

from __future__ import annotations

import gzip
import json
import os
import signal
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import read_trace

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))
import gen_traces  # noqa: E402

FILES = 3
EVENTS = 12_000  # ~0.85 MB of text per file: 8 batches per file at batch_size_mb=0.1


def _compare(ev: pd.DataFrame, want: pd.DataFrame) -> None:
    """``ev`` (the frame) equals ``want`` (:func:`_oracle`), every column, row for row."""
    assert len(ev) == len(want)
    ev = ev.reset_index(drop=True)
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
            n_rows = len(an.events)  # (the planned row counts: no task, works with any client)
            part_rows = c.compute(an.events.map_partitions(len)).result().tolist()
            st = an.stats
            md = an.metadata
            graph = dict(an.events.__dask_graph__())
            files = list(an.files)
    want = _oracle(files)
    assert st["batches"] >= 4 * FILES and st["partitions"] >= 2 * FILES, st
    assert len(parts) == st["partitions"] == an.stats["partitions"]
    assert len(ev) == len(want) == EVENTS == st["events"]
    # partitions() in order: their concatenation is the frame, row for row
    assert sum(map(len, by_part)) == len(ev) == n_rows
    assert part_rows == [len(p) for p in by_part]
    ev = ev.reset_index(drop=True)
    off = 0
    for p in by_part:
        want_p = ev.iloc[off : off + len(p)].reset_index(drop=True)
        pd.testing.assert_frame_equal(p.reset_index(drop=True), want_p, check_categorical=False)
        off += len(p)
    _compare(ev, want)
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


def _task_names(ts) -> set:
    return {(t["key"][0] if isinstance(t["key"], tuple) else t["key"]).rsplit("-", 1)[0] for t in ts.data}


def test_batches_that_fit_are_the_partitions_themselves(traces, cluster_client):
    """With batches that fit a partition and share the union schema, each loaded batch is its
    partition as it was loaded: no partition task runs, the collection's graph is the load
    tasks' keys, and the frame is still exactly gzip + json's."""
    from distributed import get_task_stream

    from dfanalyzer import DFAnalyzer

    c = cluster_client
    with get_task_stream(client=c) as ts:
        with DFAnalyzer(traces, client=c, batch_size_mb=0.1, small_file_mb=0) as an:
            parts = an.partitions()
            ev = c.compute(an.events).result()
            st = an.stats
            graph = dict(an.events.__dask_graph__())
            files = list(an.files)
            with get_task_stream(client=c) as ts_len:
                n_rows = len(an.events)
            md = an.metadata
    assert st["batches"] >= 4 * FILES and st["partitions"] == st["batches"], st
    assert n_rows == EVENTS and ts_len.data == []
    assert len(md) == 0 and list(md.columns) == ["name", "cat", "ph", "pid", "tid", "ts", "dur", "key", "value", "args"]
    names = _task_names(ts)
    assert "_assemble" not in " ".join(names) and "_load_frame_task" not in " ".join(names), names
    assert sorted(graph) == sorted(f.key for f in parts)
    assert [f.key[1] for f in parts] == list(range(len(parts)))
    _compare(ev, _oracle(files))


def _kill_a_worker(c) -> None:
    """SIGKILL one worker process of ``c``'s cluster (what a node lost for memory looks like) and
    wait until the scheduler has dropped it (its nanny's restart is not waited for)."""
    import time

    pids = c.run(os.getpid)
    assert len(pids) >= 2
    addr = sorted(pids)[0]
    os.kill(pids[addr], signal.SIGKILL)
    t = time.monotonic()
    while addr in c.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.workers)):
        assert time.monotonic() - t < 60, "the scheduler did not notice the dead worker"
        time.sleep(0.05)


def _write_with_metadata(path, events: int) -> list:
    """A trace of ``events`` events with a metadata record (``ph: M``) before every 1250th (so some
    batches have none), in gzip
    members of 200 lines; returns the names of the M records, in order."""
    recs = []
    for i in range(events):
        if i % 1250 == 0:
            recs.append({"id": len(recs), "name": f"M{i}", "cat": "dftracer", "pid": 7, "tid": 7, "ph": "M",
                         "args": {"name": "k", "value": str(i)}})  # fmt: skip
        recs.append({"id": len(recs), "name": "read", "cat": "POSIX", "pid": 7, "tid": 7, "ts": 1000 + i, "dur": 2,
                     "ph": "X", "args": {"ret": 4, "fd": 3}})  # fmt: skip
    lines = ["["] + [json.dumps(r) for r in recs]
    with open(path, "wb") as f:  # one gzip member per 200 lines, as the tracer writes them
        for i in range(0, len(lines), 200):
            f.write(gzip.compress(("\n".join(lines[i : i + 200]) + "\n").encode()))
    return [r["name"] for r in recs if r["ph"] == "M"]


def test_a_worker_killed_after_loading_loses_nothing(traces, tmp_path, monkeypatch):
    """A worker killed between the loads and the per-worker picks of their infos, and one killed
    once the events are held: the lost loads are computed again (their metadata and info with
    them), and the frame, stats and metadata are still exactly what gzip + json read."""
    from distributed import Client, LocalCluster

    from dfanalyzer import DFAnalyzer, analyzer

    infos_of_loads = analyzer._infos_of_loads
    killed = []

    def kill_then_infos(client, *args):
        if not killed:
            killed.append(1)
            _kill_a_worker(client)
        return infos_of_loads(client, *args)

    md_path = str(tmp_path / "md.pfw.gz")
    md_names = _write_with_metadata(md_path, 3000)
    with (
        LocalCluster(n_workers=3, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=50) as cl,
        Client(cl, set_as_default=False) as c,
    ):
        monkeypatch.setattr(analyzer, "_infos_of_loads", kill_then_infos)
        with DFAnalyzer(traces, client=c, batch_size_mb=0.1, small_file_mb=0) as an:
            st = an.stats
            assert killed and st["events"] == EVENTS and st["partitions"] == st["batches"] >= 4 * FILES
            ev = c.compute(an.events).result()
            files = list(an.files)
        _compare(ev, _oracle(files))
        monkeypatch.setattr(analyzer, "_infos_of_loads", infos_of_loads)
        # the held partitions (the loaded batches themselves) of one worker lost, with metadata
        with DFAnalyzer(md_path, client=c, batch_size_mb=0.1, small_file_mb=0) as an:
            st = an.stats
            assert st["partitions"] == st["batches"] >= 3
            _kill_a_worker(c)
            ev = c.compute(an.events).result()
            md = an.metadata
            files = list(an.files)
    want = _oracle(files)
    assert st["events"] == len(want) == 3000
    _compare(ev, want)
    assert md["name"].astype(str).tolist() == md_names


def test_loaded_entry_lives_with_its_frame_and_a_missing_one_is_loaded_again(traces, tmp_path):
    """In process: :func:`_load_frame_task` keeps the batch's metadata and info beside the frame
    it returns until the frame is freed; :func:`_loaded_each` gives the same info for a load whose
    entry is missing (its frame moved to another worker) by loading the batch again."""
    import gc

    from dfanalyzer import analyzer

    idx = analyzer._index_task(traces[0], str(tmp_path), False)
    batch = analyzer.plan_batches([idx], 0.1 * 2**20)[1]
    load = dict(index_dir=str(tmp_path), keep_args=None, query=None, arg_columns=None)
    ev = analyzer._load_frame_task(batch, "t", 5, **load)
    assert ("t", 5) in analyzer._LOADED
    ((info, aligned),) = analyzer._loaded_each(2, load, [("t", 5, batch)], ev)
    assert aligned and info.rows == len(ev) == batch[4] > 0
    ((again, aligned2),) = analyzer._loaded_each(2, load, [("t", 6, batch)], ev)  # no entry: loaded again
    assert again == info and aligned2
    (md,) = analyzer._loaded_each(1, load, [("t", 5, batch)], ev)
    assert md is None  # gen_traces writes no metadata record: None, not an empty frame, travels
    del ev
    gc.collect()
    assert ("t", 5) not in analyzer._LOADED


def test_metadata_of_held_batches_comes_with_their_infos(cluster_client, tmp_path):
    """Where the loaded batches are the partitions (held until close), their metadata comes back
    with their infos by the one ``client.run``: neither loading the events nor reading
    ``metadata`` runs a pick task, and ``metadata`` equals the file's ``ph: M`` records in order
    (truth: the names written), also when first read after ``close()``."""
    from distributed import get_task_stream

    from dfanalyzer import DFAnalyzer

    c = cluster_client
    path = str(tmp_path / "md.pfw.gz")
    names = _write_with_metadata(path, 3000)
    with DFAnalyzer(path, client=c, batch_size_mb=0.1, small_file_mb=0) as an:
        with get_task_stream(client=c) as ts:
            n = len(an.events)
            md = an.metadata
        st = an.stats
        again = an.metadata
    assert n == 3000 and st["partitions"] == st["batches"] >= 3, st
    ran = [t["key"][0] if isinstance(t["key"], tuple) else t["key"] for t in ts.data]
    assert [k for k in ran if str(k).startswith("_loaded_each")] == [], ran
    assert md["name"].astype(str).tolist() == names and again is md
    with DFAnalyzer(path, client=c, batch_size_mb=0.1, small_file_mb=0) as an:
        assert len(an.events) == 3000
    assert an.metadata["name"].astype(str).tolist() == names  # first read after close


def test_loads_infos_come_back_pickled_by_one_run(traces, cluster_client):
    """The one ``client.run`` after the loads (``_stashed``) answers with ``bytes`` per worker
    (Dask measures a message by walking it, a bytes object by its length): between them the
    workers answer for every load exactly once, and the rows of their infos are the events' rows
    (truth: the trace set's own count). A failed or foreign reply reads as no answer (the loads
    then take the per-worker picks)."""
    from distributed.sizeof import safe_sizeof

    from dfanalyzer import DFAnalyzer
    from dfanalyzer.analyzer import _stashed, _unpickle_stashed

    c = cluster_client
    with DFAnalyzer(traces, client=c, batch_size_mb=0.1, small_file_mb=0) as an:
        n = len(an.events)
        st = an.stats
        name = an.partitions()[0].key[0]
        got = c.run(_stashed, name)
        assert st["partitions"] == st["batches"] >= 4 * FILES, st
        assert got and all(isinstance(v, bytes) and safe_sizeof(v) >= len(v) for v in got.values())
        seen: dict = {}
        for v in got.values():
            part = _unpickle_stashed(v)
            assert part is not None and not set(part) & set(seen)
            seen.update(part)
    assert sorted(seen) == list(range(st["batches"]))
    assert n == EVENTS and sum(info.rows for info, _, _ in seen.values()) == EVENTS
    assert all(isinstance(al, bool) for _, al, _ in seen.values())
    assert _unpickle_stashed(OSError("worker lost")) is None and _unpickle_stashed(b"not a pickle") is None


def test_meta_is_what_clear_known_categories_makes():
    """``make_meta`` builds its unknown-category columns directly: the same frame, dtypes and
    category dtypes as Dask's ``clear_known_categories`` of the empty columns (the independent
    truth), categories unknown to Dask."""
    from dask.dataframe.utils import clear_known_categories, has_known_categories

    from dfanalyzer import schema

    sch = {"fname": "category", "arg_size": "Int64", "ratio": "Float64", "host": "category", "n": "int64"}
    for s in ({}, sch):
        cols = {c: schema.empty_column(k, 0) for c, k in list(schema.CORE_COLUMNS) + list(s.items())}
        want = clear_known_categories(pd.DataFrame(cols))
        got = schema.make_meta(s)
        pd.testing.assert_frame_equal(got, want)
        assert list(got.dtypes) == list(want.dtypes) and type(got.index) is type(want.index)
        cats = [c for c in got.columns if isinstance(got[c].dtype, pd.CategoricalDtype)]
        assert cats and all(not has_known_categories(got[c]) for c in cats)
        for c in cats:
            assert got[c].cat.categories.dtype == want[c].cat.categories.dtype
            assert got[c].values.codes.dtype == want[c].values.codes.dtype


def test_len_of_held_events_is_their_planned_row_count(traces, cluster_client):
    """``len(events)`` is the sum of the partitions' planned row counts, read without building
    Dask's non-empty meta frame (no ``meta_nonempty`` call, no task), and equals the rows the
    workers hold; the events are still a Dask DataFrame, and what is derived from them is too."""
    import dask.dataframe as dd
    from dask.dataframe.dispatch import meta_nonempty

    from dfanalyzer import DFAnalyzer

    c = cluster_client
    calls = []
    orig = meta_nonempty.dispatch(pd.DataFrame)
    meta_nonempty.register(pd.DataFrame)(lambda x: (calls.append(1), orig(x))[1])
    try:
        with DFAnalyzer(traces, client=c, batch_size_mb=0.1, small_file_mb=0) as an:
            ev = an.events
            n = len(ev)
            seen = list(calls)
            rows = c.compute(ev.map_partitions(len)).result().tolist()
            sub = ev[ev["dur"] >= 0]
            n_sub = c.compute(sub.map_partitions(len)).result().sum()
    finally:
        meta_nonempty.register(pd.DataFrame)(orig)
    assert seen == [] and n == sum(rows) == EVENTS == n_sub
    assert isinstance(ev, dd.DataFrame) and isinstance(sub, dd.DataFrame)
