"""Cost of combining the distributed summary's chunk partials where the summary runs, as a
function of the chunk count (issue 22, Deliver 2: no serial step above 5 % of the wall).

The chunk partials of one trace are made once, in this process, for the largest chunk count
(``_summary_chunk_task`` on the chunks of ``plan_chunks``, as the cluster's chunk tasks make
them, then a pickle round trip, as the gather delivers them); those of every smaller count
(a divisor) are the exact merges of adjacent ones (``plan_chunks`` cuts at ``n * j // k``). For
each count, interleaved and repeated, both ways of finishing the summary from the partials:

* ``fold``: (with ``--old-tree``: that tree's code) what the cluster branch of ``_streamed_partial`` did before issue 22's i29-fold
  round: ``PartialFolder(spill_intervals=SPILL_INTERVALS)`` in one thread (merging the unions,
  spilling past the bound), then ``finish`` without a pool (that branch gave it none);
* ``held``: ``hold_unions`` (the small fields combined, the unions held unmerged) and ``finish``
  on a thread pool of ``--ways`` threads (windows merged and measured on the pool).

Every run is one shot in a fresh process (the partials loaded from a pickle first, not timed):
the fold's fresh arrays and spill file cost page faults and writes there as at the task that
runs the summary (warm repeats in one process hide most of it). Printed per count and way: the
calling thread's CPU (``time.thread_time``: the serial work), the process's CPU (all threads)
and the wall, s, medians of ``--repeat`` runs; the JSON of every run must be the same.

    PYTHONPATH=$PWD python3 benchmarks/fold_chunks.py TRACE [--index-dir D] [--chunks 2 4 8 16 32]
"""

from __future__ import annotations

import argparse
import json
import os
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
            index_dir=an.index_dir,
            query=None,
            io_cats=an.io_cats,
            compute_cats=an.compute_cats,
            app_io_cats=an.app_io_cats,
        )
        with ThreadPoolExecutor(threads) as pool:
            out = list(pool.map(lambda ch: A._summary_chunk_task([items[i] for i in ch], **kw)[0], chunks))
    return [pickle.loads(pickle.dumps(p, protocol=5)) for p in out], len(batches)


def _timed(fn):
    w, c, t = time.perf_counter(), time.process_time(), time.thread_time()
    out = fn()
    return out, (time.thread_time() - t, time.process_time() - c, time.perf_counter() - w)


def _cell(path: str, way: int) -> None:
    """One timed run in this (fresh) process: the partials pickled at ``path``; ``way`` 0: the
    fold, else held with that many threads. Prints the timings and the summary's JSON."""
    from dfanalyzer import summary as S

    with open(path, "rb") as f:
        ps = pickle.load(f)
    if way == 0:

        def fold():
            f = S.PartialFolder(spill_intervals=S.SPILL_INTERVALS)
            for p in ps:
                f.add(p)
            return f.result()

        part, t_fold = _timed(fold)
        res, t_fin = _timed(lambda: S.finish(part, []))
    else:
        pool = ThreadPoolExecutor(way) if way > 1 else None
        part, t_fold = _timed(lambda: S.hold_unions(ps))
        res, t_fin = _timed(lambda: S.finish(part, [], **(dict(pool=pool, ways=way) if pool else {})))
    for sp in part.spilled:
        sp.cleanup()
    print(json.dumps({"fold": t_fold, "finish": t_fin, "summary": res.to_dict()}))


def main(argv=None) -> None:
    import subprocess
    import sys
    import tempfile

    from dfanalyzer import summary as S

    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--_cell":
        return _cell(sys.argv[2], int(sys.argv[3]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--index-dir", default=None)
    ap.add_argument("--chunks", type=int, nargs="+", default=[2, 4, 8, 16, 32])
    ap.add_argument("--ways", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help="threads making the chunk partials (not timed)")
    ap.add_argument(
        "--old-tree", default=None, help="the fold runs with this tree's dfanalyzer (e.g. a worktree of main)"
    )
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
    tmp = tempfile.mkdtemp(prefix="fold-chunks-")
    files, ivs = {}, {}
    for count in a.chunks:
        files[count] = os.path.join(tmp, f"{count}.pkl")
        ivs[count] = sum(S._intervals(p) for p in by_count[count])
        with open(files[count], "wb") as f:
            pickle.dump(by_count[count], f, protocol=5)
    del parts, by_count
    ways = [0] + list(a.ways)
    names = {w: "fold (before)" if w == 0 else f"held, {w} way{'s' if w > 1 else ''}" for w in ways}
    cells: dict = {}
    want = None
    envs = {
        w: dict(os.environ, PYTHONPATH=os.pathsep.join([t, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
        for w, t in ((0, a.old_tree or ROOT), (1, ROOT))
    }
    for _ in range(a.repeat):  # interleaved: every count and way once, then again
        for count in a.chunks:
            for w in ways:
                cmd = [sys.executable, os.path.abspath(__file__), "--_cell", files[count], str(w)]
                env = envs[min(w, 1)]
                out = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)
                got = json.dumps(out["summary"])
                want = want or got
                assert got == want, (count, w)
                cells.setdefault((count, w), []).append(tuple(out["fold"]) + tuple(out["finish"]))
    for f in files.values():
        os.remove(f)
    os.rmdir(tmp)
    print("all runs: the same JSON")
    print(
        "chunks | intervals | way | this thread CPU s | process CPU s | wall s "
        "| fold/hold: thread CPU, wall | finish: thread CPU, wall"
    )
    print("---|---|---|---|---|---|---|---")
    for count in a.chunks:
        for w in ways:
            med = [sorted(x)[len(x) // 2] for x in zip(*cells[(count, w)])]  # median per column
            ft, fp, fw, nt, np_, nw = med
            print(
                f"{count} | {ivs[count]:,} | {names[w]} | {ft + nt:.3f} | {fp + np_:.3f} | {fw + nw:.3f} "
                f"| {ft:.3f}, {fw:.3f} | {nt:.3f}, {nw:.3f}"
            )


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

if __name__ == "__main__":
    main()
