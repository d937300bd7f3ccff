"""What a Dask worker counts for the held partitions of ``DFAnalyzer(...).events`` (issue 22,
frame path): ``dask.sizeof`` of a partition is its arrays' bytes (``dfanalyzer._loaded.held``,
cheap), the true size that the worker's memory accounting and spilling rely on; the partitions
stay plain ``pandas.DataFrame``s; every other DataFrame, users' own included, keeps Dask's own
estimate. Truth: pandas' ``memory_usage(deep=True)`` (every array's bytes, the strings' too)."""

from __future__ import annotations

import gc
import os
import sys

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))
import gen_traces  # noqa: E402

from dfanalyzer import DFAnalyzer, analyzer, reader  # noqa: E402
from dfanalyzer import _loaded as L  # noqa: E402


def _true_bytes(df: pd.DataFrame) -> int:
    return int(df.memory_usage(index=True, deep=True).sum())


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    out = tmp_path_factory.mktemp("held")
    # 2 files x 0.7 MB of text: 7 batches of 0.1 MiB each, args columns of every kind
    return gen_traces.generate(str(out), 20_000, 2, member_bytes=16 << 10, jobs=1)


def _dask_own():
    """Dask's own ``sizeof`` of a DataFrame (the function the wrapper calls for other frames)."""
    from dask.sizeof import sizeof

    L.install_frame_sizeof()
    return sizeof.dispatch(pd.DataFrame)._dfanalyzer_dask_sizeof


def test_a_held_frame_is_measured_by_its_bytes_and_others_as_dask_does(traces, tmp_path):
    from dask.sizeof import sizeof

    p = traces[0]
    last = len(reader.build_index(p, str(tmp_path))["checkpoints"]) - 1
    ev = analyzer._load_frame_task((p, 0, last), "t", 0, str(tmp_path))
    assert type(ev) is pd.DataFrame and len(ev) > 1000 and not ev.attrs
    assert L.is_held(ev)
    true = _true_bytes(ev)
    assert abs(sizeof(ev) - true) <= 0.02 * true, (sizeof(ev), true)
    own = _dask_own()
    # a copy is the user's frame, not ours: Dask's estimate (1,200 B per run of one dtype, not
    # frame_nbytes' 1,000 for the frame): the same function, the same number
    mine = ev.copy()
    assert not L.is_held(mine)
    assert sizeof(mine) == own(mine) != sizeof(ev)
    # frames with Python objects: Dask samples them (seeded here); the wrapper gives its value
    obj = pd.DataFrame({"a": pd.Series([f"x{i}" * (i % 7) for i in range(500)], dtype=object), "b": np.arange(500)})
    assert obj["a"].dtype == object
    np.random.seed(5)
    want = own(obj)
    np.random.seed(5)
    assert sizeof(obj) == want
    # a held frame that holds Python objects is measured by Dask's estimate, as a user's
    held_obj = L.held(obj.copy())
    np.random.seed(5)
    assert sizeof(held_obj) == want
    # the mark goes with the frame: no entry is left, a new frame at the same address is not held
    key = id(ev)
    del ev
    gc.collect()
    assert key not in L._HELD
    del held_obj
    gc.collect()
    assert not any(r() is None for r in L._HELD.values())


def _on_worker(keys, dask_worker):
    """Per held key on this worker: (plain DataFrame, marked held, true bytes, the spill buffer's
    weight, Dask's own estimate); and a user's frame made here: (sizeof, Dask's own estimate)."""
    from dask.sizeof import sizeof

    from dfanalyzer import _loaded

    own = sizeof.dispatch(pd.DataFrame)._dfanalyzer_dask_sizeof
    out = {}
    for k in keys:
        if k in dask_worker.data:
            df = dask_worker.data[k]
            out[k] = (
                type(df) is pd.DataFrame,
                _loaded.is_held(df),
                int(df.memory_usage(index=True, deep=True).sum()),
                dask_worker.data.fast.weights[k],
                own(df),
            )
    user = pd.DataFrame({"x": np.arange(10_000), "y": np.arange(10_000) * 0.5})
    out["user"] = (sizeof(user), own(user))
    return out


def _check_sizes(c, parts) -> None:
    """Every held partition: a plain DataFrame on one worker, marked, and the scheduler's
    ``nbytes`` and the spill buffer's weight are its true size (within 2 %)."""
    keys = [f.key for f in parts]
    got = {}
    for per in c.run(_on_worker, keys).values():
        user = per.pop("user")
        assert user[0] == user[1]  # a user's frame: Dask's own figure
        got.update(per)
    assert sorted(got, key=keys.index) == keys  # every partition, each on one worker
    nbytes = c.run_on_scheduler(lambda keys, dask_scheduler: [dask_scheduler.tasks[k].nbytes for k in keys], keys)
    for k, n in zip(keys, nbytes):
        plain, held, true, weight, own = got[k]
        assert plain and held, k
        assert abs(n - true) <= 0.02 * true, (k, n, true)  # the scheduler's nbytes
        assert weight == n  # the spill buffer's weight: the same figure
        assert own > true  # (Dask's own estimate adds 1,200 B per run of columns of one dtype)


def test_partitions_on_the_workers_report_their_true_size(traces):
    from distributed import Client, LocalCluster, futures_of, wait

    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40) as cl,
        Client(cl, set_as_default=False) as c,
    ):
        # batches that are the partitions themselves, then partitions sliced by _assemble
        for kw, assembled in ((dict(batch_size_mb=0.1), False), (dict(batch_size_mb=0.2, partition_size_mb=0.2), True)):
            with DFAnalyzer(traces, client=c, small_file_mb=0, **kw) as an:
                parts = an.partitions()
                assert len(parts) >= 8
                # indexed by one task per worker thread: the same results, in file order, as one
                # _index_task per file gives
                assert an._indexes == [analyzer._index_task(f, None, False) for f in an.files]
                # each batch its partition (the load tasks' results), or sliced by _assemble tasks
                assert (an.stats["partitions"] > an.stats["batches"]) == assembled
                _check_sizes(c, parts)
                ev = c.compute(an.events).result()
                assert type(ev) is pd.DataFrame and len(ev) == an.stats["events"] == 20_000
                # a user's computation on the partitions: its frames are new, Dask measures them
                doubled = c.persist(an.events.map_partitions(lambda df: df.assign(dur=df["dur"] * 2)))
                with c.as_current():
                    wait(doubled)
                dkeys = [f.key for f in futures_of(doubled)]
                assert len(dkeys) == len(parts)
                got = {}
                for per in c.run(_on_worker, dkeys).values():
                    per.pop("user")
                    got.update(per)
                assert sorted(got, key=dkeys.index) == dkeys
                for plain, held, _true, weight, own in got.values():
                    assert plain and not held and weight == own  # Dask's own figure, as for any frame
                out = c.compute(doubled).result()
                assert type(out) is pd.DataFrame and (out["dur"].to_numpy() == ev["dur"].to_numpy() * 2).all()
                del doubled


def test_index_groups_balance_files_by_size():
    plan = analyzer.plan_index_groups
    assert plan([5] * 16, 2) == [list(range(0, 16, 2)), list(range(1, 16, 2))]
    assert plan([1, 1, 10], 2) == [[2], [0, 1]]  # the big file alone
    assert plan([3, 3, 3], 8) == [[0], [1], [2]]  # never an empty group
    assert plan([], 4) == []
    assert plan([7, 2, -1], 1) == [[0, 1, 2]]  # (a file that cannot be stat'ed: size -1)
    for n in (1, 2, 3, 5):
        sizes = [(k * 7919) % 1000 for k in range(40)]
        groups = plan(sizes, n)
        assert sorted(k for g in groups for k in g) == list(range(40)) and len(groups) == n
        assert all(g == sorted(g) for g in groups)
        loads = [sum(sizes[k] for k in g) for g in groups]
        assert max(loads) - min(loads) <= max(sizes)  # greedy: within one file of each other
