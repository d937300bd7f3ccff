"""Cost of combining the distributed summary's chunk partials where the summary runs, as a
function of the chunk count (issue 22, Deliver 2: no serial step above 5 % of the wall).

The chunk partials of one trace are made once, in this process, for the largest chunk count
(``_summary_chunk_task`` on the chunks of ``plan_chunks``, as the cluster's chunk tasks make
them, then a pickle round trip, as the gather delivers them); those of every smaller count
(a divisor) are the exact merges of adjacent ones (``plan_chunks`` cuts at ``n * j // k``). For
each count, interleaved and repeated, both ways of finishing the summary from the partials:

* ``fold``: what the cluster branch of ``_streamed_partial`` did before issue 22's i29-fold
  round: ``PartialFolder(spill_intervals=SPILL_INTERVALS)`` in one thread (merging the unions,
  spilling past the bound), then ``finish`` without a pool (that branch gave it none);
* ``held``: ``hold_unions`` (the small fields combined, the unions held unmerged) and ``finish``
  on a thread pool of ``--ways`` threads (windows merged and measured on the pool).

Printed per count and way: the calling thread's CPU (``time.thread_time``: the serial work),
the process's CPU (all threads) and the wall, s, min over ``--repeat`` runs; the JSON of every
run must be the same.

    PYTHONPATH=$PWD python3 benchmarks/fold_chunks.py TRACE [--index-dir D] [--chunks 2 4 8 16 32]
"""

from __future__ import annotations

import argparse
import json
import pickle
import time
from concurrent.futures import ThreadPoolExecutor


def _chunk_partials(path: str, index_dir, most: int, threads: int, batch_mb=None):
    from dfanalyzer import analyzer as A

    opts = dict(index_dir=index_dir, args=(), progress=False, n_workers=threads, batch_size_mb=batch_mb)
    with A.DFAnalyzer(path, **opts) as an:
        batches = an._batches
        items = [("batch", b) for b in batches]
        order = A._round_robin_by_file(batches)
        chunks = A.plan_chunks(len(items), order, most // 2)
        kw = dict(
            index_dir=an.index_dir, query=None, io_cats=an.io_cats, compute_cats=an.compute_cats, app_io_cats=an.app_io_cats
        )
        with ThreadPoolExecutor(threads) as pool:
            out = list(pool.map(lambda ch: A._summary_chunk_task([items[i] for i in ch], **kw)[0], chunks))
    return [pickle.loads(pickle.dumps(p, protocol=5)) for p in out], len(batches)


def _timed(fn):
    w, c, t = time.perf_counter(), time.process_time(), time.thread_time()
    out = fn()
    return out, (time.thread_time() - t, time.process_time() - c, time.perf_counter() - w)


def main(argv=None) -> None:
    from dfanalyzer import summary as S

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--index-dir", default=None)
    ap.add_argument("--chunks", type=int, nargs="+", default=[2, 4, 8, 16, 32])
    ap.add_argument("--ways", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help="threads making the chunk partials (not timed)")
    ap.add_argument("--batch-mb", type=float, default=None, help="batch size, MiB (default: the analyzer's)")
    a = ap.parse_args(argv)
    most = max(a.chunks)
    t = time.perf_counter()
    parts, n_batches = _chunk_partials(a.trace, a.index_dir, most, a.threads, a.batch_mb)
    print(f"{len(parts)} chunk partials of {n_batches} batches made in {time.perf_counter() - t:.1f} s (not timed)")
    by_count = {len(parts): parts}
    k = len(parts)
    while k > 1:  # adjacent pairs merged: the partials of half as many chunks
        prev = by_count[k]
        k //= 2
        by_count[k] = [S.combine_partials(prev[2 * j : 2 * j + 2]) for j in range(k)]
    pools = {w: ThreadPoolExecutor(w) for w in a.ways if w > 1}
    want = None
    rows = []
    for count in a.chunks:
        ps = by_count[count]
        iv = sum(S._intervals(p) for p in ps)
        best: dict = {}
        for _ in range(a.repeat):  # interleaved: fold, then held at every way, then again
            runs = [("fold", None)] + [(f"held, {w} way{'s' if w > 1 else ''}", w) for w in a.ways]
            for name, w in runs:
                if w is None:

                    def fold():
                        f = S.PartialFolder(spill_intervals=S.SPILL_INTERVALS)
                        for p in ps:
                            f.add(p)
                        return f.result()

                    part, t_fold = _timed(fold)
                    res, t_fin = _timed(lambda: S.finish(part, []))
                else:
                    part, t_fold = _timed(lambda: S.hold_unions(ps))
                    kw = dict(pool=pools[w], ways=w) if w > 1 else {}
                    res, t_fin = _timed(lambda: S.finish(part, [], **kw))
                for sp in part.spilled:
                    sp.cleanup()
                got = json.dumps(res.to_dict())
                want = want or got
                assert got == want, (count, name)
                cell = tuple(x + y for x, y in zip(t_fold, t_fin)) + t_fold + t_fin
                best[name] = tuple(map(min, zip(best.get(name, cell), cell)))
        for name, v in best.items():
            rows.append((count, iv, name, v))
    print("chunks | intervals | way | this thread CPU s | process CPU s | wall s | (fold/hold: thread CPU, wall) | (finish: thread CPU, wall)")
    print("---|---|---|---|---|---|---|---")
    for count, iv, name, v in rows:
        tt, pc, wall, ft, _, fw, nt, _, nw = v
        print(f"{count} | {iv:,} | {name} | {tt:.3f} | {pc:.3f} | {wall:.3f} | {ft:.3f}, {fw:.3f} | {nt:.3f}, {nw:.3f}")
    for p in pools.values():
        p.shutdown()


if __name__ == "__main__":
    main()
