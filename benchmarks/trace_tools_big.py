#!/usr/bin/env python3
"""Throughput of dftracer-merge and dftracer-split on one large trace (docs/tools.md, "Speed").

Writes ``--events`` read events of one process (4 threads) in 4 MiB members with the tracer's
encoder, then times ``dftracer-merge`` (one file into one) and ``dftracer-split --chunks 4``,
both with ``--no-index``. Prints wall and process CPU seconds.

    python3 benchmarks/trace_tools_big.py --dir /tmp/big --events 1000000
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_traces  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--events", type=int, default=1_000_000)
    a = ap.parse_args(argv)
    from dfanalyzer.trace_tools import merge_main, split_main

    os.makedirs(a.dir, exist_ok=True)
    src = os.path.join(a.dir, "in.pfw.gz")

    def lines():
        yield b"[\n"
        yield (
            b'{"id":0,"name":"hostname","cat":"dftracer","pid":42,"tid":42,"ts":1,"ph":"M",'
            b'"args":{"name":"hostname","value":"n1"}}\n'
        )
        for i in range(a.events):
            yield (
                b'{"id":%d,"name":"read","cat":"POSIX","pid":42,"tid":%d,"ts":%d,"dur":%d,"ph":"X",'
                b'"args":{"fname":"/data/img_%d.npz","fd":5,"count":262144,"ret":262144,"offset":%d}}\n'
                % (i + 1, 42 + i % 4, 1732221123000000 + i * 7, 1 + i % 50, i % 1000, i * 4096)
            )

    gen_traces.write_members(src, lines(), member_bytes=4 << 20, level=1)
    out = os.path.join(a.dir, "out")
    shutil.rmtree(out, ignore_errors=True)
    merged = os.path.join(out, "m.pfw.gz")
    for label, argv_ in (
        ("merge", lambda: merge_main([src, "-o", merged, "--no-index"])),
        ("split", lambda: split_main([merged, "-o", os.path.join(out, "s"), "--chunks", "4", "--no-index"])),
    ):
        w, c = time.perf_counter(), time.process_time()
        rc = argv_()
        print("%s: exit %d, %.2f s wall, %.2f s CPU" % (label, rc, time.perf_counter() - w, time.process_time() - c))
        if rc:
            return rc
    print("input: %d bytes, %d events" % (os.path.getsize(src), a.events))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
