"""DFAnalyzer end to end on the real DFTracer fixtures (CM1 v1.0.5 and legacy) with the C++ reader."""

import gzip
import json
import os
import shutil
import subprocess
import sys
from collections import Counter

import pytest
from conftest import DATA, pythonpath_env
from test_analyzer_summary import brute_force

from dfanalyzer import DFAnalyzer

CM1 = os.path.join(DATA, "dftracer-v1.0.5-cm1")
LEGACY = os.path.join(DATA, "dftracer-legacy")


def oracle(paths):
    """Independent json.loads count of the facts the summary must report."""
    # Own reader on purpose: the fixtures are upstream DFTracer's traces (trailing commas, no `[`).
    events, procs, funcs = 0, set(), Counter()
    for p in paths:
        opener = gzip.open if p.endswith(".gz") else open
        with opener(p, "rt", encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.strip().rstrip(",")
                if not line.startswith("{"):
                    continue
                r = json.loads(line)
                if r.get("ph") != "X" or r.get("cat") == "dftracer":
                    continue
                events += 1
                procs.add(int(r["pid"]))
                if r["cat"] in ("POSIX", "STDIO"):
                    funcs[r["name"]] += 1
    return events, procs, funcs


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """Copies of the fixtures (indexes are written next to them, never into the repository)."""
    d = tmp_path_factory.mktemp("fixtures")
    shutil.copytree(CM1, d / "cm1")
    shutil.copytree(LEGACY, d / "legacy")
    return d


@pytest.fixture(scope="module")
def cm1(traces, dask_client):
    return DFAnalyzer(str(traces / "cm1" / "*.pfw.gz"), client=dask_client)


def test_cm1_exact_facts(cm1, traces, dask_client):
    paths = sorted(str(p) for p in (traces / "cm1").glob("*.pfw.gz"))
    assert cm1.stats["files"] == 48 and cm1.files == paths
    s = cm1.summary(show=False).to_dict()
    events, procs, funcs = oracle(paths)
    assert s["events"] == events
    assert s["processes"] == len(procs) == 48
    assert {n: f["count"] for n, f in s["functions"].items()} == dict(funcs)
    assert s["nodes"] >= 1 and s["files"] > 0
    assert cm1.stats["skipped_lines"] == 0 and cm1.stats["lost_bytes"] == 0
    # the distributed summary equals a brute-force pandas computation on all events
    assert s == brute_force(cm1.events.compute(scheduler=dask_client))
    md = cm1.metadata
    assert len(md) > 0


def test_cm1_groupby_and_columns(cm1, dask_client):
    ev = cm1.events
    assert list(ev.columns[:12]) == [
        "name",
        "cat",
        "ph",
        "hostname",
        "fname",
        "pid",
        "tid",
        "ts",
        "dur",
        "te",
        "size",
        "offset",
    ]
    full = ev.compute(scheduler=dask_client)
    assert (full["te"] == full["ts"] + full["dur"]).all()
    got = ev.groupby("name", observed=True)["size"].sum().compute(scheduler=dask_client)
    assert got.to_dict() == full.groupby("name", observed=True)["size"].sum().to_dict()
    assert int(full.loc[full["name"] == "fread", "size"].sum()) > 0


def test_cm1_args_projection(cm1, traces, dask_client):
    """args=() keeps the 12 core columns, args=[...] the named keys; the summary is unchanged."""
    core = ["name", "cat", "ph", "hostname", "fname", "pid", "tid", "ts", "dur", "te", "size", "offset"]
    extra = [c for c in cm1.events.columns if c not in core]
    assert extra  # the hashed CM1 traces have args keys beyond the core columns
    pat = str(traces / "cm1" / "*.pfw.gz")
    bare = DFAnalyzer(pat, client=dask_client, args=())
    assert list(bare.events.columns) == core
    assert bare.summary(show=False).to_dict() == cm1.summary(show=False).to_dict()
    one = DFAnalyzer(pat, client=dask_client, args=[extra[0], "no-such-key"])
    assert list(one.events.columns) == core + [extra[0]]
    want = cm1.events[extra[0]].compute(scheduler=dask_client)
    got = one.events[extra[0]].compute(scheduler=dask_client)
    assert got.dtype == want.dtype and got.isna().sum() == want.isna().sum()
    assert got.dropna().astype(str).tolist() == want.dropna().astype(str).tolist()
    bare.close()
    one.close()


def test_mixed_versions_and_corrupt_file(traces, dask_client, tmp_path):
    bad = tmp_path / "broken.pfw.gz"
    bad.write_bytes(b"this is not gzip at all\n" * 10)
    pats = [str(traces / "cm1" / "cm1-DEFAULT-353778*.pfw.gz"), str(traces / "legacy" / "test.pfw.gz"), str(bad)]
    an = DFAnalyzer(pats, client=dask_client)
    files = an.files
    assert len(files) == 10 + 1 + 1  # 3537780..3537789, legacy, broken
    good = [f for f in files if f != str(bad)]
    events, procs, funcs = oracle(good)
    s = an.summary(show=False)
    d = s.to_dict()
    assert d["events"] == events and d["processes"] == len(procs)
    assert {n: f["count"] for n, f in d["functions"].items()} == dict(funcs)
    assert d == brute_force(an.events.compute(scheduler=dask_client))
    per = an.stats["per_file"].set_index("path")
    assert per.loc[str(bad), "events"] == 0
    assert per.loc[str(bad), "lost_bytes"] + per.loc[str(bad), "skipped_lines"] > 0
    assert [x["path"] for x in s.skipped] == [str(bad)]
    assert str(bad) in str(s)


def test_legacy_exact(traces, dask_client):
    an = DFAnalyzer(str(traces / "legacy" / "test.pfw"), client=dask_client)
    d = an.summary(show=False).to_dict()
    events, procs, funcs = oracle([str(traces / "legacy" / "test.pfw")])
    assert d["events"] == events == 1012 and d["nodes"] == 1 and d["processes"] == 1
    assert {n: f["count"] for n, f in d["functions"].items()} == dict(funcs)
    assert d == brute_force(an.events.compute(scheduler=dask_client))
    assert d["functions"]["write"]["size"]["max"] == 3276800.0


def _run_cli(args, cwd):
    env = pythonpath_env()
    return subprocess.run(
        [sys.executable, "-m", "dfanalyzer.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_cli_json_and_plot(traces, cm1, tmp_path):
    r = _run_cli(
        ["summary", str(traces / "cm1" / "*.pfw.gz"), "--json", "--workers", "2", "--plot", str(tmp_path / "plots")],
        cwd=str(tmp_path),
    )
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got == cm1.summary(show=False).to_dict()
    for name in ("io_bandwidth_time.png", "transfer_size.png"):
        data = (tmp_path / "plots" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_cli_local_cluster_gives_the_same_summary(traces, cm1, tmp_path):
    """``--local-cluster`` runs the batches on the embedded Dask cluster (worker processes) instead
    of threads; the JSON is the same, number for number."""
    r = _run_cli(
        ["summary", str(traces / "cm1" / "*.pfw.gz"), "--json", "--workers", "2", "--local-cluster"],
        cwd=str(tmp_path),
    )
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got == cm1.summary(show=False).to_dict()
    assert got["events"] == 283945 and got["processes"] == 48


def test_cli_panel(traces, tmp_path):
    r = _run_cli(["summary", str(traces / "legacy" / "test.pfw.gz"), "--workers", "1"], cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "Scheduler Allocation Details" in r.stdout and "Metrics by function" in r.stdout
    assert "1,012" in r.stdout or "1.0K" in r.stdout


def test_cli_progress_bar_on_a_terminal(traces, tmp_path):
    import pty

    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dfanalyzer.cli",
                "summary",
                str(traces / "legacy" / "test.pfw.gz"),
                "--workers",
                "1",
                "--json",
            ],
            cwd=str(tmp_path),
            env=dict(pythonpath_env(), TERM="xterm", COLUMNS="100"),
            stdout=subprocess.PIPE,
            stderr=slave,
        )
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        out = proc.stdout.read()
        assert proc.wait(timeout=300) == 0
    finally:
        os.close(master)
    stderr = b"".join(chunks).decode("utf-8", "replace")
    assert "loading" in stderr  # the bar's task description (small files have no indexing phase)
    assert json.loads(out)["events"] == 1012
