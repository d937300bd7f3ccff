"""Views, layers, comparison and filter push-down: exact facts against pandas brute force."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import DATA, ROOT, pythonpath_env
from test_analyzer_summary import naive_union_measure, synthetic_events

from dfanalyzer import views as V
from dfanalyzer.summary import _human_bytes

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import gen_traces  # noqa: E402

IO = ("POSIX", "STDIO")


def frame(rows):
    """Events frame from dicts (name, cat, pid, ts, dur, optional size/offset/fname/tid/host/args)."""
    df = pd.DataFrame(rows)
    n = len(df)
    out = pd.DataFrame(
        {
            "name": pd.Categorical(df["name"]),
            "cat": pd.Categorical(df["cat"]),
            "ph": pd.Categorical(df.get("ph", pd.Series(["X"] * n))),
            "hostname": pd.Categorical(df.get("hostname", pd.Series(["h"] * n))),
            "fname": pd.Categorical(df.get("fname", pd.Series([None] * n, dtype=object))),
            "pid": df["pid"].astype(np.int64),
            "tid": df.get("tid", df["pid"]).astype(np.int64),
            "ts": df["ts"].astype(np.int64),
            "dur": df["dur"].astype(np.int64),
            "te": (df["ts"] + df["dur"]).astype(np.int64),
            "size": pd.array(df.get("size", pd.Series([None] * n)), dtype="Int64"),
            "offset": pd.array(df.get("offset", pd.Series([None] * n)), dtype="Int64"),
        }
    )
    for extra in ("epoch", "step"):
        if extra in df:
            out[extra] = pd.array(df[extra], dtype="Int64")
    return out


def dask_parts(df, n, client):
    import dask.dataframe as dd

    return client.persist(dd.from_pandas(df, npartitions=n, sort=False))


# ------------------------------------------------------------------------------- functions
def test_function_metrics_exact_and_distributed(dask_client):
    df = synthetic_events(4000, seed=3)
    ev = df[(df["ph"].astype(object) == "X") & df["cat"].astype(object).isin(IO)]
    local = V.function_metrics(df)
    dist = V.function_metrics(dask_parts(df, 5, dask_client), client=dask_client)
    pd.testing.assert_frame_equal(local, dist.loc[local.index])
    total = int(ev["dur"].sum())
    for name, g in ev.groupby(ev["name"].astype(object)):
        r = local.loc[name]
        d = g["dur"].to_numpy()
        assert r["count"] == len(g)
        assert r["bytes"] == int(g["size"].sum())
        assert r["time_s"] == int(d.sum()) * 1e-6
        assert [r["p50_us"], r["p90_us"], r["p99_us"]] == list(np.percentile(d, [50, 90, 99]))
        assert r["max_us"] == d.max()
        busy = naive_union_measure(list(zip(g["ts"], g["te"])))
        assert r["busy_s"] == busy * 1e-6
        assert r["time_share"] == int(d.sum()) / total
        assert r["bandwidth_mib_s"] == pytest.approx(int(g["size"].sum()) / 2**20 / (busy * 1e-6), rel=1e-12)


def test_human_bytes_binary_units():
    assert [_human_bytes(x) for x in (512, 4096, 1536 * 1024, 3 * 2**30)] == ["512B", "4.0KiB", "1.5MiB", "3.0GiB"]


# ------------------------------------------------------------------------------- files
def test_file_view_pattern_sizes_processes(dask_client):
    rows = []
    # /a: pid 1 reads 0-100, 100-200 (consecutive), 300-400 (forward gap), 50-60 (back: random)
    for i, (off, sz) in enumerate([(0, 100), (100, 100), (300, 100), (50, 10)]):
        rows.append(dict(name="pread", cat="POSIX", pid=1, ts=1000 + 10 * i, dur=5, size=sz, offset=off, fname="/a"))
    # /a: pid 2 writes 2 MiB once; /b: one 50-byte fread without offset
    rows.append(dict(name="pwrite", cat="POSIX", pid=2, ts=1005, dur=20, size=2 << 20, offset=0, fname="/a"))
    rows.append(dict(name="fread", cat="STDIO", pid=2, ts=1100, dur=1, size=50, fname="/b"))
    rows.append(dict(name="compute", cat="compute", pid=1, ts=900, dur=50))
    df = frame(rows)
    local = V.file_view(df)
    # partitions cut inside pid 1's sequence: the step across the cut is still counted
    dist = V.file_view(dask_parts(df, 3, dask_client), client=dask_client)
    pd.testing.assert_frame_equal(local, dist.loc[local.index])
    a, b = local.loc["/a"], local.loc["/b"]
    assert (a["ops"], a["bytes"], a["processes"]) == (5, 310 + (2 << 20), 2)
    assert (a["read_bytes"], a["write_bytes"]) == (310, 2 << 20)
    assert (a["consecutive"], a["sequential"], a["random"], a["pattern"]) == (1, 2, 1, "sequential")
    assert (a["size_0_100"], a["size_100_1K"], a["size_1M_4M"]) == (1, 3, 1)
    assert a["first_s"] == pytest.approx((1000 - 900) * 1e-6) and a["last_s"] == pytest.approx((1035 - 900) * 1e-6)
    assert a["busy_s"] == pytest.approx(
        naive_union_measure([(1000, 1005), (1010, 1015), (1020, 1025), (1030, 1035), (1005, 1025)]) * 1e-6
    )
    assert (b["ops"], b["pattern"], b["size_0_100"]) == (1, "-", 1)


# ------------------------------------------------------------------------------- processes
def test_process_view_roles_and_imbalance():
    rows = [
        dict(name="read", cat="POSIX", pid=10, ts=0, dur=100, size=10),
        dict(name="compute", cat="compute", pid=10, ts=50, dur=100),
        dict(name="read", cat="POSIX", pid=11, ts=0, dur=30, size=5),
        dict(name="read", cat="POSIX", pid=12, ts=0, dur=10, size=5),
        dict(name="getitem", cat="reader", pid=12, ts=0, dur=40),
    ]
    df = V.process_view(frame(rows), parents={10: 1, 11: 10, 12: 10})
    r = df.loc[("h", 10)]
    assert (r["io_time_s"], r["compute_time_s"], r["unoverlapped_io_s"]) == (100 * 1e-6, 100 * 1e-6, 50 * 1e-6)
    assert (r["lifetime_s"], r["bytes"], r["role"], r["parent"]) == (150 * 1e-6, 10, "main", 1)
    assert list(df.loc[[("h", 11), ("h", 12)], "role"]) == ["worker", "worker"]
    assert df.loc[("h", 12), "app_io_time_s"] == 40 * 1e-6
    assert df.attrs["slowest_process"] == ("h", 10)
    assert df.attrs["io_imbalance"] == pytest.approx(100 / (140 / 3))
    assert df.attrs["workers"] == 2 and df.attrs["worker_io_imbalance"] == pytest.approx(30 / 20)


# ------------------------------------------------------------------------------- time windows
def test_time_view_splits_durations(dask_client):
    rows = [
        dict(name="read", cat="POSIX", pid=1, ts=0, dur=250, size=1000),  # windows 0,1,2: 100,100,50
        dict(name="compute", cat="compute", pid=1, ts=150, dur=200),  # 150-350
        dict(name="write", cat="POSIX", pid=2, ts=380, dur=0, size=7),  # zero-length: window 3
        dict(name="read", cat="POSIX", pid=2, ts=200, dur=100, size=None),
    ]  # 200-300
    df = frame(rows)
    tv = V.time_view(df, window_us=100)
    assert list(tv["io_time_s"] * 1e6) == pytest.approx([100, 100, 150, 0])
    assert list(tv["bytes"]) == pytest.approx([400, 400, 200, 7])
    assert list(tv["io_busy_s"] * 1e6) == pytest.approx([100, 100, 100, 0])
    assert list(tv["overlap_s"] * 1e6) == pytest.approx([0, 50, 100, 0])
    assert list(tv["concurrency"]) == pytest.approx([1.0, 1.0, 1.5, 0.0])
    assert list(tv["ops"]) == [1, 0, 1, 1]
    pd.testing.assert_frame_equal(tv, V.time_view(dask_parts(df, 2, dask_client), window_us=100, client=dask_client))
    hm = V.heatmap(df, window_us=100)
    assert hm.loc[("h", 1)].tolist() == pytest.approx([100 * 1e-6, 100 * 1e-6, 50 * 1e-6, 0])
    assert hm.loc[("h", 2)].tolist() == pytest.approx([0, 0, 100 * 1e-6, 0])
    assert float(hm.to_numpy().sum()) == pytest.approx(float(tv["io_time_s"].sum()))


def test_heatmap_png(tmp_path):
    from dfanalyzer.plots import render_heatmap

    df = frame([dict(name="read", cat="POSIX", pid=p, ts=10 * p, dur=50, size=1) for p in range(1, 5)])
    path = render_heatmap(V.heatmap(df, bins=4), str(tmp_path / "heat.png"))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------------------- tags, epochs, layers
def _ai_run():
    """Two epochs of the ai API's events: epoch.block spans, train, fetch waits, compute, POSIX reads."""
    rows = []
    for e, t0 in ((1, 0), (2, 1000)):
        rows.append(dict(name="epoch.block", cat="pipeline", pid=1, ts=t0, dur=900, epoch=e))
        rows.append(dict(name="train", cat="pipeline", pid=1, ts=t0 + 10, dur=800, epoch=e))
        for s in range(2):
            base = t0 + 20 + 300 * s
            rows.append(dict(name="fetch.iter", cat="dataloader", pid=1, ts=base, dur=100 * e, epoch=e, step=s))
            rows.append(dict(name="compute", cat="compute", pid=1, ts=base + 100 * e, dur=100, epoch=e, step=s))
            rows.append(dict(name="read", cat="POSIX", pid=2, ts=base + 10, dur=50, size=64))
    return frame(rows)


def test_epoch_view_ai_events():
    ep = V.epoch_view(_ai_run())
    assert list(ep.index) == [1, 2] and set(ep["source"]) == {"epoch"}
    assert list(ep["duration_s"] * 1e6) == pytest.approx([900, 900])
    assert list(ep["train_s"] * 1e6) == pytest.approx([800, 800])
    assert list(ep["fetch_s"] * 1e6) == pytest.approx([200, 400])
    assert list(ep["compute_s"] * 1e6) == pytest.approx([200, 200])
    assert list(ep["io_s"] * 1e6) == pytest.approx([100, 100])
    assert list(ep["other_s"] * 1e6) == pytest.approx([500, 300])


def test_tag_view_counts_io_inside_the_tagged_span():
    tv = V.tag_view(_ai_run(), "epoch", compute_cats=("compute",))
    assert list(tv.index) == [1, 2]
    assert list(tv["events"]) == [6, 6]
    assert list(tv["span_s"] * 1e6) == pytest.approx([900, 900])
    assert list(tv["io_time_s"] * 1e6) == pytest.approx([100, 100])  # untagged POSIX reads inside the epochs
    assert list(tv["compute_time_s"] * 1e6) == pytest.approx([200, 200])
    st = V.tag_view(_ai_run(), "step")
    assert list(st["events"]) == [4, 4]
    assert V.tag_view(_ai_run(), "no_such_key").empty


def test_layer_view_unoverlapped_and_mapping():
    rows = [
        dict(name="getitem", cat="reader", pid=1, ts=0, dur=100),
        dict(name="read", cat="POSIX", pid=1, ts=10, dur=20),
        dict(name="read", cat="POSIX", pid=1, ts=50, dur=10),
        dict(name="fread", cat="STDIO", pid=1, ts=200, dur=10),
        dict(name="start", cat="dftracer", pid=1, ts=0, dur=0),
    ]
    lv = V.layer_view(frame(rows))
    assert set(lv.index) == {"app_io", "POSIX", "STDIO"}
    assert lv.loc["app_io", "time_s"] == 100 * 1e-6 and lv.loc["POSIX", "time_s"] == 30 * 1e-6
    assert lv.loc["app_io", "unoverlapped_s"] == 70 * 1e-6 and lv.loc["POSIX", "unoverlapped_s"] == 0
    assert lv.attrs["total_s"] == 110 * 1e-6
    assert lv.loc["app_io", "time_s"] / lv.loc["POSIX", "time_s"] - 1 == pytest.approx(100 / 30 - 1)
    mapped = V.layer_view(frame(rows), {"POSIX": "system", "STDIO": "system", "reader": None})
    assert list(mapped.index) == ["system"] and mapped.loc["system", "time_s"] == 40 * 1e-6


# ------------------------------------------------------------------------------- compare
def test_compare_signed_deltas_and_threshold():
    a = {
        "summary": {"events": 10, "time": {"io": 2.0}},
        "functions": V.function_metrics(frame([dict(name="read", cat="POSIX", pid=1, ts=0, dur=100, size=1 << 20)])),
    }
    b = {
        "summary": {"events": 12, "time": {"io": 2.5}},
        "functions": V.function_metrics(frame([dict(name="read", cat="POSIX", pid=1, ts=0, dur=100, size=1 << 19)])),
    }
    c = V.compare(a, b, threshold=0.2)
    assert c.loc["events", "delta"] == 2 and c.loc["events", "ratio"] == 1.2 and not c.loc["events", "regression"]
    assert c.loc["time.io", "delta"] == 0.5 and c.loc["time.io", "regression"]  # +25 % > 20 %
    bw = c.loc["function.read.bandwidth_mib_s"]
    assert bw["ratio"] == 0.5 and bw["direction"] == -1 and bw["regression"]  # bandwidth halved
    assert not V.compare(a, b, threshold=0.3).loc["time.io", "regression"]
    assert not V.compare(a, b)["regression"].any()


# ------------------------------------------------------------------------------- CM1 and the analyzer
CM1 = os.path.join(DATA, "dftracer-v1.0.5-cm1")


@pytest.fixture(scope="module")
def cm1_small(tmp_path_factory, dask_client):
    from dfanalyzer import DFAnalyzer

    d = tmp_path_factory.mktemp("cm1views")
    for f in sorted(os.listdir(CM1))[:6]:
        shutil.copy(os.path.join(CM1, f), d)
    an = DFAnalyzer(str(d), client=dask_client)
    yield an, an.events.compute(scheduler=dask_client), d
    an.close()


def test_cm1_views_match_pandas(cm1_small):
    an, ev, _ = cm1_small
    ev = ev[(ev["ph"].astype(object) == "X") & (ev["cat"].astype(object) != "dftracer")]
    io = ev[ev["cat"].astype(object).isin(IO)]
    fm = an.functions()
    for name, g in io.groupby(io["name"].astype(object)):
        assert fm.loc[name, "count"] == len(g)
        assert fm.loc[name, "p99_us"] == np.percentile(g["dur"].to_numpy(), 99)
        assert fm.loc[name, "time_s"] == int(g["dur"].sum()) * 1e-6
    files = an.files()  # the list of paths is callable: the per file view
    named = io[io["fname"].notna()]
    truth = named.groupby(named["fname"].astype(object)).agg(ops=("ts", "size"), bytes=("size", "sum"))
    procs = named.groupby(named["fname"].astype(object))["pid"].nunique()
    assert len(files) == len(truth)
    assert (files.loc[truth.index, "ops"].to_numpy() == truth["ops"].to_numpy()).all()
    assert (files.loc[truth.index, "bytes"].to_numpy() == truth["bytes"].to_numpy()).all()
    assert (files.loc[procs.index, "processes"].to_numpy() == procs.to_numpy()).all()
    pv = an.processes()
    for pid, g in io.groupby("pid"):
        row = pv.xs(pid, level="pid").iloc[0]
        assert row["io_time_s"] == naive_union_measure(list(zip(g["ts"], g["te"]))) * 1e-6
        assert row["events"] == int((ev["pid"] == pid).sum())
    assert pv["parent"].notna().all()  # DFTracer v1 'start' records carry ppid
    s = an.summary(show=False)
    lv = an.layers()
    assert lv.attrs["total_s"] == pytest.approx(s.time["io"])
    tv = an.time_windows(window="1s")
    assert tv["io_time_s"].sum() == pytest.approx(int(io["dur"].sum()) * 1e-6)
    assert tv["bytes"].sum() == pytest.approx(int(io["size"].sum()))
    assert tv["io_busy_s"].sum() == pytest.approx(s.time["io"])


def test_filter_query_exact_on_cm1(cm1_small, dask_client):
    from dfanalyzer import DFAnalyzer

    an, ev, d = cm1_small
    t_mid = int(ev["ts"].median())
    q = f"cat == 'STDIO' and ts >= {t_mid}"
    f = DFAnalyzer(str(d), client=dask_client, query=q)
    got = f.events.compute(scheduler=dask_client)
    assert len(got) == len(ev.query(q)) == f.stats["events"] > 0
    assert f.functions()["count"].sum() == len(ev.query(q))
    with pytest.raises(ValueError):
        DFAnalyzer(str(d), client=dask_client, query="cat ==")


# ------------------------------------------------------------------------------- push-down
def test_pushdown_predicates_parse():
    from dfanalyzer.filters import Predicate, pushdown_predicates

    p = pushdown_predicates("cat == 'POSIX' and 100 <= ts < 200 and (name in ['read', 'write']) and dur > 5")
    assert p == [
        Predicate("cat", "in", ("POSIX",)),
        Predicate("ts", ">=", 100),
        Predicate("ts", "<", 200),
        Predicate("name", "in", ("read", "write")),
    ]
    assert pushdown_predicates("cat == 'POSIX' or ts > 5") == []


def test_pushdown_skips_checkpoints_exactly(tmp_path, dask_client):
    from dfanalyzer import DFAnalyzer, reader

    paths = gen_traces.generate(str(tmp_path), 6000, 2, fmt="member", member_bytes=32 << 10)
    stats = reader.checkpoint_stats(paths[0])
    assert len(stats) > 4 and all(s["events"] > 0 for s in stats)
    full = DFAnalyzer(paths, client=dask_client).events.compute(scheduler=dask_client)
    first = DFAnalyzer(paths[0], client=dask_client, args=()).events.compute(scheduler=dask_client)
    assert stats[0]["events"] + stats[1]["events"] <= len(first)
    assert stats[0]["min_ts"] == first["ts"].iloc[: stats[0]["events"]].min()
    assert set(stats[0]["cats"]) == set(first["cat"].iloc[: stats[0]["events"]].astype(str))
    cut = int(full["ts"].quantile(0.9))
    for q in (f"ts >= {cut}", f"ts >= {cut} and cat == 'POSIX'", "name == 'no_such_event'"):
        # small_file_mb=0: these files are small; grouped small files are read whole (no push-down)
        an = DFAnalyzer(paths, client=dask_client, query=q, small_file_mb=0)
        want = full.query(q)
        assert an.stats["events"] == len(want)
        assert an.stats["skipped_checkpoints"] > 0
        grouped = DFAnalyzer(paths, client=dask_client, query=q)
        assert grouped.stats["events"] == len(want) and grouped.stats["small_files"] == 2
        got = an.events.compute(scheduler=dask_client)
        assert sorted(got["ts"]) == sorted(want["ts"])


# ------------------------------------------------------------------------------- CLI
def _cli(args, client, capsys):
    """Run the CLI in this process against the test cluster; returns (status, stdout, stderr)."""
    from dfanalyzer import cli

    capsys.readouterr()
    status = cli.main([*args, "--scheduler", client.scheduler.address])
    out = capsys.readouterr()
    return status, out.out, out.err


def test_cli_views_export_and_compare(tmp_path, cm1_small, dask_client, capsys):
    an, ev, d = cm1_small
    st, out, err = _cli(["functions", str(d), "--format", "csv", "--top", "3", "--sort", "count"], dask_client, capsys)
    assert st == 0, err
    got = pd.read_csv(pd.io.common.StringIO(out), index_col="name")
    want = an.functions().sort_values("count", ascending=False).head(3)
    assert list(got.index) == list(want.index) and list(got["count"]) == list(want["count"])
    pq = tmp_path / "files.parquet"
    st, out, err = _cli(
        ["files", str(d), "--format", "parquet", "-o", str(pq), "--filter", "cat == 'POSIX'"], dask_client, capsys
    )
    assert st == 0, err
    io = ev[ev["cat"].astype(object) == "POSIX"]
    assert pd.read_parquet(pq)["ops"].sum() == int(io["fname"].notna().sum())
    st, out, err = _cli(
        ["timeline", str(d), "--window", "10s", "--heatmap", str(tmp_path / "h.png"), "--top", "2"], dask_client, capsys
    )
    assert st == 0 and os.path.getsize(tmp_path / "h.png") > 0 and "io_time_s" in out, err
    # compare: the run against itself, then against a copy with one extra 50 s write
    other = tmp_path / "other"
    other.mkdir()
    for f in sorted(os.listdir(d)):
        if f.endswith(".pfw.gz"):
            shutil.copy(os.path.join(d, f), other)
    slow = {
        "id": 1,
        "name": "write",
        "cat": "POSIX",
        "pid": 1,
        "tid": 1,
        "ts": int(ev["ts"].min()),
        "dur": 50_000_000,
        "ph": "X",
        "args": {"hostname": "x", "fname": "/slow", "ret": 1},
    }
    with open(other / "extra.pfw", "w") as f:
        f.write("[\n" + json.dumps(slow) + "\n")
    st, out, err = _cli(["compare", str(d), str(d), "--threshold", "0.1"], dask_client, capsys)
    assert st == 0, err
    st, out, err = _cli(["compare", str(d), str(other), "--threshold", "0.1", "--format", "json"], dask_client, capsys)
    assert st == 3, err
    rows = {x["metric"]: x for x in json.loads(out)}
    assert rows["time.io"]["regression"] and rows["time.io"]["delta"] > 0
    assert rows["events"]["delta"] == 1 and rows["function.write.count"]["delta"] == 1
    assert "regression: time.io" in err


def test_cli_help_lists_every_command():
    r = subprocess.run(
        [sys.executable, "-m", "dfanalyzer.cli", "--help"],
        env=pythonpath_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0
    for cmd in ("summary", "functions", "files", "processes", "timeline", "tags", "epochs", "layers", "compare"):
        assert f"dfanalyzer {cmd} " in r.stdout


def test_layer_view_spanning_regions_are_never_their_layers_time():
    # the README's ai example: fetch.block (cat dataloader) spans the whole loop body, the reads
    # and the compute; only the fetch.iter waits are application I/O
    rows = [
        dict(name="fetch.block", cat="dataloader", pid=1, ts=0, dur=1000),
        dict(name="fetch.iter", cat="dataloader", pid=1, ts=0, dur=10),
        dict(name="fetch.iter", cat="dataloader", pid=1, ts=500, dur=10),
        dict(name="compute", cat="compute", pid=1, ts=10, dur=490),
        dict(name="epoch", cat="pipeline", pid=1, ts=0, dur=1000),
    ]
    lv = V.layer_view(frame(rows))
    assert lv.loc["app_io", "time_s"] == 20 * 1e-6 and lv.loc["app_io", "events"] == 2
    assert lv.loc["pipeline", "events"] == 2 and lv.loc["pipeline", "categories"] == "dataloader,pipeline"
    assert lv.loc["compute", "time_s"] == 490 * 1e-6


def test_views_count_calls_of_aggregated_records_as_the_summary():
    # one aggregated record of 5 reads of 100 B (500 B, 50 µs in all) and two complete reads
    rows = [
        dict(name="read", cat="POSIX", pid=1, ts=0, dur=50, size=500, ph="A", fname="/f"),
        dict(name="read", cat="POSIX", pid=1, ts=100, dur=10, size=100, offset=0, fname="/f", ph="X"),
        dict(name="read", cat="POSIX", pid=2, ts=200, dur=30, size=300, offset=0, fname="/f", ph="X"),
        dict(name="epoch", cat="pipeline", pid=1, ts=0, dur=300, ph="M"),  # not an event
    ]
    df = frame(rows)
    df["dft_cnt"] = pd.array([5, None, None, None], dtype="Int64")
    from dfanalyzer import summary as S

    s = S.finish(S.partition_partial(df, ("POSIX",), (), ()), [])
    assert s.events == 7 and s.functions["read"]["count"] == 7
    fm = V.function_metrics(df)
    assert fm.loc["read", "count"] == 7 and fm.loc["read", "bytes"] == 900
    assert fm.loc["read", "p50_us"] == 10  # five calls of 10 µs, one of 10, one of 30
    fv = V.file_view(df)
    assert fv.loc["/f", "ops"] == 7 and fv.loc["/f", "size_100_1K"] == 7 and fv.loc["/f", "size_0_100"] == 0
    pv = V.process_view(df)
    assert pv.loc[("h", 1), "events"] == 6 and pv.loc[("h", 2), "events"] == 1
    assert V.layer_view(df).loc["POSIX", "events"] == 7
