"""The engine's file-position model (dfanalyzer/engine/access.py) on a real preload trace.

A C program reads a file through stdio the way numpy.fromfile does (``fseeko64(f, 0,
SEEK_CUR)`` before each ``fread``), then seeks relatively, asks ``ftell`` and finally seeks to
the end. Truth: the program's own positions (``ftello`` before every read, printed).
"""

from __future__ import annotations

import subprocess

import numpy as np
import pandas as pd
from test_preload_helpers import preload_lib, trace_files, traced_env

from dfanalyzer import reader as R
from dfanalyzer.engine import access

PROG = r"""
#define _FILE_OFFSET_BITS 64
#include <stdio.h>
int main(int argc, char** argv) {
  static char buf[4096];
  FILE* w = fopen(argv[1], "w");
  for (int i = 0; i < 4; ++i) fwrite(buf, 1, sizeof buf, w);
  fclose(w);
  FILE* f = fopen(argv[1], "r");
  if (!f) return 1;
  long step[] = {0, 0, 300, -100};
  for (int i = 0; i < 4; ++i) {
    if (fseeko(f, step[i], SEEK_CUR) != 0) return 2;   /* numpy: fseeko64(f, 0, SEEK_CUR) */
    printf("%lld\n", (long long)ftello(f));
    if (fread(buf, 1, 1000, f) != 1000) return 3;
  }
  if (fseeko(f, -500, SEEK_END) != 0) return 4;        /* position unknown without the size */
  if (fread(buf, 1, 100, f) != 100) return 5;
  printf("%lld\n", (long long)ftello(f));              /* ftell: known again */
  if (fread(buf, 1, 100, f) != 100) return 6;
  return fclose(f);
}
"""


def test_stdio_positions_follow_seek_cur_and_ftell(tmp_path):
    src = tmp_path / "pos.c"
    src.write_text(PROG)
    exe = tmp_path / "pos"
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(src)], check=True)
    data = tmp_path / "data"
    data.mkdir()
    prefix = str(tmp_path / "trace")
    out = subprocess.run(
        [str(exe), str(data / "f.bin")],
        env=traced_env(preload_lib(), prefix, str(data)),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    truth = [int(x) for x in out.stdout.split()]  # positions before reads 1-4, after read 5
    files = trace_files(prefix)
    assert len(files) == 1
    e = R.load_batch(files[0], 0, 0).events
    io = e[e["cat"].astype(str).isin(["POSIX", "STDIO"]) & (e["ph"].astype(str) == "X")].reset_index(drop=True)
    pos = access.place_requests(io)
    reads = (io["name"].astype(str) == "fread").to_numpy()
    got = pos[reads].tolist()
    assert len(got) == 6
    assert got[:4] == [float(x) for x in truth[:4]] == [0.0, 1000.0, 2300.0, 3200.0]
    assert np.isnan(got[4])  # after SEEK_END: unplaced (its bytes are counted as such)
    assert got[5] == float(truth[4]) == 16384.0 - 400.0
    # the writes were placed too (fopen "w" then fwrite advances)
    writes = (io["name"].astype(str) == "fwrite").to_numpy()
    assert pos[writes].tolist() == [0.0, 4096.0, 8192.0, 12288.0]


def test_seek_cur_carries_across_partitions():
    def ev(name, ts, **a):
        return dict(name=name, hostname="h", pid=1, ts=ts, size=a.pop("size", None), offset=a.pop("offset", None), **a)

    rows = [
        ev("fopen", 0, fd=3, ret=0),
        ev("fread", 1, fd=3, size=100),
        ev("fseeko64", 2, fd=3, offset=0, whence=1, ret=0),  # partition boundary after this row
        ev("fread", 3, fd=3, size=100),
        ev("fseeko64", 4, fd=3, offset=50, whence=1, ret=0),
        ev("fread", 5, fd=3, size=100),
    ]
    df = pd.DataFrame(rows)
    df["offset"] = pd.array(df["offset"], dtype="Int64")
    df["size"] = pd.array(df["size"], dtype="Int64")
    whole = access.place_requests(df)
    assert whole[df["name"] == "fread"].tolist() == [0.0, 100.0, 250.0]
    p0, p1 = df.iloc[:3], df.iloc[3:]
    starts = access.stream_positions([access.stream_carry(p) for p in (p0, p1)])
    assert access.place_requests(p1, starts[1])[p1["name"] == "fread"].tolist() == [100.0, 250.0]


def _steps_by_hand(reqs):
    """(consecutive, sequential, random) per group of ``(group, proc, tid, start, end)`` requests
    in trace order: each thread's next request against the end of its previous one."""
    out, last = {}, {}
    for g, p, t, s, e in reqs:
        c = out.setdefault(g, [0, 0, 0])
        if (g, p, t) in last:
            prev = last[(g, p, t)]
            c[0] += s == prev
            c[1] += s >= prev
            c[2] += s < prev
        last[(g, p, t)] = e
    return out


def test_thread_steps_join_across_any_split():
    """The files view's "thread" ordering: the same steps whole and cut into partitions anywhere
    (each cut joined by join_step_ends), against a by-hand loop."""
    rng = np.random.default_rng(7)
    n, k = 400, 3
    group = rng.integers(0, k, n)
    proc = rng.integers(0, 2, n)
    tid = rng.integers(0, 2, n)
    size = rng.integers(1, 5, n) * 10
    start = np.where(rng.random(n) < 0.7, 0, rng.integers(0, 200, n))  # 0: continue (below)
    # mostly consecutive per thread, some jumps back and forth
    pos = {}
    for i in range(n):
        key = (group[i], proc[i], tid[i])
        if start[i] == 0:
            start[i] = pos.get(key, 0)
        pos[key] = start[i] + size[i]
    end = start + size
    keys = [("h", 1), ("h", 2)]
    truth = _steps_by_hand(zip(group, proc, tid, start, end))
    for cuts in ([], [1], [137, 138, 300], list(range(0, n, 17))):
        acc = [dict() for _ in range(k)]
        tot = np.zeros((k, 3), dtype=np.int64)
        for a, z in zip([0] + cuts, cuts + [n]):
            sl = slice(a, z)
            c, s, r, ends = access.thread_steps(
                group[sl], proc[sl], keys, tid[sl], np.arange(a, z), start[sl], end[sl], k
            )
            tot += np.stack([c, s, r], axis=1)
            for g in range(k):
                tot[g] += access.join_step_ends(acc[g], ends[g])
        for g in range(k):
            assert list(tot[g]) == truth.get(g, [0, 0, 0]), (cuts, g)
    assert all(truth[g][2] > 0 and truth[g][0] > 0 for g in range(k))  # both kinds present
