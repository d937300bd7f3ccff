"""Aggregation in the tracer (issue 23, docs/aggregation.md).

The same programs run with full tracing and with ``DFTRACER_ENABLE_AGGREGATION`` (FULL, and
SELECTIVE with a rule file). The truth is the programs' own counts (tests/cpp/agg_io.c prints its
calls and bytes; the Python loop knows its iterations) and the full trace, both read with plain
gzip + json (conftest.read_trace): calls, bytes and per-field sums per function must be equal,
and the analyzer's summaries of both traces must agree on counts and bytes.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import pythonpath_env
from test_preload_helpers import compile_c, preload_lib, read_trace, trace_files, traced_env

from dfanalyzer import DFAnalyzer

READS = 9000  # per thread, over 3 phases of 3000 reads
INTERVAL_MS = 40  # bucket length; the program sleeps PAUSE_MS between phases
PAUSE_MS = 50
ITEM = {"fread", "fwrite"}  # bytes = ret x size

RULES = """\
# upstream layout: top-level lists of rule strings
inclusion:
  - "cat == 'POSIX'"
exclusion:
  - "name LIKE 'write%'"
  - "name IN {open, close}"
"""


def records(prefix):
    files = trace_files(prefix)
    assert len(files) == 1, files
    return read_trace(files[0])


def totals(recs):
    """{name: [calls, bytes, failed calls, count_sum]} from complete events and aggregated
    (ph 3) records alike, computed here with the layout of docs/aggregation.md."""
    out = collections.defaultdict(lambda: [0, 0, 0, 0])
    for r in recs:
        a = r.get("args", {})
        if r.get("cat") == "dftracer" or r.get("ph") not in ("X", 3):
            continue
        t = out[r["name"]]
        if r["ph"] == "X" or a["dft_cnt"] == 1:
            n = 1 if r["ph"] == "X" else a["dft_cnt"]
            ret, count, size = a.get("ret"), a.get("count", 0), a.get("size", 1)
            t[0] += n
            t[3] += count
            if ret is not None:
                if ret < 0:
                    t[2] += n
                else:
                    t[1] += ret * (size if r["name"] in ITEM else 1)
            continue
        n = a["dft_cnt"]
        t[0] += n
        t[3] += a.get("count_sum", 0)
        if "ret_sum" in a:
            if a["ret_max"] < 0:
                t[2] += n
            else:
                # our tracer never mixes failed and successful calls, nor item sizes, in a record
                assert a["ret_min"] >= 0, r
                if r["name"] in ITEM:
                    assert a["size_min"] == a["size_max"], r
                    t[1] += a["ret_sum"] * a["size_min"]
                else:
                    t[1] += a["ret_sum"]
    return {k: tuple(v) for k, v in out.items()}


def check_records(recs, interval_ms):
    """Every aggregated record has upstream's layout; returns them."""
    agg = [r for r in recs if r.get("ph") == 3]
    for r in agg:
        a = r["args"]
        assert set(r) == {"name", "cat", "pid", "tid", "ts", "ph", "args"}, r
        assert r["ts"] % (interval_ms * 1000) == 0, r
        assert isinstance(a["dft_cnt"], int) and a["dft_cnt"] >= 1, r
        if a["dft_cnt"] == 1:
            assert "dur" in a and not any(k.endswith(("_sum", "_min", "_max")) for k in a), r
        else:
            assert a["dur_min"] <= a["dur_max"] <= a["dur_sum"], r
            for k in a:
                if k.endswith("_sum"):
                    f = k[:-4]
                    assert a[f + "_min"] <= a[f + "_max"], r
                    # over the calls that passed the key (an open's mode only with O_CREAT): 1..dft_cnt of them
                    lo, hi, n = a[f + "_min"], a[f + "_max"], a["dft_cnt"]
                    assert min(lo, lo * n) <= a[k] <= max(hi, hi * n), r
        assert "fname" not in a  # strings are not aggregated
    return agg


@pytest.fixture(scope="module")
def c_runs(tmp_path_factory):
    """The C program under the preload: full, FULL and SELECTIVE; {mode: (prefix, own counts)}."""
    d = tmp_path_factory.mktemp("agg")
    exe = compile_c("agg_io", str(d))
    rules = d / "rules.yaml"
    rules.write_text(RULES)
    lib = preload_lib()
    modes = {
        "full": {},
        "FULL": {"DFTRACER_ENABLE_AGGREGATION": "1", "DFTRACER_TRACE_INTERVAL_MS": str(INTERVAL_MS)},
        "SELECTIVE": {
            "DFTRACER_ENABLE_AGGREGATION": "1",
            "DFTRACER_AGGREGATION_TYPE": "SELECTIVE",
            "DFTRACER_AGGREGATION_FILE": str(rules),
            "DFTRACER_TRACE_INTERVAL_MS": str(INTERVAL_MS),
        },
    }
    out = {}
    for mode, extra in modes.items():
        data = d / f"data-{mode}"
        data.mkdir()
        prefix = str(d / f"trace-{mode}")
        env = traced_env(lib, prefix, str(data), DFTRACER_WRITE_BUFFER_SIZE="64K", **extra)
        p = subprocess.run(
            [exe, str(data), str(READS), str(PAUSE_MS)], env=env, capture_output=True, text=True, timeout=120
        )
        assert p.returncode == 0, p.stderr
        assert "warning" not in p.stderr, p.stderr
        out[mode] = (prefix, json.loads(p.stdout))
    return out


@pytest.mark.parametrize("mode", ["FULL", "SELECTIVE"])
def test_aggregated_counts_and_bytes_are_exact(c_runs, mode):
    full_prefix, own = c_runs["full"]
    prefix, own_agg = c_runs[mode]
    assert own == own_agg  # the program does the same calls either way
    full = totals(records(full_prefix))
    recs = records(prefix)
    agg = check_records(recs, INTERVAL_MS)
    got = totals(recs)
    # the program's own counts
    for name in ("read", "pread", "write", "fwrite"):
        calls, nbytes = own[name]
        assert got[name][:2] == (calls, nbytes), (name, got[name], own[name])
    assert got["read"][2] == own["read_failed"]
    # the full trace of the same program, function by function (calls, bytes, failures, count_sum)
    assert got == full
    by_name = collections.defaultdict(set)
    for r in agg:
        by_name[r["name"]].add(r["ts"])
    assert len(by_name["read"]) >= 3  # several buckets
    # far fewer lines than calls (a loose bound: a loaded machine stretches the loop over more buckets)
    assert sum(r["args"]["dft_cnt"] for r in agg) > 5 * len(agg)
    xs = collections.Counter(r["name"] for r in recs if r.get("ph") == "X")
    if mode == "FULL":
        assert not xs, xs  # every call outside the tracer's category is folded
    else:
        # excluded by the rules (write, open, close) or not included (STDIO): full events
        assert {"read", "pread", "lseek"}.isdisjoint(xs), xs
        assert xs["write"] == own["write"][0] and xs["fwrite"] == own["fwrite"][0]
        assert xs["open"] >= 4 and xs["close"] >= 4
        assert {r["name"] for r in agg} == {"read", "pread", "lseek", "unlink"}


def test_summaries_of_full_and_aggregated_traces_agree(c_runs, dask_client):
    sums = {}
    for mode in ("full", "FULL", "SELECTIVE"):
        an = DFAnalyzer(c_runs[mode][0] + "*.pfw.gz", client=dask_client)
        try:
            sums[mode] = an.summary(show=False).to_dict()
        finally:
            an.close()
    full = sums["full"]
    assert full["aggregated"] == {"records": 0, "calls": 0}
    for mode in ("FULL", "SELECTIVE"):
        s = sums[mode]
        assert s["events"] == full["events"]
        assert s["aggregated"]["calls"] > 0 and s["aggregated"]["records"] < s["aggregated"]["calls"]
        assert s["functions"].keys() == full["functions"].keys()
        for name, f in full["functions"].items():
            g = s["functions"][name]
            assert g["count"] == f["count"], name
            # bytes: the mean per sized call (total / calls) is exact; quantiles may be unknown
            if f["size"] is not None:
                assert g["size"]["mean"] == pytest.approx(f["size"]["mean"], rel=1e-12), name
                assert (g["size"]["min"], g["size"]["max"]) == (f["size"]["min"], f["size"]["max"]), name


PY_LOOP = textwrap.dedent(
    """
    import os, sys
    from dftracer.logger import dftracer, dft_fn

    log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)
    app = dft_fn("app")

    @app.log
    def step(i):
        return i

    n = int(sys.argv[1])
    for i in range(n):
        step(i)
        with dft_fn("app", name="inner", image_size=i % 5):
            pass
        if i == n // 2 and sys.argv[2] == "fork":
            pid = os.fork()
            if pid == 0:
                for j in range(300):
                    step(j)
                os._exit(0)
            os.waitpid(pid, 0)
    log.finalize()
    """
)


def run_py(tmp_path, name, n, fork, **extra):
    script = tmp_path / "loop.py"
    script.write_text(PY_LOOP)
    prefix = str(tmp_path / name)
    env = pythonpath_env()
    env.update(DFTRACER_ENABLE="1", DFTRACER_INC_METADATA="1", DFTRACER_LOG_FILE=prefix)
    env.update(extra)
    p = subprocess.run(
        [sys.executable, str(script), str(n), "fork" if fork else "-"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    return prefix, p.stderr


def py_totals(prefix):
    """{file: {name: (calls, image_size sum)}} of every file of the run."""
    out = {}
    for f in trace_files(prefix):
        t = collections.defaultdict(lambda: [0, 0])
        for r in read_trace(f):
            if r.get("cat") != "app":
                continue
            a = r.get("args", {})
            if r["ph"] == "X" or a.get("dft_cnt") == 1:
                t[r["name"]][0] += a.get("dft_cnt", 1)
                t[r["name"]][1] += a.get("image_size", 0)
            else:
                assert r["ph"] == 3, r
                t[r["name"]][0] += a["dft_cnt"]
                t[r["name"]][1] += a.get("image_size_sum", 0)
        out[os.path.basename(f).split(".")[0]] = {k: tuple(v) for k, v in t.items()}
    return out


def test_python_api_loop_and_fork(tmp_path):
    n = 6000
    full, _ = run_py(tmp_path, "full", n, True)
    agg, _ = run_py(tmp_path, "agg", n, True, DFTRACER_ENABLE_AGGREGATION="1", DFTRACER_TRACE_INTERVAL_MS="20")
    want = {"step": (n, 0), "inner": (n, sum(i % 5 for i in range(n)))}
    tf, ta = py_totals(full), py_totals(agg)
    assert len(tf) == len(ta) == 2  # the parent and its forked child
    a, b = sorted(ta, key=len)  # the child's file is the parent's name plus -<pid>
    assert b.startswith(a + "-")
    assert ta[a] == want
    # the forked child counts its own 300 calls once, not the parent's table
    assert ta[b] == {"step": (300, 0)}
    assert sorted(tf.values(), key=len) == sorted(ta.values(), key=len)
    recs = [r for f in trace_files(agg) for r in read_trace(f)]
    agg_recs = check_records(recs, 20)
    assert len(agg_recs) < (2 * n + 300) // 5 and not [r for r in recs if r.get("ph") == "X" and r["cat"] == "app"]


def test_selective_rules_on_duration_and_bad_rules(tmp_path):
    rules = tmp_path / "rules.yaml"
    # a rule on the duration: every call is folded (dur >= 0) except those named inner
    rules.write_text("inclusion:\n  - \"dur >= 0 AND NOT name == 'inner'\"\n")
    sel = dict(
        DFTRACER_ENABLE_AGGREGATION="1", DFTRACER_AGGREGATION_TYPE="SELECTIVE", DFTRACER_AGGREGATION_FILE=str(rules)
    )
    prefix, err = run_py(tmp_path, "sel", 500, False, **sel)
    assert err == ""
    recs = read_trace(trace_files(prefix)[0])
    app = [r for r in recs if r.get("cat") == "app"]
    assert {r["name"] for r in app if r["ph"] == 3} == {"step"}
    assert sum(r["args"]["dft_cnt"] for r in app if r["ph"] == 3) == 500
    assert sum(1 for r in app if r["ph"] == "X" and r["name"] == "inner") == 500
    # a rule that does not parse is named with its reason; with no valid inclusion rule left,
    # nothing is folded (never silently everything)
    rules.write_text('inclusion:\n  - "size > 3"\nexclusion:\n  - "name =~ x"\n')
    prefix, err = run_py(tmp_path, "bad", 200, False, **sel)
    assert "rule \"size > 3\" ignored: unknown field 'size'" in err, err
    assert 'rule "name =~ x" ignored' in err, err
    assert "aggregation disabled" in err
    recs = read_trace(trace_files(prefix)[0])
    assert not [r for r in recs if r.get("ph") == 3]
    assert sum(1 for r in recs if r.get("ph") == "X" and r["name"] == "step") == 200
    # an unreadable rule file: warned, aggregation off
    prefix, err = run_py(tmp_path, "missing", 10, False, **dict(sel, DFTRACER_AGGREGATION_FILE=str(tmp_path / "no")))
    assert "cannot read aggregation rules" in err and "aggregation disabled" in err, err
    assert not [r for r in read_trace(trace_files(prefix)[0]) if r.get("ph") == 3]


def utils_tool(name):
    """A dftracer-utils (upstream's reader, PyPI ``dftracer-utils``) binary: in the directory
    ``DFTRACER_UTILS_BIN`` names, else on PATH; None when absent."""
    d = os.environ.get("DFTRACER_UTILS_BIN")
    if d and os.access(os.path.join(d, name), os.X_OK):
        return os.path.join(d, name)
    import shutil

    return shutil.which(name)


@pytest.mark.parametrize("mode", ["FULL", "SELECTIVE"])
def test_upstream_reader_counts_our_aggregated_records(c_runs, tmp_path, mode):
    """dftracer-utils' dftracer_stats reads our aggregated trace and finds, per function, the same
    records (an event to it is a record; dft_cnt is the calls inside) as plain gzip + json."""
    stats = utils_tool("dftracer_stats")
    if stats is None:
        pytest.skip("dftracer-utils (dftracer_stats) is not installed")
    prefix, _ = c_runs[mode]
    files = trace_files(prefix)
    want = collections.Counter(r["name"] for r in records(prefix) if r.get("cat") != "dftracer" and r.get("ph") != "M")
    p = subprocess.run(
        [stats, "--files", *files, "--index-dir", str(tmp_path), "--json", "--report", "names", "--log-level", "off"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout[p.stdout.index("[") :])[0]
    assert got["total_events"] == sum(want.values())
    assert {r["name"]: r["count"] for r in got["results"]} == dict(want)


def test_report_and_functions_view_say_what_comes_from_aggregates(c_runs, dask_client):
    from dfanalyzer.report import _summary_html

    an = DFAnalyzer(c_runs["SELECTIVE"][0] + "*.pfw.gz", client=dask_client)
    try:
        s = an.summary(show=False)
        fv = an.functions()
    finally:
        an.close()
    d = s.to_dict()
    html = _summary_html(d, {})
    assert f"{d['aggregated']['calls']:,} of the events come from {d['aggregated']['records']:,} aggregated" in html
    assert "From aggregated records" in str(s)
    # reads are folded by the rules, writes are not
    assert fv.loc["read", "agg_calls"] == fv.loc["read", "count"] and fv.loc["write", "agg_calls"] == 0
    assert fv.attrs["aggregated_calls"] == int(fv["agg_calls"].sum()) > 0
    assert fv.attrs["estimated"] == ["p50_us", "p90_us", "p99_us", "max_us"]
