"""Usage: ``PYTHONPATH=TREE python benchmarks/frame_cpu_split.py DIR ROUNDS TAG`` (issue 22, frame path).

N cold `len(DFAnalyzer(files, client=c).events)` rounds on a quiet 2-worker
LocalCluster, windows settled as bench_analyzer (previous frees + gc before, own frees inside).
Prints per round µs/event: all, client main thread, client other threads (loop, scheduler, nannies),
worker main threads, worker other threads."""

import glob
import os
import statistics
import sys
import threading
import time

import psutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_analyzer as B


def main():
    import dask, dask.dataframe  # noqa
    from distributed import Client, LocalCluster
    from dfanalyzer import DFAnalyzer
    import dfanalyzer
    from dfanalyzer.cluster import QUIET_CONFIG
    import logging

    logging.getLogger("distributed").setLevel(logging.ERROR)
    d = sys.argv[1]
    rounds = int(sys.argv[2])
    tag = sys.argv[3]
    paths = sorted(glob.glob(os.path.join(d, "*.pfw.gz")))
    me = psutil.Process()
    mtid = threading.get_native_id()
    with (
        dask.config.set(QUIET_CONFIG),
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl,
        Client(cl) as c,
    ):
        wp = list(c.run(os.getpid).values())
        c.run(B._import_frame_libs)

        def snap():
            ths = me.threads()
            m = sum(t.user_time + t.system_time for t in ths if t.id == mtid)
            o = sum(t.user_time + t.system_time for t in ths if t.id != mtid)
            wm = wo = 0.0
            for p in wp:
                for t in psutil.Process(p).threads():
                    if t.id == p:
                        wm += t.user_time + t.system_time
                    else:
                        wo += t.user_time + t.system_time
            return [m, o, wm, wo]

        tots = []

        def ours():  # as bench_analyzer's: the analyzer goes with the call
            B._clear_indexes(d)
            with DFAnalyzer(paths, client=c) as an:
                return int(len(an.events))

        for r in range(rounds):
            B._settle(c)
            s0 = snap()
            t0 = time.perf_counter()
            n = ours()
            B._drained(c)
            wall = time.perf_counter() - t0
            s1 = snap()
            dd_ = [(b - a) * 1e6 / n for a, b in zip(s0, s1)]
            tots.append(sum(dd_))
            print(
                f"{tag} r{r} wall {wall:5.2f} all {sum(dd_):.3f} cl-main {dd_[0]:.3f} cl-other {dd_[1]:.3f} w-main {dd_[2]:.3f} w-tasks {dd_[3]:.3f} load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        print(f"{tag} median {statistics.median(tots):.3f} ({dfanalyzer.__file__})", flush=True)


if __name__ == "__main__":
    main()
