#!/usr/bin/env python3
"""Many small per-process trace files compacted with ``dftracer-compact`` (issue 23).

Writes ``--files`` small trace files (default 20,000) with plain zlib (each one ordinary gzip
stream, as DFTracer v1 and ``gzip`` write them), on 4 hosts whose pids collide (pid 1000 + i // 4
on every host), then compacts them into files of about ``--size`` and checks that:

- there are at most ``--max-files`` outputs (default 64);
- ``DFAnalyzer(...).summary()`` is identical before and after (``to_dict()``);
- the events per (host, pid) counted with plain gzip + json are identical before and after.

Prints one JSON document with the timings (s, wall and process CPU) and sizes (bytes).
Used at a smaller size by tests/test_trace_tools.py (``write_small_files``).

    python3 benchmarks/compact_small_files.py --dir /tmp/small --files 20000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import zlib
from collections import Counter

HOSTS = 4
CATS = ("POSIX", "POSIX", "STDIO", "CPP_APP")


def small_file_lines(i: int) -> list:
    """The lines (bytes, each ending in ``\\n``) of small file ``i``: ``[``, three metadata
    records, then 1 + i % 5 events (read, write, open of shared files; an app compute event)."""
    host = "node%d" % (i % HOSTS)
    pid = 1000 + i // HOSTS
    ts = 1_700_000_000_000_000 + 1000 * i
    out = [
        b"[\n",
        b'{"id":0,"name":"process_name","cat":"dftracer","pid":%d,"tid":%d,"ts":%d,"ph":"M",'
        b'"args":{"name":"app"}}\n' % (pid, pid, ts),
        b'{"id":1,"name":"hostname","cat":"dftracer","pid":%d,"tid":%d,"ts":%d,"ph":"M",'
        b'"args":{"name":"hostname","value":"%s"}}\n' % (pid, pid, ts, host.encode()),
        b'{"id":2,"name":"cmd_line","cat":"dftracer","pid":%d,"tid":%d,"ts":%d,"ph":"M",'
        b'"args":{"name":"cmd_line","value":"app --steps 5"}}\n' % (pid, pid, ts),
    ]
    for k in range(1 + i % 5):
        cat = CATS[k % len(CATS)]
        tid = pid + (k % 2)
        t = ts + 10 * k
        if cat == "CPP_APP":
            out.append(
                b'{"id":%d,"name":"compute","cat":"CPP_APP","pid":%d,"tid":%d,"ts":%d,"dur":%d,"ph":"X",'
                b'"args":{"step":%d}}\n' % (3 + k, pid, tid, t, 5 + i % 7, k)
            )
        else:
            name = (b"read", b"write", b"fread")[k % 3]
            size = 512 * (1 + (i + k) % 9)
            out.append(
                b'{"id":%d,"name":"%s","cat":"%s","pid":%d,"tid":%d,"ts":%d,"dur":%d,"ph":"X",'
                b'"args":{"fname":"/data/f%d","fd":5,"count":%d,"ret":%d,"size":1}}\n'
                % (3 + k, name, cat.encode(), pid, tid, t, 1 + (i + k) % 13, (i + k) % 50, size, size)
            )
    return out


def write_small_files(directory: str, n: int) -> int:
    """Write ``n`` small trace files ``<directory>/app-<host>-<pid>.pfw.gz``; returns their bytes."""
    os.makedirs(directory, exist_ok=True)
    total = 0
    for i in range(n):
        data = zlib.compress(b"".join(small_file_lines(i)), 1, wbits=31)
        name = "app-node%d-%d.pfw.gz" % (i % HOSTS, 1000 + i // HOSTS)
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)
        total += len(data)
    return total


def plain_counts(paths) -> Counter:
    """Events per (host, pid) with plain gzip + json (host: args.hostname, else the file's first
    hostname record) -- independent of dfanalyzer."""
    c: Counter = Counter()
    for p in paths:
        with open(p, "rb") as f:
            raw = f.read()
        text = bytearray()
        while raw:
            d = zlib.decompressobj(31)
            text += d.decompress(raw)
            raw = d.unused_data
        host = None
        for line in bytes(text).split(b"\n"):
            if line.strip() in (b"", b"[", b"]"):
                continue
            r = json.loads(line)
            if r.get("ph") == "M":
                if r["name"] == "hostname" and host is None:
                    host = r["args"]["value"]
                continue
            c[(r.get("args", {}).get("hostname", host), r["pid"])] += 1
    return c


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True, help="work directory (small/ and compact/ are made in it)")
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--size", default="64KiB", help="dftracer-compact --size")
    ap.add_argument("--max-files", type=int, default=64)
    a = ap.parse_args(argv)
    from dfanalyzer import DFAnalyzer
    from dfanalyzer.trace_tools import compact_main

    small, out = os.path.join(a.dir, "small"), os.path.join(a.dir, "compact")
    for d in (small, out):
        shutil.rmtree(d, ignore_errors=True)
    t = time.perf_counter()
    bytes_in = write_small_files(small, a.files)
    gen_s = time.perf_counter() - t

    def timed(fn):
        w, c = time.perf_counter(), time.process_time()
        r = fn()
        return r, time.perf_counter() - w, time.process_time() - c

    rc, compact_wall, compact_cpu = timed(lambda: compact_main([small, "-o", out, "--size", a.size]))
    if rc != 0:
        print("dftracer-compact failed (exit %d)" % rc, file=sys.stderr)
        return 1
    outs = sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".pfw.gz"))
    before, before_wall, _ = timed(lambda: DFAnalyzer(small).summary(show=False).to_dict())
    after, after_wall, _ = timed(lambda: DFAnalyzer(out).summary(show=False).to_dict())
    ins = [os.path.join(small, f) for f in os.listdir(small)]
    same_counts = plain_counts(ins) == plain_counts(outs)
    doc = {
        "files_in": a.files,
        "files_out": len(outs),
        "bytes_in": bytes_in,
        "bytes_out": sum(os.path.getsize(p) for p in outs),
        "generate_s": round(gen_s, 2),
        "compact_wall_s": round(compact_wall, 2),
        "compact_cpu_s": round(compact_cpu, 2),
        "summary_before_wall_s": round(before_wall, 2),
        "summary_after_wall_s": round(after_wall, 2),
        "events": before["events"],
        "summaries_identical": before == after,
        "plain_counts_identical": same_counts,
    }
    print(json.dumps(doc, indent=1))
    ok = before == after and same_counts and len(outs) <= a.max_files
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
