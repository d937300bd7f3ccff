"""Page faults and memory of many loads in one process, under the allocator of a Dask worker
(issue 22, docs/perf/i26-faults.md).

Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_=65536``: every freed block of
>= 128 KiB goes back to the system, so a buffer that is allocated and freed per batch (text
chunks, scratch, column storage of a dropped batch) is a fresh page, a fault, in every batch.
Truth: the kernel's minor-fault count of the process (``getrusage``) against the pages the
loaded columns occupy (their arrays' ``nbytes`` / 4096, computed from the arrays, not by the
reader), and the resident set (``/proc/self/statm``).

* Batches loaded and dropped, round after round (the summary's load tasks): after the first
  round, faults stay far below the pages of the columns loaded (each batch's storage and
  buffers come from the ones freed before), and the resident set does not grow.
* Batches loaded and held (the frame path): faults and growth of the resident set stay near the
  pages the columns hold (no copy, no buffer per batch on top).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))
import gen_traces  # noqa: E402

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="getrusage/statm: Linux")

_CHILD = r"""
import json, os, resource, sys
import numpy as np
from dfanalyzer import reader

path, idx, mode, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
n_ck = len(reader.build_index(path, idx)["checkpoints"])
# 4 checkpoints (~19k events) a batch: every int64 column is a block of >= 128 KiB
batches = [(a, min(a + 3, n_ck - 1)) for a in range(0, n_ck, 4)]
page = os.sysconf("SC_PAGESIZE")

def nbytes(b):
    tot = 0
    def walk(x):
        nonlocal tot
        if isinstance(x, np.ndarray):
            tot += x.nbytes
        elif isinstance(x, (tuple, list)):
            for y in x:
                walk(y)
        elif isinstance(x, dict):
            for y in x.values():
                walk(y)
    walk(b["core"]); walk(b.get("args", {}))
    return tot

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * page

def load(a, z):
    return reader._reader.load_batch(path, a, z, idx, None)

out = {"rounds": []}
held = []
for r in range(rounds):
    f0, s0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, rss()
    rows = col_bytes = 0
    for a, z in batches:
        b = load(a, z)
        rows += int(b["rows"])
        col_bytes += nbytes(b)
        if mode == "held":
            held.append(b)
        del b
    f1, s1 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, rss()
    out["rounds"].append({"faults": f1 - f0, "rows": rows, "col_pages": col_bytes / page, "rss": s1, "rss0": s0})
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    out = tmp_path_factory.mktemp("faults")
    # 150,000 events in 32 members of 1 MiB of text (~4,800 events each)
    return gen_traces.generate(str(out), 150_000, 1, member_bytes=1 << 20, jobs=1)[0]


def _run(trace, tmp_path, mode, rounds):
    env = dict(os.environ, MALLOC_TRIM_THRESHOLD_="65536")  # as Dask's nanny
    r = subprocess.run(
        [sys.executable, "-c", _CHILD, trace, str(tmp_path / "idx"), mode, str(rounds)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])["rounds"]


def test_dropped_batches_reuse_their_memory(trace, tmp_path):
    rounds = _run(trace, tmp_path, "drop", 6)
    first, later = rounds[0], rounds[1:]
    assert first["rows"] == 150_000 and all(r["rows"] == 150_000 for r in later)
    # Every round loads the same columns: ~col_pages of storage a round. Reallocated per batch
    # (text chunk, scratch, column storage given back to the system) that is >= col_pages faults
    # a round; reused, a small fraction (the Python objects of the batch dict, partial pages).
    for r in later:
        assert r["faults"] <= 0.2 * r["col_pages"], (r, first)
    # Bounded: what round 2 kept (the reused blocks) is all that is kept; later rounds add nothing.
    growth = later[-1]["rss"] - later[0]["rss"]
    assert growth <= 4 << 20, [r["rss"] for r in rounds]


def test_held_batches_cost_their_own_pages(trace, tmp_path):
    (r,) = _run(trace, tmp_path, "held", 1)
    assert r["rows"] == 150_000
    # Held columns are fresh memory: ~one fault per page they occupy; a copy of the columns, or
    # a fresh buffer per batch on top (4 MiB of text a batch here), would be twice that.
    assert r["faults"] <= 1.35 * r["col_pages"] + 2000, r
    page = os.sysconf("SC_PAGESIZE")
    assert r["rss"] - r["rss0"] <= 1.35 * r["col_pages"] * page + (8 << 20), r
