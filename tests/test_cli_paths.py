"""Documented command-line paths that used to fail (issue 21, problem 5): view options checked
before any load, tables that fit 120 columns, unreadable files with their reason and exit 1,
Ctrl-C with one line and exit 130, an analysis script without a ``__main__`` guard, the
preload path and imports from a source checkout, and the suite under ignored SIGHUP/SIGINT."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import DATA, ROOT, pythonpath_env

CM1 = os.path.join(DATA, "dftracer-v1.0.5-cm1")


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """Four of the bundled CM1 traces in their own folder."""
    d = tmp_path_factory.mktemp("cm1")
    for name in sorted(os.listdir(CM1))[:4]:
        shutil.copy(os.path.join(CM1, name), d / name)
    return str(d)


def _cli(*args, env=None, timeout=240, **kw):
    return subprocess.run(
        [sys.executable, "-m", "dfanalyzer.cli", *args],
        env=pythonpath_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,
    )


@pytest.mark.parametrize(
    "args,want",
    [
        (["files", "--sort", "io_time"], "no column 'io_time' to sort by (did you mean 'time_s'?)"),
        (["processes", "--sort", "io_time"], "(did you mean 'io_time_s'?)"),
        (["timeline", "--sort", "nope"], "no column 'nope' to sort by"),
        (["functions", "--top", "0"], "--top must be >= 1"),
        (["functions", "--columns", "count,bogus"], "no column 'bogus' to show"),
    ],
)
def test_view_options_checked_before_any_load(tmp_path, args, want):
    idx = tmp_path / "idx"
    idx.mkdir()
    t0 = time.monotonic()
    r = _cli(args[0], CM1, *args[1:], "--index-dir", str(idx), "--no-progress")
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and want in lines[0], r.stderr
    assert os.listdir(idx) == []  # nothing was indexed: no trace was read
    assert time.monotonic() - t0 < 30


def test_default_tables_fit_120_columns(traces, tmp_path, dask_client, monkeypatch, capsys):
    """At COLUMNS=120 no line is longer and every default column keeps its header on one line
    (in this process, on the session's cluster: the command is the same as from a shell)."""
    from dfanalyzer.cli import TABLE_COLUMNS, main

    monkeypatch.setenv("COLUMNS", "120")
    base = [traces, "--no-progress", "--index-dir", str(tmp_path), "--scheduler", dask_client.scheduler.address]
    for view in ("functions", "files", "processes", "timeline"):
        assert main([view, *base]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert max(map(len, lines)) <= 120, (view, lines)
        header = "\n".join(lines[:6])
        for col in TABLE_COLUMNS[view]:  # every default column, its header on one line
            assert col in header, (view, col, lines)
        assert len(lines) > 6  # rows, not one collapsed column
    # every column on request: the exports, --all-columns, --columns
    assert main(["files", *base, "--format", "csv"]) == 0
    header = capsys.readouterr().out.splitlines()[0].split(",")
    assert len(header) == 27 and header[0] == "fname", header
    monkeypatch.setenv("COLUMNS", "400")  # (all 27 do not fit 120)
    assert main(["files", *base, "--all-columns", "--top", "2"]) == 0
    assert "size_1G_PLUS" in capsys.readouterr().out
    assert main(["files", *base, "--columns", "bytes,ops", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "bytes" in out and "ops" in out and "time_s" not in out, out


def _cli_denied(*args, **kw):
    """``_cli`` without the capabilities that let root read any file (CAP_DAC_OVERRIDE,
    CAP_DAC_READ_SEARCH), so a mode-000 file is refused as it would be for any user; as another
    user, a plain run."""
    if os.geteuid() != 0:
        return _cli(*args, **kw)
    setpriv = shutil.which("setpriv")  # util-linux, on every Debian/Ubuntu
    assert setpriv, "setpriv (util-linux) is needed to drop root's file capabilities"
    cmd = [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--", sys.executable, "-m", "dfanalyzer.cli"]
    env = pythonpath_env(kw.pop("env", None))
    return subprocess.run(cmd + list(args), env=env, capture_output=True, text=True, timeout=240, **kw)


def test_unreadable_files_print_their_reason_and_exit_1(tmp_path):
    d = tmp_path / "t"
    d.mkdir()
    (d / "text.pfw.gz").write_text("just text, not a trace\n")
    r = _cli("summary", str(d / "text.pfw.gz"), "--no-progress")
    assert r.returncode == 1, r.stderr
    assert "not a gzip file" in r.stderr and "no event loaded" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    # permission denied: a trace nobody may read
    secret = tmp_path / "secret.pfw.gz"
    shutil.copy(os.path.join(CM1, sorted(os.listdir(CM1))[0]), secret)
    os.chmod(secret, 0)
    probe = _cli_denied("--help")
    assert probe.returncode == 0, probe.stderr
    for cmd in ("summary", "files"):
        r = _cli_denied(cmd, str(secret), "--no-progress", "--index-dir", str(tmp_path / "idx"))
        assert r.returncode == 1, r.stderr
        assert "Permission denied" in r.stderr and "no event loaded" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr


@pytest.mark.parametrize("extra", [[], ["--local-cluster", "--workers", "2"]], ids=["threads", "local-cluster"])
def test_ctrl_c_prints_one_line_and_exits_130(tmp_path, extra):
    """SIGINT to the whole process group, as a terminal's Ctrl-C, while the traces are indexed."""
    idx = tmp_path / "idx"
    idx.mkdir()
    p = subprocess.Popen(
        [sys.executable, "-m", "dfanalyzer.cli", "summary", CM1, "--no-progress", "--small-file-mb", "0"]
        + ["--index-dir", str(idx)]
        + extra,
        env=pythonpath_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not os.listdir(idx) and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert p.poll() is None, "finished before it could be interrupted"
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 130, err
    assert err.splitlines() == ["dfanalyzer: interrupted"], err


_UNGUARDED = """
from dfanalyzer import DFAnalyzer
analyzer = DFAnalyzer(TRACES)
analyzer.summary()
print("files", analyzer.files().shape)
analyzer.close()
"""


def test_script_without_main_guard(traces, tmp_path):
    """The README's analysis snippet saved as a script: one summary, the view, exit 0."""
    script = tmp_path / "analyze.py"
    script.write_text(f"TRACES = {traces + '/*.pfw.gz'!r}\n" + _UNGUARDED)
    r = subprocess.run(
        [sys.executable, str(script)],
        env=pythonpath_env(),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(tmp_path),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("Summary") == 1 and "files (" in r.stdout, r.stdout
    assert "Nanny" not in r.stderr and "Traceback" not in r.stderr, r.stderr[-3000:]
    import ast

    from dfanalyzer.cluster import _guarded

    tree = ast.parse("x = 1\nif __name__ == '__main__':\n    y = 2\n    z = 3\nw = 4\n")
    assert [_guarded(tree, n) for n in range(1, 6)] == [False, False, True, True, False]


def test_source_checkout_without_compiled_parts(tmp_path, traces):
    """``python -m dftracer --preload-path`` and ``from dfanalyzer import DFAnalyzer`` in a
    source tree whose packages have no compiled modules (the repository root of a fresh
    checkout): the installed package's compiled parts are used, in the workers too."""
    src = tmp_path / "checkout"
    for pkg in ("dftracer", "dfanalyzer"):
        shutil.copytree(os.path.join(ROOT, pkg), src / pkg, ignore=shutil.ignore_patterns("*.so", "lib", "__pycache__"))
    env = pythonpath_env()
    env.pop("PYTHONSAFEPATH", None)  # the current directory first on sys.path, as for a user
    r = subprocess.run(
        [sys.executable, "-m", "dftracer", "--preload-path"], cwd=str(src), env=env, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    path = r.stdout.strip()
    assert os.path.isfile(path) and not path.startswith(str(src)), path
    code = (
        "import dfanalyzer, dftracer\n"
        "assert dfanalyzer.__file__.startswith(%r)\n"
        "from dfanalyzer import DFAnalyzer\n"
        "a = DFAnalyzer(%r, n_workers=1, small_file_mb=0)\n"
        "print(a.functions().shape[0] > 0, a.stats['events'])\n"
        "a.close()\n" % (str(src), traces)
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=str(src), env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split()[0] == "True" and int(r.stdout.split()[1]) > 0, r.stdout


def test_suite_cells_with_sighup_and_sigint_ignored():
    """``nohup`` (SIGHUP ignored) or a background job (SIGINT ignored): the signal cells still
    pass, since conftest gives the children default dispositions."""
    cells = [
        "tests/test_lifecycle_matrix.py::test_lifecycle_cell[main-sighup-python]",
        "tests/test_lifecycle_matrix.py::test_lifecycle_cell[main-sigint-python]",
    ]
    code = (
        "import os, signal, sys\n"
        "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "os.execv(sys.executable, [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider'] + sys.argv[1:])\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, *cells],
        cwd=ROOT,
        env=pythonpath_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
