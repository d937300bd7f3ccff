"""Program of tests/test_lifecycle_matrix.py: start a worker process one way, end it another.

usage: lifecycle_app.py START END N REPORT DATA

A "unit" of work is one ``os.read`` of DATA (a POSIX ``read`` event under the preload) wrapped
in a ``dft_fn`` call (one Python API event, when LC_API=1). Every process that makes units
appends ``{"pid", "made", "early"}`` to REPORT (one O_APPEND write) *before* it ends: ``made``
units in all, ``early`` of them made at least LC_GAP_S seconds before it ended (the SIGKILL and
C ``_exit`` cells: only those are guaranteed on disk, by the core's timed flush).

START: main (this process does the work), fork, subprocess, posix_spawn, mp_fork, mp_spawn,
mp_forkserver (a Process), pool_fork, pool_spawn, pool_forkserver (``with Pool(2)``: leaves by
terminate(), i.e. SIGTERM), executor (ProcessPoolExecutor), torch_fork, torch_spawn (DataLoader
workers). END: normal, thread_exit (C exit() from a thread), os_exit, c_exit (C _exit), abort,
sigterm, sigint, sighup, exec (execv /bin/true), sigkill, hang (sleep until killed).
For fork/subprocess/posix_spawn/mp_* starts the root prints ``status <code>`` of the worker
(waitstatus_to_exitcode: negative = killed by that signal) and exits 0.
"""

import json
import os
import resource
import signal
import sys
import threading
import time

START, END, N, REPORT, DATA = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
GAP_S = float(os.environ.get("LC_GAP_S", "0.5"))
API = os.environ.get("LC_API") == "1"
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # abort(): no core file

if API:
    from dftracer.python import dft_fn

    _region = dft_fn("lc")
else:
    _region = None


def _read_once():
    fd = os.open(DATA, os.O_RDONLY)
    try:
        os.read(fd, 64)
    finally:
        os.close(fd)


def unit():
    if _region is not None:
        with _region:
            _read_once()
    else:
        _read_once()


def report(made, early):
    line = json.dumps({"pid": os.getpid(), "made": made, "early": early}) + "\n"
    fd = os.open(REPORT, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, line.encode())
    os.close(fd)


def work_and_end(end):
    """The worker: N units, then leave by `end`."""
    for _ in range(N):
        unit()
    if end in ("sigkill", "c_exit"):
        time.sleep(GAP_S)  # the first N are older than the flush bound when the process ends
        for _ in range(N):
            unit()
        report(2 * N, N)
    else:
        report(N, N)
    if end == "normal":
        sys.exit(0)
    if end == "thread_exit":
        import ctypes

        libc = ctypes.CDLL(None)
        t = threading.Thread(target=lambda: libc.exit(0))
        t.start()
        t.join()
    if end == "os_exit":
        os._exit(0)
    if end == "c_exit":
        import ctypes

        ctypes.CDLL(None)._exit(0)
    if end == "abort":
        os.abort()
    if end in ("sigterm", "sigint", "sighup", "sigkill"):
        os.kill(os.getpid(), getattr(signal, end.upper()))
        time.sleep(30)
        os._exit(99)  # not reached: the signal ends the process
    if end == "exec":
        os.execv("/bin/true", ["true"])
    if end == "hang":
        time.sleep(60)
    raise SystemExit(f"unknown end {end!r}")


def task(i):
    """Pool/executor task: 3 units, reported per task."""
    for _ in range(3):
        unit()
    report(3, 3)
    return os.getpid()


class Dataset:
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return task(i)


def done(code):
    print("status", code, flush=True)
    sys.exit(0)


def main():
    if START == "main":
        work_and_end(END)
    if START == "fork":
        pid = os.fork()
        if pid == 0:
            work_and_end(END)
        done(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    argv = [sys.executable, os.path.abspath(__file__), "main", END, str(N), REPORT, DATA]
    if START == "subprocess":
        import subprocess

        done(subprocess.run(argv).returncode)
    if START == "posix_spawn":
        pid = os.posix_spawn(sys.executable, argv, os.environ)
        done(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    import multiprocessing as mp

    if START.startswith("mp_"):
        p = mp.get_context(START[3:]).Process(target=work_and_end, args=(END,))
        p.start()
        p.join()
        done(p.exitcode)
    if START.startswith("pool_"):
        with mp.get_context(START[5:]).Pool(2) as pool:
            pool.map(task, range(4), chunksize=1)
        sys.exit(0)  # __exit__ = terminate(): the workers get SIGTERM
    if START == "executor":
        import concurrent.futures as cf

        with cf.ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as ex:
            list(ex.map(task, range(4)))
        sys.exit(0)
    if START.startswith("torch_"):
        import torch.utils.data as tud

        loader = tud.DataLoader(Dataset(), batch_size=None, num_workers=2, multiprocessing_context=START[6:])
        list(loader)
        sys.exit(0)
    raise SystemExit(f"unknown start {START!r}")


if __name__ == "__main__":
    main()
