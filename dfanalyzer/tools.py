"""Command-line tools over the trace index (docs/index.md).

``dftracer-index FILE... [--json]``  build or refresh indexes; print kind, lines, events,
                            compressed and uncompressed bytes and checkpoints per file (plus a
                            total row) as a ``rich`` table, or as JSON with ``--json``.
``dftracer-cat FILE [--lines A:B]``  print lines A..B (1-based, inclusive, like ``sed -n A,Bp``)
                            decompressing only the checkpoints that hold them.

Both report on stderr what they could not read, with the analyzer's counts (lines and bytes
lost, lines skipped, lying member headers; docs/index.md "Trust rules"). Exit status: 0 when
everything was read; 1 when a file could not be read or data was lost (``dftracer-index``: in
any file; ``dftracer-cat``: in the requested lines); 2 for usage errors.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, Optional

from . import reader
from .safetext import cell, escape

__all__ = ["index_main", "cat_main", "damage_report", "INDEX_COLUMNS"]


def damage_report(
    path: str, lost_lines: int, lost_bytes: int, skipped_lines: int = 0, header_mismatches: int = 0
) -> Optional[str]:
    """One stderr line for what could not be read in ``path`` (None when nothing): the same
    wording as ``dfanalyzer summary`` uses for the same counts."""
    parts = []
    if lost_lines or lost_bytes:
        parts.append("%d lines (%d bytes) lost" % (lost_lines, lost_bytes))
    if skipped_lines:
        parts.append("%d lines skipped (invalid JSON or invalid values)" % skipped_lines)
    if header_mismatches:
        parts.append("%d gzip member header(s) disagreed with their data (read by plain inflation)" % header_mismatches)
    return "%s: %s" % (path, "; ".join(parts)) if parts else None


#: Per-file columns of ``dftracer-index`` (table headers and ``--json`` keys): index kind
#: (member | inflate | plain), lines, events, bytes (compressed = on disk), checkpoints.
INDEX_COLUMNS = ("kind", "lines", "events", "compressed_bytes", "uncompressed_bytes", "checkpoints")


def index_main(argv: Optional[List[str]] = None) -> int:
    """``dftracer-index``: build or refresh the index of each file and report it.

    stdout: a ``rich`` table (one row per file, a total row when there are several), or with
    ``--json`` one JSON document ``{"files": [{"file": str, "kind": str, "lines": int, "events":
    int | null, "compressed_bytes": int, "uncompressed_bytes": int, "checkpoints": int}, ...],
    "total": {... same count keys, "files": int}}`` (files that could not be read are left out;
    ``events`` is null, and "-" in the table, when the index does not know it yet and ``--scan``
    was not given; a total with an unknown part is unknown). Damage and errors go to stderr.
    Returns the exit status (module docstring).
    """
    ap = argparse.ArgumentParser(prog="dftracer-index", description="Build or refresh trace indexes.")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--index-dir", default=None, help="directory for the .zindex files")
    ap.add_argument("--force", action="store_true", help="rebuild even if the index is valid")
    ap.add_argument(
        "--scan",
        action="store_true",
        help="also read and parse every line: events, skipped lines and damage only the data shows (CRC32)",
    )
    ap.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    a = ap.parse_args(argv)
    rc = 0
    rows = []
    for f in _unique_files(a.files):
        try:
            s = reader.build_index(f, a.index_dir, force=a.force)
            scanned = a.scan or "events" not in s  # an index that cannot report events: scan
            if scanned:
                s = reader.scan(f, a.index_dir)
        except (OSError, ValueError) as e:
            print("dftracer-index: %s" % escape(e), file=sys.stderr)
            rc = 1
            continue
        rows.append(
            {
                "file": f,
                "kind": s["kind"],
                "lines": s["lines"],
                "events": s["events"],
                "compressed_bytes": s["compressed_bytes"],
                "uncompressed_bytes": s["uncompressed_bytes"],
                "checkpoints": len(s["checkpoints"]),
            }
        )
        if scanned:  # what reading every checkpoint could not deliver
            lost = (s["read_lost_lines"], s["read_lost_bytes"], s["skipped_lines"], s["read_header_mismatches"])
        else:  # what the index build found: lost regions, a cut-short end, lying headers
            lost = (s["lost_lines"], s["lost_bytes"] + s["truncated_bytes"], 0, s["header_mismatches"])
        msg = damage_report(f, *lost)
        if msg:
            print("dftracer-index: " + escape(msg), file=sys.stderr)
        if lost[0] or lost[1]:
            rc = 1
    total = {k: None if any(r[k] is None for r in rows) else sum(r[k] for r in rows) for k in INDEX_COLUMNS[1:]}
    total["files"] = len(rows)
    if a.json:
        json.dump({"files": rows, "total": total}, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        _print_index_table(rows, total)
    return rc


def _print_index_table(rows: List[dict], total: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(show_edge=False, header_style="bold", box=None, pad_edge=False)
    table.add_column("file", overflow="fold", min_width=16)  # a long path wraps in a narrow terminal; never cut
    cells = [[r["kind"]] + [_count(r[k]) for k in INDEX_COLUMNS[1:]] for r in rows]
    total_cells = [""] + [_count(total[k]) for k in INDEX_COLUMNS[1:]]
    for i, col in enumerate(INDEX_COLUMNS):
        # wide enough for every value: a narrow terminal wraps the file column, never a number
        width = max([len(col), len(total_cells[i])] + [len(c[i]) for c in cells])
        table.add_column(col, justify="left" if col == "kind" else "right", no_wrap=True, min_width=width)
    for r, c in zip(rows, cells):
        table.add_row(cell(r["file"]), *c)  # a path is anybody's bytes: never markup, no controls
    if len(rows) > 1:
        table.add_section()
        table.add_row("total (%d files)" % len(rows), *total_cells, style="bold")
    console = Console(file=sys.stdout)
    need = Console(file=sys.stdout, width=100_000).measure(table)
    # piped or redirected: one line per row; a terminal: its width, but never a column cut off
    width = max(console.width, need.minimum) if console.is_terminal else need.maximum
    if width != console.width:
        console = Console(file=sys.stdout, width=width)
    console.print(table)


def _count(n: Optional[int]) -> str:
    """A count for the table: thousands separators; "-" when unknown (None)."""
    return "-" if n is None else "{:,}".format(n)


def _unique_files(paths: List[str]) -> List[str]:
    """``paths`` without repeats of one file (same st_dev, st_ino: a symbolic link and its
    target, two links); each dropped path is named on stderr."""
    seen = {}
    out = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            out.append(p)  # reported when it is opened
            continue
        key = (st.st_dev, st.st_ino)
        if key not in seen:
            seen[key] = p
            out.append(p)
        else:
            print("note: %s is the same file as %s; listed once" % (escape(p), escape(seen[key])), file=sys.stderr)
    return out


def _parse_range(text: str):
    a, _, b = text.partition(":")
    first = int(a) if a else 1
    last = int(b) if b else None
    if first < 1 or (last is not None and last < first):
        raise argparse.ArgumentTypeError("--lines A:B needs 1 <= A <= B")
    return first, last


def cat_main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="dftracer-cat", description="Print trace lines through the index.")
    ap.add_argument("file")
    ap.add_argument("--lines", type=_parse_range, default=(1, None), help="A:B, 1-based inclusive")
    ap.add_argument("--index-dir", default=None)
    a = ap.parse_args(argv)
    first, last = a.lines
    lost_lines = lost_bytes = 0
    warnings: List[str] = []
    try:
        total = reader.build_index(a.file, a.index_dir)["lines"]
        out = sys.stdout
        step = 100_000
        line = first
        # Up to the range's end or one line past the indexed ones (an unterminated last line
        # is not in the '\n' count of a member, but is printed like sed does).
        while (last is None or line <= last) and line - 1 <= total:
            n = step if last is None else min(step, last - line + 1)
            r = reader.read_lines_checked(a.file, line - 1, n, a.index_dir)
            if r["reindexed"]:
                total = reader.build_index(a.file, a.index_dir)["lines"]
            lost_lines += r["lost_lines"]
            lost_bytes += r["lost_bytes"]
            warnings.extend(r["warnings"])
            if r["lines"]:
                out.write("\n".join(r["lines"]))
                out.write("\n")
            line += n
        out.flush()
    except BrokenPipeError:
        return 0
    except (OSError, ValueError) as e:
        print("dftracer-cat: %s" % escape(e), file=sys.stderr)
        return 1
    for w in dict.fromkeys(warnings):
        print("dftracer-cat: warning: %s" % escape(w), file=sys.stderr)
    msg = damage_report(a.file, lost_lines, lost_bytes)
    if msg:
        print("dftracer-cat: " + escape(msg), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(index_main())
