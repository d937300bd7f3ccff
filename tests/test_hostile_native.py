"""Hostile input, round 2 (issue 25), native side: bounded args columns (``args_extra``), load
failures that are errors, timestamp sanity, ``dftracer-cat`` with an in-memory index, the Python
API's args limit and the flush on crash signals. Every attack input is built here; the truth is
computed with plain gzip + json (or the program's own counts), never with our reader."""

import gzip
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest
from conftest import pythonpath_env, read_trace

from dfanalyzer import reader
from dfanalyzer.records import LoadError

TS0 = 1_700_000_000_000_000  # 2023-11-14, µs since the epoch
RENAMED = {"name", "cat", "ph", "pid", "tid", "ts", "dur", "te", "size"}
SPECIAL = {"hostname", "hhash", "fname", "fhash", "offset"}  # args keys that feed core columns


def _event(i, args, ts=None, dur=5, name="op"):
    return {
        "id": i,
        "name": name,
        "cat": "app",
        "pid": 1,
        "tid": 1,
        "ts": TS0 + i if ts is None else ts,
        "dur": dur,
        "ph": "X",
        "args": args,
    }


def _write(path, records, raw_lines=()):
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("[\n")
        for r in records:
            f.write(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n")
        for line in raw_lines:
            f.write(line + "\n")


def _truth(path):
    """Event records of a trace, with plain gzip + json."""
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                out.append(json.loads(line))
    return out


def _rebuild_args(row, columns):
    """The args of one event row: its non-null args columns (``arg_<key>`` back to ``key``) plus
    the JSON object in ``args_extra``."""
    got = {}
    for c in columns:
        v = row[c]
        if c == "args_extra" or v is None or v != v:
            continue
        key = c[4:] if c.startswith("arg_") and c[4:] in RENAMED else c
        got[key] = int(v) if isinstance(v, (int,)) or hasattr(v, "__index__") else v
    if row.get("args_extra") is not None and row["args_extra"] == row["args_extra"]:
        extra = json.loads(row["args_extra"])
        assert not set(extra) & set(got), "a key both in a column and in args_extra"
        got.update(extra)
    return got


def _check_round_trip(frame, truth):
    cols = [c for c in frame.columns if c not in reader.CORE_COLUMNS]
    assert len(cols) <= reader.MAX_ARG_COLUMNS + 1  # + args_extra
    assert len(frame) == len(truth)
    for row, rec in zip(frame.to_dict("records"), truth):
        want = {k: v for k, v in rec["args"].items() if k not in SPECIAL and v is not None}
        assert _rebuild_args(row, cols) == want


# ---- bounded args columns ---------------------------------------------------------------------


def test_one_event_with_100000_keys_goes_to_args_extra(tmp_path):
    # attack: one event with 100,000 distinct args keys (strings with quotes, backslashes,
    # newlines and non-ASCII, floats, ints, booleans, a nested object) among ordinary events
    big = {}
    for k in range(100_000):
        m = k % 5
        big[f"k{k}"] = (
            k
            if m == 0
            else k + 0.5
            if m == 1
            else f'v"\\\n\u00e9{k}'
            if m == 2
            else (k % 2 == 0)
            if m == 3
            else {"n": [k]}
        )
    records = [_event(0, {"a": 1, "b": "x"})] + [_event(1, big)] + [_event(i, {"a": i}) for i in range(2, 50)]
    path = tmp_path / "wide.pfw.gz"
    _write(path, records)
    truth = _truth(path)
    idx = reader.build_index(str(path), index_dir=str(tmp_path))
    b = reader.load_batch(str(path), 0, len(idx["checkpoints"]) - 1, index_dir=str(tmp_path))
    ev = b.events
    assert len(ev.columns) <= len(reader.CORE_COLUMNS) + reader.MAX_ARG_COLUMNS + 1
    assert "args_extra" in ev.columns
    # booleans are 1/0 in columns (the reader's rule): compare with that rule
    for rec in truth:
        rec["args"] = {k: (int(v) if isinstance(v, bool) and False else v) for k, v in rec["args"].items()}
    cols = [c for c in ev.columns if c not in reader.CORE_COLUMNS]
    rows = ev.to_dict("records")
    for row, rec in zip(rows, truth):
        got = _rebuild_args(row, cols)
        want = {k: v for k, v in rec["args"].items() if v is not None}
        # values that became columns are typed by the column; those in args_extra are exact JSON
        for k, v in want.items():
            if isinstance(v, bool) and k in got and not isinstance(got[k], bool):
                want[k] = int(v)
            if isinstance(v, dict) and k in got and isinstance(got[k], str):
                got[k] = json.loads(got[k])
        assert got == want
    assert b.arg_counts["k99999"] == 1


def test_many_events_each_with_new_keys_bounded_memory_and_time(tmp_path):
    # attack: 100,000 events, each with a key no other event has (the 67 KB trace of the issue
    # gave a 576 MB frame), loaded through DFAnalyzer in a child process: RSS < 1 GB, < 60 s
    path = tmp_path / "keys.pfw.gz"
    _write(path, [_event(i, {f"key_{i}": i, "common": i % 7}) for i in range(100_000)])
    code = textwrap.dedent(
        f"""
        import json, sys, time
        from dfanalyzer import DFAnalyzer
        t = time.time()
        a = DFAnalyzer([{str(path)!r}], index_dir={str(tmp_path)!r}, n_workers=1, progress=False)
        df = a.events.compute()
        cols = [c for c in df.columns if c not in ("name","cat","ph","hostname","fname","pid","tid","ts","dur","te","size","offset")]
        extra = df["args_extra"].astype(object)
        ok = all(json.loads(e) == {{"key_%d" % (ts - {TS0}): ts - {TS0}}} for e, ts in zip(extra, df["ts"])
                 if e is not None and e == e)
        n_extra = int(extra.notna().sum())
        # VmHWM: this process image's own peak (ru_maxrss would include the forking pytest's)
        hwm = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
        print(json.dumps({{"rows": len(df), "cols": len(cols), "n_extra": n_extra, "ok": ok,
                          "secs": time.time() - t,
                          "rss_kb": hwm}}))
        a.close()
        """
    )
    r = subprocess.run([sys.executable, "-c", code], env=pythonpath_env(), capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["rows"] == 100_000
    assert doc["cols"] <= reader.MAX_ARG_COLUMNS + 1
    assert doc["ok"]
    # every key_i but those that got one of the 255 other columns is in args_extra
    assert doc["n_extra"] >= 100_000 - reader.MAX_ARG_COLUMNS
    assert doc["rss_kb"] < 1024 * 1024, doc
    assert doc["secs"] < 60, doc


def test_same_columns_in_every_batch_global_choice(tmp_path, dask_client):
    # attack: two files whose keys differ (300 each, 600 together): every partition must have
    # the same columns, chosen by frequency over all batches, and nothing may be lost
    from dfanalyzer import DFAnalyzer

    paths = []
    for f in range(2):
        p = tmp_path / f"t{f}.pfw.gz"
        recs = [_event(i, {f"f{f}_k{i % 300}": i, "shared": i}) for i in range(3000)]
        _write(p, recs)
        paths.append(str(p))
    a = DFAnalyzer(paths, index_dir=str(tmp_path), client=dask_client, progress=False, small_file_mb=0)
    df = a.events.compute(scheduler=dask_client)
    assert len([c for c in df.columns if c not in reader.CORE_COLUMNS]) == reader.MAX_ARG_COLUMNS + 1
    assert "shared" in df.columns
    truth = [r for p in paths for r in _truth(p)]
    df = df.sort_values(["ts", "name"], kind="stable")
    by_ts = {}
    for rec in truth:
        by_ts.setdefault(rec["ts"], []).append(rec["args"])
    cols = [c for c in df.columns if c not in reader.CORE_COLUMNS]
    for row in df.to_dict("records"):
        assert _rebuild_args(row, cols) in by_ts[row["ts"]]
    a.close()


# ---- load failures ------------------------------------------------------------------------------


def test_failed_load_task_is_an_error_naming_file_and_batch(tmp_path, dask_client, monkeypatch):
    # attack: the load of one batch runs out of memory (MemoryError inside the task)
    from dfanalyzer import DFAnalyzer

    path = tmp_path / "t.pfw.gz"
    _write(path, [_event(i, {"a": i}) for i in range(100)])

    def boom(p, first, last, *args, **kw):
        raise MemoryError("std::bad_alloc")

    monkeypatch.setattr(reader, "load_batch", boom)
    monkeypatch.setattr(reader._reader, "load_batch", boom)  # (the streamed summary's direct call)
    a = DFAnalyzer([str(path)], index_dir=str(tmp_path), client=dask_client, progress=False, small_file_mb=0)
    with pytest.raises(LoadError) as e:
        _ = a.events
    assert str(path) in str(e.value) and "checkpoints 0-0" in str(e.value) and "MemoryError" in str(e.value)
    # the streamed summary too
    a2 = DFAnalyzer([str(path)], index_dir=str(tmp_path), client=dask_client, progress=False, small_file_mb=0)
    with pytest.raises(LoadError, match="MemoryError"):
        a2.summary(show=False)


def test_load_task_that_dies_is_an_error(tmp_path, dask_client, monkeypatch):
    # attack: the task itself raises outside its own error handling (as a killed worker's task
    # does at gather): the future errs, the analyzer names the file and batch
    from dfanalyzer import DFAnalyzer, analyzer

    path = tmp_path / "t.pfw.gz"
    _write(path, [_event(i, {"a": i}) for i in range(100)])

    def dies(batch, index_dir, **kw):
        raise SystemError("worker killed")

    monkeypatch.setattr(analyzer, "_load_task", dies)
    a = DFAnalyzer([str(path)], index_dir=str(tmp_path), client=dask_client, progress=False, small_file_mb=0)
    with pytest.raises(LoadError) as e:
        _ = a.events
    assert str(path) in str(e.value) and "checkpoints 0-0" in str(e.value), str(e.value)


def test_failed_small_files_group_is_an_error(tmp_path, dask_client, monkeypatch):
    from dfanalyzer import DFAnalyzer

    path = tmp_path / "small.pfw.gz"
    _write(path, [_event(i, {"a": i}) for i in range(10)])

    def boom(paths, **kw):
        raise MemoryError("std::bad_alloc")

    monkeypatch.setattr(reader, "load_files", boom)
    a = DFAnalyzer([str(path)], index_dir=str(tmp_path), client=dask_client, progress=False)
    with pytest.raises(LoadError) as e:
        _ = a.events
    assert str(path) in str(e.value) and "group of small files" in str(e.value)


# ---- timestamp sanity ---------------------------------------------------------------------------


def test_insane_timestamps_are_invalid_and_counted(tmp_path):
    # attack: ts = -2^63 (made the run 9.2e12 s long), ts after 2100, ts + dur beyond 2100, a
    # negative dur; in the tracer's layout (fast path) and with spaces (simdjson path)
    bad = [
        ('{"id":1,"name":"r","cat":"c","pid":1,"tid":1,"ts":-9223372036854775808,"dur":1,"ph":"X"}', "ts"),
        ('{"id":2,"name":"r","cat":"c","pid":1,"tid":1,"ts":4102444800000000,"dur":1,"ph":"X"}', "ts"),
        ('{"id":3,"name":"r","cat":"c","pid":1,"tid":1,"ts":4102444799999999,"dur":2,"ph":"X"}', "ts"),
        ('{"id":4,"name":"r","cat":"c","pid":1,"tid":1,"ts":-1,"dur":1,"ph":"X"}', "ts"),
        ('{"id":5,"name":"r","cat":"c","pid":1,"tid":1,"ts":%d,"dur":-1,"ph":"X"}' % TS0, "dur"),
        ('{"name": "r", "cat": "c", "pid": 1, "tid": 1, "ts": -9223372036854775808, "dur": 1, "ph": "X"}', "ts"),
        ('{"name": "r", "cat": "c", "pid": 1, "tid": 1, "ts": 1e300, "dur": 1, "ph": "X"}', "other"),
        ('{"name": "r", "cat": "c", "pid": 1, "tid": 1, "ts": %d, "dur": -5, "ph": "X"}' % TS0, "dur"),
        ('{"name": "r", "cat": "c", "pid": 1, "tid": 1, "ts": 9e15, "dur": 5, "ph": "X"}', "ts"),
    ]
    good = [_event(i, {"a": i}) for i in range(10)]
    good.append(_event(10, {}, ts=5, dur=0))  # relative timestamps (before 1990) stay valid
    path = tmp_path / "ts.pfw.gz"
    _write(path, good, [b for b, _ in bad])
    idx = reader.build_index(str(path), index_dir=str(tmp_path))
    b = reader.load_batch(str(path), 0, len(idx["checkpoints"]) - 1, index_dir=str(tmp_path))
    assert len(b.events) == len(good)
    assert b.skipped_lines == len(bad)
    r = reader._reader.load_batch(str(path), 0, len(idx["checkpoints"]) - 1, str(tmp_path), None, False)
    assert r["ts_out_of_range_lines"] == sum(1 for _, why in bad if why == "ts")
    assert r["negative_dur_lines"] == sum(1 for _, why in bad if why == "dur")
    assert any("outside [0, 2100-01-01)" in w and "negative dur" in w for w in b.warnings), b.warnings
    assert int(b.events["te"].max()) < reader.MAX_TS and int(b.events["ts"].min()) >= 0
    # load_files (small files) counts them per file
    _, files = reader.load_files([str(path)])
    assert files[0]["ts_out_of_range_lines"] == r["ts_out_of_range_lines"]
    assert files[0]["negative_dur_lines"] == r["negative_dur_lines"]


# ---- dftracer-cat with an in-memory index -----------------------------------------------------


def _member_trace(path, n_members=5, per_member=300):
    """A trace in the tracer's own layout: several 'DF' gzip members (member-kind index)."""
    from dftracer import _dftracer

    lines = [b"[\n"]
    k = 0
    with open(path, "wb") as f:
        for m in range(n_members):
            chunk = b"".join(
                json.dumps(_event(k + j, {"m": m, "s": "x" * (j % 7)}), separators=(",", ":")).encode() + b"\n"
                for j in range(per_member)
            )
            k += per_member
            if m == 0:
                chunk = b"[\n" + chunk
            f.write(_dftracer.encode_member(chunk))
            lines.append(chunk)
    with gzip.open(path, "rb") as f:
        return f.read().decode().splitlines()


def _cat(args, drop_caps=False, env=None, no_cache=None):
    cmd = [sys.executable, "-c", "import sys; from dfanalyzer.tools import cat_main; sys.exit(cat_main())"] + args
    if drop_caps and os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        assert setpriv, "setpriv (util-linux) is needed to drop root's file capabilities"
        cmd = [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--"] + cmd
    e = pythonpath_env(env)
    e.pop("DFTRACER_INDEX_DIR", None)
    # no fallback folder either (its parent is a file, so it cannot be made): the index stays in memory
    e["XDG_CACHE_HOME"] = e["HOME"] = os.path.join(no_cache, "cache")
    return subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=120)


def test_cat_with_directory_planted_at_index_path(tmp_path):
    # attack: a directory at <trace>.zindex, so the index cannot be written anywhere
    path = tmp_path / "t.pfw.gz"
    truth = _member_trace(path)
    (tmp_path / "t.pfw.gz.zindex").mkdir()
    r = _cat([str(path)], no_cache=str(path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == truth
    r = _cat([str(path), "--lines", "700:1001"], no_cache=str(path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == truth[699:1001]


def test_cat_in_read_only_folder(tmp_path):
    # attack: the trace folder is read-only (root's DAC override dropped with setpriv)
    d = tmp_path / "ro"
    d.mkdir()
    path = d / "t.pfw.gz"
    truth = _member_trace(path)
    os.chmod(d, 0o555)
    try:
        r = _cat([str(path)], drop_caps=True, no_cache=str(path))
    finally:
        os.chmod(d, 0o755)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == truth
    assert not os.path.exists(str(path) + ".zindex")


def test_cat_when_index_folder_is_unusable(tmp_path):
    # attack: --index-dir names a file, not a folder: no index can be written, it stays in memory
    path = tmp_path / "t.pfw.gz"
    truth = _member_trace(path)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    r = _cat([str(path), "--index-dir", str(blocker)], no_cache=str(path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == truth


def test_cat_when_disk_is_full(tmp_path):
    # attack: the index folder is a full 64 KiB tmpfs (mounted in a private mount namespace)
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1) to mount a private tmpfs")
    path = tmp_path / "t.pfw.gz"
    truth = _member_trace(path)
    full = tmp_path / "full"
    full.mkdir(mode=0o700)
    script = (
        f"mount -t tmpfs -o size=64k,mode=0700 tmpfs {full} && "
        f"(dd if=/dev/zero of={full}/fill bs=4k 2>/dev/null; true) && "
        f'exec "$0" -c "import sys; from dfanalyzer.tools import cat_main; sys.exit(cat_main())" '
        f"{path} --index-dir {full}"
    )
    e = pythonpath_env()
    e["XDG_CACHE_HOME"] = e["HOME"] = os.path.join(str(path), "cache")
    r = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, sys.executable], env=e, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == truth


# ---- Python API args --------------------------------------------------------------------------


def _py_app(tmp_path, code):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_") and k != "LD_PRELOAD"}
    env = pythonpath_env(env)
    env["DFTRACER_ENABLE"] = "1"
    env["DFTRACER_LOG_FILE"] = str(tmp_path / "trace")
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(code))
    r = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    files = sorted(p for p in tmp_path.iterdir() if ".pfw" in p.name)
    assert len(files) == 1, os.listdir(tmp_path)
    return r, read_trace(files[0])


def test_python_api_keeps_40_args_and_counts_oversize(tmp_path):
    # attack: 40 args (only 24 were kept), odd keys, and one 2 MiB arg over the byte limit
    r, recs = _py_app(
        tmp_path,
        """
        from dftracer.logger import dftracer
        log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=None)
        args = {f"a{i}": i for i in range(36)}
        args.update({'q"uote': 'v"\\\\x', "f": 1.5, "b": True, "big": 2**64 - 1})
        t0 = log.get_time()
        log.log_event("forty", "api", t0, 5, args)
        log.log_event("oversize", "api", t0, 5, {"small": 1, "huge": "x" * (2 << 20), "after": 2})
        log.finalize()
        """,
    )
    ev = {e["name"]: e for e in recs if e.get("ph") == "X"}
    want = {f"a{i}": i for i in range(36)}
    want.update({'q"uote': 'v"\\x', "f": 1.5, "b": True, "big": 2**64 - 1})
    assert ev["forty"]["args"] == want
    assert ev["oversize"]["args"] == {"small": 1, "after": 2}
    meta = [e for e in recs if e.get("ph") == "M" and e.get("name") == "dropped_args"]
    assert len(meta) == 1 and meta[0]["args"]["value"].startswith("1 args, "), meta
    assert r.stderr.count("event args") == 1 and "dropped" in r.stderr, r.stderr


def test_pydftracer_module_keeps_every_arg_under_the_same_limit(tmp_path):
    # dftracer.dftracer (what pydftracer drives, src/core/upstream_module.cpp) kept only 24 tags;
    # it now shares the Python API's args builder (src/core/py_args.h) and drop counters: one
    # dropped_args record for the whole process, whichever binding dropped
    r, recs = _py_app(
        tmp_path,
        """
        import dftracer.dftracer as profiler
        from dftracer.logger import dftracer
        log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=None)
        t0 = profiler.get_time()
        ints = {f"i{k}": (1, k) for k in range(30)}
        strs = {f"s{k}": (0, f"v{k}") for k in range(10)}
        floats = {"f": (1, 2.5), "i3": (1, 0.5)}  # a key in several dicts keeps the last
        profiler.log_event("many", "compat", t0, 7, ints, strs, floats)
        profiler.log_event("over", "compat", t0, 7, {"a": (1, 1)}, {"huge": (0, "x" * (2 << 20))}, {"z": (1, 1.0)})
        log.log_event("over2", "api", t0, 5, {"huge": "y" * (2 << 20), "b": 2})
        log.finalize()
        """,
    )
    ev = {e["name"]: e for e in recs if e.get("ph") == "X"}
    want = {f"i{k}": k for k in range(30)}
    want.update({f"s{k}": f"v{k}" for k in range(10)})
    want.update({"f": 2.5, "i3": 0.5})
    assert ev["many"]["args"] == want
    assert ev["over"]["args"] == {"a": 1, "z": 1.0}
    assert ev["over2"]["args"] == {"b": 2}
    meta = [e for e in recs if e.get("ph") == "M" and e.get("name") == "dropped_args"]
    assert len(meta) == 1 and meta[0]["args"]["value"].startswith("2 args, "), meta
    assert r.stderr.count("event args") == 1 and "2 event args" in r.stderr, r.stderr


# ---- crash signals ----------------------------------------------------------------------------

CRASH_C = r"""
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static void on_segv_exit(int sig) { (void)sig; _exit(42); }
static void on_segv_reraise(int sig) { signal(sig, SIG_DFL); raise(sig); }
int main(int argc, char** argv) {
  int n = atoi(argv[1]);
  const char* how = argv[2];
  if (!strcmp(how, "handler_exit")) signal(SIGSEGV, on_segv_exit);
  if (!strcmp(how, "handler_reraise")) signal(SIGSEGV, on_segv_reraise);
  char path[4096];
  snprintf(path, sizeof path, "%s/data.bin", argv[3]);
  for (int i = 0; i < n; ++i) {  /* n traced events (open + write + close: 3 each) */
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    if (write(fd, "x", 1) != 1) return 3;
    close(fd);
  }
  if (!strncmp(how, "segv", 4) || !strncmp(how, "handler", 7)) { volatile int* p = (int*)16; *p = 1; }
  if (!strcmp(how, "fpe")) { volatile int z = 0; volatile int x = 1 / z; (void)x; raise(SIGFPE); }
  if (!strcmp(how, "ill")) { __builtin_trap(); }
  if (!strcmp(how, "bus")) { raise(SIGBUS); }
  return 0;
}
"""


@pytest.fixture(scope="module")
def crash_prog(tmp_path_factory):
    d = tmp_path_factory.mktemp("crash")
    src = d / "crash.c"
    src.write_text(CRASH_C)
    exe = d / "crash"
    subprocess.run(["cc", "-O0", "-o", str(exe), str(src)], check=True)
    return str(exe)


@pytest.mark.parametrize(
    "how,sig",
    [
        ("segv", signal.SIGSEGV),
        ("fpe", signal.SIGFPE),
        ("ill", signal.SIGILL),
        ("bus", signal.SIGBUS),
        # the application's own handler: one that _exits(42), one that restores the default and
        # re-raises (faulthandler's way): the same end as untraced, every event kept
        ("handler_exit", None),
        ("handler_reraise", signal.SIGSEGV),
    ],
)
def test_crash_signal_flushes_then_dies_the_same(tmp_path, crash_prog, how, sig):
    # attack: the application crashes right after its last event (nothing flushed yet)
    lib = subprocess.run(
        [sys.executable, "-m", "dftracer", "--preload-path"],
        env=pythonpath_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    data = tmp_path / "data"
    data.mkdir()
    n = 2000
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    plain = subprocess.run(
        [crash_prog, str(n), how, str(data)],
        capture_output=True,
        timeout=60,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, hard)),
    )
    assert plain.returncode == (42 if sig is None else -sig)
    env = dict(
        os.environ,
        LD_PRELOAD=lib,
        DFTRACER_ENABLE="1",
        DFTRACER_INIT="PRELOAD",
        DFTRACER_LOG_FILE=str(tmp_path / "trace"),
        DFTRACER_DATA_DIR=str(data),
        DFTRACER_FLUSH_INTERVAL="600000",
    )
    traced = subprocess.run(
        [crash_prog, str(n), how, str(data)],
        env=env,
        capture_output=True,
        timeout=60,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, hard)),
    )
    assert traced.returncode == plain.returncode, traced.stderr
    files = sorted(p for p in tmp_path.iterdir() if ".pfw" in p.name)
    assert files, os.listdir(tmp_path)
    evs = [e for f in files for e in read_trace(f, allow_truncated=False) if e.get("ph") == "X"]
    assert sum(1 for e in evs if e["name"] in ("open", "open64", "openat")) == n
    assert sum(1 for e in evs if e["name"] == "write") == n
    assert sum(1 for e in evs if e["name"] == "close") == n
