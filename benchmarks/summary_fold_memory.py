"""Peak memory of the streamed summary's fold (``PartialFolder``) and ``finish``, replayed on
synthetic partials shaped like the 1-billion-event run's (docs/perf/i22-mem.md): files in time-disjoint pairs, batches in round-robin order, ~4,180
disjoint I/O intervals per batch (p0: 4,010,839 in 959 batches). Peak traced memory (numpy
allocations are traced) of the fold and finish; the spilling PartialFolder where this
dfanalyzer has one (``summary.SPILL_INTERVALS``), the unbounded one otherwise.

Usage: ``PYTHONPATH=<tree> python benchmarks/summary_fold_memory.py FILES BATCHES_PER_FILE``
(10 959: the 1B run's shape, 40.1M intervals) under ``/usr/bin/time -v`` for the process peak.
"""

import sys
import time
import tracemalloc

import numpy as np

from dfanalyzer import summary as S

files, batches, per = int(sys.argv[1]), int(sys.argv[2]), 4180
span = 258_000_000 // batches  # µs per batch (p0 spans 258 s)


def part(f, b):
    rng = np.random.default_rng(f * 100003 + b)
    t0 = (f // 2) * 10**12 + b * span + (f % 2)
    gaps = rng.integers(2, 2 * span // per - 3, per)  # disjoint, even across the pair (odd offset)
    s = t0 + np.cumsum(gaps) * 1
    s = s - (s - t0) % 2 + (f % 2)
    e = s + 1
    p = S.Partial(events=per, min_ts=int(s[0]), max_te=int(e[-1]))
    p.io = (s.astype(np.int64), e.astype(np.int64))
    return p


spill = getattr(S, "SPILL_INTERVALS", None)
fold = S.PartialFolder(spill_intervals=spill) if spill else S.PartialFolder()
tracemalloc.start()
t = time.time()
for b in range(batches):
    for f in range(files):
        fold.add(part(f, b))
cur, peak_fold = tracemalloc.get_traced_memory()
p = fold.result()
cur2, peak_result = tracemalloc.get_traced_memory()
tracemalloc.reset_peak()
r = S.finish(p)
_, peak_finish = tracemalloc.get_traced_memory()
held = sum(a.nbytes for a in p.io)
print(
    f"files {files} batches/file {batches} intervals {files * batches * per:,} spill={spill} "
    f"held-at-end {held >> 20} MiB peak(fold adds) {peak_fold >> 20} MiB peak(fold+result) {peak_result >> 20} MiB "
    f"peak(finish) {peak_finish >> 20} MiB io {r.time['io']} s {time.time() - t:.0f}s",
    flush=True,
)
for sp in getattr(p, "spilled", []):
    sp.cleanup()
