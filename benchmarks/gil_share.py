"""Who holds the GIL while the threaded ``dfanalyzer summary`` runs, sampled from outside Python
(issue 22, Deliver 2: what stops threads past 8).

A native thread (not a Python thread: it never takes the GIL, so it does not perturb what it
measures) reads CPython's GIL state every ``--period-us`` µs: ``_PyRuntime.ceval.gil.locked``
and ``last_holder`` (the holder's thread state), and, per pool thread, the section of the batch
task that thread is in (a slot the benchmark's wrappers set, ~0.1 µs per change). The GIL's
offset in ``_PyRuntime`` is found, not assumed: ``sys.setswitchinterval`` is stored in the
``interval`` field right before ``last_holder`` and ``locked``, so the benchmark sets two odd
intervals and keeps the one offset holding both; it then checks ``locked == 1`` while Python
runs and ``locked == 0`` in ``time.sleep``. The sampler is a 60-line C file compiled with ``cc``
on first use (cached next to this file under ``build/``).

The summary is the command's own code, run in this process: ``dfanalyzer.cli.main(["summary",
DIR, "--json", "--workers", N])`` (stdout captured and compared with the first run's). Its
sections are marked by wrapping, for the run only, ``_reader.load_batch`` (C++ inflate +
parse: it releases the GIL), ``summary.partial_from_columns`` (the per-batch reduction) and
``PartialFolder.add`` (the fold in the pool thread); the rest of the batch task is "glue".

Every sample also reads each marked thread's CPU time (``/proc/self/task/TID/schedstat``, run
time in ns) and books the CPU it used since the last sample to its state now (section, GIL held
by it or not), so the shares are of CPU, not of wall: a thread the kernel preempts (a loaded
machine) adds nothing while it waits. Per section the table gives the pool threads' CPU in it
and the share of that CPU during which that same thread held the GIL (and the same by wall
samples). ``f`` = CPU of pool threads holding the GIL ÷ their CPU in batch tasks; with it, Amdahl's ``S(N) = 1 / (f + (1 - f) / N)`` and the
GIL's hard bound ``1 / f``. Also: held by the main thread (planning, final combine, finish)
and GIL switches (``gil.switch_number``) per batch.

    python benchmarks/gil_share.py DIR [--workers 1] [--rounds 3] [--period-us 20] [-- extra summary args]

DIR's indexes are built by a first untimed run (use a private copy of the data).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import io
import os
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

SECTIONS = ("idle", "load_batch", "glue", "partial", "fold")
MAX_SLOTS = 64

_C = r"""
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#define SLOTS %(slots)d
#define SECS %(secs)d
static volatile int *locked;
static void *volatile *holder;
static volatile unsigned long *switches;
volatile int section[SLOTS];
void *tstate[SLOTS];
volatile int tids[SLOTS];
/* ns[slot][sec][0]: the slot's CPU time (schedstat run time) while in sec; [1]: of it, while it
   held the GIL; counts[...]: the same in samples (wall) */
unsigned long long ns[SLOTS][SECS][2];
unsigned long counts[SLOTS][SECS][2];
unsigned long free_samples, other_held, total_samples, switch0, switch1;
static int fds[SLOTS];
static unsigned long long last_run[SLOTS];
static volatile int running;
static pthread_t thr;
static long period_ns;
static unsigned long long run_ns(int i) {
  char buf[128];
  if (fds[i] < 0) {
    if (!tids[i]) return 0;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%%d/schedstat", tids[i]);
    fds[i] = open(path, O_RDONLY);
    if (fds[i] < 0) return 0;
  }
  ssize_t n = pread(fds[i], buf, sizeof buf - 1, 0);
  if (n <= 0) return 0;
  buf[n] = 0;
  return strtoull(buf, 0, 10);
}
static void *loop(void *arg) {
  (void)arg;
  struct timespec ts = {0, period_ns};
  while (running) {
    int l = *locked;
    void *h = *holder;
    int who = -1;
    for (int i = 0; i < SLOTS && tstate[i]; i++)
      if (tstate[i] == h) { who = i; break; }
    for (int i = 0; i < SLOTS && tstate[i]; i++) {
      int s = section[i];
      int mine = l && who == i;
      unsigned long long r = run_ns(i);
      unsigned long long d = (last_run[i] && r >= last_run[i]) ? r - last_run[i] : 0;
      if (r) last_run[i] = r;
      /* the CPU the thread used since the last sample goes to its state now (sampling) */
      ns[i][s][0] += d;
      if (mine) ns[i][s][1] += d;
      counts[i][s][0]++;
      if (mine) counts[i][s][1]++;
    }
    if (!l) free_samples++;
    else if (who < 0) other_held++;
    total_samples++;
    nanosleep(&ts, 0);
  }
  return 0;
}
int start(void *runtime, long gil_offset, long period) {
  char *g = (char *)runtime + gil_offset;  /* interval, last_holder, locked, switch_number */
  holder = (void *volatile *)(g + 8);
  locked = (volatile int *)(g + 16);
  switches = (volatile unsigned long *)(g + 24);
  memset(ns, 0, sizeof ns);
  memset(counts, 0, sizeof counts);
  memset(last_run, 0, sizeof last_run);
  for (int i = 0; i < SLOTS; i++) fds[i] = -1;
  free_samples = other_held = total_samples = 0;
  period_ns = period;
  switch0 = *switches;
  running = 1;
  return pthread_create(&thr, 0, loop, 0);
}
void stop(void) {
  running = 0;
  pthread_join(thr, 0);
  switch1 = *switches;
  for (int i = 0; i < SLOTS; i++)
    if (fds[i] >= 0) close(fds[i]), fds[i] = -1;
}
int locked_now(void) { return *locked; }
"""


def _sampler():
    """The compiled sampler (ctypes.CDLL), built under build/ on first use."""
    src = _C % {"slots": MAX_SLOTS, "secs": len(SECTIONS)}
    out = os.path.join(ROOT, "build", "gil_share")
    os.makedirs(out, exist_ok=True)
    so = os.path.join(out, "sampler_%08x.so" % (hash(src) & 0xFFFFFFFF))
    if not os.path.exists(so):
        c = os.path.join(out, "sampler.c")
        with open(c, "w") as f:
            f.write(src)
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-pthread", "-o", so + ".tmp", c], check=True)
        os.replace(so + ".tmp", so)
    lib = ctypes.PyDLL(so)  # (calls keep the GIL: locked_now must see this thread hold it)
    lib.start.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_long]
    return lib


def _gil_offset() -> tuple:
    """(address of _PyRuntime, offset of its gil state): the offset holding the switch interval."""
    base = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
    words = (ctypes.c_ulong * 8192).from_address(base)  # 64 KiB: the runtime state's head
    old = sys.getswitchinterval()
    try:
        found = None
        for us in (12347, 23459):
            sys.setswitchinterval(us / 1e6)
            hits = {i * 8 for i in range(len(words)) if words[i] == us}
            found = hits if found is None else found & hits
    finally:
        sys.setswitchinterval(old)
    if len(found) != 1:
        raise SystemExit(f"cannot find the GIL state in _PyRuntime (candidates {sorted(found)})")
    return base, found.pop()


def _check(lib) -> None:
    """The found fields are the GIL: held while this thread runs Python, free while it sleeps."""
    if lib.locked_now() != 1:
        raise SystemExit("gil.locked is not 1 while Python runs")
    free = ctypes.c_ulong.in_dll(lib, "free_samples")
    total = ctypes.c_ulong.in_dll(lib, "total_samples")
    time.sleep(0.05)
    lib.stop()
    if total.value < 10 or free.value < 0.9 * total.value:
        raise SystemExit(f"gil.locked not 0 while Python sleeps ({free.value} of {total.value} samples free)")


class Marks:
    """Per-thread section slots the sampler reads; wrappers set them."""

    def __init__(self, lib):
        self.section = (ctypes.c_int * MAX_SLOTS).in_dll(lib, "section")
        self.tstate = (ctypes.c_void_p * MAX_SLOTS).in_dll(lib, "tstate")
        self.tids = (ctypes.c_int * MAX_SLOTS).in_dll(lib, "tids")
        for i in range(MAX_SLOTS):  # (a new thread may get an old one's thread state address)
            self.tstate[i] = None
            self.section[i] = 0
            self.tids[i] = 0
        self.local = threading.local()
        self.n = 0
        self.lock = threading.Lock()
        self.get_ts = ctypes.pythonapi.PyThreadState_Get
        self.get_ts.restype = ctypes.c_void_p

    def slot(self) -> int:
        s = getattr(self.local, "slot", None)
        if s is None:
            with self.lock:
                s = self.local.slot = self.n
                self.n += 1
            self.tids[s] = threading.get_native_id()
            self.tstate[s] = self.get_ts()
        return s

    def wrap(self, fn, sec: int):
        marks = self

        def wrapped(*a, **k):
            s = marks.slot()
            prev = marks.section[s]
            marks.section[s] = sec
            try:
                return fn(*a, **k)
            finally:
                marks.section[s] = prev

        return wrapped


@contextlib.contextmanager
def _patched(marks: Marks):
    """Mark the batch task's sections in the pool threads (restored after)."""
    from dfanalyzer import _reader, analyzer, summary

    saved = [
        (_reader, "load_batch", _reader.load_batch),
        (summary, "partial_from_columns", summary.partial_from_columns),
        (summary.PartialFolder, "add", summary.PartialFolder.add),
        (analyzer, "_summary_batch_task", analyzer._summary_batch_task),
        (analyzer, "_summary_files_task", analyzer._summary_files_task),
        (analyzer, "PREFETCH_PER_THREAD", getattr(analyzer, "PREFETCH_PER_THREAD", 0)),
    ]
    # every load through the wrapped load_batch in a pool thread (no native loads started before
    # the pool, docs/perf/i27-start.md: this measures the pool's threads)
    analyzer.PREFETCH_PER_THREAD = 0
    _reader.load_batch = marks.wrap(_reader.load_batch, 1)
    summary.partial_from_columns = marks.wrap(summary.partial_from_columns, 3)
    summary.PartialFolder.add = marks.wrap(summary.PartialFolder.add, 4)
    analyzer._summary_batch_task = marks.wrap(analyzer._summary_batch_task, 2)
    analyzer._summary_files_task = marks.wrap(analyzer._summary_files_task, 2)
    try:
        yield
    finally:
        for obj, name, v in saved:
            setattr(obj, name, v)


def _run_summary(argv) -> tuple:
    from dfanalyzer import cli

    buf = io.StringIO()
    t = time.perf_counter()
    c = time.process_time()
    with contextlib.redirect_stdout(buf):
        rc = cli.main(argv)
    return rc, buf.getvalue(), time.perf_counter() - t, time.process_time() - c


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    cut = argv.index("--") if "--" in argv else len(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--period-us", type=float, default=20.0)
    a = ap.parse_args(argv[:cut])
    cmd = ["summary", a.dir, "--json", "--workers", str(a.workers), *argv[cut + 1 :]]
    lib = _sampler()
    base, off = _gil_offset()
    period = int(a.period_us * 1000)
    lib.start(base, off, period)
    _check(lib)
    rc, ref, _, _ = _run_summary(cmd)  # indexes, byte code, page cache
    if rc != 0:
        raise SystemExit(f"summary exited {rc}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, load {os.getloadavg()}, {' '.join(cmd)}")
    print(f"# GIL state at _PyRuntime+{off}; sample period {a.period_us} µs")
    size = MAX_SLOTS * len(SECTIONS) * 2
    counts = (ctypes.c_ulong * size).in_dll(lib, "counts")
    ns = (ctypes.c_ulonglong * size).in_dll(lib, "ns")
    glob = {
        k: ctypes.c_ulong.in_dll(lib, k) for k in ("free_samples", "other_held", "total_samples", "switch0", "switch1")
    }
    rows = []
    for r in range(a.rounds):
        marks = Marks(lib)
        main_slot = marks.slot()  # slot 0: this (the main) thread
        with _patched(marks):
            lib.start(base, off, period)
            rc, out, wall, cpu = _run_summary(cmd)
            lib.stop()
        if rc != 0 or out != ref:
            raise SystemExit(f"round {r}: the summary differs from the first run's (exit {rc})")
        total = glob["total_samples"].value
        dt = wall / max(1, total)  # seconds per sample (the sampler's real period)
        # per section of the pool threads: [CPU s, CPU s holding the GIL, wall s, wall s holding it]
        sec = [[0.0, 0.0, 0.0, 0.0] for _ in SECTIONS]
        main_held = 0.0
        for s in range(marks.n):
            for k in range(len(SECTIONS)):
                i = (s * len(SECTIONS) + k) * 2
                if s == main_slot:
                    main_held += ns[i + 1] / 1e9
                elif k:
                    x = sec[k]
                    x[0] += ns[i] / 1e9
                    x[1] += ns[i + 1] / 1e9
                    x[2] += counts[i] * dt
                    x[3] += counts[i + 1] * dt
        busy = sum(x[0] for x in sec)
        held = sum(x[1] for x in sec)
        rows.append(
            dict(
                wall=wall,
                cpu=cpu,
                samples=total,
                dt=dt,
                sec=sec,
                f=held / busy if busy else 0.0,
                f_wall=sum(x[3] for x in sec) / max(1e-9, sum(x[2] for x in sec)),
                main_held=main_held,
                other=glob["other_held"].value * dt,
                switches=glob["switch1"].value - glob["switch0"].value,
            )
        )
        x = rows[-1]
        print(
            f"round {r}: wall {wall:.3f} s, CPU {cpu:.3f} s, {total} samples ({dt * 1e6:.1f} µs each), "
            f"f = {x['f']:.4f} (by wall samples {x['f_wall']:.4f}), pool threads' CPU in batch tasks {busy:.3f} s, "
            f"GIL switches {x['switches']}, main thread's CPU holding the GIL {main_held:.3f} s, "
            f"GIL held by no marked thread {x['other']:.3f} s (wall)"
        )

    def med(vals):
        vals = sorted(vals)
        return vals[len(vals) // 2]

    print("\n| section (pool threads) | CPU s | CPU s holding the GIL | held share | wall s | held share by wall |")
    print("|---|---:|---:|---:|---:|---:|")
    for k in range(1, len(SECTIONS)):
        c_in, c_held, w_in, w_held = (med(x["sec"][k][j] for x in rows) for j in range(4))
        print(
            f"| {SECTIONS[k]} | {c_in:.3f} | {c_held:.3f} | {c_held / c_in if c_in else 0:.1%} | {w_in:.3f} | "
            f"{w_held / w_in if w_in else 0:.1%} |"
        )
    fs = sorted(x["f"] for x in rows)
    f = med(fs)
    print(f"\nGIL-held share of the pool threads' batch CPU f = {f:.4f} (rounds {', '.join('%.4f' % v for v in fs)})")
    for n in (2, 4, 8, 16):
        print(f"Amdahl S({n}) = 1 / (f + (1 - f) / {n}) = {1 / (f + (1 - f) / n):.2f}; GIL demand N*f = {n * f:.2f}")
    print(f"GIL bound 1 / f = {1 / f:.1f} threads' worth of batch work" if f else "GIL bound: none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
