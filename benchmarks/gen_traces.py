#!/usr/bin/env python3
"""Synthetic DFTracer traces in our gzip member format (docs/design.md, "Gzip member format").

Usage::

    python benchmarks/gen_traces.py --events N --files F --out DIR [--format member|gzip|plain]
                                    [--member-bytes B] [--seed S] [--first-file K] [--t0 US]
                                    [--jobs J]

Writes F files ``DIR/synth-<i>.pfw.gz`` (``.pfw`` for ``plain``) holding N events in total, a
realistic mix per process: application and compute events with tags (epoch, step), POSIX opens,
stats, reads, writes, seeks and closes, STDIO fopen/fread/fwrite/fclose. The first line is ``[``.

File ``i`` (``i`` = K .. K+F-1) is process ``pid = 10000 + i`` on host ``node<i % 8>`` with seed
``S + i``, its first timestamp ``US`` (µs). A larger set is made of parts that share no event:
the same S, disjoint file ranges (``--first-file``) and, for disjoint timelines, ``--t0`` past
the previous part's last timestamp. With K = 0 and the default t0 the output is unchanged.

Importable: :func:`write_members` (our member writer), :func:`gzip_member`, :func:`event_lines`,
:func:`generate`.
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
from typing import Iterable, Iterator, List

__all__ = ["gzip_member", "write_members", "event_lines", "generate", "main"]


def gzip_member(data: bytes, level: int = 6) -> bytes:
    """One gzip member with our 'DF' size subfield, written by the tracer's own encoder
    (``dftracer._dftracer.encode_member``, layout in src/format/member.h); ``data`` must hold
    whole lines. Level 1 is the tracer's default line encoder, 2-9 the general deflater."""
    from dftracer import _dftracer

    return _dftracer.encode_member(data, level)


def write_members(path: str, lines: Iterable[bytes], member_bytes: int = 1 << 20, level: int = 6) -> int:
    """Write ``lines`` (each ending in ``\\n``) as members of about ``member_bytes``; returns members.

    Members are compressed on a second thread (the encoder releases the GIL) while lines are built.
    """
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    n = 0
    with open(path, "wb") as f, ThreadPoolExecutor(max_workers=2) as ex:
        pending: deque = deque()

        def submit(chunk: List[bytes]):
            nonlocal n
            pending.append(ex.submit(gzip_member, b"".join(chunk), level))
            n += 1
            while len(pending) > 4:
                f.write(pending.popleft().result())

        buf: List[bytes] = []
        size = 0
        for ln in lines:
            buf.append(ln)
            size += len(ln)
            if size >= member_bytes:
                submit(buf)
                buf, size = [], 0
        if buf:
            submit(buf)
        while pending:
            f.write(pending.popleft().result())
    return n


_POSIX_OPS = ["open64", "read", "read", "read", "pread64", "write", "write", "lseek64", "__xstat64", "close"]
_STDIO_OPS = ["fopen", "fread", "fread", "fwrite", "fclose"]
_IO_SIZES = (4096, 65536, 1 << 20)
_FREAD_COUNTS = (1, 16, 256)
_CHUNK_STEPS = 2048  # steps whose random numbers are drawn at once


def _step_block(rng: random.Random, n_steps: int):
    """Random numbers for ``n_steps`` steps, drawn in bulk (lists are faster to index than rng calls)."""
    r = rng.random
    k = n_steps * 12
    return (
        [rng.randint(50, 5000) for _ in range(n_steps)],
        [rng.randint(100, 20000) for _ in range(n_steps)],
        [r() for _ in range(n_steps)],
        [int(r() * 900) + 1 for _ in range(k)],
        [int(r() * 21) for _ in range(k)],
        [r() for _ in range(k)],
        [int(r() * 30) + 1 for _ in range(n_steps)],
    )


DEFAULT_T0 = 1_700_000_000_000_000  # µs, first timestamp of every file unless --t0 says otherwise


def event_lines(n_events: int, pid: int, host: str, seed: int = 0, t0: int = DEFAULT_T0) -> Iterator[bytes]:
    """``[`` then ``n_events`` JSON lines for one process (bytes, newline terminated).

    Per step: one ``train_step`` (app) and one ``compute`` event tagged with epoch/step, then a POSIX
    open/read/pread/write/lseek/stat/close sequence (every 5th step STDIO fopen/fread/fwrite/fclose)
    on one of 64 files; every 250th step an 8 MiB checkpoint write. Deterministic for a seed.
    """
    rng = random.Random(seed)
    yield b"[\n"
    ts = t0
    ev = 0
    step = 0
    hb = host.encode()
    files = [b"/p/lustre/data/train/img_%05d.npz" % i for i in range(64)]
    ckpt = b"/p/lustre/ckpt/model-%d.pt" % pid
    # Per-op line prefix/suffix templates (only numbers are formatted per event).
    pre = {
        op: b'{"id":%%d,"name":"%s","cat":"%s","pid":%d,"tid":%%d,"ts":%%d,"dur":%%d,"ph":"X","args":{"hostname":"%s",'
        % (op.encode(), b"STDIO" if op.startswith("f") else b"POSIX", pid, hb)
        for op in set(_POSIX_OPS) | set(_STDIO_OPS)
    }
    app = (
        b'{"id":%%d,"name":"train_step","cat":"app","pid":%d,"tid":%%d,"ts":%%d,"dur":%%d,"ph":"X",'
        b'"args":{"hostname":"%s","epoch":%%d,"step":%%d,"level":1}}\n' % (pid, hb)
    )
    comp = (
        b'{"id":%%d,"name":"compute","cat":"compute","pid":%d,"tid":%%d,"ts":%%d,"dur":%%d,"ph":"X",'
        b'"args":{"hostname":"%s","epoch":%%d,"step":%%d,"flops":%%.3f}}\n' % (pid, hb)
    )
    big = (
        b'{"id":%%d,"name":"write","cat":"POSIX","pid":%d,"tid":%%d,"ts":%%d,"dur":9000,"ph":"X",'
        b'"args":{"hostname":"%s","fname":"%s","fd":9,"count":8388608,"ret":8388608,"offset":0}}\n' % (pid, hb, ckpt)
    )
    posix = [(op, pre[op]) for op in _POSIX_OPS]
    stdio = [(op, pre[op]) for op in _STDIO_OPS]
    out: List[bytes] = []
    while ev < n_events:
        d_app, d_comp, flops, d_io, gap_io, u_io, gap_app = _step_block(rng, _CHUNK_STEPS)
        k = 0
        for j in range(_CHUNK_STEPS):
            if ev >= n_events:
                break
            epoch = step // 100
            tid = pid + (step & 3)
            dur = d_app[j]
            out.append(app % (ev, tid, ts, dur, epoch, step))
            ev += 1
            ts += gap_app[j]
            if ev < n_events:
                d = d_comp[j]
                out.append(comp % (ev, tid, ts, d, epoch, step, flops[j] * 1e9))
                ev += 1
                ts += d
            fname = files[step & 63]
            fd = 3 + step % 16
            off = 0
            for op, p in posix if step % 5 else stdio:
                if ev >= n_events:
                    break
                d = d_io[k]
                u = u_io[k]
                if op in ("read", "pread64", "write"):
                    cnt = _IO_SIZES[int(u * 3)]
                    ret = cnt if u * 20 % 1 > 0.05 else int(u * 1e6) % (cnt + 1)
                    args = b'"fname":"%s","fd":%d,"count":%d,"ret":%d,"offset":%d' % (fname, fd, cnt, ret, off)
                    off += ret
                elif op in ("fread", "fwrite"):
                    cnt = _FREAD_COUNTS[int(u * 3)]
                    args = b'"fname":"%s","size":4096,"count":%d,"ret":%d' % (fname, cnt, cnt)
                elif op == "lseek64":
                    args = b'"fname":"%s","fd":%d,"offset":%d,"whence":0,"ret":%d' % (fname, fd, off, off)
                elif op in ("open64", "fopen"):
                    args = b'"fname":"%s","flags":0,"mode":"r","ret":%d' % (fname, fd)
                else:
                    args = b'"fname":"%s","ret":0' % (fname,)
                out.append(p % (ev, tid, ts, d) + args + b',"epoch":%d}}\n' % epoch)
                ev += 1
                ts += d + gap_io[k]
                k += 1
            if step % 250 == 249 and ev < n_events:
                out.append(big % (ev, tid, ts))
                ev += 1
                ts += 9000
            step += 1
        yield from out
        out.clear()


def _write_one(job) -> str:
    path, n, pid, host, seed, fmt, member_bytes, level, t0 = job
    lines = event_lines(n, pid, host, seed=seed, t0=t0)
    if fmt == "member":
        write_members(path, lines, member_bytes, level)
    elif fmt in ("gzip", "plain"):
        # One buffered write per ~8 MiB (a write per line through GzipFile is slow).
        f = gzip.open(path, "wb", compresslevel=level) if fmt == "gzip" else open(path, "wb")
        with f:
            buf: List[bytes] = []
            size = 0
            for ln in lines:
                buf.append(ln)
                size += len(ln)
                if size >= 8 << 20:
                    f.write(b"".join(buf))
                    buf, size = [], 0
            f.write(b"".join(buf))
    else:
        raise ValueError("unknown format %r" % fmt)
    return path


def generate(
    out: str,
    events: int,
    files: int = 1,
    fmt: str = "member",
    member_bytes: int = 1 << 20,
    seed: int = 0,
    level: int = 6,
    jobs: int = 0,
    first_file: int = 0,
    t0: int = DEFAULT_T0,
) -> List[str]:
    """Write ``files`` traces with ``events`` events in total under ``out``; returns their paths.

    Files are written by ``jobs`` processes (0 = one per CPU); level 6 is the tracer's default.
    File ``i`` in ``first_file .. first_file + files - 1`` is ``synth-<i>``, pid ``10000 + i``,
    host ``node<i % 8>``, seed ``seed + i``, first timestamp ``t0`` (µs).
    Raises ValueError for an unknown format or a negative ``first_file``.
    """
    if fmt not in ("member", "gzip", "plain"):
        raise ValueError("unknown format %r" % fmt)
    if first_file < 0:
        raise ValueError("first_file must be >= 0, got %d" % first_file)
    os.makedirs(out, exist_ok=True)
    suffix = ".pfw" if fmt == "plain" else ".pfw.gz"
    work = []
    for j in range(files):
        n = events // files + (1 if j < events % files else 0)
        i = first_file + j
        work.append(
            (
                os.path.join(out, "synth-%d%s" % (i, suffix)),
                n,
                10_000 + i,
                "node%02d" % (i % 8),
                seed + i,
                fmt,
                member_bytes,
                level,
                t0,
            )
        )
    jobs = min(jobs or os.cpu_count() or 1, files)
    if jobs <= 1:
        return [_write_one(w) for w in work]
    import multiprocessing as mp

    with mp.get_context("fork").Pool(jobs) as pool:
        return pool.map(_write_one, work, chunksize=1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, required=True, help="events in total")
    ap.add_argument("--files", type=int, default=1)
    ap.add_argument("--out", required=True)
    ap.add_argument("--format", default="member", choices=("member", "gzip", "plain"))
    ap.add_argument("--member-bytes", type=int, default=1 << 20, help="uncompressed bytes per member")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--first-file", type=int, default=0, help="number of the first file (pid 10000+K, seed S+K)")
    ap.add_argument("--t0", type=int, default=DEFAULT_T0, help="first timestamp of every file, µs")
    ap.add_argument("--jobs", type=int, default=0, help="writer processes (0 = one per CPU)")
    a = ap.parse_args(argv)
    if a.first_file < 0:
        ap.error("--first-file must be >= 0")
    for p in generate(
        a.out, a.events, a.files, a.format, a.member_bytes, a.seed, jobs=a.jobs, first_file=a.first_file, t0=a.t0
    ):
        print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
