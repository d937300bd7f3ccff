"""Args-column projection (``columns=`` of the reader, docs/analyzer.md "Projection"): the rows,
core columns, kept args columns, metadata and counts are exactly those of a full load, and the
summary JSON is identical with and without it (CM1 fixtures, upstream 2.x aggregated records,
generator traces); ``DFAnalyzer(...).events`` is unchanged."""

import os
import shutil
import sys

import pytest
from conftest import DATA

from dfanalyzer import DFAnalyzer, _reader, reader
from dfanalyzer import summary as S

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))
import gen_traces  # noqa: E402

CM1 = os.path.join(DATA, "dftracer-v1.0.5-cm1")
AGG = list(S.AGGREGATE_COLUMNS)

# Lines for the rules a projection must not change: core-named args keys (arg_size, arg_dur),
# fread's ret x size, an aggregated record whose bytes and duration come from dropped keys, a
# string args value, a line only simdjson reads (spaces), one with an escape, a bad line, a later
# duplicate key, and a bad value in a key that is not kept (the line is skipped either way).
MIXED = [
    '{"id":1,"name":"read","cat":"POSIX","pid":1,"tid":1,"ts":10,"dur":2,"ph":"X","args":{"fname":"/a","ret":7,"size":9,"mode":"r"}}',
    '{"id":2,"name":"fread","cat":"STDIO","pid":1,"tid":2,"ts":12,"dur":3,"ph":"X","args":{"fname":"/b","size":4,"count":5,"ret":5,"dur":1.5}}',
    '{"id":3,"name":"write","cat":"POSIX","pid":1,"tid":1,"ts":20,"ph":"A","args":{"dur_sum":9,"ret_min":2,"ret_max":8,"ret_sum":30,"dft_cnt":6,"flags_sum":3}}',
    '{"id":4,"name":"fwrite","cat":"STDIO","pid":1,"tid":1,"ts":30,"ph":"A","args":{"dur_sum":4,"ret_min":1,"ret_max":1,"ret_sum":3,"size_min":8,"size_max":8,"dft_cnt":3}}',
    '{ "name" : "open", "cat":"POSIX", "pid":2, "tid":2, "ts":40, "dur":1, "ph":"X", "args":{"fname":"/c","mode":"w","flags":577} }',
    '{"id":5,"name":"open","cat":"POSIX","pid":2,"tid":2,"ts":41,"dur":1,"ph":"X","args":{"fname":"/d\\u00e9","mode":"a\\"b"}}',
    '{"id":6,"name":"read","cat":"POSIX","pid":2,"tid":2,"ts":42,"dur":1,"ph":"X","args":{"fname":"/a","ret":"12","mode":3}}',
    "not json",
    '{"id":7,"name":"read","cat":"POSIX","pid":2,"tid":2,"ts":43,"dur":1,"ph":"X","args":{"fname":"/a","ret":1,"ret":2}}',
    '{"id":8,"name":"read","cat":"POSIX","pid":2,"tid":2,"ts":44,"dur":1,"ph":"X","args":{"fname":"/a","ret":1,"mode":tru}}',
    '{"id":9,"name":"compute","cat":"app","pid":2,"tid":2,"ts":45,"dur":5,"ph":"X","args":{"flops":1.25,"level":1}}',
    '{"name":"HH","cat":"dftracer","pid":1,"tid":1,"ph":"M","args":{"name":"node7","value":"h1"}}',
]


def _core(r):
    """Core columns of a binding result as plain lists (categorical codes resolved)."""
    out = {}
    for k, v in r["core"].items():
        if isinstance(v, tuple) and isinstance(v[1], list):  # (codes, categories)
            out[k] = [None if c < 0 else v[1][c] for c in v[0].tolist()]
        elif isinstance(v, tuple):  # (values, null mask)
            out[k] = [None if m else x for x, m in zip(v[0].tolist(), v[1].tolist())]
        else:
            out[k] = v.tolist()
    return out


def _args(r):
    out = {}
    for key, dtype, payload in r["args"]:
        if dtype == "string":
            out[key] = (dtype, [None if c < 0 else payload[1][c] for c in payload[0].tolist()])
        else:
            out[key] = (dtype, [None if m else x for x, m in zip(payload[0].tolist(), payload[1].tolist())])
    return out


def _assert_projection_exact(full, got, columns):
    assert got["rows"] == full["rows"]
    assert _core(got) == _core(full)
    want = {k: v for k, v in _args(full).items() if k in columns}
    assert _args(got) == want and [a[0] for a in got["args"]] == sorted(want)
    for k in ("skipped_lines", "skipped_examples", "unresolved_hashes", "replaced_utf8_lines", "lost_lines"):
        assert got[k] == full[k], k
    assert got["metadata"] == full["metadata"]


def _sources(tmp_path):
    mixed = tmp_path / "mixed.pfw"
    mixed.write_text("\n".join(MIXED) + "\n")
    gen = gen_traces.generate(str(tmp_path / "gen"), 4000, 1, member_bytes=1 << 15, jobs=1)[0]
    agg = tmp_path / "c-agg.pfw"
    shutil.copy(os.path.join(DATA, "dftracer-v2.2.0", "c-agg.pfw"), agg)
    cm1 = tmp_path / "cm1.pfw.gz"
    shutil.copy(os.path.join(CM1, sorted(os.listdir(CM1))[0]), cm1)
    return [str(mixed), gen, str(agg), str(cm1)]


def test_projected_batch_equals_full_batch(tmp_path):
    srcs = _sources(tmp_path)
    full_mixed = _reader.load_batch(srcs[0], 0, 0, None)
    assert full_mixed["rows"] == 9 and full_mixed["skipped_lines"] == 2  # "not json", "tru"
    assert {a[0] for a in full_mixed["args"]} >= {"arg_size", "arg_dur", "mode", "flags", "flops"}
    for p in srcs:
        last = len(reader.build_index(p)["checkpoints"]) - 1
        full = _reader.load_batch(p, 0, last, None)
        for columns in ([], AGG, ["arg_size", "mode", "name", "no_such_key"], [a[0] for a in full["args"]]):
            _assert_projection_exact(full, _reader.load_batch(p, 0, last, None, columns), columns)
    # the size and duration rules still read dropped keys
    c = _core(_reader.load_batch(srcs[0], 0, 0, None, []))
    assert c["size"][:4] == [7, 20, 30, 24] and c["dur"][2:4] == [9, 4]
    # the many-small-files path and the DataFrame API take the same projection
    got = _reader.load_files(srcs, AGG)
    full = _reader.load_files(srcs)
    _assert_projection_exact(full, got, AGG)
    assert got["files"] == full["files"]
    b = reader.load_batch(srcs[1], 0, 0, columns=("epoch", "size"))
    assert list(b.events.columns) == reader.CORE_COLUMNS + ["epoch"]
    with pytest.raises(TypeError):
        reader.load_batch(srcs[1], 0, 0, columns="epoch")


def _without_projection(monkeypatch):
    """Make every reader call build all args columns (the code before projection)."""
    lb, lf = _reader.load_batch, _reader.load_files
    monkeypatch.setattr(_reader, "load_batch", lambda p, a, b, d=None, columns=None: lb(p, a, b, d))
    monkeypatch.setattr(_reader, "load_files", lambda paths, columns=None: lf(paths))


@pytest.mark.parametrize("source", ["cm1", "generator", "aggregated"])
def test_summary_json_identical_with_and_without_projection(tmp_path, monkeypatch, source):
    if source == "cm1":
        paths = [str(shutil.copy(os.path.join(CM1, f), tmp_path)) for f in sorted(os.listdir(CM1))]
    elif source == "generator":
        paths = gen_traces.generate(str(tmp_path), 30000, 3, member_bytes=1 << 16, jobs=1)
    else:
        paths = [
            str(shutil.copy(os.path.join(DATA, "dftracer-v2.2.0", f), tmp_path)) for f in ("c-agg.pfw", "py-agg.pfw.gz")
        ]
    for p in paths:
        reader.build_index(p)

    def run(**kw):
        with DFAnalyzer(paths, n_workers=2, **kw) as an:
            summary = an.summary(show=False).to_dict()  # streamed: fills stats, holds no frame
            assert an._client is None  # (in threads)
            return summary, {k: (v.to_dict() if hasattr(v, "to_dict") else v) for k, v in an.stats.items()}

    projected = run()
    frame_args = run(args=("fname", "ret"))  # a frame-free load path with keep_args
    with monkeypatch.context() as m:
        _without_projection(m)
        full = run()
    assert projected == full and frame_args == full
    assert projected[0]["events"] > 0
    if source == "cm1":
        assert projected[0]["events"] == 283945


def test_events_frame_unchanged_by_projection(tmp_path, monkeypatch, dask_client):
    paths = gen_traces.generate(str(tmp_path), 6000, 2, member_bytes=1 << 15, jobs=1)
    frames = {}
    for mode in ("projected", "full"):
        with monkeypatch.context() as m:
            if mode == "full":
                _without_projection(m)
            with DFAnalyzer(paths, client=dask_client) as an:
                every = an.events.compute(scheduler=dask_client)
            with DFAnalyzer(paths, args=("epoch",), query="cat == 'app' and level == 1", client=dask_client) as an:
                some = an.events.compute(scheduler=dask_client)
            with DFAnalyzer(paths, args=(), client=dask_client) as an:
                none = an.events.compute(scheduler=dask_client)
        frames[mode] = (every, some, none)
    # a streamed summary skips building empty metadata frames: the same (empty) frame as a load
    with DFAnalyzer(paths, client=dask_client) as an:
        assert an.events.npartitions > 0  # holds the frame; its metadata comes from the load
        loaded = an.metadata
    with DFAnalyzer(paths) as an:
        an.summary(show=False)
        streamed = an.metadata
        assert an._client is None  # streamed in threads (no cluster started for the metadata)
    assert len(loaded) == 0 and list(streamed.columns) == list(loaded.columns)
    assert list(streamed.dtypes) == list(loaded.dtypes) and streamed.equals(loaded)
    for a, b in zip(frames["projected"], frames["full"]):
        assert list(a.columns) == list(b.columns) and list(a.dtypes) == list(b.dtypes)
        assert a.reset_index(drop=True).equals(b.reset_index(drop=True))
    assert "flops" in frames["full"][0].columns and list(frames["full"][2].columns) == reader.CORE_COLUMNS
    assert len(frames["full"][1]) > 0
