"""Command-line tools over the trace index (docs/index.md).

``dftracer-index FILE...``  build or refresh indexes; print lines, events, compressed and
                            uncompressed bytes and checkpoints per file (plus a total row).
``dftracer-cat FILE [--lines A:B]``  print lines A..B (1-based, inclusive, like ``sed -n A,Bp``)
                            decompressing only the checkpoints that hold them.

Both report on stderr what they could not read, with the analyzer's counts (lines and bytes
lost, lines skipped, lying member headers; docs/index.md "Trust rules"). Exit status: 0 when
everything was read; 1 when a file could not be read or data was lost (``dftracer-index``: in
any file; ``dftracer-cat``: in the requested lines); 2 for usage errors.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from . import reader

__all__ = ["index_main", "cat_main", "damage_report"]


def damage_report(path: str, lost_lines: int, lost_bytes: int, skipped_lines: int = 0,
                  header_mismatches: int = 0) -> Optional[str]:
    """One stderr line for what could not be read in ``path`` (None when nothing): the same
    wording as ``dfanalyzer summary`` uses for the same counts."""
    parts = []
    if lost_lines or lost_bytes:
        parts.append("%d lines (%d bytes) lost" % (lost_lines, lost_bytes))
    if skipped_lines:
        parts.append("%d lines skipped (invalid JSON or invalid values)" % skipped_lines)
    if header_mismatches:
        parts.append("%d gzip member header(s) disagreed with their data (read by plain inflation)"
                     % header_mismatches)
    return "%s: %s" % (path, "; ".join(parts)) if parts else None


def index_main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="dftracer-index", description="Build or refresh trace indexes.")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--index-dir", default=None, help="directory for the .zindex files")
    ap.add_argument("--force", action="store_true", help="rebuild even if the index is valid")
    a = ap.parse_args(argv)
    rc = 0
    tot = [0, 0, 0, 0, 0]
    a.files = _unique_files(a.files)
    print("%-60s %8s %10s %10s %14s %16s %11s" % ("file", "kind", "lines", "events", "compressed_B",
                                                   "uncompressed_B", "checkpoints"))
    for f in a.files:
        try:
            if a.force:
                reader.build_index(f, a.index_dir, force=True)
            s = reader.scan(f, a.index_dir)
        except (OSError, ValueError) as e:
            print("dftracer-index: %s" % e, file=sys.stderr)
            rc = 1
            continue
        row = [s["lines"], s["events"], s["compressed_bytes"], s["uncompressed_bytes"], len(s["checkpoints"])]
        tot = [x + y for x, y in zip(tot, row)]
        print("%-60s %8s %10d %10d %14d %16d %11d" % ((f, s["kind"]) + tuple(row)))
        msg = damage_report(f, s["read_lost_lines"], s["read_lost_bytes"], s["skipped_lines"],
                            s["read_header_mismatches"])
        if msg:
            print("dftracer-index: " + msg, file=sys.stderr)
        if s["read_lost_lines"] or s["read_lost_bytes"]:
            rc = 1
    if len(a.files) > 1:
        print("%-60s %8s %10d %10d %14d %16d %11d" % (("total (%d files)" % len(a.files), "") + tuple(tot)))
    return rc


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
            print("note: %s is the same file as %s; listed once" % (p, seen[key]), file=sys.stderr)
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
        print("dftracer-cat: %s" % e, file=sys.stderr)
        return 1
    for w in dict.fromkeys(warnings):
        print("dftracer-cat: warning: %s" % w, file=sys.stderr)
    msg = damage_report(a.file, lost_lines, lost_bytes)
    if msg:
        print("dftracer-cat: " + msg, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(index_main())
