"""C++ batch loader cost per event: `_reader.load_batch` in process (docs/perf/i22-parse.md).

Two modes:

* ``ir``: ``--loads`` identical ``load_batch`` calls of checkpoints [first, last]; run it under
  callgrind with ``--toggle-collect='*load_batch_into*'`` once with ``--loads 1`` and once with
  ``--loads 2``: the difference is one warm load (index cached in the process). Prints the events.
* ``cpu``: paired alternating runs of two ``_reader`` builds (``--so-dir`` old, ``--so-dir2``
  new) over every checkpoint of every file given, in child processes; prints CPU µs/event
  (user+sys of the loads, ``time.process_time``) per round and the median ratio.

``--columns all`` builds every args column (the frame path); ``--columns none`` builds none
(``columns=()``: what ``DFAnalyzer(..., args=())`` and the streamed summary read).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time


def load_reader(so_dir: str):
    """The ``_reader`` extension module found in ``so_dir`` (a folder holding _reader*.so)."""
    for f in sorted(os.listdir(so_dir)):
        if f.startswith("_reader") and f.endswith(".so"):
            spec = importlib.util.spec_from_file_location("_reader", os.path.join(so_dir, f))
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return mod
    raise SystemExit(f"no _reader*.so in {so_dir}")


def cols(arg: str):
    return None if arg == "all" else ()


def mode_ir(a) -> None:
    r = load_reader(a.so_dir)
    n_cp = len(r.build_index(a.file, a.index_dir)["checkpoints"])
    last = n_cp - 1 if a.last < 0 else min(a.last, n_cp - 1)
    for _ in range(a.loads):
        b = r.load_batch(a.file, a.first, last, a.index_dir, cols(a.columns))
    print(json.dumps({"events": int(b["rows"]), "first": a.first, "last": last}))


def child_cpu(a) -> None:
    """One pass over all files (in a child: one process per build and round)."""
    r = load_reader(a.so_dir)
    ranges = []
    for f in a.files:
        ranges.append((f, len(r.build_index(f, a.index_dir)["checkpoints"]) - 1))
    for f, _ in ranges:  # warm the index cache and the page cache
        r.load_batch(f, 0, 0, a.index_dir, cols(a.columns))
    events = 0
    t0 = time.process_time()
    for f, last in ranges:
        b = r.load_batch(f, 0, last, a.index_dir, cols(a.columns))
        events += int(b["rows"])
        del b
    cpu = time.process_time() - t0
    print(json.dumps({"events": events, "cpu_s": cpu}))


def mode_cpu(a) -> None:
    res: dict[str, list[float]] = {"old": [], "new": []}
    for rnd in range(a.rounds):
        order = [("old", a.so_dir), ("new", a.so_dir2)]
        if rnd % 2:
            order.reverse()
        for tag, d in order:
            cmd = [sys.executable, __file__, "child", "--so-dir", d, "--columns", a.columns]
            cmd += ["--index-dir", a.index_dir, *a.files]
            out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            res[tag].append(out["cpu_s"] * 1e6 / out["events"])
            events = out["events"]
        print(f"round {rnd}: old {res['old'][-1]:.3f} new {res['new'][-1]:.3f} µs/event (CPU)", flush=True)
    ratios = [n / o for o, n in zip(res["old"], res["new"])]
    print(
        json.dumps(
            {
                "events": events,
                "columns": a.columns,
                "old_us_per_event_median": statistics.median(res["old"]),
                "new_us_per_event_median": statistics.median(res["new"]),
                "new_over_old_median": statistics.median(ratios),
            }
        )
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["ir", "cpu", "child"])
    p.add_argument("--so-dir", required=True)
    p.add_argument("--so-dir2", help="cpu: the second build")
    p.add_argument("--index-dir", default="")
    p.add_argument("--columns", choices=["all", "none"], default="all")
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--last", type=int, default=-1, help="ir: last checkpoint (-1: the file's last)")
    p.add_argument("--loads", type=int, default=1, help="ir: loads of the same range")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("files", nargs="+")
    a = p.parse_args()
    a.index_dir = a.index_dir or None
    if a.mode == "ir":
        a.file = a.files[0]
        mode_ir(a)
    else:
        (mode_cpu if a.mode == "cpu" else child_cpu)(a)


if __name__ == "__main__":
    main()
