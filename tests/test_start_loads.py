"""The threaded summary's first loads, started in native threads before NumPy is imported
(issue 22, Deliver 2: the serial start-up; docs/perf/i27-start.md).

``_reader.Prefetch`` must hand over exactly what ``_reader.load_batch`` / ``load_files`` return
(every array's dtype and bytes, every list and count) or raise what they raise; the command's
output (stdout, stderr, exit status) must not depend on how many loads start early; and the
loads must really start before NumPy is imported (checked in a fresh interpreter)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import pythonpath_env

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))
import gen_traces  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data")
V22 = os.path.join(DATA, "dftracer-v2.2.0")


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """3 member files of 4,000 events (16 KiB members: many checkpoints, so many batches), the
    v2.2.0 traces (small files: read whole in groups), a trace cut inside a member and a file
    that is no trace."""
    out = tmp_path_factory.mktemp("start_loads")
    big = sorted(gen_traces.generate(str(out / "big"), 12_000, 3, member_bytes=16 << 10, jobs=1))
    small = out / "small"
    small.mkdir()
    for name in sorted(os.listdir(V22)):
        if ".pfw" in name:
            shutil.copy(os.path.join(V22, name), small / name)
    raw = open(big[0], "rb").read()
    (small / "cut.pfw.gz").write_bytes(raw[: len(raw) // 3])  # (a member cut in the middle)
    (small / "junk.pfw.gz").write_bytes(gzip.compress(b"not a trace\n{broken json\n") + b"trailing garbage")
    return str(out), big, sorted(str(p) for p in small.iterdir())


def _same(a, b, where="result"):
    """``a`` and ``b`` equal down to every array's dtype and bytes (and lists, dicts in order)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray), where
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert a.tobytes() == b.tobytes(), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), where
        for k in a:
            _same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for k, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{k}]")
    else:
        assert type(a) is type(b) and a == b, (where, a, b)


def _plan(big, small, idx):
    """The streamed summary's own items: (batch tuples, small-file groups), planned small."""
    from dfanalyzer import DFAnalyzer

    with DFAnalyzer(big + small, index_dir=idx, batch_size_mb=0.05, small_file_mb=0.01, n_workers=2) as an:
        return list(an._batches), [list(g) for g in an._groups]


def test_prefetch_hands_over_what_the_loads_return(traces, tmp_path):
    from dfanalyzer import _reader
    from dfanalyzer.analyzer import _args_projection
    from dfanalyzer.engine.vocabulary import AGGREGATE_COLUMNS

    _, big, small = traces
    idx = str(tmp_path / "idx")
    batches, groups = _plan(big, small, idx)
    assert len(batches) >= 12 and groups  # (several batches per file, and groups)
    for columns in (list(AGGREGATE_COLUMNS), None, []):
        fcols = _args_projection(frozenset(), None) if columns is not None else None
        items = [("batch", p, a, z, idx, columns) for p, a, z, _, _ in batches]
        items += [("files", g, fcols) for g in groups]
        want = [_reader.load_batch(p, a, z, idx, columns) for p, a, z, _, _ in batches]
        want += [_reader.load_files(g, fcols) for g in groups]
        assert sum(w["rows"] for w in want) > 12_000
        pf = _reader.Prefetch(items, 3)
        assert len(pf) == len(items)
        deadline = time.monotonic() + 60
        while pf.ready() < len(items) and time.monotonic() < deadline:  # (all loaded: no hand-over yet)
            time.sleep(0.01)
        assert pf.ready() == len(items)
        # taken out of order: odd ones first, then the even ones from the end
        order = list(range(1, len(items), 2)) + list(range(len(items) - 1 - (len(items) - 1) % 2, -1, -2))
        assert sorted(order) == list(range(len(items)))
        for i in order:
            _same(pf.take(i), want[i], f"item {i}")
        assert pf.ready() == 0
        times = pf.times()
        assert len(times) == len(items) and all(0 < a <= z <= time.monotonic_ns() for a, z in times)
        pf.close()


def test_prefetch_stops_at_the_hand_over(traces, tmp_path):
    """The first take() is the hand-over: the threads start no item after it; the items started
    are a prefix of the list (handed over exactly), the others are None (the caller loads them)."""
    from dfanalyzer import _reader

    _, big, small = traces
    idx = str(tmp_path / "idx")
    batches, _ = _plan(big, small, idx)
    items = [("batch", p, a, z, idx, None) for p, a, z, _, _ in batches] * 200
    pf = _reader.Prefetch(items, 1)
    assert pf.take(len(items) - 1) is None  # (far past what one thread loads meanwhile)
    got = [pf.take(i) for i in range(len(items) - 1)]
    k = sum(1 for g in got if g is not None)
    assert 0 <= k < 20 and all(g is not None for g in got[:k]) and all(g is None for g in got[k:])
    for i in range(k):
        _, p, a, z, d, c = items[i]
        _same(got[i], _reader.load_batch(p, a, z, d, c), f"item {i}")
    assert sum(1 for a, z in pf.times() if a) == k
    pf.close()


def test_prefetch_raises_what_load_batch_raises(traces, tmp_path):
    from dfanalyzer import _reader

    _, big, _ = traces
    idx = str(tmp_path / "idx")
    gone = str(tmp_path / "gone.pfw.gz")
    shutil.copy(big[1], gone)
    _reader.build_index(gone, idx)
    os.unlink(gone)
    items = [
        ("batch", gone, 0, 1, idx, None),  # indexed, then deleted
        ("batch", str(tmp_path / "never.pfw.gz"), 0, 0, idx, None),  # never existed
        ("batch", big[0], 10_000, 10_001, idx, None),  # checkpoints past the end
    ]
    pf = _reader.Prefetch(items, 2)
    deadline = time.monotonic() + 60
    while pf.ready() < len(items) and time.monotonic() < deadline:  # (all started before the first take)
        time.sleep(0.01)
    raised = 0
    for i, (_, p, a, z, d, c) in enumerate(items):
        try:
            want = _reader.load_batch(p, a, z, d, c)
        except Exception as exc:
            raised += 1
            with pytest.raises(Exception) as got:
                pf.take(i)
            assert type(got.value) is type(exc) and str(got.value) == str(exc)
        else:
            _same(pf.take(i), want)
    assert raised >= 2
    pf.close()


def test_prefetch_take_close_and_bad_items(traces, tmp_path):
    from dfanalyzer import _reader

    _, big, small = traces
    idx = str(tmp_path / "idx")
    batches, _ = _plan(big, small, idx)
    items = [("batch", p, a, z, idx, None) for p, a, z, _, _ in batches]
    pf = _reader.Prefetch(items, 2)
    deadline = time.monotonic() + 60
    while pf.ready() < len(items) and time.monotonic() < deadline:
        time.sleep(0.01)
    first = pf.take(0)
    assert first["rows"] > 0
    with pytest.raises(RuntimeError, match="taken twice"):
        pf.take(0)
    with pytest.raises(IndexError):
        pf.take(len(items))
    pf.close()
    pf.close()  # (twice: nothing left to do)
    with pytest.raises(RuntimeError, match="after close"):
        pf.take(1)
    assert first["core"]["ts"].sum() > 0  # (a taken batch outlives its Prefetch)
    # closed at once with 40 times the items pending: no load is left running, nothing hangs
    t0 = time.monotonic()
    many = _reader.Prefetch(items * 40, 2)
    many.close()
    assert sum(1 for a, z in many.times() if z) < len(items) * 40
    del many
    gone = _reader.Prefetch(items * 4, 2)  # dropped without close(): the destructor joins
    del gone
    assert time.monotonic() - t0 < 30
    for bad in ([("batch", big[0], 0, 0)], [("files",)], [("frame", [], None)]):
        with pytest.raises(ValueError, match="items are"):
            _reader.Prefetch(bad, 1)
    assert len(_reader.Prefetch([], 4)) == 0


OPTIONS = (
    ["--workers", "1"],
    ["--workers", "2"],
    ["--workers", "2", "--batch-size-mb", "0.05", "--small-file-mb", "0"],
    ["--workers", "3", "--batch-size-mb", "0.05", "--small-file-mb", "0.01"],
    ["--workers", "2", "--filter", 'cat == "POSIX"'],
)


@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: " ".join(o))
def test_summary_output_does_not_depend_on_early_loads(traces, tmp_path, capsys, monkeypatch, opts):
    """stdout, stderr and the exit status of ``summary --json`` with no load started early, a
    few, the default and every one (the damaged inputs' warnings included)."""
    from dfanalyzer import analyzer, cli

    out, big, small = traces
    got = []
    for per_thread in (0, 1, analyzer.PREFETCH_PER_THREAD, 10_000):
        monkeypatch.setattr(analyzer, "PREFETCH_PER_THREAD", per_thread)
        idx = str(tmp_path / "idx")
        status = cli.main(["summary", *big, *small, "--json", "--index-dir", idx, *opts])
        o, e = capsys.readouterr()
        got.append((status, o, e))
    events = json.loads(got[0][1])["events"]
    assert got[0][0] == 0 and (events > 12_000 if "--filter" not in opts else events > 0) and "warning:" in got[0][2]
    assert all(g == got[0] for g in got[1:])


def test_loads_start_before_numpy(traces, tmp_path, capsys):
    """In a fresh interpreter: the command's modules and the plan import no NumPy, the native
    loads start before it is imported, and the output is the in-process command's."""
    from dfanalyzer import cli

    _, big, small = traces
    idx = str(tmp_path / "idx")
    argv = [
        "summary",
        *big,
        *small,
        "--json",
        "--workers",
        "2",
        "--index-dir",
        idx,
        "--batch-size-mb",
        "0.05",
        "--small-file-mb",
        "0",
    ]
    assert cli.main(argv) == 0
    want = capsys.readouterr().out
    probe = (
        "import sys\n"
        "from dfanalyzer import _reader, analyzer, cli\n"
        "assert 'numpy' not in sys.modules, 'imported by the modules'\n"
        "made, seen = _reader.Prefetch, []\n"
        "def prefetch(items, threads):\n"
        "    seen.append(('numpy' in sys.modules, len(items), threads))\n"
        "    return made(items, threads)\n"
        "_reader.Prefetch = prefetch\n"
        "status = cli.main(sys.argv[1:])\n"
        "print(repr(seen), file=sys.stderr)\n"
        "sys.exit(status)\n"
    )
    env = pythonpath_env()
    p = subprocess.run(
        [sys.executable, "-c", probe, *argv], env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout == want
    from dfanalyzer.analyzer import PREFETCH_PER_THREAD

    seen = eval(p.stderr.strip().splitlines()[-1])
    assert seen == [(False, 2 * PREFETCH_PER_THREAD, 2)]
