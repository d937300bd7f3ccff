"""Memory-map system calls of batches loaded and dropped, and the exactness of reused column
storage (issue 22, docs/perf/i28-mm.md).

Every ``mmap``/``munmap``/``mprotect``/``brk`` takes the process's ``mmap_lock`` for writing (all
other threads' page faults wait), and each ``madvise(MADV_POPULATE_WRITE)`` walks the page table
under it; the threaded summary loads and drops one batch after another in every thread. Truth:
the system calls as ``strace`` sees them (skipped, with the reason, where it cannot run), between
markers the child leaves (a ``stat`` of a path that does not exist), and the bytes of every
column of a batch loaded in a process that frees nothing (no reused storage at all).

* After the first round, a batch's columns come from blocks freed by earlier batches (the
  reader's column cache, py_reader's pooled code vectors): no populate of pages that are resident
  already, and no mm call of the loader's own.
* A reused block holds the previous column's bytes; the columns of every batch, loaded in turns
  with batches of other sizes, equal byte for byte those of the same batch in a fresh process.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))
import gen_traces  # noqa: E402

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise/strace: Linux")

_CHILD = r"""
import hashlib, json, os, random, sys
import numpy as np
from dfanalyzer import reader

path, idx, mode, rounds, proj = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
from dfanalyzer.engine.vocabulary import AGGREGATE_COLUMNS
cols = None if proj == "all" else list(AGGREGATE_COLUMNS)  # (all args columns, or the summary's)
if os.environ.get("MM_KEEP"):  # as the dfanalyzer command's own process (cli.run)
    from dfanalyzer import cli
    cli._keep_freed_memory()
n_ck = len(reader.build_index(path, idx)["checkpoints"])
# batches of 8 to 16 checkpoints (~38,000 to ~77,000 events, the summary's are ~78,000): columns of
# several size classes, every int64 one a block of >= 128 KiB (the cache's)
sizes = [12, 8, 16, 10, 14]
batches, a, k = [], 0, 0
while a < n_ck:
    z = min(a + sizes[k % len(sizes)] - 1, n_ck - 1)
    batches.append((a, z))
    a, k = z + 1, k + 1

def digest(b):
    h = {}
    def walk(key, x):
        if isinstance(x, np.ndarray):
            h[key] = [str(x.dtype), list(x.shape), hashlib.sha1(np.ascontiguousarray(x).tobytes()).hexdigest()]
        elif isinstance(x, (tuple, list)):
            for i, y in enumerate(x):
                walk(f"{key}[{i}]", y)
        elif isinstance(x, dict):
            for n, y in x.items():
                walk(f"{key}.{n}", y)
        else:
            h[key] = repr(x)
    walk("b", b)
    return h

out = {"batches": len(batches), "digests": {}}
held = []
rng = random.Random(7)
for r in range(rounds):
    try:
        os.stat(f"/nonexistent-dfanalyzer-mm-round-{r}")
    except OSError:
        pass
    order = list(batches)
    if r:
        rng.shuffle(order)  # (each batch meets blocks of other batches' sizes)
    for a, z in order:
        b = reader._reader.load_batch(path, a, z, idx, cols)
        d = digest(b)
        key = f"{a}-{z}"
        if out["digests"].setdefault(key, d) != d:
            out.setdefault("changed", []).append([r, key])
        if mode == "held":
            held.append(b)
        del b
try:
    os.stat("/nonexistent-dfanalyzer-mm-round-end")
except OSError:
    pass
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    out = tmp_path_factory.mktemp("mm")
    # 300,000 events in 62 members of 1 MiB of text (~4,800 events each)
    return gen_traces.generate(str(out), 300_000, 1, member_bytes=1 << 20, jobs=1)[0]


def _child(trace, idx, mode, rounds, proj="all", prefix=(), cli_malloc=False):
    if cli_malloc:  # the dfanalyzer command's malloc settings (cli.run)
        env = dict(os.environ, MM_KEEP="1")
        env.pop("MALLOC_TRIM_THRESHOLD_", None)
    else:  # Dask's: freed blocks >= 128 KiB go back, so fresh ones are zero
        env = dict(os.environ, MALLOC_TRIM_THRESHOLD_="65536")
    r = subprocess.run(
        [*prefix, sys.executable, "-c", _CHILD, trace, str(idx), mode, str(rounds), proj],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_reused_columns_equal_fresh_ones(trace, tmp_path):
    fresh = _child(trace, tmp_path / "idx", "held", 1)  # nothing freed: no block reused
    reused = _child(trace, tmp_path / "idx", "drop", 3)  # rounds 2 and 3: every block reused
    assert fresh["batches"] == reused["batches"] >= 5
    assert "changed" not in reused, reused.get("changed")
    assert reused["digests"] == fresh["digests"]
    # (the digests cover every array of the batch: core columns, codes, dictionaries, args)
    assert all(len(d) >= 10 for d in fresh["digests"].values())


def _strace_works():
    if shutil.which("strace") is None:
        return "strace is not installed"
    r = subprocess.run(["strace", "-f", "-qq", "-o", os.devnull, "true"], capture_output=True, text=True)
    if r.returncode != 0:
        return f"strace cannot trace here: {r.stderr.strip()[:200]}"
    return None


MM_WRITERS = ("mmap", "munmap", "mprotect", "brk", "mremap")


def test_dropped_batches_take_no_mm_calls(trace, tmp_path):
    why = _strace_works()
    if why:
        pytest.skip(why)
    log = tmp_path / "strace.txt"
    calls = ",".join(("madvise", "stat", "newfstatat", "lstat", "statx") + MM_WRITERS)
    # the summary's projection, with the dfanalyzer command's malloc settings (cli.run)
    prefix = ("strace", "-f", "-qq", "-o", str(log), "-e", f"trace={calls}")
    out = _child(trace, tmp_path / "idx", "drop", 4, "summary", prefix=prefix, cli_malloc=True)
    n = out["batches"]
    rounds, cur = [], None
    with open(log) as f:
        for line in f:
            m = re.search(r"nonexistent-dfanalyzer-mm-round-(\w+)", line)
            if m:
                cur = {"populate": 0, "writers": 0} if m.group(1) != "end" else None
                if cur is not None:
                    rounds.append(cur)
                continue
            m = re.match(r"\d+ +(\w+)\(", line)
            if cur is None or not m:
                continue
            if m.group(1) == "madvise" and "MADV_POPULATE_WRITE" in line:
                cur["populate"] += 1
            elif m.group(1) in MM_WRITERS:
                cur["writers"] += 1
    assert len(rounds) == 4 and n >= 5, (rounds, n)
    # Round 1: fresh storage, populated ahead of the rows (several strides per column).
    if rounds[0]["populate"] == 0:
        pytest.skip("madvise(MADV_POPULATE_WRITE) not used here (kernel < 5.14)")
    assert rounds[0]["populate"] >= 8 * n, rounds
    # Rounds 3 and 4 (round 2 still meets size classes for the first time): every block is
    # reused and resident. Before the parser knew it, every round took as many populates as the
    # first (~22 a batch here); what is left is the part of a block a larger batch adds.
    for r in rounds[2:]:
        assert r["populate"] <= 4 * n, (rounds, n)
        # and no mm call at all: glibc serves the rest from memory freed by earlier batches
        assert r["writers"] <= n // 2, (rounds, n)


def test_keep_freed_memory_only_in_the_console_script(monkeypatch, tmp_path):
    from dfanalyzer import _reader, cli

    with pytest.raises(ValueError):
        _reader.keep_freed_memory(-1, 1 << 20)
    with pytest.raises(ValueError):
        _reader.keep_freed_memory(1 << 20, 64 << 20)
    seen = []
    monkeypatch.setattr(_reader, "keep_freed_memory", lambda *n: seen.append(n) or True)
    assert cli.main(["summary", str(tmp_path / "none-*.pfw.gz"), "--json"]) == 2  # (no such file)
    assert seen == []  # a caller of main() keeps its malloc as it is
    cli._keep_freed_memory()
    assert seen == [(cli.KEEP_FREED_BYTES, cli.MMAP_FROM_BYTES)]
