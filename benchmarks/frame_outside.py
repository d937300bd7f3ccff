"""What a cold ``DFAnalyzer(DIR).events`` spends outside the C++ parse (issue 22, Deliver 4;
docs/perf/i27-frame.md).

Usage (``PYTHONPATH=TREE``):

- ``python benchmarks/frame_outside.py steps DIR [ROUNDS]``: in process, each batch of DIR (one
  per file, as the 2-worker cluster plans g2m) loaded as ``_load_task`` does, frames held, with
  ``time.thread_time`` around each step (the C++ call, the pandas frame, ``sanity.span``, the
  info with ``frame_schema``, ``_is_aligned``, ``_loaded.held``); µs per event. Indexes go to a
  temporary folder.
- ``python benchmarks/frame_outside.py fixed DIR [DIR...]``: CPU of cold ``.events`` rounds
  (indexes next to the files removed first, ``len``, close, the workers' frees waited for) on a
  quiet 2-worker ``LocalCluster``, client process and workers apart, as
  ``bench_analyzer.py --frame-vs-bag`` windows them, every file its own load task
  (``small_file_mb=0``, as g2m's 2 MiB files are planned); run it on a DIR of tiny files to see
  the per-round fixed cost (the first round also pays the client's first use of pandas).
- ``python benchmarks/frame_outside.py idle [SECONDS]``: CPU per second of wall of the same
  cluster doing nothing (client process = client, scheduler and nannies).
"""

from __future__ import annotations

import glob
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def steps(d: str, rounds: int) -> None:
    import gc

    from dfanalyzer import _reader, reader, sanity
    from dfanalyzer import analyzer as A
    from dfanalyzer._loaded import held

    files = sorted(glob.glob(os.path.join(d, "*.pfw.gz")))
    tt = time.thread_time
    with tempfile.TemporaryDirectory() as idx:
        batches = [(f, 0, len(reader.build_index(f, idx)["checkpoints"]) - 1) for f in files]
        names = ("cpp", "frame", "span", "info", "aligned", "held")
        for r in range(rounds):
            acc = dict.fromkeys(names, 0.0)
            keep, n = [], 0
            for path, first, last in batches:
                t = [tt()]
                res = _reader.load_batch(path, first, last, idx, None)
                t.append(tt())
                b = reader._batch(res, path)
                ev = b.events
                t.append(tt())
                span = sanity.span(ev["ts"], ev["te"])
                t.append(tt())
                info = A.BatchInfo(rows=len(ev), schema=A.frame_schema(ev), span=span, arg_counts=b.arg_counts)
                t.append(tt())
                A._is_aligned(ev)
                t.append(tt())
                keep.append(held(ev))
                t.append(tt())
                for k, a, z in zip(names, t, t[1:]):
                    acc[k] += z - a
                n += info.rows
            python = sum(v for k, v in acc.items() if k != "cpp")
            print(
                f"round {r}: {n:,} events, µs/event: "
                + ", ".join(f"{k} {v * 1e6 / n:.4f}" for k, v in acc.items())
                + f"; Python around the C++ call {python * 1e6 / n:.4f}",
                flush=True,
            )
            del keep
            gc.collect()


def _cluster():
    import dask
    from distributed import Client, LocalCluster

    from dfanalyzer.cluster import QUIET_CONFIG

    cfg = dask.config.set(QUIET_CONFIG)
    cfg.__enter__()
    cl = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    return cl, Client(cl)


def fixed(dirs, rounds: int = 6) -> None:
    import bench_analyzer as B

    from dfanalyzer import DFAnalyzer

    cl, client = _cluster()
    with cl, client:
        pids = [os.getpid()] + list(client.run(os.getpid).values())
        client.run(B._import_frame_libs)
        for _ in range(rounds):
            for d in dirs:
                paths = sorted(glob.glob(os.path.join(d, "*.pfw.gz")))
                B._settle(client)
                c0, w0, t0 = B._cpu_of(pids[:1]), B._cpu_of(pids[1:]), time.perf_counter()
                B._clear_indexes(d)
                # small_file_mb=0: one load task per file, as g2m's files get (no small-file groups)
                with DFAnalyzer(paths, client=client, small_file_mb=0) as an:
                    n = len(an.events)
                    tasks = an.stats.get("batches"), an.stats.get("partitions")
                B._drained(client)
                wall = time.perf_counter() - t0
                cc, cw = B._cpu_of(pids[:1]) - c0, B._cpu_of(pids[1:]) - w0
                print(
                    f"{os.path.basename(d)}: {n:,} events, (batches, partitions) {tasks}, wall {wall * 1e3:.0f} ms, client + scheduler "
                    f"{cc * 1e3:.0f} ms, workers {cw * 1e3:.0f} ms CPU, {(cc + cw) * 1e6 / max(n, 1):.3f} µs/event",
                    flush=True,
                )


def idle(seconds: float = 3.0, rounds: int = 3) -> None:
    import bench_analyzer as B

    cl, client = _cluster()
    with cl, client:
        pids = [os.getpid()] + list(client.run(os.getpid).values())
        time.sleep(2)
        for _ in range(rounds):
            c0, w0, t0 = B._cpu_of(pids[:1]), B._cpu_of(pids[1:]), time.perf_counter()
            time.sleep(seconds)
            w = time.perf_counter() - t0
            cc, cw = B._cpu_of(pids[:1]) - c0, B._cpu_of(pids[1:]) - w0
            print(f"idle: client + scheduler {cc * 1e3 / w:.1f} ms/s, workers {cw * 1e3 / w:.1f} ms/s", flush=True)


def main(argv) -> int:
    if len(argv) < 1 or argv[0] not in ("steps", "fixed", "idle"):
        print(__doc__)
        return 2
    if argv[0] == "steps":
        steps(argv[1], int(argv[2]) if len(argv) > 2 else 3)
    elif argv[0] == "fixed":
        fixed([os.path.abspath(d) for d in argv[1:]])
    else:
        idle(float(argv[1]) if len(argv) > 1 else 3.0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
