"""The threaded summary's serial steps, start-up and finish (issue 22, Deliver 2; docs/perf/i22-serial.md).

* start-up: ``dfanalyzer summary --json`` of clean input, stderr not a terminal, imports no
  ``rich`` (the stderr console is made on first use) and prints the same as with rich loaded;
  with input warnings, or with a variable by which rich calls stderr a terminal, rich is used;
* only the named command's subparser is built: the same namespaces, help, usage errors and
  exit statuses as the full parser, for every command;
* the console entry (``cli.run``) ends the process without the interpreter's teardown: the
  same stdout, stderr and exit status, atexit handlers run, a running thread is waited for;
* ``finish`` with the thread pool (windows measured in parallel, in memory and spilled) gives
  the same summary as without it, and measures equal to a brute-force coverage count.
"""

import contextlib
import io
import json
import os
import random
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from conftest import pythonpath_env

from dfanalyzer import cli
from dfanalyzer import summary as S

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
CM1 = os.path.join(DATA, "dftracer-v1.0.5-cm1")
LEGACY = os.path.join(DATA, "dftracer-legacy", "test.pfw.gz")

_PROBE = """
import json, sys
from dfanalyzer.cli import main
rc = main(sys.argv[1:])
sys.stdout.flush()
print(json.dumps({"rc": rc, "rich": "rich" in sys.modules}), file=sys.stderr)
"""


def _env(**extra):
    env = pythonpath_env()
    for k in cli._RICH_TERMINAL_ENV:
        env.pop(k, None)
    env.update(extra)
    return env


def _run(args, env, probe=False, stdin=None):
    cmd = [sys.executable, "-c", _PROBE] if probe else [sys.executable, "-m", "dfanalyzer.cli"]
    return subprocess.run([*cmd, *args], env=env, capture_output=True, text=True, timeout=120, stdin=stdin)


def _probe(r):
    return json.loads(r.stderr[r.stderr.rindex('{"rc"') :])  # (after any progress bar codes)


def test_summary_json_needs_no_rich_unless_it_prints_on_stderr(tmp_path):
    idx = ["--index-dir", str(tmp_path / "idx"), "--workers", "2"]
    clean = _run(["summary", CM1, "--json", *idx], _env(), probe=True)
    assert clean.returncode == 0, clean.stderr[-2000:]
    assert _probe(clean) == {"rc": 0, "rich": False}
    assert clean.stderr.strip().count("\n") == 0  # (only the probe's line)
    # the same command with rich loaded first prints the same
    pre = _run(["summary", CM1, "--json", *idx], _env(), probe=False)
    assert (pre.returncode, pre.stdout) == (0, clean.stdout) and pre.stderr == ""
    # damaged input: warnings on stderr through rich, as before
    bad = tmp_path / "bad"
    bad.mkdir()
    with open(LEGACY, "rb") as f:
        raw = f.read()
    (bad / "cut.pfw.gz").write_bytes(raw[: len(raw) // 2])
    (bad / "good.pfw.gz").write_bytes(raw)
    r = _run(["summary", str(bad), "--json", *idx], _env(), probe=True)
    assert r.returncode == 0 and _probe(r) == {"rc": 0, "rich": True}
    assert "warning: " in r.stderr and "cut.pfw.gz" in r.stderr
    # a variable by which rich may call stderr a terminal: rich decides (the progress bar)
    r = _run(["summary", LEGACY, "--json", *idx], _env(FORCE_COLOR="1"), probe=True)
    assert r.returncode == 0 and _probe(r)["rich"] is True and "loading" in r.stderr
    r = _run(["summary", LEGACY, "--json", "--no-progress", *idx], _env(FORCE_COLOR="1"), probe=True)
    assert r.returncode == 0 and _probe(r) == {"rc": 0, "rich": False}


def test_stderr_console_is_terminal_matches_rich(monkeypatch):
    from rich.console import Console

    master, slave = os.openpty()
    try:
        for env in ({}, {"FORCE_COLOR": "1"}, {"FORCE_COLOR": ""}, {"TTY_COMPATIBLE": "1"}, {"TTY_COMPATIBLE": "0"}):
            for k in cli._RICH_TERMINAL_ENV:
                monkeypatch.delenv(k, raising=False)
            for k, v in env.items():
                monkeypatch.setenv(k, v)
            for stream in (io.StringIO(), open(os.devnull, "w"), open(slave, "w", closefd=False)):
                with stream:
                    monkeypatch.setattr(sys, "stderr", stream)
                    mine = cli._StderrConsole()
                    assert mine.is_terminal == Console(stderr=True).is_terminal, (env, stream)
                    assert (mine._console is None) == (not env and not stream.isatty())  # rich not asked
    finally:
        os.close(master)
        os.close(slave)


def _parse(fn, argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            got = ("ok", vars(fn(argv)))
        except SystemExit as exc:
            got = ("exit", exc.code)
    return got, out.getvalue(), err.getvalue()


ARGVS = (
    [[c, "--help"] for c in cli.COMMANDS]
    + [[c] for c in cli.COMMANDS]
    + [
        ["summary", "x", "--json", "--workers", "3", "--filter", "cat == 'POSIX'"],
        ["summary", "x", "--bogus"],
        ["summary", "x", "--scheduler", "a:1", "--scheduler-file", "f"],
        ["summary", "x", "--batch-size-mb", "abc"],
        ["functions", "x", "--top", "3", "--sort", "count"],
        ["timeline", "x", "--bins", "3", "--window", "1s"],
        ["compare", "a", "b", "--threshold", "0.1"],
        ["compare", "a"],
        ["layers", "x", "--map", "a"],
        ["tags", "x"],
        ["epochs", "x", "--format", "xml"],
        ["report", "x"],
        ["insights", "x", "--json"],
        ["--help"],
        ["-h"],
        [],
        ["bogus", "x"],
        ["summary", "--", "x"],
    ]
)


@pytest.mark.parametrize("columns", ["80", "200"])
def test_one_subparser_parses_as_the_full_parser(monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    for argv in ARGVS:
        assert _parse(cli._parse_args, argv) == _parse(lambda a: cli.build_parser().parse_args(a), argv), argv


_RUN = """
import atexit, os, sys, threading, time
from dfanalyzer import cli
atexit.register(lambda: open(os.environ["MARK"], "a").write("atexit\\n"))
if os.environ.get("THREAD"):
    def late():
        time.sleep(0.5)
        open(os.environ["MARK"], "a").write("thread\\n")
    threading.Thread(target=late).start()
sys.argv[0] = "dfanalyzer"
cli.run()
"""


@pytest.mark.parametrize("thread", [False, True])
def test_console_entry_exit_status_output_and_atexit(tmp_path, thread):
    mark = tmp_path / "mark"
    env = _env(MARK=str(mark), THREAD="1" if thread else "")
    idx = ["--index-dir", str(tmp_path / "idx")]
    cases = [
        (["summary", LEGACY, "--json", *idx], 0),
        (["summary", str(tmp_path / "none"), "--json", *idx], 2),  # no such file
        (["summary", LEGACY, "--workers", "0"], 2),
        (["summary", "--bogus"], 2),
        (["--help"], 0),
    ]
    for args, status in cases[:1] if thread else cases:
        mark.unlink(missing_ok=True)
        fast = subprocess.run([sys.executable, "-c", _RUN, *args], env=env, capture_output=True, text=True, timeout=120)
        # reference: the same main() ended by Python's own exit
        code = "import sys; from dfanalyzer.cli import main; sys.argv[0] = 'dfanalyzer'; sys.exit(main())"
        ref = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=120)
        assert (fast.returncode, fast.stdout, fast.stderr) == (ref.returncode, ref.stdout, ref.stderr), args
        assert fast.returncode == status, (args, fast.stderr)
        lines = mark.read_text().split()
        assert lines.count("atexit") == 1 and lines.count("thread") == (1 if thread else 0), lines
    # stdout closed by its reader before anything is written (``| head`` gone): the same status
    # and stderr as Python's own exit (the flush at exit is where the two could differ)
    for opts in () if thread else ([], ["--json"]):
        got = []
        for code in (_RUN, "import sys; from dfanalyzer.cli import main; sys.exit(main())"):
            p = subprocess.Popen(
                [sys.executable, "-c", code, "summary", CM1, *opts, *idx],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            p.stdout.close()
            err = p.stderr.read().decode()
            got.append((p.wait(timeout=120), err))
        assert got[0] == got[1] and "Traceback" not in got[0][1], got
        # a reader gone is not a cluster problem; with --json not a failure either, as in the other
        # commands (the table goes through rich, whose own broken-pipe handling exits 1, silently)
        assert got[0][0] == (0 if opts else 1) and "Dask cluster" not in got[0][1], got


def _random_union(rng, n, span):
    s = rng.integers(0, span, n)
    return S.union_intervals(s, s + rng.integers(1, 5, n))


def _coverage(span, *unions):
    """µs of [0, span + 5) covered by any interval of ``unions``: a count per µs (no union code)."""
    cover = np.zeros(span + 6, dtype=np.int64)
    for u in unions:
        np.add.at(cover, u[0], 1)
        np.add.at(cover, u[1], -1)
    return int((np.cumsum(cover) > 0).sum())


@pytest.mark.parametrize("ways", [2, 3, 16])
def test_finish_on_the_pool_equals_finish_and_brute_force(ways, tmp_path, monkeypatch):
    rng = np.random.default_rng(ways)
    span = 3_000_000
    p = S.Partial(events=1, min_ts=0, max_te=span)
    p.io, p.compute, p.app_io = (_random_union(rng, n, span) for n in (120_000, 50_000, 20_000))
    assert S._intervals(p) >= S.PARALLEL_MERGE_INTERVALS  # (the pool is used)
    truth = {
        "io": _coverage(span, p.io),
        "compute": _coverage(span, p.compute),
        "app_io": _coverage(span, p.app_io),
        "io|compute": _coverage(span, p.io, p.compute),
        "app_io|compute": _coverage(span, p.app_io, p.compute),
    }
    with ThreadPoolExecutor(4) as pool:
        calls = []
        monkeypatch.setattr(S, "_window_measures", lambda *a, f=S._window_measures: calls.append(1) or f(*a))
        got = S.spilled_measures(p, pool=pool, ways=ways)
        assert got == truth and len(calls) >= min(2 * ways, 20)  # windows for every thread (>= 8192 intervals)
        want = json.dumps(S.finish(p).to_dict())
        assert json.dumps(S.finish(p, pool=pool, ways=ways).to_dict()) == want
        # spilled: runs on disk in several stores' worth of pieces, windows far smaller than a run
        parts = []
        for _ in range(24):
            q = S.Partial(events=1, min_ts=0, max_te=span)
            q.io, q.compute, q.app_io = (_random_union(rng, n, span) for n in (3000, 1500, 500))
            parts.append(q)
        ref = S.combine_partials(parts)
        want = json.dumps(S.finish(ref).to_dict())
        order = list(range(len(parts)))
        random.Random(ways).shuffle(order)
        fold = S.PartialFolder(spill_intervals=20_000, spill_dir=str(tmp_path))
        for i in order:
            fold.add(parts[i])
        out = fold.result()
        assert len(out.spilled) == 1 and sum(len(r) for r in out.spilled[0].runs.values()) >= 6
        try:
            assert json.dumps(S.finish(out, pool=pool, ways=ways).to_dict()) == want
            assert json.dumps(S.finish(out).to_dict()) == want
            monkeypatch.setattr(S, "MIN_WINDOW_STRIDE", 256)  # (many windows, each cut through every run)
            for window in (2000, 50_000):
                m = S.spilled_measures(out, window=window, pool=pool, ways=ways)
                assert m == S.spilled_measures(out, window=window)
                assert m["io|compute"] == _coverage(span, *(ref.io, ref.compute))
        finally:
            out.spilled[0].cleanup()


@pytest.mark.parametrize("ways", [2, 5, 16])
def test_merge_unions_parallel_joins_intervals_cut_at_window_edges(ways):
    """Intervals that span one or many windows (cut at every edge) and pieces that touch: the
    windowed merge joins them again, the same arrays as ``merge_unions``."""
    rng = np.random.default_rng(ways)
    big = _random_union(rng, 200_000, 10_000_000)  # (the window edges are starts of this one)
    spans = S.union_intervals(np.array([5, 4_000_000, 9_000_000]), np.array([3_000_000, 8_000_000, 9_000_001]))
    edges = big[0][(np.arange(1, ways) * big[0].size) // ways]
    touching = (edges[:-1].copy(), edges[:-1] + 1)  # (starts exactly at window edges)
    with ThreadPoolExecutor(4) as pool:
        for unions in ([big, spans], [big, touching, spans], [big, touching]):
            got = S.merge_unions_parallel(unions, pool, ways, min_intervals=1)
            want = S.merge_unions(*unions)
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
