"""Python variant of the preload microbenchmark (see bench_preload.c for the C one).

    python bench_preload_py.py FILE PROCS READS BLOCK_BYTES ROUNDS

P forked processes each do ROUNDS x (os.open, READS x os.read(BLOCK_BYTES), os.close) and report
their wall time (ns, time.perf_counter_ns) and their own thread's CPU time (time.thread_time_ns).
Prints the same JSON object as bench_preload.c.
"""

import json
import multiprocessing as mp
import os
import sys
import time


def worker(path, n, bs, rounds, q):
    c0 = time.thread_time_ns()
    t0 = time.perf_counter_ns()
    for _ in range(rounds):
        fd = os.open(path, os.O_RDONLY)
        for _ in range(n):
            if not os.read(fd, bs):
                raise SystemExit(3)
        os.close(fd)
    q.put((time.perf_counter_ns() - t0, time.thread_time_ns() - c0))


def main():
    path, procs, n, bs, rounds = sys.argv[1], *map(int, sys.argv[2:6])
    ctx = mp.get_context("fork")
    q = ctx.SimpleQueue()
    ps = [ctx.Process(target=worker, args=(path, n, bs, rounds, q)) for _ in range(procs)]
    for p in ps:
        p.start()
    got = [q.get() for _ in ps]
    for p in ps:
        p.join()
    ok = all(p.exitcode == 0 for p in ps)
    print(
        json.dumps(
            {
                "procs": procs,
                "reads": n,
                "bs": bs,
                "rounds": rounds,
                "calls": rounds * (n + 2),
                "ns_per_proc": [g[0] for g in got],
                "thread_cpu_ns_per_proc": [g[1] for g in got],
            }
        )
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
