"""``dfanalyzer`` command line: ``dfanalyzer COMMAND PATTERN... [options]``.

``summary`` prints the summary panel (paper Figure 6) or, with ``--json``, exactly
``Summary.to_dict()`` as JSON on stdout. The view commands (``functions``, ``files``,
``processes``, ``timeline``, ``tags``, ``epochs``, ``layers``) print a table of the matching
``dfanalyzer.views`` frame or export it (``--format csv|parquet|json``, ``-o FILE``);
``compare A B`` compares two runs; ``insights`` runs the insight rules (``--json``,
``--config``) and ``report`` writes one self-contained HTML page (``-o``). Every command takes ``--filter QUERY``.

Exit status (docs/analyzer.md, "Exit status and option ranges"): 0 on success; 2 for usage and
configuration errors (a bad or out-of-range option, a pattern that matches no file, an invalid
insights config, ``-o`` naming a directory); 1 for input that cannot be used (no event in the
files, no event left after ``--filter``, a run of ``compare`` without events, an output that
cannot be written, a cluster that cannot be reached); 3 when ``compare --threshold`` finds a
regression. Every failure is one line ``dfanalyzer: error: ...`` on stderr, never a traceback
(``DFANALYZER_DEBUG=1`` re-raises an unexpected exception). Count options have the ranges of
:data:`RANGES`. A progress bar is shown on stderr while loading when it is a terminal.

Every string from a trace (event names, categories, file and host names, args values) is
printed through :func:`dfanalyzer.safetext.escape` in tables, notes, warnings and errors, and in
``--format csv`` on stdout: control characters and bidi controls appear as JSON escapes
(``\\u001b``), as ``dftracer-cat`` shows them. Input warnings (skipped input, unresolved
file/host hashes) of ``summary`` are printed on stderr as ``warning: ...``; its panel also lists
unresolved hashes under "Warnings".
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from .engine.timebins import MAX_BINS
from .engine.vocabulary import APP_IO_CATS, COMPUTE_CATS, IO_CATS
from .safetext import cell, escape

#: inclusive ranges of the count options (docs/analyzer.md, "Exit status and option ranges");
#: insights' ``evidence.top`` / ``evidence.time_bins`` are in ``insights.EVIDENCE_RANGES``
RANGES = {
    "--workers": (1, 1024),
    "--top": (1, 1_000_000),  # rows of a view table or export
    "report --top": (1, 1000),  # rows per report table and processes in its heat map
    "--bins": (1, MAX_BINS),  # time windows (timeline, report)
}


def _error(msg) -> None:
    """A failure: its one line on stderr, any trace text in it escaped."""
    print(f"dfanalyzer: error: {escape(msg)}", file=sys.stderr)


#: environment variables by which rich can call a stream that is not a tty a terminal
_RICH_TERMINAL_ENV = ("FORCE_COLOR", "TTY_COMPATIBLE", "FORCE_TERMINAL", "TTY_INTERACTIVE")


class _StderrConsole:
    """``rich.console.Console(stderr=True)``, made (and rich imported) on first use: the
    threaded ``summary --json`` of clean input prints nothing on stderr, and rich's import is a
    serial step of its start-up (issue 22). :attr:`is_terminal` answers without rich when rich
    would say False for certain: stderr is not a tty and none of the variables by which rich
    overrides that is set."""

    _console = None

    @property
    def is_terminal(self) -> bool:
        if self._console is None and not any(v in os.environ for v in _RICH_TERMINAL_ENV):
            isatty = getattr(sys.stderr, "isatty", None)
            try:
                if isatty is not None and not isatty():
                    return False
            except ValueError:
                pass
        return self.__getattr__("is_terminal")

    def __getattr__(self, name):
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=True)
        return getattr(self._console, name)


def _say(console, text) -> None:
    """One line (note, warning, "wrote ...") on ``console``: escaped, never read as markup."""
    console.print(escape(text), highlight=False, markup=False, soft_wrap=True)


class _Parser(argparse.ArgumentParser):
    """argparse with one line for a usage error (no usage block): ``PROG: error: ... (see PROG
    --help)``, exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {escape(message)} (see {self.prog} --help)\n")


def _cats(text: str) -> tuple:
    return tuple(c for c in (s.strip() for s in text.split(",")) if c)


_EPILOG = """commands and examples (PATTERN: quoted glob, file or directory):
  summary    dfanalyzer summary 'traces/*.pfw.gz' --json
  functions  dfanalyzer functions 'traces/*.pfw.gz' --top 10 --sort p99_us
  files      dfanalyzer files 'traces/*.pfw.gz' --sort bytes --format csv -o files.csv
  processes  dfanalyzer processes 'traces/*.pfw.gz' --filter "cat == 'POSIX'"
  timeline   dfanalyzer timeline 'traces/*.pfw.gz' --window 1s --heatmap heat.png
  tags       dfanalyzer tags 'traces/*.pfw.gz' --key epoch
  epochs     dfanalyzer epochs 'traces/*.pfw.gz' --format json
  layers     dfanalyzer layers 'traces/*.pfw.gz' --map reader=python,data_loader=python
  compare    dfanalyzer compare 'base/*.pfw.gz' 'new/*.pfw.gz' --threshold 0.1
  insights   dfanalyzer insights 'traces/*.pfw.gz' [--config my-thresholds.yaml] [--json]
  report     dfanalyzer report 'traces/*.pfw.gz' -o report.html
"""


def build_parser(only: Optional[str] = None) -> argparse.ArgumentParser:
    """The ``dfanalyzer`` parser; ``only``: a command name, whose subcommand alone is added (the
    same parser for that command's arguments, without building the ten others: part of every
    command's start-up)."""
    p = _Parser(
        prog="dfanalyzer",
        description="Analyse DFTracer traces with Dask.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True)
    if only in (None, "summary"):
        s = sub.add_parser("summary", help="print the summary of traces (paper Figure 6)")
        _add_load_options(s)
        s.add_argument("--json", action="store_true", help="print the summary as JSON (Summary.to_dict())")
        s.add_argument("--plot", default=None, metavar="DIR", help="also save timeline PNGs (paper Fig. 8) in DIR")
        s.add_argument(
            "--local-cluster",
            action="store_true",
            help="run the batches on the embedded local Dask cluster (--workers processes) instead of this "
            "process's threads (the default when no scheduler is given)",
        )
    if only is None or only in VIEW_COMMANDS or only == "compare":
        add_view_commands(sub, only)
    if only in (None, "insights"):
        _add_insights_parser(sub)
    if only in (None, "report"):
        _add_report_parser(sub)
    return p


#: the subcommands of :func:`build_parser`
COMMANDS = ("summary", "functions", "files", "processes", "timeline", "tags", "epochs", "layers", "compare")
COMMANDS += ("insights", "report")


def _parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    """``build_parser().parse_args(argv)``; when the first argument names a command, only that
    command's subparser is built (the same result, errors and help)."""
    args = sys.argv[1:] if argv is None else list(argv)
    return build_parser(args[0] if args and args[0] in COMMANDS else None).parse_args(argv)


def _add_insights_parser(sub) -> None:
    s = sub.add_parser(
        "insights",
        help="rules with severity, evidence and recommendations (Drishti's + AI rules)",
        description="Run the insight rules over the exact trace data. Thresholds: the shipped "
        "dfanalyzer/insights.yaml, overridden key by key by --config.",
        epilog="example: dfanalyzer insights 'traces/*.pfw.gz' --config th.yaml --json",
    )
    _add_load_options(s)
    s.add_argument("--config", default=None, metavar="YAML", help="thresholds overriding the defaults")
    s.add_argument("--json", action="store_true", help="print InsightReport.to_dict() as JSON")


def _add_report_parser(sub) -> None:
    s = sub.add_parser(
        "report",
        help="write one self-contained HTML report (summary, insights, views, plots)",
        description="Write one HTML page with no script and no external URL: summary, insights, "
        "layers, views and embedded PNG plots.",
        epilog="example: dfanalyzer report 'traces/*.pfw.gz' -o report.html",
    )
    _add_load_options(s)
    s.add_argument("-o", "--output", required=True, metavar="HTML", help="output file")
    s.add_argument("--config", default=None, metavar="YAML", help="insights thresholds overriding the defaults")
    lo, hi = RANGES["report --top"]
    s.add_argument("--top", type=int, default=20, metavar="N", help=f"rows per view table, {lo}..{hi} (default 20)")
    lo, hi = RANGES["--bins"]
    s.add_argument(
        "--bins", type=int, default=50, metavar="N", help=f"time windows of the plots, {lo}..{hi} (default 50)"
    )
    s.add_argument("--title", default=None, help="page title")


#: args keys the insight rules read (file position reconstruction, epoch and step tags)
INSIGHT_ARGS = ("fd", "ret", "whence", "epoch", "step", "count")


def _check_load_options(args) -> int:
    """0, or exit status 2 after saying on stderr which option is invalid (:func:`bad_option`)."""
    bad = bad_option(args)
    if bad:
        _error(bad)
        return 2
    if args.filter:  # parsed (never run: a filter is data) before anything is read
        from .filters import FilterError, parse_filter

        try:
            parse_filter(args.filter)
        except FilterError as exc:
            print(f"dfanalyzer: error: --filter: {exc.line}", file=sys.stderr)
            return 2
    return 0


def _outside(name: str, v, key: Optional[str] = None) -> Optional[str]:
    lo, hi = RANGES[key or name]
    return None if lo <= v <= hi else f"{name} must be >= {lo} and <= {hi}, got {v}"


def _bad_output(opt: str, path: str, parent_must_exist: bool = True) -> Optional[str]:
    if os.path.isdir(path):
        return f"{opt} {path}: is a directory; give the name of the file to write"
    d = os.path.dirname(os.path.abspath(path))
    if parent_must_exist and not os.path.isdir(d):
        return f"{opt} {path}: no directory {d}"
    return None


def bad_option(args) -> Optional[str]:
    """Why an option of ``args`` cannot work, or None; checked before anything is loaded: the
    shared load options, the count options against :data:`RANGES`, ``--threshold`` (a finite
    fraction >= 0) and the output paths (``-o`` not a directory, in an existing directory)."""
    import math

    if args.workers is not None and _outside("--workers", args.workers):
        return _outside("--workers", args.workers)
    if args.batch_size_mb is not None and not (math.isfinite(args.batch_size_mb) and args.batch_size_mb > 0):
        return f"--batch-size-mb must be > 0, got {args.batch_size_mb}"
    if not (math.isfinite(args.small_file_mb) and args.small_file_mb >= 0):
        return f"--small-file-mb must be >= 0, got {args.small_file_mb}"
    top = getattr(args, "top", None)
    if top is not None:
        bad = _outside("--top", top, "report --top" if args.command == "report" else None)
        if bad:
            return bad
    if getattr(args, "bins", None) is not None and _outside("--bins", args.bins):
        return _outside("--bins", args.bins)
    th = getattr(args, "threshold", None)
    if th is not None and not (math.isfinite(th) and th >= 0):
        return f"--threshold must be a finite fraction >= 0 (0.1 = 10 %), got {th}"
    if getattr(args, "output", None):
        bad = _bad_output("-o", args.output)
        if bad:
            return bad
    if getattr(args, "heatmap", None):
        bad = _bad_output("--heatmap", args.heatmap, parent_must_exist=False)
        if bad:
            return bad
    if getattr(args, "plot", None) and os.path.exists(args.plot) and not os.path.isdir(args.plot):
        return f"--plot {args.plot}: not a directory"
    return None


def _start_cluster(args):
    """``(client, 0)``, or ``(None, 1)`` after saying on stderr why the cluster is unreachable.
    distributed's INFO/WARNING logs of cluster start/stop are silenced: the terminal is kept for
    the result."""
    import logging
    import signal

    logging.getLogger("distributed").setLevel(logging.ERROR)

    from .cluster import setup_dask_cluster

    # The worker processes start with SIGINT ignored (kept across their exec): Ctrl-C reaches the
    # whole process group, and only this process reports it (one line, main()); the workers go
    # when the client closes the cluster.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return setup_dask_cluster(
            scheduler_address=args.scheduler,
            scheduler_file=args.scheduler_file,
            n_workers=args.workers,
            silence_logs=logging.CRITICAL,  # (their shutdown after Ctrl-C is not news)
        ), 0
    except (OSError, ValueError, TimeoutError) as exc:
        _error(f"cannot start or reach the Dask cluster: {exc}")
        return None, 1
    finally:
        signal.signal(signal.SIGINT, previous)


def _analyzer_from_args(patterns, args, client, columns, progress, **extra):
    """A ``DFAnalyzer`` over ``patterns`` with the shared load options of ``args``
    (``_add_load_options``); ``columns`` is its ``args=`` (args columns to keep)."""
    from .analyzer import DFAnalyzer

    return DFAnalyzer(
        patterns,
        index_dir=args.index_dir,
        batch_size_mb=args.batch_size_mb,
        small_file_mb=args.small_file_mb,
        io_cats=args.io_cats,
        compute_cats=args.compute_cats,
        app_io_cats=args.app_io_cats,
        args=columns,
        client=client,
        progress=progress,
        query=args.filter,
        **extra,
    )


#: reasons printed per file under its counts (the rest are counted in one more line)
MAX_REASONS = 5


def _print_input_problems(err, analyzer, skipped=None) -> None:
    """On stderr: the analyzer's notes (duplicate paths, indexes rebuilt or kept in memory), then
    per file with lost or skipped data one line of counts, in the wording of ``dftracer-index``,
    followed by the distinct reasons the reader gave (file not readable, not a trace, changed
    since it was indexed, still being written, corrupt member...), at most ``MAX_REASONS``."""
    from .tools import damage_report

    def say(text):
        _say(err, f"warning: {text}")

    for note in analyzer.notes:
        _say(err, f"note: {note}")
    for s in analyzer.skipped_files() if skipped is None else skipped:
        msg = damage_report(s["path"], s.get("lost_lines", 0), s["lost_bytes"], s["skipped_lines"])
        if msg:
            say(msg)
        reasons = []
        for w in s.get("warnings", []):
            if w not in reasons and "lines skipped (invalid JSON" not in w:  # (counted in msg)
                reasons.append(w)
        for w in reasons[:MAX_REASONS]:
            say(w)
        if len(reasons) > MAX_REASONS:
            say(
                f"{s['path']}: {len(reasons) - MAX_REASONS} more reasons (the Python API lists them all: "
                "DFAnalyzer.skipped_files())"
            )


def _no_events(analyzer, args, run: str = "", error=None) -> bool:
    """True (after one line on stderr, or through ``error``) when nothing was loaded: no event
    in any file and no ``--filter`` that could have removed them; ``run`` names the run
    (``compare``)."""
    if args.filter or analyzer.totals["events"] > 0:
        return False
    n = analyzer.totals["files"]
    why = "see the warnings above" if analyzer.skipped_files() else "they hold no trace event"
    (error or _error)(f"no event loaded from the {n} file(s) given{run} ({why})")
    return True


def _no_events_left(exc, args, error=None) -> None:
    """The line of a :class:`~dfanalyzer.engine.timebins.NoEventsError` (no event to analyse or
    plot), on stderr or through ``error``."""
    why = f" (--filter {args.filter!r} kept none of the events loaded)" if args.filter else ""
    (error or _error)(f"{exc}{why}")


def _run_loaded(args, work) -> int:
    """Validate the shared options, start/reach the cluster, load the traces and call
    ``work(analyzer, err_console)``; returns the exit status."""
    if _check_load_options(args):
        return 2
    from rich.console import Console

    from .analyzer import expand_patterns
    from .engine.timebins import NoEventsError
    from .insights import load_config

    try:
        expand_patterns(args.patterns)
        if getattr(args, "config", None):
            load_config(args.config)  # a bad file fails before the cluster starts
    except (FileNotFoundError, ValueError, TypeError) as exc:
        _error(exc)
        return 2
    except Exception as exc:  # YAML syntax errors, a config that is a directory
        _error(f"{args.config}: {exc}")
        return 2
    err = Console(stderr=True)
    client, status = _start_cluster(args)
    if client is None:
        return status
    try:
        columns = None if args.command == "report" else INSIGHT_ARGS
        analyzer = _analyzer_from_args(args.patterns, args, client, columns, err.is_terminal and not args.no_progress)
        _print_input_problems(err, analyzer)
        for w in analyzer.input_warnings():  # unresolved hashes, inputs from several runs (sanity)
            _say(err, f"warning: {w}")
        if _no_events(analyzer, args):
            return 1
        return work(analyzer, err)
    except NoEventsError as exc:
        _no_events_left(exc, args)
        return 1
    except (FileNotFoundError, ValueError) as exc:  # a FilterError at run time, a --window too fine
        _error(exc)
        return 2
    except BrokenPipeError:
        raise
    except OSError as exc:  # the report cannot be written
        _error(exc)
        return 1
    finally:
        client.close()


def _run_insights(args) -> int:
    def work(analyzer, err):
        from rich.console import Console

        rep = analyzer.insights(config=args.config, show=False)
        if args.json:
            import json

            print(json.dumps(rep.to_dict(), indent=2))
        else:
            out = Console()
            if not out.is_terminal:
                out = Console(width=140)
            out.print(rep.panel())
        return 0

    return _run_loaded(args, work)


def _run_report(args) -> int:
    def work(analyzer, err):
        path = analyzer.report(args.output, config=args.config, top=args.top, bins=args.bins, title=args.title)
        _say(err, f"wrote {path}")
        return 0

    return _run_loaded(args, work)


def main(argv: Optional[List[str]] = None) -> int:
    """Run one command; returns the exit status (module docstring). Ctrl-C (SIGINT) ends any
    command with one line on stderr and status 130, as a shell reports a killed command."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        _interrupted()
        return 130
    except BrokenPipeError:  # the reader of stdout went away (``| head``): not a failure
        try:  # (and Python's flush of stdout at exit must not report it either)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 0
    except Exception as exc:  # a bug or a failure not foreseen: still one line, not a traceback
        if os.environ.get("DFANALYZER_DEBUG"):
            raise
        _error(f"{type(exc).__name__}: {exc} (unexpected; DFANALYZER_DEBUG=1 shows the traceback)")
        return 1


def _interrupted() -> None:
    import logging
    import signal

    # a second Ctrl-C while the cluster shuts down must not print a traceback either
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    print("dfanalyzer: interrupted", file=sys.stderr)


def _main(argv: Optional[List[str]] = None) -> int:
    try:
        args = _parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2, its line already printed)
        return exc.code if isinstance(exc.code, int) else 2
    import warnings

    from .sanity import InputWarning

    warnings.simplefilter("ignore", InputWarning)  # the commands print input warnings as "warning: ..."
    if args.command == "insights":
        return _run_insights(args)
    if args.command == "report":
        return _run_report(args)
    if args.command in VIEW_COMMANDS or args.command == "compare":
        return view_main(args)
    if _check_load_options(args):
        return 2
    pause = _StartUpGc()  # until the analyzer is planned: imports (distributed), connecting, indexing
    try:
        return _summary_main(args, pause)
    finally:
        pause.end()


class _StartUpGc:
    """In the ``dfanalyzer`` process itself (:func:`run` sets :data:`_FREEZE_START_UP`), Python's
    cyclic garbage collector paused for the summary command's start-up, from construction to
    :meth:`end` (idempotent), which moves everything made so far to the permanent generation
    (``gc.freeze()``) and restores the collector as it was.

    The start-up only allocates: modules, their functions and classes, the connection, the
    plan. Importing distributed (and the dask it imports) makes ~300k such objects, and the
    collector traverses them again and again while they are made: ~0.1-0.18 s of CPU of the
    ``--scheduler`` command (a full collection of ~70 ms, ~110 young ones), ~20-40 ms of the
    threaded command's (docs/perf/i26-client.md); frozen, no later collection traverses them
    either. Merely pausing would not do: the first young collection after it traverses them
    all at once (~0.19 s measured). A caller of :func:`main` (tests, scripts) keeps its
    collector untouched: the process goes on after the command, and frozen objects that
    become garbage in cycles would never be collected."""

    def __init__(self):
        import gc

        self._was = gc.isenabled()
        self._on = _FREEZE_START_UP
        if self._on:
            gc.disable()

    def end(self) -> None:
        if not self._on:
            return
        import gc

        self._on = False
        gc.freeze()
        if self._was:
            gc.enable()


#: set by :func:`run` (the console script's own process, which ends with the command)
_FREEZE_START_UP = False


def _summary_main(args, pause: _StartUpGc) -> int:
    """The ``summary`` command once its options are checked (``_main``); ``pause`` ends when
    the analyzer is planned, before the summary runs."""
    from ._paths import expand_patterns  # (no NumPy: see _summary_on_worker)

    try:
        expand_patterns(args.patterns)
    except FileNotFoundError as exc:
        _error(exc)
        return 2
    # rich (~30 ms of imports before the first batch) only when something goes to stderr
    err = _StderrConsole()
    progress = not args.no_progress and err.is_terminal
    # a scheduler is reached now; the embedded cluster is not started at all for the summary
    # (streamed in this process's threads), only for --plot, which needs the events held
    client = None
    if args.scheduler or args.scheduler_file or args.local_cluster:
        on_worker = _runs_on_worker(args, progress)
        if on_worker:  # (this process folds nothing: distributed imported without NumPy)
            from .cluster import _import_distributed

            _import_distributed(hide_numpy=True)
        client, status = _start_cluster(args)
        if client is None:
            return status
        if on_worker:
            try:
                return _summary_from_worker(args, client, err, pause)
            finally:
                client.close()
    try:
        return _summary_run(args, client, progress, _Output(err), pause)
    finally:
        if client is not None:
            client.close()


class _Output:
    """Where :func:`_summary_run` writes: stdout, the stderr console (``err``, for
    :func:`_say`) and the one-line failures (:func:`_error`)."""

    def __init__(self, err):
        self.err = err

    def stdout(self, text: str) -> None:
        print(text)

    def error(self, msg) -> None:
        _error(msg)


class _Recorded(_Output):
    """An :class:`_Output` that records instead (on a worker: :func:`_summary_on_worker`):
    ``items`` are ``(kind, args, kwargs)`` in the order written, ``kind`` one of ``"stdout"``,
    ``"error"`` and ``"print"`` (a call of the stderr console's ``print``, which it stands for);
    :func:`_replay` writes them in this process as :class:`_Output` would have."""

    is_terminal = False  # (as the stderr console: no progress bar, no colour)

    def __init__(self):
        super().__init__(self)
        self.items: List[tuple] = []

    def stdout(self, text: str) -> None:
        self.items.append(("stdout", (text,), {}))

    def error(self, msg) -> None:
        self.items.append(("error", (f"{msg}",), {}))

    def print(self, *objects, **kwargs) -> None:
        self.items.append(("print", objects, kwargs))


def _replay(items: List[tuple], out: _Output) -> None:
    """Write what a :class:`_Recorded` recorded, in its order, to ``out``."""
    for kind, a, kw in items:
        if kind == "stdout":
            out.stdout(*a)
        elif kind == "error":
            out.error(*a)
        else:
            out.err.print(*a, **kw)


#: the ``--scheduler`` / ``--scheduler-file`` summary with ``--json`` (no progress bar, no
#: ``--plot``) runs on a worker (:func:`_summary_on_worker`); False: in this process, as with
#: a progress bar (tests and benchmarks compare the two)
SUMMARY_ON_WORKER = True


def _runs_on_worker(args, progress: bool) -> bool:
    """Whether this summary runs on a worker of the running cluster (:data:`SUMMARY_ON_WORKER`)."""
    return bool(
        SUMMARY_ON_WORKER
        and (args.scheduler or args.scheduler_file)
        and not args.local_cluster
        and args.json
        and not args.plot
        and not progress
    )


def _summary_from_worker(args, client, err, pause: _StartUpGc) -> int:
    """The summary of a running cluster, computed by one task (:func:`_summary_on_worker`):
    this process checks the options and patterns, imports distributed (without NumPy),
    connects, submits that task, and writes what it returns, as :func:`_summary_run` would
    have written it here; its exit status. The patterns are made absolute here (this process's
    working directory and home); ``--index-dir`` is taken on the workers, as by the tasks of
    the summary made here."""
    import argparse

    remote = argparse.Namespace(**vars(args))
    remote.patterns = [os.path.join(os.getcwd(), os.path.expanduser(os.fspath(p))) for p in args.patterns]
    future = client.submit(_summary_on_worker, remote, pure=False)
    pause.end()
    try:
        status, items = future.result()
    except (OSError, TimeoutError) as exc:  # (the connection lost while waiting: as _summary_run says it)
        _error(f"cannot start or reach the Dask cluster: {exc}")
        return 1
    _replay(items, _Output(err))
    return status


def _summary_on_worker(args) -> tuple:
    """Run on a worker of the running cluster: :func:`_summary_run` with the worker's client
    (``distributed.worker_client``: this task leaves the worker's thread pool while it waits, so
    the summary's own tasks run there too); ``(exit status, what it wrote)`` (see
    :class:`_Recorded`). Indexing, planning, the chunk tasks' submission and the fold of their
    partials all happen here, so the client that submitted this task needs neither NumPy nor the
    analysis modules, and gets back plain text (docs/perf/i27-import.md). Once the scheduler
    releases this task (the command interrupted, killed or cut off), its waits cancel the tasks
    it submitted and raise :class:`~dfanalyzer.analyzer.TaskReleased` (``DFAnalyzer._wait``),
    which the worker discards; the chunk tasks already running stop before their next batch."""
    from distributed import worker_client
    from distributed.client import _del_global_client, _get_global_client  # (private, see below)

    rec = _Recorded()
    before = _get_global_client()
    with worker_client() as client:
        # The worker's first client is made the process's default client (distributed's
        # Worker._get_client). Where the workers are threads of a user's process
        # (LocalCluster(processes=False)) that would silently move the user's later
        # DFAnalyzer(...) calls onto the cluster: give the default back as it was.
        if before is None and _get_global_client() is client:
            _del_global_client(client)
        status = _summary_run(args, client, False, rec)
    return status, rec.items


def _summary_run(args, client, progress: bool, out: _Output, pause: Optional[_StartUpGc] = None) -> int:
    """The summary itself (in threads when ``client`` is None), written to ``out``; its exit
    status. ``pause`` ends once the analyzer is planned."""
    from .engine.timebins import NoEventsError

    err = out.err
    analyzer = None
    try:
        # the summary and the plots use only the core columns (args=())
        analyzer = _analyzer_from_args(args.patterns, args, client, (), progress, n_workers=args.workers)
        if pause is not None:
            pause.end()
        result = analyzer.summary(show=False)
        if args.json:
            import json  # (after the loads: not a start-up import, docs/perf/i28-boot.md)

            out.stdout(json.dumps(result.to_dict(), indent=2))
            _print_input_problems(err, analyzer, result.skipped)
            for w in result.warnings:
                _say(err, f"warning: {w}")
        else:
            from rich.console import Console

            console = Console()
            if not console.is_terminal and not os.environ.get("COLUMNS"):  # files and pipes: the function table
                console = Console(width=120)
            console.print(result.panel())
            # also on stderr, for output redirected to a file; with the reasons the panel lacks
            _print_input_problems(err, analyzer, result.skipped)
            for w in result.warnings:
                _say(err, f"warning: {w}")
        if _no_events(analyzer, args, error=out.error):
            return 1
        if args.plot:
            try:
                paths = analyzer.plot_timeline(args.plot)
            except OSError as exc:  # (the directory cannot be written)
                out.error(f"--plot {args.plot}: {exc}")
                return 1
            for path in paths:
                _say(err, f"wrote {path}")
    except NoEventsError as exc:
        _no_events_left(exc, args, error=out.error)
        return 1
    except (FileNotFoundError, ValueError) as exc:
        out.error(exc)
        return 2
    except BrokenPipeError:  # the reader of stdout went away: main() says nothing, status 0
        raise
    except (OSError, TimeoutError) as exc:  # the embedded cluster (--plot) could not start
        out.error(f"cannot start or reach the Dask cluster: {exc}")
        return 1
    finally:
        if analyzer is not None:
            analyzer.close()
    return 0


# ----------------------------------------------------------------------------- view commands
#: command -> (help, default sort column or None for the view's own order)
VIEW_COMMANDS = {
    "functions": ("per I/O function: count, bytes, time, exact dur percentiles, bandwidth", "time_s"),
    "files": ("per file: ops, bytes, I/O time, bandwidth, processes, access pattern, request sizes", "time_s"),
    "processes": ("per process: I/O, app-I/O and compute time, bytes, lifetime, parent; imbalance", "io_time_s"),
    "timeline": ("per time window: bytes, I/O time split across windows, bandwidth, concurrency, overlap", None),
    "tags": ("per value of a context tag (args key such as epoch or step)", None),
    "epochs": ("per epoch time split from the tracer's epoch/train/fetch events", None),
    "layers": ("time split per layer (application categories vs POSIX/STDIO), unoverlapped time", "time_s"),
}


#: command -> the columns its table shows by default (the rest with --all-columns or --columns;
#: exports keep every column): chosen so that the table fits a 120-column terminal
TABLE_COLUMNS = {
    "functions": ("count", "bytes", "time_s", "mean_us", "p99_us", "max_us", "bandwidth_mib_s", "time_share"),
    "files": ("ops", "bytes", "time_s", "bandwidth_mib_s", "processes", "p50_us", "max_us", "pattern"),
    "processes": ("events", "bytes", "io_time_s", "compute_time_s", "lifetime_s", "parent", "role"),
    "timeline": ("start_s", "end_s", "ops", "bytes", "io_time_s", "bandwidth_mib_s", "concurrency"),
    "tags": ("events", "time_s", "io_time_s", "app_io_time_s", "compute_time_s", "start_s", "end_s"),
    "epochs": ("processes", "start_s", "duration_s", "train_s", "fetch_s", "compute_s", "io_s"),
    "layers": None,
    "compare": None,
}


def _add_load_options(s: argparse.ArgumentParser, patterns: bool = True) -> None:
    """Options every loading command shares (traces, cluster, index, categories, filter)."""
    if patterns:
        s.add_argument("patterns", nargs="+", metavar="PATTERN", help="trace files, glob patterns or directories")
    s.add_argument("--workers", type=int, default=None, metavar="N", help="local Dask workers (default: cores)")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--scheduler", default=None, metavar="ADDR", help="connect to a running Dask scheduler")
    g.add_argument("--scheduler-file", default=None, metavar="F", help="scheduler file of a running Dask scheduler")
    s.add_argument("--index-dir", default=None, metavar="D", help="directory for .zindex files")
    s.add_argument(
        "--batch-size-mb",
        type=float,
        default=None,
        help="uncompressed MiB of text per load batch (default: 16; a summary in 8+ threads: 16-64, 8+ per thread; events held on a cluster: 16-64, 4+ per worker thread)",
    )
    s.add_argument(
        "--small-file-mb",
        type=float,
        default=1,
        metavar="MB",
        help="files of at most MB compressed MiB are read whole in groups, without index files "
        "(0: index every file on its own)",
    )
    s.add_argument("--io-cats", type=_cats, default=IO_CATS, help="I/O categories (comma separated)")
    s.add_argument("--compute-cats", type=_cats, default=COMPUTE_CATS, help="compute categories")
    s.add_argument("--app-io-cats", type=_cats, default=APP_IO_CATS, help="application I/O categories")
    s.add_argument("--no-progress", action="store_true", help="never show the progress bar")
    s.add_argument(
        "--filter",
        default=None,
        metavar="FILTER",
        help="keep only the events this filter selects (a grammar of comparisons, in, and/or/not, "
        'startswith/contains, units; docs/analyzer.md "Filters"), e.g. '
        "\"cat == 'POSIX' and dur >= 10ms and fname contains 'ckpt'\"",
    )


def _add_output_options(s: argparse.ArgumentParser) -> None:
    lo, hi = RANGES["--top"]
    s.add_argument(
        "--top", type=int, default=None, metavar="N", help=f"only the first N rows (after sorting), {lo}..{hi}"
    )
    s.add_argument("--sort", default=None, metavar="COLUMN", help="sort by this column (descending)")
    s.add_argument("--ascending", action="store_true", help="sort ascending")
    s.add_argument(
        "--format",
        choices=("table", "csv", "parquet", "json"),
        default="table",
        help="table (default) or an export format",
    )
    s.add_argument("-o", "--output", default=None, metavar="FILE", help="write the export to FILE (else stdout)")
    g = s.add_mutually_exclusive_group()
    g.add_argument(
        "--columns",
        type=_cats,
        default=None,
        metavar="A,B,...",
        help="only these columns, in this order (default: the table shows a subset that fits 120 "
        "characters, exports every column)",
    )
    g.add_argument("--all-columns", action="store_true", help="the table shows every column")


def _mapping(text: str) -> dict:
    out = {}
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        if "=" not in item:
            raise argparse.ArgumentTypeError(f"bad mapping {item!r}: use CATEGORY=LAYER")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip() or None
    return out


def add_view_commands(sub, only: Optional[str] = None) -> None:
    """Add the view subcommands and ``compare`` (``only``: just that one) to the ``dfanalyzer`` parser."""
    for name, (helptext, _) in VIEW_COMMANDS.items():
        if only is not None and name != only:
            continue
        s = sub.add_parser(name, help=helptext, description=helptext)
        _add_load_options(s)
        _add_output_options(s)
        if name == "timeline":
            g = s.add_mutually_exclusive_group()
            g.add_argument(
                "--bins", type=int, default=None, metavar="N", help=f"N equal windows, 1..{MAX_BINS} (default 100)"
            )
            g.add_argument("--window", default=None, metavar="DT", help="window length, e.g. 1s, 250ms")
            s.add_argument("--heatmap", default=None, metavar="PNG", help="also write a process x time heat map PNG")
        if name == "tags":
            s.add_argument("--key", required=True, metavar="KEY", help="args key to group by, e.g. epoch, step")
        if name == "layers":
            s.add_argument(
                "--map",
                type=_mapping,
                default=None,
                metavar="CAT=LAYER,...",
                help="override the category -> layer mapping (empty LAYER drops the category)",
            )
    if only not in (None, "compare"):
        return
    s = sub.add_parser(
        "compare",
        help="compare two runs: deltas and ratios of every summary and function metric",
        description="Compare run B against baseline run A. With --threshold, exit 3 when a time "
        "or latency metric grew (or a bandwidth fell) by more than that fraction.",
    )
    s.add_argument("baseline", metavar="A", help="pattern of the baseline run")
    s.add_argument("candidate", metavar="B", help="pattern of the run to compare")
    _add_load_options(s, patterns=False)
    _add_output_options(s)
    s.add_argument(
        "--threshold",
        type=float,
        default=None,
        metavar="FRACTION",
        help="regression threshold >= 0, e.g. 0.1 = 10 %% worse (exit 3 on a regression; 1 when a run has no event)",
    )
    s.add_argument("--all", action="store_true", help="table: every metric (default: changed ones)")


def _view_frame(analyzer, args):
    cmd = args.command
    if cmd == "functions":
        return analyzer.functions()
    if cmd == "files":
        return analyzer.file_view()
    if cmd == "processes":
        return analyzer.processes()
    if cmd == "timeline":
        return analyzer.time_windows(bins=args.bins, window=args.window)
    if cmd == "tags":
        return analyzer.by_tag(args.key)
    if cmd == "epochs":
        return analyzer.epochs()
    return analyzer.layers(args.map)


#: the columns of ``compare`` (``dfanalyzer.views.compare``)
COMPARE_COLUMNS = ("a", "b", "delta", "ratio", "direction", "regression")


def _sample_events():
    """A one-event frame with the core columns (a 1 ms POSIX ``read`` of 4096 bytes): enough for
    every view to build its columns, so view options are checked before any trace is loaded."""
    import pandas as pd

    from . import schema

    meta = schema.make_meta(dict(schema.CORE_COLUMNS))
    row = {"name": "read", "cat": "POSIX", "ph": "X", "hostname": "h", "fname": "/f", "pid": 1, "tid": 1}
    row.update(ts=0, dur=1000, te=1000, size=4096, offset=0)
    df = pd.DataFrame({c: [row.get(c)] for c in meta.columns})
    return schema.align_frame(df, schema.frame_schema(meta))


def view_columns(args) -> Optional[tuple]:
    """``(index names, columns)`` of the frame ``args.command`` prints, computed on a one-event
    frame (no trace is read); None when they cannot be known before loading."""
    if args.command == "compare":
        return ("metric",), COMPARE_COLUMNS
    try:
        df = _view_frame(_SampleAnalyzer(), args)
    except Exception:  # (a view whose columns depend on the data: checked after the load)
        return None
    return tuple(str(n) for n in df.index.names if n is not None), tuple(map(str, df.columns))


class _SampleAnalyzer:
    """The view methods of ``DFAnalyzer`` over :func:`_sample_events` (for :func:`view_columns`)."""

    def __init__(self):
        from . import views

        self._v, self._e = views, _sample_events()

    def functions(self):
        return self._v.function_metrics(self._e)

    def file_view(self):
        return self._v.file_view(self._e)

    def processes(self):
        return self._v.process_view(self._e)

    def time_windows(self, bins=None, window=None):  # (the columns do not depend on the windows)
        return self._v.time_view(self._e, bins=1)

    def by_tag(self, key):
        return self._v.tag_view(self._e, key)

    def epochs(self):
        return self._v.epoch_view(self._e)

    def layers(self, mapping=None):
        return self._v.layer_view(self._e, mapping)


def _no_column(kind: str, key: str, names) -> str:
    import difflib

    near = difflib.get_close_matches(key, names, n=1, cutoff=0.5)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return f"no column {key!r} to {kind}{hint}; columns: {', '.join(names)}"


def check_view_options(args) -> Optional[str]:
    """Why the output options of a view command (``--sort``, ``--top``, ``--columns``) cannot
    work, or None; checked before any trace is loaded."""
    if args.top is not None and _outside("--top", args.top):
        return _outside("--top", args.top)
    if args.sort is None and not args.columns:
        return None
    cols = view_columns(args)
    if cols is None:
        return None
    index, columns = cols
    if args.sort is not None and args.sort not in columns and args.sort not in index:
        return _no_column("sort by", args.sort, list(columns) + list(index))
    for c in args.columns or ():
        if c not in columns:
            return _no_column("show", c, list(columns))
    return None


def _shape(df, args, default_sort):
    import pandas as pd

    key = args.sort or default_sort
    if key is not None:
        if key not in df.columns and key not in (df.index.names or []):
            raise ValueError(f"no column {key!r} to sort by; columns: {', '.join(map(str, df.columns))}")
        attrs = dict(df.attrs)
        df = df.sort_values(key, ascending=args.ascending, kind="stable")
        df.attrs.update(attrs)
    elif args.ascending:
        df = df.iloc[::-1]
    if args.top is not None:
        if args.top < 1:
            raise ValueError("--top must be >= 1")
        attrs = dict(df.attrs)
        df = df.head(args.top)
        df.attrs.update(attrs)
    keep = args.columns
    if keep is None and args.format == "table" and not args.all_columns:
        keep = TABLE_COLUMNS.get(args.command)
    if keep:
        missing = [c for c in args.columns or () if c not in df.columns]
        if missing:
            raise ValueError(_no_column("show", missing[0], list(map(str, df.columns))))
        attrs = dict(df.attrs)
        df = df[[c for c in keep if c in df.columns]]
        df.attrs.update(attrs)
    assert isinstance(df, pd.DataFrame)
    return df


def write_frame(df, fmt: str, output) -> None:
    """Export a view frame: ``csv`` (index as columns), ``parquet`` (needs ``output``) or ``json``
    (a list of records, index as fields) to ``output`` or stdout."""
    if fmt == "parquet":
        if not output:
            raise ValueError("--format parquet needs -o FILE")
        flat = df.reset_index()
        flat.columns = [str(c) for c in flat.columns]
        flat.to_parquet(output, index=False)
        return
    if fmt == "csv":
        text = df.to_csv()
        if not output:  # (a terminal, maybe: the trace's text escaped; a file keeps it exact)
            text = "\n".join(escape(line) for line in text.split("\n"))
    else:
        text = df.reset_index().to_json(orient="records", indent=2, double_precision=15)
    if output:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text if text.endswith("\n") else text + "\n")
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _cell(v) -> str:
    import math

    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


#: widest key (index) cell of a table, longer ones lose their start
MAX_KEY = 48


def frame_table(df, title: str):
    """A ``rich.table.Table`` of a view frame (index columns first)."""
    from rich.table import Table

    t = Table(title=title, header_style="bold", show_edge=True)
    names = [str(n) if n is not None else "" for n in (df.index.names or [None])]
    # The keys (file paths...) give way when the terminal is narrow: cut from the left (the end of
    # a path says most), then folded; the values and their headers are never broken.
    # every header and cell is a Text of the escaped string: a trace's names are never read as
    # rich markup nor reach the terminal with their control characters
    for n in names:
        t.add_column(cell(n), overflow="fold", min_width=min(12, max(len(n), 4)))
    for c in df.columns:
        t.add_column(cell(c), justify="right", no_wrap=True, min_width=len(str(c)))

    def key(v):
        text = escape(_cell(v))
        return cell(text if len(text) <= MAX_KEY else "…" + text[-(MAX_KEY - 1) :])

    for idx, row in zip(df.index, df.itertuples(index=False)):
        keys = idx if isinstance(idx, tuple) else (idx,)
        t.add_row(*[key(k) for k in keys], *[cell(_cell(v)) for v in row])
    return t


def _attrs_text(df) -> str:
    items = [(k, v) for k, v in df.attrs.items() if not isinstance(v, (list, dict))]
    return "  ".join(f"{k}={_cell(v) if not isinstance(v, tuple) else ':'.join(map(str, v))}" for k, v in items)


def view_main(args) -> int:
    """Run a view command or ``compare``; returns the exit status."""
    from rich.console import Console

    from .analyzer import expand_patterns
    from .engine.timebins import NoEventsError

    if _check_load_options(args):
        return 2
    if args.format == "parquet" and not args.output:
        _error("--format parquet needs -o FILE")
        return 2
    runs = [[args.baseline], [args.candidate]] if args.command == "compare" else [args.patterns]
    try:
        for r in runs:
            expand_patterns(r)
        if args.command == "timeline" and args.window is not None:
            from .analyzer import _window_us

            _window_us(args.window)
        bad = check_view_options(args)  # before the load (which can take minutes)
        if bad:
            raise ValueError(bad)
    except (FileNotFoundError, ValueError) as exc:
        _error(exc)
        return 2
    err = Console(stderr=True)
    progress = err.is_terminal and not args.no_progress
    client, status = _start_cluster(args)
    if client is None:
        return status
    keep_args = (args.key,) if args.command == "tags" else ()
    try:
        analyzers = [_analyzer_from_args(r, args, client, keep_args, progress) for r in runs]
        for a in analyzers:  # (before any output: a run without events ends the command)
            _print_input_problems(err, a)
        names = [""]
        if args.command == "compare":
            names = [f" for the baseline run A {args.baseline!r}", f" for the candidate run B {args.candidate!r}"]
        if any(_no_events(a, args, name) for a, name in zip(analyzers, names)):
            return 1
        status = 0
        if args.command == "compare":
            from .views import compare

            df = compare(analyzers[0], analyzers[1], threshold=args.threshold)
            # a run with no event (after --filter) would compare as "no regression": refuse it
            for side, col, pattern in (("baseline", "a", args.baseline), ("candidate", "b", args.candidate)):
                n = df[col].get("events", 0.0)
                if not n > 0:
                    left = f" left after --filter {args.filter!r}" if args.filter else ""
                    _error(f"compare: the {side} run {pattern!r} has no event{left}: nothing to compare")
                    return 1
            regressions = df[df["regression"]]
            shown = df if (args.all or args.format != "table") else df[(df["delta"] != 0) | df["regression"]]
            default_sort = None
            if args.threshold is not None and len(regressions):
                status = 3
        else:
            df = shown = _view_frame(analyzers[0], args)
            default_sort = VIEW_COMMANDS[args.command][1]
        shown = _shape(shown, args, default_sort)
        if args.format == "table":
            out = Console()
            if not out.is_terminal and not os.environ.get("COLUMNS"):  # files and pipes: room for --all-columns
                out = Console(width=200)
            out.print(frame_table(shown, f"dfanalyzer {args.command}"))
            note = _attrs_text(df)
            if note:  # (wrapped at the table's width)
                out.print(escape(note), highlight=False, markup=False)
            if args.command == "layers" and df.attrs.get("nested"):  # HDF5 > MPI-IO > POSIX (issue 24)
                from .views import nested_frame

                out.print(frame_table(nested_frame(df.attrs["nested"]), "nested layers"))
        else:
            write_frame(shown, args.format, args.output)
            if args.output:
                _say(err, f"wrote {args.output}")
        if args.command == "compare" and args.threshold is not None:
            for m, r in regressions.iterrows():
                _say(err, f"regression: {m}: {r['a']:.6g} -> {r['b']:.6g} ({r['ratio']:.3f}x)")
        if args.command == "timeline" and args.heatmap:
            from .plots import render_heatmap

            hm = analyzers[0].heatmap(bins=args.bins, window=args.window)
            _say(err, f"wrote {render_heatmap(hm, args.heatmap)}")
    except NoEventsError as exc:
        _no_events_left(exc, args)
        return 1
    except (FileNotFoundError, ValueError) as exc:
        _error(exc)
        return 2
    except BrokenPipeError:
        raise
    except OSError as exc:  # the output cannot be written (permissions, full disk)
        _error(exc)
        return 1
    finally:
        client.close()
    return status


#: freed memory glibc's malloc keeps per arena in the dfanalyzer process (bytes): what the
#: reduction of a 64 MiB batch (the threaded summary's largest, 8+ threads) frees at once; arenas
#: of 16 MiB batches never grow that far, so it costs them nothing (docs/perf/i28-mm.md, and
#: docs/perf/analyzer.md "ninth round" for the 64 MiB measurement)
KEEP_FREED_BYTES = 64 << 20
#: blocks from this size (bytes) get their own mapping, given back at free: the fold's large
#: one-off arrays; a batch's columns and temporaries (<= ~1.3 MiB at 16 MiB batches, 3-5 MiB at
#: 64 MiB) stay below
MMAP_FROM_BYTES = 16 << 20


def _keep_freed_memory() -> None:
    """In the console script's own process only (never a caller of :func:`main`, a user's
    process or a traced application): glibc's malloc keeps freed memory for the next batch
    instead of giving it back and faulting it in again (``_reader.keep_freed_memory``:
    ~540 fresh pages and a ``MADV_DONTNEED`` every few 16 MiB batches of the threaded summary
    before, ~0 after; peak RSS +10-50 MiB at 2 threads, at most KEEP_FREED_BYTES per arena;
    docs/perf/i28-mm.md). A reader module that cannot be loaded is left to the command to
    report."""
    try:
        from . import _reader
    except ImportError:
        return
    _reader.keep_freed_memory(KEEP_FREED_BYTES, MMAP_FROM_BYTES)


def run() -> None:
    """The ``dfanalyzer`` console script: :func:`main`, then the process ends with its status.

    Once the command is done and its output flushed, the interpreter's teardown (freeing every
    module: NumPy, rich, the analyzer; 0.05-0.15 s of one core after the result is out, a serial
    step of the threaded summary, issue 22) is skipped: the atexit handlers run, then
    ``os._exit``. Python's own exit is kept whenever it could differ: a flush that fails (the
    reader of stdout went away: Python reports it and exits 120) or a thread still running."""
    global _FREEZE_START_UP
    _FREEZE_START_UP = True  # (this process ends with the command: see _StartUpGc)
    _keep_freed_memory()
    status = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        sys.exit(status)
    import threading

    if threading.active_count() != 1 or not isinstance(status, int) or not 0 <= status <= 255:
        sys.exit(status)
    import atexit

    atexit._run_exitfuncs()  # (coverage, logging, tempfile... as at a normal exit)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        sys.exit(status)
    os._exit(status)


if __name__ == "__main__":  # pragma: no cover
    run()
