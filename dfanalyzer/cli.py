"""``dfanalyzer`` command line: ``dfanalyzer COMMAND PATTERN... [options]``.

``summary`` prints the summary panel (paper Figure 6) or, with ``--json``, exactly
``Summary.to_dict()`` as JSON on stdout. The view commands (``functions``, ``files``,
``processes``, ``timeline``, ``tags``, ``epochs``, ``layers``) print a table of the matching
``dfanalyzer.views`` frame or export it (``--format csv|parquet|json``, ``-o FILE``);
``compare A B`` compares two runs; ``insights`` runs the insight rules (``--json``,
``--config``) and ``report`` writes one self-contained HTML page (``-o``). Every command takes ``--filter QUERY``. Exit status: 0 on
success, 2 for bad arguments or a pattern that matches no file, 1 for other errors, 3 when
``compare --threshold`` finds a regression. A progress bar is shown on stderr while loading when
it is a terminal.
Input warnings (skipped input, unresolved file/host hashes) of ``summary`` are printed on stderr
as ``warning: ...``; its panel also lists unresolved hashes under "Warnings".
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import List, Optional

from .engine.vocabulary import APP_IO_CATS, COMPUTE_CATS, IO_CATS


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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dfanalyzer",
        description="Analyse DFTracer traces with Dask.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True)
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
    add_view_commands(sub)
    _add_insights_parser(sub)
    _add_report_parser(sub)
    return p


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
    s.add_argument("--top", type=int, default=20, metavar="N", help="rows per view table (default 20)")
    s.add_argument("--bins", type=int, default=50, metavar="N", help="time windows of the plots (default 50)")
    s.add_argument("--title", default=None, help="page title")


#: args keys the insight rules read (file position reconstruction, epoch and step tags)
INSIGHT_ARGS = ("fd", "ret", "whence", "epoch", "step", "count")


def _check_load_options(args) -> int:
    """0, or exit status 2 after saying on stderr which shared load option is invalid."""
    if args.workers is not None and args.workers < 1:
        print("dfanalyzer: error: --workers must be >= 1", file=sys.stderr)
        return 2
    if args.batch_size_mb <= 0:
        print("dfanalyzer: error: --batch-size-mb must be > 0", file=sys.stderr)
        return 2
    return 0


def _start_cluster(args):
    """``(client, 0)``, or ``(None, 1)`` after saying on stderr why the cluster is unreachable.
    distributed's INFO/WARNING logs of cluster start/stop are silenced: the terminal is kept for
    the result."""
    logging.getLogger("distributed").setLevel(logging.ERROR)
    from .cluster import setup_dask_cluster

    try:
        return setup_dask_cluster(
            scheduler_address=args.scheduler, scheduler_file=args.scheduler_file, n_workers=args.workers
        ), 0
    except (OSError, ValueError, TimeoutError) as exc:
        print(f"dfanalyzer: error: cannot start or reach the Dask cluster: {exc}", file=sys.stderr)
        return None, 1


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


def _print_input_problems(err, analyzer, skipped=None) -> None:
    """On stderr: the analyzer's notes (duplicate paths, indexes rebuilt or kept in memory), then
    one line per file with lost or skipped data, in the wording of ``dftracer-index``."""
    from .tools import damage_report

    for note in analyzer.notes:
        err.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)
    for s in analyzer.skipped_files() if skipped is None else skipped:
        msg = damage_report(s["path"], s.get("lost_lines", 0), s["lost_bytes"], s["skipped_lines"])
        for w in s.get("warnings", []) if msg is None else ():
            err.print(f"warning: {w}", highlight=False, markup=False, soft_wrap=True)
        if msg:
            err.print(f"warning: {msg}", highlight=False, markup=False, soft_wrap=True)


def _run_loaded(args, work) -> int:
    """Validate the shared options, start/reach the cluster, load the traces and call
    ``work(analyzer, err_console)``; returns the exit status."""
    if _check_load_options(args):
        return 2
    from rich.console import Console

    from .analyzer import expand_patterns
    from .insights import load_config

    try:
        expand_patterns(args.patterns)
        if getattr(args, "config", None):
            load_config(args.config)  # a bad file fails before the cluster starts
    except (FileNotFoundError, ValueError) as exc:
        print(f"dfanalyzer: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # YAML syntax errors
        print(f"dfanalyzer: error: {args.config}: {exc}", file=sys.stderr)
        return 2
    err = Console(stderr=True)
    client, status = _start_cluster(args)
    if client is None:
        return status
    try:
        columns = None if args.command == "report" else INSIGHT_ARGS
        analyzer = _analyzer_from_args(args.patterns, args, client, columns, err.is_terminal and not args.no_progress)
        _print_input_problems(err, analyzer)
        return work(analyzer, err)
    except FileNotFoundError as exc:
        print(f"dfanalyzer: error: {exc}", file=sys.stderr)
        return 2
    finally:
        client.close()


def _run_insights(args) -> int:
    def work(analyzer, err):
        from rich.console import Console

        rep = analyzer.insights(config=args.config, show=False)
        if args.json:
            print(json.dumps(rep.to_dict(), indent=2))
        else:
            out = Console()
            if not out.is_terminal:
                out = Console(width=140)
            out.print(rep.panel())
        return 0

    return _run_loaded(args, work)


def _run_report(args) -> int:
    if args.top < 1 or args.bins < 1:
        print("dfanalyzer: error: --top and --bins must be >= 1", file=sys.stderr)
        return 2

    def work(analyzer, err):
        path = analyzer.report(args.output, config=args.config, top=args.top, bins=args.bins, title=args.title)
        err.print(f"wrote {path}", highlight=False)
        return 0

    return _run_loaded(args, work)


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "insights":
        return _run_insights(args)
    if args.command == "report":
        return _run_report(args)
    if args.command in VIEW_COMMANDS or args.command == "compare":
        return view_main(args)
    if _check_load_options(args):
        return 2
    from rich.console import Console

    from .analyzer import expand_patterns

    try:
        expand_patterns(args.patterns)
    except FileNotFoundError as exc:
        print(f"dfanalyzer: error: {exc}", file=sys.stderr)
        return 2
    err = Console(stderr=True)
    progress = err.is_terminal and not args.no_progress
    # a scheduler is reached now; the embedded cluster is not started at all for the summary
    # (streamed in this process's threads), only for --plot, which needs the events held
    client = None
    if args.scheduler or args.scheduler_file or args.local_cluster:
        client, status = _start_cluster(args)
        if client is None:
            return status
    analyzer = None
    try:
        # the summary and the plots use only the core columns (args=())
        analyzer = _analyzer_from_args(args.patterns, args, client, (), progress, n_workers=args.workers)
        result = analyzer.summary(show=False)
        if args.json:
            print(json.dumps(result.to_dict(), indent=2))
            _print_input_problems(err, analyzer, result.skipped)
            for w in result.warnings:
                err.print(f"warning: {w}", highlight=False, markup=False, soft_wrap=True)
        else:
            out = Console()
            if not out.is_terminal:  # files and pipes: wide enough for the function table
                out = Console(width=120)
            out.print(result.panel())
            for note in analyzer.notes:  # (the panel lists the damaged files)
                err.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)
            for w in result.warnings:  # also on stderr, for output redirected to a file
                err.print(f"warning: {w}", highlight=False, soft_wrap=True)
        if args.plot:
            for path in analyzer.plot_timeline(args.plot):
                err.print(f"wrote {path}", highlight=False)
    except (FileNotFoundError, ValueError) as exc:
        print(f"dfanalyzer: error: {exc}", file=sys.stderr)
        return 2
    except (OSError, TimeoutError) as exc:  # the embedded cluster (--plot) could not start
        print(f"dfanalyzer: error: cannot start or reach the Dask cluster: {exc}", file=sys.stderr)
        return 1
    finally:
        if analyzer is not None:
            analyzer.close()
        if client is not None:
            client.close()
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


def _add_load_options(s: argparse.ArgumentParser, patterns: bool = True) -> None:
    """Options every loading command shares (traces, cluster, index, categories, filter)."""
    if patterns:
        s.add_argument("patterns", nargs="+", metavar="PATTERN", help="trace files, glob patterns or directories")
    s.add_argument("--workers", type=int, default=None, metavar="N", help="local Dask workers (default: cores)")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--scheduler", default=None, metavar="ADDR", help="connect to a running Dask scheduler")
    g.add_argument("--scheduler-file", default=None, metavar="F", help="scheduler file of a running Dask scheduler")
    s.add_argument("--index-dir", default=None, metavar="D", help="directory for .zindex files")
    s.add_argument("--batch-size-mb", type=float, default=16, help="uncompressed MiB per load batch")
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
        metavar="QUERY",
        help="keep only the events this pandas query selects, e.g. \"cat == 'POSIX' and ts >= 1.7e15\"",
    )


def _add_output_options(s: argparse.ArgumentParser) -> None:
    s.add_argument("--top", type=int, default=None, metavar="N", help="only the first N rows (after sorting)")
    s.add_argument("--sort", default=None, metavar="COLUMN", help="sort by this column (descending)")
    s.add_argument("--ascending", action="store_true", help="sort ascending")
    s.add_argument(
        "--format",
        choices=("table", "csv", "parquet", "json"),
        default="table",
        help="table (default) or an export format",
    )
    s.add_argument("-o", "--output", default=None, metavar="FILE", help="write the export to FILE (else stdout)")


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


def add_view_commands(sub) -> None:
    """Add the view subcommands and ``compare`` to the ``dfanalyzer`` parser."""
    for name, (helptext, _) in VIEW_COMMANDS.items():
        s = sub.add_parser(name, help=helptext, description=helptext)
        _add_load_options(s)
        _add_output_options(s)
        if name == "timeline":
            g = s.add_mutually_exclusive_group()
            g.add_argument("--bins", type=int, default=None, metavar="N", help="N equal windows (default 100)")
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
        "--threshold", type=float, default=None, metavar="FRACTION", help="regression threshold, e.g. 0.1 = 10 %% worse"
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


def frame_table(df, title: str):
    """A ``rich.table.Table`` of a view frame (index columns first)."""
    from rich.table import Table

    t = Table(title=title, header_style="bold", show_edge=True)
    names = [str(n) if n is not None else "" for n in (df.index.names or [None])]
    for n in names:
        t.add_column(n, no_wrap=True)
    for c in df.columns:
        t.add_column(str(c), justify="right")
    for idx, row in zip(df.index, df.itertuples(index=False)):
        keys = idx if isinstance(idx, tuple) else (idx,)
        t.add_row(*[_cell(k) for k in keys], *[_cell(v) for v in row])
    return t


def _attrs_text(df) -> str:
    items = [(k, v) for k, v in df.attrs.items() if not isinstance(v, (list, dict))]
    return "  ".join(f"{k}={_cell(v) if not isinstance(v, tuple) else ':'.join(map(str, v))}" for k, v in items)


def view_main(args) -> int:
    """Run a view command or ``compare``; returns the exit status."""
    from rich.console import Console

    from .analyzer import expand_patterns

    if _check_load_options(args):
        return 2
    if args.format == "parquet" and not args.output:
        print("dfanalyzer: error: --format parquet needs -o FILE", file=sys.stderr)
        return 2
    runs = [[args.baseline], [args.candidate]] if args.command == "compare" else [args.patterns]
    try:
        for r in runs:
            expand_patterns(r)
        if args.filter:
            from .filters import pushdown_predicates

            pushdown_predicates(args.filter)
        if args.command == "timeline" and args.window is not None:
            from .analyzer import _window_us

            _window_us(args.window)
    except (FileNotFoundError, ValueError) as exc:
        print(f"dfanalyzer: error: {exc}", file=sys.stderr)
        return 2
    err = Console(stderr=True)
    progress = err.is_terminal and not args.no_progress
    client, status = _start_cluster(args)
    if client is None:
        return status
    keep_args = (args.key,) if args.command == "tags" else ()
    try:
        analyzers = [_analyzer_from_args(r, args, client, keep_args, progress) for r in runs]
        status = 0
        if args.command == "compare":
            from .views import compare

            df = compare(analyzers[0], analyzers[1], threshold=args.threshold)
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
            if not out.is_terminal:
                out = Console(width=200)
            out.print(frame_table(shown, f"dfanalyzer {args.command}"))
            note = _attrs_text(df)
            if note:
                out.print(note, highlight=False)
        else:
            write_frame(shown, args.format, args.output)
            if args.output:
                err.print(f"wrote {args.output}", highlight=False)
        if args.command == "compare" and args.threshold is not None:
            for m, r in regressions.iterrows():
                err.print(f"regression: {m}: {r['a']:.6g} -> {r['b']:.6g} ({r['ratio']:.3f}x)", highlight=False)
        if args.command == "timeline" and args.heatmap:
            from .plots import render_heatmap

            hm = analyzers[0].heatmap(bins=args.bins, window=args.window)
            err.print(f"wrote {render_heatmap(hm, args.heatmap)}", highlight=False)
        for a in analyzers:
            _print_input_problems(err, a)
    except (FileNotFoundError, ValueError) as exc:
        print(f"dfanalyzer: error: {exc}", file=sys.stderr)
        return 2
    finally:
        client.close()
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
