"""CPU of the thread that waits in the ``--scheduler`` summary's task: ``distributed.wait`` alone
(before) vs :func:`dfanalyzer.analyzer._wait_unless_released` then ``wait`` (after), for 4 tasks
of 3 s each, in a task on a 1-worker LocalCluster (docs/perf/i29-cancel.md).

    PYTHONPATH=$PWD python3 benchmarks/cancel_wait_cost.py
"""

import time

from distributed import Client, LocalCluster, wait, worker_client


def sleeper(s):
    time.sleep(s)


def outer(mode, n, s):
    from dfanalyzer.analyzer import _task_released_check, _wait_unless_released

    with worker_client() as c:
        fs = [c.submit(sleeper, s, pure=False) for _ in range(n)]
        t0, c0 = time.perf_counter(), time.thread_time()
        if mode == "after":
            _wait_unless_released(fs, _task_released_check(), c, "x")
        with c.as_current():
            wait(fs)
        return time.perf_counter() - t0, time.thread_time() - c0


if __name__ == "__main__":
    with (
        LocalCluster(n_workers=1, threads_per_worker=4, processes=True, dashboard_address=None, silence_logs=40) as lc,
        Client(lc) as c,
    ):
        for _ in range(4):
            for mode in ("before", "after"):
                w, cpu = c.submit(outer, mode, 4, 3.0, pure=False).result()
                print(f"{mode:6} wait {w:.3f} s, CPU of the waiting thread {cpu * 1e3:.2f} ms")
