"""A small training-like program for the oracle's differential tests (tests/test_oracle_diff.py).

Run under the preload (POSIX calls) with the Python API (pipeline / dataloader / compute /
checkpoint events): two epochs of steps that open, pread (sequential and random) and close a
shared file, a reader thread, STDIO fopen/fread/fwrite/fclose through libc, a checkpoint write,
and two forked children ("workers") that read samples, one twice as many as the other. Usage: ``oracle_app.py DATA_DIR STEPS``.
"""

import ctypes
import os
import sys
import threading

from dftracer.logger import dftracer

data, steps = sys.argv[1], int(sys.argv[2])
log = dftracer.initialize_log(None, None, -1)
now = log.get_time
shared = os.path.join(data, "shared.bin")
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.fread.argtypes = libc.fwrite.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]


def event(name, cat, t0, **args):
    log.log_event(name, cat, t0, max(1, now() - t0), args)


def reader(n):
    fd = os.open(shared, os.O_RDONLY)
    for i in range(n):
        os.pread(fd, 4096, (i * 7919 % 64) * 4096)  # random offsets
    os.close(fd)


def worker(n):
    fd = os.open(shared, os.O_RDONLY)
    for i in range(n):
        t = now()
        os.pread(fd, 1000, i * 1000)  # consecutive, misaligned
        event("item", "data", t, image_idx=i)
    os.close(fd)


for epoch in (1, 2):
    t_epoch = now()
    th = threading.Thread(target=reader, args=(steps,))
    th.start()
    for step in range(steps):
        t = now()
        fd = os.open(shared, os.O_RDONLY)
        for k in range(3):
            os.pread(fd, 8192, (step % 8) * 24576 + k * 8192)
        if step % 7 == 0:
            os.pread(fd, 512, 100)  # back to an earlier offset: a random step
        os.close(fd)
        event("fetch.iter", "dataloader", t, epoch=epoch, step=step)
        t = now()
        sum(range(3000))
        event("compute", "compute", t, epoch=epoch, step=step)
    th.join()
    t = now()
    fd = os.open(os.path.join(data, "ckpt-%d.bin" % epoch), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for _ in range(4):
        os.write(fd, b"c" * 65536)
    os.close(fd)
    event("checkpoint", "checkpoint", t, epoch=epoch)
    f = libc.fopen(shared.encode(), b"rb")
    buf = ctypes.create_string_buffer(65536)
    for _ in range(8):
        libc.fread(buf, 512, 16, f)
    libc.fclose(f)
    g = libc.fopen(os.path.join(data, "stdio-%d.out" % epoch).encode(), b"wb")
    for _ in range(8):
        libc.fwrite(buf, 100, 3, g)
    libc.fclose(g)
    event("epoch", "pipeline", t_epoch, epoch=epoch)

for n in (steps * 2, steps):  # two workers, one with twice the samples of the other
    pid = os.fork()
    if pid == 0:
        worker(n)
        os._exit(0)
    os.waitpid(pid, 0)
