#!/usr/bin/env python3
"""Synthetic DFTracer traces in our gzip member format (docs/design.md, "Gzip member format").

Usage::

    python benchmarks/gen_traces.py --events N --files F --out DIR [--format member|gzip|plain]
                                    [--member-bytes B] [--seed S]

Writes F files ``DIR/synth-<i>.pfw.gz`` (``.pfw`` for ``plain``) holding N events in total, a
realistic mix per process: application and compute events with tags (epoch, step), POSIX opens,
stats, reads, writes, seeks and closes, STDIO fopen/fread/fwrite/fclose. The first line is ``[``.

Importable: :func:`write_members` (our member writer), :func:`gzip_member`, :func:`event_lines`,
:func:`generate`.
"""
from __future__ import annotations

import argparse
import gzip
import os
import random
import struct
import zlib
from typing import Iterable, Iterator, List

__all__ = ["gzip_member", "write_members", "event_lines", "generate", "main"]


def gzip_member(data: bytes, level: int = 6) -> bytes:
    """One RFC 1952 member with our 'DF' FEXTRA subfield; ``data`` must hold whole lines."""
    comp = zlib.compressobj(level, zlib.DEFLATED, -15)
    body = comp.compress(data) + comp.flush()
    total = 10 + 2 + 20 + len(body) + 8
    header = b"\x1f\x8b\x08\x04" + b"\x00\x00\x00\x00" + b"\x00\x03"
    extra = b"DF" + struct.pack("<HIIII", 16, total, len(data), data.count(b"\n"), 1)
    trailer = struct.pack("<II", zlib.crc32(data) & 0xFFFFFFFF, len(data) & 0xFFFFFFFF)
    return header + struct.pack("<H", len(extra)) + extra + body + trailer


def write_members(path: str, lines: Iterable[bytes], member_bytes: int = 1 << 20, level: int = 6) -> int:
    """Write ``lines`` (each ending in ``\\n``) as members of about ``member_bytes``; returns members."""
    n = 0
    with open(path, "wb") as f:
        buf: List[bytes] = []
        size = 0
        for ln in lines:
            buf.append(ln)
            size += len(ln)
            if size >= member_bytes:
                f.write(gzip_member(b"".join(buf), level))
                n += 1
                buf, size = [], 0
        if buf:
            f.write(gzip_member(b"".join(buf), level))
            n += 1
    return n


_POSIX_OPS = ["open64", "read", "read", "read", "pread64", "write", "write", "lseek64", "__xstat64", "close"]
_STDIO_OPS = ["fopen", "fread", "fread", "fwrite", "fclose"]


def event_lines(n_events: int, pid: int, host: str, seed: int = 0, t0: int = 1_700_000_000_000_000) -> Iterator[bytes]:
    """``[`` then ``n_events`` JSON lines for one process (bytes, newline terminated)."""
    rng = random.Random(seed)
    yield b"[\n"
    ts = t0
    ev = 0
    step = 0
    files = ["/p/lustre/data/train/img_%05d.npz" % i for i in range(64)]
    ckpt = "/p/lustre/ckpt/model-%d.pt" % pid
    while ev < n_events:
        epoch = step // 100
        tid = pid + (step % 4)
        # application + compute events with tags
        dur = rng.randint(50, 5000)
        yield (b'{"id":%d,"name":"train_step","cat":"app","pid":%d,"tid":%d,"ts":%d,"dur":%d,"ph":"X",'
               b'"args":{"hostname":"%s","epoch":%d,"step":%d,"level":1}}\n'
               % (ev, pid, tid, ts, dur, host.encode(), epoch, step))
        ev += 1
        ts += rng.randint(1, 30)
        if ev < n_events:
            d = rng.randint(100, 20000)
            yield (b'{"id":%d,"name":"compute","cat":"compute","pid":%d,"tid":%d,"ts":%d,"dur":%d,"ph":"X",'
                   b'"args":{"hostname":"%s","epoch":%d,"step":%d,"flops":%.3f}}\n'
                   % (ev, pid, tid, ts, d, host.encode(), epoch, step, rng.random() * 1e9))
            ev += 1
            ts += d
        fname = files[step % len(files)].encode()
        fd = 3 + step % 16
        off = 0
        for op in (_POSIX_OPS if step % 5 else _STDIO_OPS):
            if ev >= n_events:
                break
            d = rng.randint(1, 900)
            if op in ("read", "pread64", "write"):
                cnt = rng.choice((4096, 65536, 1 << 20))
                ret = cnt if rng.random() > 0.05 else rng.randint(0, cnt)
                args = b'"fname":"%s","fd":%d,"count":%d,"ret":%d,"offset":%d' % (fname, fd, cnt, ret, off)
                off += ret
            elif op in ("fread", "fwrite"):
                cnt = rng.choice((1, 16, 256))
                args = b'"fname":"%s","size":4096,"count":%d,"ret":%d' % (fname, cnt, cnt)
            elif op == "lseek64":
                args = b'"fname":"%s","fd":%d,"offset":%d,"whence":0,"ret":%d' % (fname, fd, off, off)
            elif op in ("open64", "fopen"):
                args = b'"fname":"%s","flags":0,"mode":"r","ret":%d' % (fname, fd)
            else:
                args = b'"fname":"%s","ret":0' % (fname,)
            cat = b"STDIO" if op.startswith("f") else b"POSIX"
            yield (b'{"id":%d,"name":"%s","cat":"%s","pid":%d,"tid":%d,"ts":%d,"dur":%d,"ph":"X",'
                   b'"args":{"hostname":"%s",%s,"epoch":%d}}\n'
                   % (ev, op.encode(), cat, pid, tid, ts, d, host.encode(), args, epoch))
            ev += 1
            ts += d + rng.randint(0, 20)
        if step % 250 == 249 and ev < n_events:
            yield (b'{"id":%d,"name":"write","cat":"POSIX","pid":%d,"tid":%d,"ts":%d,"dur":%d,"ph":"X",'
                   b'"args":{"hostname":"%s","fname":"%s","fd":9,"count":8388608,"ret":8388608,"offset":0}}\n'
                   % (ev, pid, tid, ts, 9000, host.encode(), ckpt.encode()))
            ev += 1
            ts += 9000
        step += 1


def generate(out: str, events: int, files: int = 1, fmt: str = "member", member_bytes: int = 1 << 20,
             seed: int = 0, level: int = 6) -> List[str]:
    """Write ``files`` traces with ``events`` events in total under ``out``; returns their paths."""
    os.makedirs(out, exist_ok=True)
    paths = []
    for i in range(files):
        n = events // files + (1 if i < events % files else 0)
        pid = 10_000 + i
        host = "node%02d" % (i % 8)
        lines = event_lines(n, pid, host, seed=seed + i)
        suffix = ".pfw" if fmt == "plain" else ".pfw.gz"
        path = os.path.join(out, "synth-%d%s" % (i, suffix))
        if fmt == "member":
            write_members(path, lines, member_bytes, level)
        elif fmt == "gzip":
            with gzip.open(path, "wb", compresslevel=level) as f:
                for ln in lines:
                    f.write(ln)
        elif fmt == "plain":
            with open(path, "wb") as f:
                for ln in lines:
                    f.write(ln)
        else:
            raise ValueError("unknown format %r" % fmt)
        paths.append(path)
    return paths


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, required=True, help="events in total")
    ap.add_argument("--files", type=int, default=1)
    ap.add_argument("--out", required=True)
    ap.add_argument("--format", default="member", choices=("member", "gzip", "plain"))
    ap.add_argument("--member-bytes", type=int, default=1 << 20, help="uncompressed bytes per member")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    for p in generate(a.out, a.events, a.files, a.format, a.member_bytes, a.seed):
        print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
