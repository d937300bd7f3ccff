"""What the streamed summary (``DFAnalyzer.summary``, threads) holds as it folds: every N
partials added, the interval unions' bytes and intervals and the size histograms' bytes held by
the ``PartialFolder``, with VmRSS/VmHWM; the final partial's sizes; the metadata frame.

Usage: ``PYTHONPATH=<tree> python benchmarks/summary_fold_state.py 'GLOB' WORKERS N [INDEX_DIR]``
(indexes in INDEX_DIR, default build/idx). docs/perf/i22-mem.md has the numbers for one 100M-event part.
"""

import glob
import json
import resource
import sys
import time

from dfanalyzer import summary as S
from dfanalyzer.analyzer import DFAnalyzer


def rss():
    d = {}
    for line in open("/proc/self/status"):
        if line.startswith(("VmRSS", "VmHWM")):
            k, v = line.split(":")
            d[k] = int(v.split()[0]) // 1024
    return d


def psize(p):
    u = sum(a.nbytes for un in (p.io, p.compute, p.app_io) for a in un)
    n = sum(un[0].size for un in (p.io, p.compute, p.app_io))
    h = sum(f[1][0].nbytes + f[1][1].nbytes for f in p.functions.values())
    return u, n, h, len(p.files)


peak = {"union_bytes": 0}
log = []
orig_add = S.PartialFolder.add
count = [0]


def add(self, part):
    orig_add(self, part)
    count[0] += 1
    held = [p for lv in self.levels for p in lv]
    tot = [sum(x) for x in zip(*(psize(p)[:3] for p in held))] if held else [0, 0, 0]
    if tot[0] > peak["union_bytes"]:
        peak.update(union_bytes=tot[0], intervals=tot[1], at=count[0])
    if count[0] % int(sys.argv[3]) == 0:
        r = rss()
        log.append((count[0], tot[0] >> 20, tot[1], tot[2] >> 10, r["VmRSS"], r["VmHWM"]))
        print(
            "add",
            count[0],
            "union MiB",
            tot[0] >> 20,
            "intervals",
            tot[1],
            "hist KiB",
            tot[2] >> 10,
            "levels",
            [len(lv) for lv in self.levels],
            r,
            flush=True,
        )


S.PartialFolder.add = add

orig_finish = S.finish


def fin(p, skipped=None):
    print(
        "final partial: union bytes/intervals/hist bytes/files",
        psize(p),
        "io",
        p.io[0].size,
        "compute",
        p.compute[0].size,
        "app_io",
        p.app_io[0].size,
        rss(),
        flush=True,
    )
    return orig_finish(p, skipped)


S.finish = fin

files = sorted(glob.glob(sys.argv[1]))
t = time.time()
a = DFAnalyzer(files, index_dir=sys.argv[4] if len(sys.argv) > 4 else "build/idx", n_workers=int(sys.argv[2]))
print("batches", len(a._batches), rss(), flush=True)
s = a.summary(show=False)
print("after summary", rss(), "wall", round(time.time() - t, 1), "peak unions held", peak, flush=True)
md = a._metadata
print("metadata rows", len(md), "bytes", int(md.memory_usage(deep=True).sum()))
print(json.dumps(s.to_dict()))
ru = resource.getrusage(resource.RUSAGE_SELF)
print("cpu", ru.ru_utime + ru.ru_stime, "maxrss MiB", ru.ru_maxrss >> 10)
