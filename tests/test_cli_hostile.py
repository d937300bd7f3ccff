"""Hostile input, round 2 (issue 25, items 2-5 for the ``dfanalyzer`` command): trace strings
with terminal escape sequences reach no terminal raw, host names with matplotlib math do not
kill a plot, every failure is one line with its documented exit status, count options and
insights config values have validated ranges.

The traces are written here with plain gzip + json; the attack strings are in ``NAME``,
``HOST``, ``FNAME`` and ``TAG``. Most commands run in this process (``main([...])`` is what
``python -m dfanalyzer.cli`` runs) on the session's cluster (``--scheduler``), ``summary`` in this
process's threads as by default; two run as real processes."""

import gzip
import json
import os
import subprocess
import sys
import warnings

import pytest
from conftest import pythonpath_env

from dfanalyzer.cli import RANGES, main
from dfanalyzer.engine.timebins import MAX_BINS
from dfanalyzer.safetext import escape

# window title (OSC 0 ... BEL), clear screen (CSI 2 J), an OSC 8 hyperlink ended by ST (ESC \),
# a carriage return, a bidi override, rich markup and an 8-bit CSI (C1 0x9b)
NAME = "rd\x1b]0;pwned\x07\x1b[2J\x1b]8;;http://x\x1b\\L\x1b]8;;\x1b\\\r\u202e[link=http://e]k[/link]\x9b"
MATH = "$\\frac{A$"  # matplotlib mathtext: "Expected \frac{num}{den}" while the figure is drawn
HOST = MATH + "\x1b[31m"
FNAME = "/data/f\x1b[2J$x_1$\u202e.bin"
TAG = "v\x1b[5m\x7f"
RAW = ("\x1b", "\x07", "\x9b", "\r", "\u202e", "\x7f")  # none may reach stdout or stderr
T0 = 1_700_000_000_000_000  # µs


def _write(path, n=200, span_us=2_000_000):
    """A trace of ``n`` events of one process: every odd one is named ``NAME``, the others
    ``write`` (4 KiB), all on ``FNAME`` of host ``HOST`` with args ``tag=TAG``; the last event
    starts ``span_us`` after the first."""
    recs = [
        {"id": 0, "name": "HH", "cat": "dftracer", "pid": 7, "tid": 7, "ph": "M", "args": {"name": HOST, "value": 11}},
        {"id": 1, "name": "FH", "cat": "dftracer", "pid": 7, "tid": 7, "ph": "M", "args": {"name": FNAME, "value": 22}},
    ]
    for i in range(n):
        ts = T0 + (span_us if i == n - 1 else i * 100)
        args = {"hhash": 11, "fhash": 22, "size": 4096, "ret": 4096, "fd": 3, "tag": TAG}
        recs.append(
            {"id": i + 2, "name": NAME if i % 2 else "write", "cat": "POSIX", "pid": 7, "tid": 7}
            | {"ts": ts, "dur": 50, "ph": "X", "args": args}
        )
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("[\n" + "".join(json.dumps(r) + "\n" for r in recs) + "]\n")
    return str(path)


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    for sub in ("bad", "empty", "meta"):
        (d / sub).mkdir()
    out = {"bad": _write(d / "bad" / "h.pfw.gz"), "dir": str(d)}
    with gzip.open(d / "empty" / "e.pfw.gz", "wt") as f:  # a valid trace without a line
        f.write("[\n]\n")
    with gzip.open(d / "meta" / "m.pfw.gz", "wt") as f:  # only a metadata record, no event
        f.write('[\n{"id":0,"name":"HH","cat":"dftracer","pid":7,"tid":7,"ph":"M","args":{"name":"h","value":1}}\n]\n')
    out["empty"] = str(d / "empty" / "e.pfw.gz")
    out["meta"] = str(d / "meta" / "m.pfw.gz")
    return out


@pytest.fixture
def run(traces, dask_client, tmp_path, capsys, monkeypatch):
    """``run(command, pattern, *options)`` -> (status, stdout, stderr), in this process on the
    session's cluster (``cluster=False``: without ``--scheduler``, the summary in threads); every trace is indexed in ``tmp_path / "idx"`` (``--small-file-mb 0``),
    so an empty folder after a run means no trace was read."""
    monkeypatch.delenv("COLUMNS", raising=False)
    (tmp_path / "idx").mkdir()

    def go(cmd, *rest, cluster=True):
        extra = ["--scheduler", dask_client.scheduler.address] if cluster else []
        opts = ["--no-progress", "--index-dir", str(tmp_path / "idx"), "--small-file-mb", "0", *extra]
        status = main([cmd, *rest, *opts])
        out, err = capsys.readouterr()
        return status, out, err

    return go


def _clean(*texts):
    for t in texts:
        for c in RAW:
            assert c not in t, (c, t[-2000:])
        assert "Traceback" not in t and "unexpected" not in t, t[-2000:]


def _one_line(status, out, err, want_status, want):
    assert status == want_status, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dfanalyzer: error: ") and want in lines[0], err
    _clean(out, err)


# ----------------------------------------------------------------------------- safe output
def test_escape_writes_json_escapes():
    assert escape("plain /data/ä.bin") == "plain /data/ä.bin"
    assert escape("\x1b]0;t\x07") == "\\u001b]0;t\\u0007"
    assert escape("a\tb\nc\rd\x00\x7f\x9b") == "a\\tb\\nc\\rd\\u0000\\u007f\\u009b"
    assert escape("\u202eevil\u2066\u200f\u2028") == "\\u202eevil\\u2066\\u200f\\u2028"
    assert escape(12) == "12"
    # as dftracer-cat shows the same string inside its JSON line
    assert escape("\x1b[2J") == json.dumps("\x1b[2J")[1:-1]


@pytest.mark.parametrize(
    "cmd,opts,shown",
    [
        ("summary", [], escape(NAME)[:40]),  # (the function column is cut)
        ("functions", ["--sort", "count"], escape(NAME)[-40:]),  # (long keys lose their start)
        ("files", [], escape(FNAME)),
        ("processes", [], escape(HOST)),
        ("tags", ["--key", "tag"], escape(TAG)),
        ("files", ["--format", "csv"], escape(FNAME)),
    ],
)
def test_tables_escape_trace_strings(traces, run, cmd, opts, shown):
    status, out, err = run(cmd, traces["bad"], *opts, cluster=cmd != "summary")
    assert status == 0, err
    _clean(out, err)
    assert shown in out, out
    if cmd == "functions":
        assert "[link=http://e]k[/link]" in out  # shown as text, not read as rich markup


def test_processes_note_escapes_the_slowest_host(traces, run):
    status, out, err = run("processes", traces["bad"])
    assert status == 0 and f"slowest_process={escape(HOST)}:7" in out, out
    _clean(out, err)


def test_json_output_keeps_the_exact_strings(traces, run):
    status, out, err = run("files", traces["bad"], "--format", "json")
    assert status == 0 and json.loads(out)[0]["fname"] == FNAME
    status, out, err = run("summary", traces["bad"], "--json", cluster=False)
    assert status == 0 and set(json.loads(out)["functions"]) == {NAME, "write"}
    _clean(out, err)


def test_csv_file_keeps_the_exact_strings(traces, run, tmp_path):
    dest = tmp_path / "f.csv"
    status, out, err = run("files", traces["bad"], "--format", "csv", "-o", str(dest))
    assert status == 0 and FNAME in dest.read_text(encoding="utf-8")
    _clean(out, err)


def test_math_hostname_report_and_heatmap(traces, run, tmp_path):
    """``$\\frac{A$`` in a host name: the PNG and the HTML are written, the label is plain text."""
    heat = tmp_path / "h.png"
    status, out, err = run("timeline", traces["bad"], "--heatmap", str(heat))
    assert status == 0, err
    assert heat.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = tmp_path / "r.html"
    status, out, err = run("report", traces["bad"], "-o", str(html))
    assert status == 0, err
    page = html.read_text(encoding="utf-8")
    assert "$\\frac{A$" in page and "data:image/png;base64," in page
    _clean(out, err)


def test_insights_panel_escapes_evidence():
    """A finding whose message and evidence name a hostile file, and an input warning: the
    panel (``dfanalyzer insights`` and ``DFAnalyzer.insights(show=True)``) prints them escaped."""
    import io

    from rich.console import Console

    from dfanalyzer.insights import Insight, InsightReport

    ins = Insight(
        "small_requests",
        "P01",
        "high",
        "Small requests",
        f"small reads on {FNAME}",
        {"metrics": {"share": 0.5}, "files": [{"fname": FNAME, "host": HOST, "small_reads": 10}]},
        [f"batch the reads of {NAME}"],
    )
    rep = InsightReport([ins], ["small_requests"], {}, warnings=[f"runs far apart: {HOST}"])
    buf = io.StringIO()
    Console(file=buf, width=400, color_system=None).print(rep.panel())
    text = buf.getvalue()
    _clean(text)
    for s in (FNAME, HOST, NAME):
        assert escape(s) in text, (s, text)


def test_api_input_warning_is_escaped():
    from dfanalyzer.sanity import InputWarning, emit

    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        emit([f"host {HOST}"])
    assert [str(w.message) for w in got if w.category is InputWarning] == [f"host {escape(HOST)}"]


def test_real_process_prints_no_raw_escape(traces, tmp_path):
    """``python -m dfanalyzer.cli summary``: the bytes on the terminal side, not rich's view."""
    r = subprocess.run(
        [sys.executable, "-m", "dfanalyzer.cli", "summary", traces["bad"], "--no-progress"],
        env=pythonpath_env(dict(os.environ, COLUMNS="200")),
        capture_output=True,
        timeout=240,
    )
    assert r.returncode == 0, r.stderr
    for raw in (b"\x1b", b"\x07", b"\r", "\u202e".encode(), "\x9b".encode()):
        assert raw not in r.stdout and raw not in r.stderr, raw
    assert b"\\u001b]0;pwned\\u0007" in r.stdout


# ----------------------------------------------------------------------------- one-line failures
@pytest.mark.parametrize(
    "cmd,which,opts,status,want",
    [
        ("report", "empty", ["-o", "{tmp}/r.html"], 1, "no event loaded from the 1 file(s) given (they hold no"),
        ("insights", "meta", [], 1, "no event loaded from the 1 file(s) given (they hold no trace event)"),
        ("report", "bad", ["-o", "{tmp}/r.html", "--filter", "pid == 99"], 1, "kept none of the events"),
        ("insights", "bad", ["--filter", "pid == 99"], 1, "kept none of the events"),
        ("timeline", "bad", ["--filter", "pid == 99"], 1, "kept none of the events"),
        ("timeline", "bad", ["--window", "1us"], 2, "more than 100000: use a longer window"),
    ],
)
def test_no_events_and_late_errors(traces, run, tmp_path, cmd, which, opts, status, want):
    _one_line(*run(cmd, traces[which], *[o.format(tmp=tmp_path) for o in opts]), status, want)
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("empty", ["empty", "meta"])
def test_compare_refuses_an_empty_run(traces, run, empty):
    """Today's bug: a candidate with 0 events passed ``--threshold`` with exit 0."""
    for a, b, side in (
        (traces["bad"], traces[empty], "candidate run B"),
        (traces[empty], traces["bad"], "baseline run A"),
    ):
        status, out, err = run("compare", a, b, "--threshold", "0.1")
        _one_line(status, out, err, 1, f"no event loaded from the 1 file(s) given for the {side} '{traces[empty]}'")
        assert out == ""
    status, out, err = run("compare", traces["bad"], traces["bad"], "--threshold", "0.1", "--filter", "pid == 99")
    _one_line(status, out, err, 1, "compare: the baseline run")
    assert "has no event left after --filter 'pid == 99'" in err and out == ""


CONFIGS = {
    "time_bins: 0": ("evidence: {time_bins: 0}\n", "'evidence.time_bins' must be an integer in 1..100000, got 0"),
    "time_bins: 2e9": ("evidence: {time_bins: 2000000000}\n", "'evidence.time_bins' must be an integer in 1..100000"),
    "top: -1": ("evidence: {top: -1}\n", "'evidence.top' must be an integer in 1..1000, got -1"),
    "bad regex": ('categories: {checkpoint_name_pattern: "(unclosed"}\n', "bad regular expression '(unclosed'"),
    "non-string pattern": ("categories: {checkpoint_name_pattern: 42}\n", "must be a string (a regular expression)"),
    "dict in a list": ("categories: {compute: [compute, {a: 1}]}\n", "'categories.compute' must be a list of strings"),
    ".nan threshold": ("thresholds: {small_requests: .nan}\n", "'thresholds.small_requests' must be a finite number"),
    ".inf floor": ("floors: {small_requests: {seconds: .inf}}\n", "'floors.small_requests.seconds' must be a finite"),
    "negative threshold": ("thresholds: {small_bytes: -5}\n", "'thresholds.small_bytes' must be a finite number >= 0"),
    "alignment 0": ("thresholds: {alignment: 0}\n", "'thresholds.alignment' must be a finite number >= 1"),
    "not YAML": ("thresholds: [\n", "expected"),
}


@pytest.mark.parametrize("case", sorted(CONFIGS))
@pytest.mark.parametrize("cmd", ["insights", "report"])
def test_bad_insights_config_is_a_usage_error(traces, run, tmp_path, case, cmd):
    text, want = CONFIGS[case]
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    opts = ["-o", str(tmp_path / "r.html")] if cmd == "report" else []
    _one_line(*run(cmd, traces["bad"], "--config", str(cfg), *opts), 2, want)
    assert os.listdir(tmp_path / "idx") == []  # refused before any trace was read


def test_config_values_checked_in_the_api():
    from dfanalyzer.insights import load_config

    with pytest.raises(ValueError, match="must be a finite number"):
        load_config({"thresholds": {"random_operations": float("nan")}})
    assert load_config({"evidence": {"time_bins": 100000.0}})["evidence"]["time_bins"] == 100000


@pytest.mark.parametrize(
    "cmd,opts,want",
    [
        ("report", ["-o", "{dir}"], "is a directory; give the name of the file to write"),
        ("files", ["--format", "csv", "-o", "{dir}"], "is a directory"),
        ("report", ["-o", "{dir}/no/such/r.html"], "no directory"),
        ("timeline", ["--heatmap", "{dir}"], "--heatmap"),
        ("timeline", ["--bins", "100000000"], f"--bins must be >= 1 and <= {MAX_BINS}, got 100000000"),
        ("timeline", ["--bins", "0"], "--bins must be >= 1"),
        ("report", ["-o", "{dir}/r.html", "--bins", "2000000000"], "--bins must be >= 1 and <= 100000"),
        ("report", ["-o", "{dir}/r.html", "--top", "-1"], "--top must be >= 1 and <= 1000, got -1"),
        ("report", ["-o", "{dir}/r.html", "--top", "5000"], "--top must be >= 1 and <= 1000"),
        ("functions", ["--top", "-1"], "--top must be >= 1"),
        ("functions", ["--workers", "100000"], "--workers must be >= 1 and <= 1024"),
        ("files", ["--batch-size-mb", "nan"], "--batch-size-mb must be > 0"),
        ("functions", ["--no-such-option"], "unrecognized arguments: --no-such-option"),
        ("timeline", ["--bins", "x"], "invalid int value: 'x'"),
    ],
)
def test_bad_options_are_one_line_before_any_load(traces, run, tmp_path, cmd, opts, want):
    opts = [o.format(dir=tmp_path) for o in opts]
    status, out, err = run(cmd, traces["bad"], *opts)
    assert status == 2 and out == "", err
    lines = err.splitlines()
    assert len(lines) == 1 and "error: " in lines[0] and want in lines[0], err
    _clean(out, err)
    assert os.listdir(tmp_path / "idx") == []  # refused before any trace was read


@pytest.mark.parametrize("th", ["nan", "-0.5", "inf"])
def test_compare_threshold_must_be_a_finite_fraction(traces, run, tmp_path, th):
    status, out, err = run("compare", traces["bad"], traces["bad"], "--threshold", th)
    _one_line(status, out, err, 2, "--threshold must be a finite fraction >= 0")


def test_documented_ranges():
    """The ranges in docs/analyzer.md are the ones the command enforces."""
    doc = open(os.path.join(os.path.dirname(__file__), "..", "docs", "analyzer.md"), encoding="utf-8").read()
    for name, (lo, hi) in RANGES.items():
        assert f"`{name}` | {lo}..{hi:,}" in doc, name
    assert f"`evidence.time_bins` | 1..{MAX_BINS:,}" in doc


def test_real_process_config_error_is_one_line(traces, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("evidence: {time_bins: 0}\n")
    r = subprocess.run(
        [sys.executable, "-m", "dfanalyzer.cli", "insights", traces["bad"], "--config", str(cfg), "--no-progress"],
        env=pythonpath_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr.splitlines() == [
        "dfanalyzer: error: insights config key 'evidence.time_bins' must be an integer in 1..100000, got 0"
    ]
