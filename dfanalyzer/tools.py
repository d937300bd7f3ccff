"""Command-line tools over the trace index (docs/index.md).

``dftracer-index FILE...``  build or refresh indexes; print lines, events, compressed and
                            uncompressed bytes and checkpoints per file (plus a total row).
``dftracer-cat FILE [--lines A:B]``  print lines A..B (1-based, inclusive, like ``sed -n A,Bp``)
                            decompressing only the checkpoints that hold them.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from . import reader

__all__ = ["index_main", "cat_main"]


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
        if s["skipped_lines"]:
            print("  %d lines skipped (invalid JSON or missing name/ts)" % s["skipped_lines"], file=sys.stderr)
        if s["truncated_bytes"]:
            print("  %s: cut short, %d bytes dropped" % (f, s["truncated_bytes"]), file=sys.stderr)
        if s["lost_bytes"]:
            print("  %s: %d bytes undecodable" % (f, s["lost_bytes"]), file=sys.stderr)
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
    try:
        idx = reader.build_index(a.file, a.index_dir)
        total = idx["lines"]
        last = total if last is None else min(last, total)
        out = sys.stdout
        step = 100_000
        line = first
        while line <= last:
            n = min(step, last - line + 1)
            lines = reader.read_lines(a.file, line - 1, n, a.index_dir)
            if lines:
                out.write("\n".join(lines))
                out.write("\n")
            line += n
        out.flush()
    except BrokenPipeError:
        return 0
    except (OSError, ValueError) as e:
        print("dftracer-cat: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(index_main())
