#!/usr/bin/env python3
"""Cheap check that trace files share no event: per file, its pids, first ts and last te.

Usage::

    python benchmarks/trace_ranges.py PATTERN... [--expect-events N]

For every trace (directories expand as in ``dfanalyzer``) the index is built or loaded (headers
only for our member files) and only the first and last checkpoint are parsed. Prints one line
per file: events (index line count minus the ``[`` line), pids seen, first ``ts`` and last
``te`` (µs), then the totals and the groups of files whose [first ts, last te] ranges overlap.

Exit status 1 when a file shows more than one pid, two files share a pid, or ``--expect-events``
differs from the indexed event total. Why this suffices for ``benchmarks/gen_traces.py`` output:
a file is one process (its pid is a constant of the line templates) and its ``ts`` strictly
increases, so no two lines of one file are the same event, and files with distinct pids share
none. ``te`` of the last checkpoint is the file's last ``te`` because a checkpoint spans far
more time than any duration the generator draws (≤ 20 ms).
"""

from __future__ import annotations

import argparse
import sys

from dfanalyzer import reader
from dfanalyzer.analyzer import expand_patterns


def file_ranges(path: str) -> dict:
    """``{"path", "events", "pids", "first_ts", "last_te"}`` of one trace (ints in µs; ``pids`` a set)."""
    idx = reader.build_index(path)
    last = len(idx["checkpoints"]) - 1
    head = reader.load_batch(path, 0, 0).events
    tail = reader.load_batch(path, last, last).events if last > 0 else head
    pids = set(head["pid"].dropna().astype(int)) | set(tail["pid"].dropna().astype(int))
    return {
        "path": path,
        "events": int(idx["lines"]) - 1,
        "pids": pids,
        "first_ts": int(head["ts"].min()),
        "last_te": int(tail["te"].max()),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("patterns", nargs="+")
    ap.add_argument("--expect-events", type=int, default=None)
    a = ap.parse_args(argv)
    rows = [file_ranges(p) for p in expand_patterns(a.patterns)]
    ok = True
    seen = {}
    for r in rows:
        print(
            "%s events %d pids %s ts [%d, %d]"
            % (r["path"], r["events"], sorted(r["pids"]), r["first_ts"], r["last_te"])
        )
        if len(r["pids"]) != 1:
            print("  more than one pid in one file", file=sys.stderr)
            ok = False
        for pid in r["pids"]:
            if pid in seen:
                print("  pid %d also in %s" % (pid, seen[pid]), file=sys.stderr)
                ok = False
            seen[pid] = r["path"]
    groups = []  # files whose time ranges overlap (transitively), in time order
    for r in sorted(rows, key=lambda r: r["first_ts"]):
        if groups and r["first_ts"] < groups[-1]["last_te"]:
            g = groups[-1]
            g["files"] += 1
            g["events"] += r["events"]
            g["last_te"] = max(g["last_te"], r["last_te"])
        else:
            groups.append({"first_ts": r["first_ts"], "last_te": r["last_te"], "files": 1, "events": r["events"]})
    total = sum(r["events"] for r in rows)
    print("files %d, distinct pids %d, events %d" % (len(rows), len(seen), total))
    for g in groups:
        print("time range [%d, %d]: %d files, %d events" % (g["first_ts"], g["last_te"], g["files"], g["events"]))
    if a.expect_events is not None and total != a.expect_events:
        print("events %d != expected %d" % (total, a.expect_events), file=sys.stderr)
        ok = False
    print("distinct pids per file, no pid shared: %s" % ("yes" if ok else "NO"))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
