"""``dfanalyzer`` command line: ``dfanalyzer summary PATTERN... [options]``.

Prints the summary panel (paper Figure 6) or, with ``--json``, exactly ``Summary.to_dict()``
as JSON on stdout. Exit status: 0 on success, 2 for bad arguments or a pattern that matches no
file, 1 for other errors. A progress bar is shown on stderr while loading when it is a terminal.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import List, Optional


def _cats(text: str) -> tuple:
    return tuple(c for c in (s.strip() for s in text.split(",")) if c)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dfanalyzer", description="Analyse DFTracer traces with Dask.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("summary", help="print the summary of traces (paper Figure 6)")
    s.add_argument("patterns", nargs="+", metavar="PATTERN", help="trace files, glob patterns or directories")
    s.add_argument("--json", action="store_true", help="print the summary as JSON (Summary.to_dict())")
    s.add_argument("--workers", type=int, default=None, metavar="N", help="local Dask workers (default: cores)")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--scheduler", default=None, metavar="ADDR", help="connect to a running Dask scheduler")
    g.add_argument("--scheduler-file", default=None, metavar="F", help="scheduler file of a running Dask scheduler")
    s.add_argument("--index-dir", default=None, metavar="D", help="directory for .zindex files")
    s.add_argument("--plot", default=None, metavar="DIR", help="also save timeline PNGs (paper Fig. 8) in DIR")
    s.add_argument("--batch-size-mb", type=float, default=16, help="uncompressed MiB per load batch")
    s.add_argument("--io-cats", type=_cats, default=("POSIX", "STDIO"), help="I/O categories (comma separated)")
    s.add_argument("--compute-cats", type=_cats, default=("compute",), help="compute categories")
    s.add_argument("--app-io-cats", type=_cats, default=("reader",), help="application I/O categories")
    s.add_argument("--no-progress", action="store_true", help="never show the progress bar")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.workers is not None and args.workers < 1:
        print("dfanalyzer: error: --workers must be >= 1", file=sys.stderr)
        return 2
    if args.batch_size_mb <= 0:
        print("dfanalyzer: error: --batch-size-mb must be > 0", file=sys.stderr)
        return 2
    from rich.console import Console

    from .analyzer import DFAnalyzer, expand_patterns

    try:
        expand_patterns(args.patterns)
    except FileNotFoundError as exc:
        print(f"dfanalyzer: error: {exc}", file=sys.stderr)
        return 2
    # distributed logs cluster start/stop at INFO/WARNING; keep the terminal for the result
    logging.getLogger("distributed").setLevel(logging.ERROR)
    err = Console(stderr=True)
    progress = err.is_terminal and not args.no_progress
    from .cluster import setup_dask_cluster

    try:
        client = setup_dask_cluster(
            scheduler_address=args.scheduler, scheduler_file=args.scheduler_file, n_workers=args.workers
        )
    except (OSError, ValueError, TimeoutError) as exc:
        print(f"dfanalyzer: error: cannot start or reach the Dask cluster: {exc}", file=sys.stderr)
        return 1
    try:
        analyzer = DFAnalyzer(
            args.patterns,
            index_dir=args.index_dir,
            batch_size_mb=args.batch_size_mb,
            io_cats=args.io_cats,
            compute_cats=args.compute_cats,
            app_io_cats=args.app_io_cats,
            args=(),  # the summary and the plots use only the core columns
            client=client,
            progress=progress,
        )
        result = analyzer.summary(show=False)
        if args.json:
            print(json.dumps(result.to_dict(), indent=2))
            for s in result.skipped:
                err.print(
                    f"warning: {s['path']}: {s['skipped_lines']} lines and {s['lost_bytes']} bytes skipped",
                    highlight=False,
                )
        else:
            out = Console()
            if not out.is_terminal:  # files and pipes: wide enough for the function table
                out = Console(width=120)
            out.print(result.panel())
        if args.plot:
            for path in analyzer.plot_timeline(args.plot):
                err.print(f"wrote {path}", highlight=False)
    except FileNotFoundError as exc:
        print(f"dfanalyzer: error: {exc}", file=sys.stderr)
        return 2
    finally:
        client.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
