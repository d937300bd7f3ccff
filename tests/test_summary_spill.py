"""The streamed summary's memory bound (``PartialFolder(spill_intervals=...)``): interval unions
moved to disk are measured exactly.

Truth is computed here without dfanalyzer: the traces are written and read back with plain
``gzip`` + ``json``, and the union measures come from a sort-and-sweep over the intervals. The
spill is forced with a tiny bound across many batches (gzip members) and several processes whose
calls overlap in time (two pairs) or not, with long calls written after the short ones inside
them (out of time order, the tracer writes a call when it ends), and batches folded in a
shuffled order.
"""

import gzip
import json
import os
import random

import pytest

from dfanalyzer import summary as S
from dfanalyzer.analyzer import DFAnalyzer

IO, COMPUTE, APP = ("POSIX", "STDIO"), ("compute",), ("app",)


def _write_traces(d, seed=7):
    """Four processes, one file each, gzip member per 40 lines. p0/p1 share a time range, p2/p3
    share a later one. Returns the files."""
    rng = random.Random(seed)
    paths = []
    for k in range(4):
        pid = 100 + k
        t = 1_000_000 + (k // 2) * 50_000_000 + k * 3
        lines = []
        for step in range(600):
            start = t
            for _ in range(rng.randint(1, 4)):  # a few I/O calls, with gaps or back to back
                dur = rng.choice((0, 1, 1, 2, 5, 40))
                name = rng.choice(("read", "write", "open64", "fread"))
                cat = "STDIO" if name == "fread" else "POSIX"
                lines.append(
                    {
                        "name": name,
                        "cat": cat,
                        "pid": pid,
                        "tid": pid,
                        "ts": t,
                        "dur": dur,
                        "ph": "X",
                        "args": {"fname": f"/d/f{rng.randint(0, 9)}", "ret": rng.choice((512, 4096))},
                    }
                )
                t += dur + rng.choice((0, 0, 1, 3, 17))
            if step % 3 == 0:  # compute after the I/O, sometimes overlapping the last call
                c0 = t - rng.randint(0, 2)
                cd = rng.randint(1, 30)
                lines.append(
                    {"name": "step", "cat": "compute", "pid": pid, "tid": pid + 1000, "ts": c0, "dur": cd, "ph": "X"}
                )
                t = c0 + cd + rng.randint(0, 5)
            if step % 7 == 6:  # an app-level call around the previous steps, written after them
                lines.append(
                    {
                        "name": "load",
                        "cat": "app",
                        "pid": pid,
                        "tid": pid,
                        "ts": start - 1,
                        "dur": t - start + 2,
                        "ph": "X",
                    }
                )
            t += rng.randint(0, 60)
        lines.append(
            {
                "name": "main",
                "cat": "app",
                "pid": pid,
                "tid": pid,
                "ts": 1_000_000 + (k // 2) * 50_000_000,
                "dur": 100,
                "ph": "X",
            }
        )  # an early call written last
        path = os.path.join(d, f"p{k}.pfw.gz")
        with open(path, "wb") as f:
            f.write(gzip.compress(b"[\n"))
            for i in range(0, len(lines), 40):
                f.write(gzip.compress("".join(json.dumps(x) + "\n" for x in lines[i : i + 40]).encode()))
        paths.append(path)
    return paths


def _measure(iv):
    """Total length of the union of [s, e) intervals (sort and sweep)."""
    total, end = 0, None
    for s, e in sorted(x for x in iv if x[1] > x[0]):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def _truth(paths):
    ev = []
    for p in paths:
        with gzip.open(p, "rt") as f:
            for line in f:
                line = line.strip().rstrip(",")
                if line.startswith("{"):
                    ev.append(json.loads(line))
    iv = {
        c: [(e["ts"], e["ts"] + e["dur"]) for e in ev if e["cat"] in cats]
        for c, cats in (("io", IO), ("cp", COMPUTE), ("app", APP))
    }
    io, cp, app = (_measure(iv[c]) for c in ("io", "cp", "app"))
    io_cp, app_cp = _measure(iv["io"] + iv["cp"]), _measure(iv["app"] + iv["cp"])
    us = 1e-6
    return {
        "events": len(ev),
        "processes": len({e["pid"] for e in ev}),
        "counts": {
            n: sum(1 for e in ev if e["cat"] in IO and e["name"] == n)
            for n in {e["name"] for e in ev if e["cat"] in IO}
        },
        "time": {
            "total": (max(e["ts"] + e["dur"] for e in ev) - min(e["ts"] for e in ev)) * us,
            "app_io": app * us,
            "unoverlapped_app_io": (app_cp - cp) * us,
            "unoverlapped_app_compute": (app_cp - app) * us,
            "compute": cp * us,
            "io": io * us,
            "unoverlapped_io": (io_cp - cp) * us,
            "unoverlapped_compute": (io_cp - io) * us,
        },
        "intervals": sum(len(v) for v in iv.values()),
    }


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("spill")
    return _write_traces(str(d))


def _spy_spills(monkeypatch, spill) -> list:
    """Set the bound to ``spill`` intervals; the list gets every SpilledUnions made."""
    monkeypatch.setattr(S, "SPILL_INTERVALS", spill)
    made = []
    real = S.SpilledUnions.__init__

    def spy(self, *a, **k):
        real(self, *a, **k)
        made.append(self)

    monkeypatch.setattr(S.SpilledUnions, "__init__", spy)
    return made


def _summary(paths, index_dir, spill, monkeypatch):
    made = _spy_spills(monkeypatch, spill)
    # the streamed summary in threads (what spills), even where the session has a default client
    monkeypatch.setattr(DFAnalyzer, "_get_client", lambda self, *a: None)
    with DFAnalyzer(
        paths,
        index_dir=index_dir,
        batch_size_mb=0.004,
        small_file_mb=0,
        n_workers=2,
        io_cats=IO,
        compute_cats=COMPUTE,
        app_io_cats=APP,
    ) as a:
        assert len(a._batches) >= 40  # many batches per file
        s = a.summary(show=False)
    return s.to_dict(), made


def test_spilled_summary_equals_truth_and_unspilled(traces, tmp_path, monkeypatch):
    truth = _truth(traces)
    ref, made = _summary(traces, str(tmp_path / "i"), 1 << 40, monkeypatch)
    assert made == []  # no spill with a bound this large
    got, made = _summary(traces, str(tmp_path / "i"), 64, monkeypatch)
    assert len(made) == 1 and sum(len(r) for r in made[0].runs.values()) >= 10
    assert made[0].file.closed  # closed (so freed: the file is unlinked from the start) after the summary
    assert json.dumps(got) == json.dumps(ref)
    assert got["events"] == truth["events"] and got["processes"] == truth["processes"] == 4
    assert {n: f["count"] for n, f in got["functions"].items()} == truth["counts"]
    assert got["time"] == truth["time"]


@pytest.mark.parametrize("window,ways", [(40, 3), (40, 1), (1 << 40, 3)])
def test_cluster_holds_chunk_unions_unmerged(traces, tmp_path, monkeypatch, window, ways):
    """The distributed summary does not merge the chunk tasks' unions where it runs: it holds
    them as they came (HeldUnions, one run per chunk and key, no spill file) and finish()
    measures them window by window on a thread pool. With windows of ``window`` intervals (40:
    windows far smaller than one chunk's union, cut inside unions of chunks that overlap in
    time; 2**40: one window), on ``ways`` threads of this node (1: in the calling thread), the
    same JSON as the threads' (spilled) run and the truth, and no window holds more than
    ``window`` intervals (the memory bound of the measure)."""
    from distributed import Client, LocalCluster

    truth = _truth(traces)
    ref, made = _summary(traces, str(tmp_path / "i"), 64, monkeypatch)
    assert len(made) == 1  # (the threads' run spilled)
    monkeypatch.undo()
    made = _spy_spills(monkeypatch, 16)
    seen = {"held": [], "windows": []}
    measures, window_measures = S.spilled_measures, S._window_measures

    def spy_measures(p, window=window, pool=None, ways=1):
        seen["held"] += [sp for sp in p.spilled if isinstance(sp, S.HeldUnions)]
        seen["runs"] = [[len(sp.runs[k]) for k in S.UNION_KEYS] for sp in p.spilled]
        seen["io ranges"] = sorted((int(u[0][0]), int(u[1][-1])) for sp in p.spilled for u in sp.runs["io"])
        seen["ways"] = ways if pool is not None else 0
        return measures(p, window=window, pool=pool, ways=ways)

    def spy_window(runs, a, b):
        m = window_measures(runs, a, b)
        n = sum(S._run_window(src, r, a, b)[0].size for k in S.UNION_KEYS for src, r in runs[k])
        seen["windows"].append(n)
        return m

    monkeypatch.setattr(S, "spilled_measures", spy_measures)
    monkeypatch.setattr(S, "_window_measures", spy_window)
    monkeypatch.setattr(S, "MIN_WINDOW_STRIDE", 1)
    monkeypatch.setattr(S, "PARALLEL_MERGE_INTERVALS", 1)  # (on the pool however few the intervals)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as lc:
        with Client(lc, set_as_default=False) as c:
            with DFAnalyzer(
                traces,
                index_dir=str(tmp_path / "i"),
                batch_size_mb=0.004,
                small_file_mb=0,
                client=c,
                io_cats=IO,
                compute_cats=COMPUTE,
                app_io_cats=APP,
                n_workers=ways,  # (this node's threads for the measure)
            ) as a:
                assert not a._use_threads
                got = a.summary(show=False).to_dict()
    assert made == []  # nothing merged and spilled where the summary ran
    (held,) = seen["held"]
    assert seen["ways"] == ways
    assert seen["runs"] == [[4, 4, 4]]  # one run per chunk and key (2 workers: 4 chunks), nothing else
    assert held.runs == {k: [] for k in S.UNION_KEYS}  # dropped after the summary
    # the chunks' io unions overlap in time (each chunk: a time slice of every process, and
    # p2/p3 run after p0/p1), so windows merge pieces of several chunks
    r = seen["io ranges"]
    assert any(r[i][1] > r[i + 1][0] for i in range(len(r) - 1))
    if window == 40:
        assert len(seen["windows"]) > 20 and max(seen["windows"]) <= 40
    assert len(seen["windows"]) >= 2 * ways  # (on the pool: at least 2 windows per thread)
    assert json.dumps(got) == json.dumps(ref)
    assert got["time"] == truth["time"] and got["events"] == truth["events"]


def test_folder_spill_any_order_and_window(traces, tmp_path):
    """PartialFolder with spill bounds from 1 interval up, batches in shuffled orders, and
    spilled_measures with windows down to one interval: the same finish as combine_partials."""
    from dfanalyzer import _reader, reader

    parts = []
    for p in traces:
        n = len(reader.build_index(p, index_dir=str(tmp_path))["checkpoints"])
        for a in range(0, n, 3):
            r = _reader.load_batch(p, a, min(n, a + 3) - 1, str(tmp_path), list(S.AGGREGATE_COLUMNS))
            parts.append(S.partial_from_columns(S.ReaderColumns(r), IO, COMPUTE, APP))
    assert len(parts) >= 20
    ref = S.finish(S.combine_partials(parts))
    want = json.dumps(ref.to_dict())
    truth = _truth(traces)
    assert ref.to_dict()["time"] == truth["time"]
    held = [S._intervals(p) for p in parts]
    for bound, fan_in, seed in ((1, 2, 0), (50, 3, 1), (400, 8, 2)):
        order = list(range(len(parts)))
        random.Random(seed).shuffle(order)
        fold = S.PartialFolder(fan_in=fan_in, spill_intervals=bound, spill_dir=str(tmp_path))
        for i in order:
            fold.add(parts[i])
        out = fold.result()
        assert len(out.spilled) == 1 and out.spilled[0].intervals > 0
        assert json.dumps(S.finish(out).to_dict()) == want
        for window in (1000, 5000) if bound == 400 else ():  # windows far smaller than the default
            m = S.spilled_measures(out, window=window)
            us = 1e-6
            assert m["io"] * us == truth["time"]["io"] and m["compute"] * us == truth["time"]["compute"]
            assert (m["io|compute"] - m["compute"]) * us == truth["time"]["unoverlapped_io"]
            assert (m["app_io|compute"] - m["app_io"]) * us == truth["time"]["unoverlapped_app_compute"]
        assert not [n for n in os.listdir(tmp_path) if n.startswith("dfanalyzer-unions")]  # never named
        out.spilled[0].cleanup()
        assert out.spilled[0].file.closed
    assert [S._intervals(p) for p in parts] == held  # the callers' partials are left as they were
