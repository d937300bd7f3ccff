"""Filters are data (issue 25, item 1): the grammar of ``dfanalyzer.filters``.

* every attack string (code that ``DataFrame.query`` ran before) is rejected before anything is
  read, naming the position, and creates no file;
* valid filters select exactly the events that a plain-Python predicate written by hand selects
  over the trace lines (gzip + json), on traces of several files and many checkpoints, loaded in
  many batches, through the held frame, the streamed summary and grouped small files;
* unit literals, unknown columns, data that does not fit the filter, push-down (skips
  checkpoints, same rows), and the command line (exit 2, one line, no traceback).
"""

import gzip
import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT, pythonpath_env

from dfanalyzer import DFAnalyzer, reader
from dfanalyzer.filters import FilterError, Predicate, filter_mask, parse_filter, pushdown_predicates

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import gen_traces  # noqa: E402

T0 = 1_700_000_000_000_000
NAMES = ("read", "readv", "write", "open64", "close", "fread", "fwrite", "train_step", "compute")
SIZED = ("read", "readv", "write")  # documented size rule: ret (>= 0) for the read/write family


def _event(i: int, pid: int, rng_a: int) -> dict:
    """One event line of file ``pid``: deterministic, with args that are sometimes absent."""
    name = NAMES[(i * 7 + pid) % len(NAMES)]
    cat = "app" if name == "train_step" else "compute" if name == "compute" else "STDIO" if name[0] == "f" else "POSIX"
    args = {"hostname": f"node{pid % 3}", "seq": pid * 1_000_000 + i}
    if cat in ("POSIX", "STDIO"):
        args["fname"] = ["/data/a.bin", "/ckpt/model-1.pt", '/data/it\'s "q".bin', "/tmp/x"][(i + pid) % 4]
    if name in SIZED:
        args["ret"] = [4096, 512, -1, 1 << 20, 8192][(i * 3) % 5]
        args["offset"] = i * 512
    if name in ("fread", "fwrite"):
        args["ret"] = 1 + i % 3
        args["size"] = 4096
    if i % 3 == 0:
        args["level"] = i % 5
    if i % 4 == 1:
        args["tag"] = ["alpha", "beta", "read-me"][i % 3]
    if i % 5 == 2:
        args["ratio"] = (i % 10) / 10
    if i % 7 == 3:
        args["odd key"] = i % 4
    return {
        "id": i,
        "name": name,
        "cat": cat,
        "pid": pid,
        "tid": pid + i % 2,
        "ts": T0 + i * 997 + rng_a,
        "dur": (i * 131) % 3000,
        "ph": "X",
        "args": args,
    }


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """Three traces of 2,500 events in gzip members of ~16 KiB (many checkpoints each) and the
    event records as plain json reads them back from the files."""
    d = tmp_path_factory.mktemp("filters")
    paths = []
    for k in range(3):
        pid = 100 + k
        lines = [b"[\n"] + [json.dumps(_event(i, pid, k)).encode() + b"\n" for i in range(2500)]
        p = str(d / f"run-{k}.pfw.gz")
        gen_traces.write_members(p, lines, member_bytes=16 << 10)
        paths.append(p)
    records = []
    for p in paths:  # the truth: plain gzip + json, no dfanalyzer code
        with gzip.open(p, "rt") as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    rec = json.loads(line)
                    if rec.get("ph") != "M":
                        records.append(rec)
    assert len(records) == 7500
    return d, paths, records


def _size(r):
    a = r["args"]
    if r["name"] in SIZED and a.get("ret", -1) >= 0:
        return a["ret"]
    if r["name"] in ("fread", "fwrite"):
        return a["ret"] * a["size"]
    return None


def _a(r, key):
    return r["args"].get(key)


CUT = T0 + 2000 * 997
#: filter -> the same selection written by hand in Python over the trace records
CASES = [
    ("cat == 'POSIX' and ts >= %d" % CUT, lambda r: r["cat"] == "POSIX" and r["ts"] >= CUT),
    ("name startswith 'read' and dur > 250us", lambda r: r["name"].startswith("read") and r["dur"] > 250),
    ("1ms <= dur < 2ms", lambda r: 1000 <= r["dur"] < 2000),
    (
        "fname contains 'ckpt' or size >= 4KiB",
        lambda r: "ckpt" in (_a(r, "fname") or "") or (_size(r) is not None and _size(r) >= 4096),
    ),
    ("fname endswith '.bin' & not pid == 101", lambda r: (_a(r, "fname") or "").endswith(".bin") and r["pid"] != 101),
    (
        "name not in ['open64', 'close', 'compute'] | tid > pid",
        lambda r: r["name"] not in ("open64", "close", "compute") or r["tid"] > r["pid"],
    ),
    ("fname == '/data/it\\'s \"q\".bin'", lambda r: _a(r, "fname") == '/data/it\'s "q".bin'),
    (
        'fname == "/data/it\'s \\"q\\".bin" and offset >= 1KiB',
        lambda r: _a(r, "fname") == '/data/it\'s "q".bin' and (_a(r, "offset") or -1) >= 1024,
    ),
    ("level is null and fname is not null", lambda r: _a(r, "level") is None and _a(r, "fname") is not None),
    ("level in (1, 2) or ratio > 0.5", lambda r: _a(r, "level") in (1, 2) or (_a(r, "ratio") or 0) > 0.5),
    ("level != 3", lambda r: _a(r, "level") != 3),  # null: != is the complement of ==
    (
        "tag not contains 'e' and (tag == 'beta' or `odd key` >= 2)",
        lambda r: "e" not in (_a(r, "tag") or "") and (_a(r, "tag") == "beta" or (_a(r, "odd key") or -1) >= 2),
    ),
    (
        "tag startswith 'read' and hostname in ['node1', 'node2']",
        lambda r: (_a(r, "tag") or "").startswith("read") and _a(r, "hostname") in ("node1", "node2"),
    ),
    ("name == 'no_such_event'", lambda r: False),
]


def _seqs(df):
    if len(df) == 0:  # (no args column at all when every checkpoint was skipped)
        return []
    return sorted(int(s) for s in df["seq"])


#: the cases also run through the whole analyzer with the events held on the cluster (a load per
#: case: the rest are checked on the loader's frame and through the streamed summary)
HELD = (0, 3, 10, 11, 13)


def test_filters_select_exactly_the_truth(traces, dask_client):
    d, paths, records = traces
    frame, _ = reader.load_files(paths)  # the frame the loader builds: every args column
    assert len(frame.events) == len(records)
    for k, (text, want) in enumerate(CASES):
        truth = sorted(r["args"]["seq"] for r in records if want(r))
        assert _seqs(frame.events[filter_mask(frame.events, text)]) == truth, text
        # grouped small files, only the summary streamed (threads of this process, core columns)
        with DFAnalyzer(paths, query=text) as an:
            assert an.summary(show=False) is not None
            assert an._client is None  # (threads, not a cluster)
            assert an.stats["events"] == len(truth) and an.stats["small_files"] == 3, text
        if k in HELD:  # many batches of single files (push-down on), held in the cluster
            with DFAnalyzer(paths, client=dask_client, query=text, batch_size_mb=0.05, small_file_mb=0) as an:
                assert _seqs(an.events.compute(scheduler=dask_client)) == truth, text
                assert an.stats["events"] == len(truth), text
                assert an.stats["batches"] >= 6 if truth else an.stats["batches"] == 0, text  # all skipped


ATTACKS = [
    # the two reproductions: a shell command, a file written
    ("name.__class__.__init__.__globals__['sys'].modules['os'].system('id > f') == 0", 4),
    ("ts.to_pickle('f') == 1", 2),
    ("__import__('os').system('id > f') == 0", 10),
    ("open('f', 'w').write('x') > 0", 4),
    ("(lambda: open('f', 'w'))() == 1", 1),
    ("f'{open(\"f\", \"w\")}' == 'x'", 0),
    ("name[0] == 'r'", 4),
    ("ts.between(0, 1)", 2),
    ("name.str.startswith('read')", 4),
    ("@ts == 1", 0),
    ("ts + 1 > 0", 3),
    ("[open('f', 'w') for x in ts] == 1", 0),
    ("ts == 1; import os", 7),
    ("ts == ts.__len__", 8),
    ("ts == 1 if True else 0", 8),
]


@pytest.mark.parametrize("attack,pos", ATTACKS)
def test_attack_strings_rejected_before_load(traces, tmp_path, monkeypatch, attack, pos):
    d, paths, records = traces
    monkeypatch.chdir(tmp_path)
    before = sorted(os.listdir(d))
    with pytest.raises(FilterError) as e:
        DFAnalyzer(paths, query=attack, small_file_mb=0)
    assert isinstance(e.value, ValueError)
    assert e.value.pos == pos and f"char {pos + 1}:" in str(e.value), str(e.value)
    lines = str(e.value).splitlines()  # the message, the filter, a caret under the position
    assert len(lines) == 3 and lines[2] == "  " + " " * pos + "^" and lines[1] == "  " + attack
    assert os.listdir(tmp_path) == [] and sorted(os.listdir(d)) == before  # no file, no index made


def test_unit_literals():
    def value(text):
        (p,) = pushdown_predicates(f"ts >= {text}")
        return p.value

    assert value("1s") == 1_000_000 and value("250ms") == 250_000 and value("10us") == 10
    assert value("10µs") == 10 and value("1.5ms") == 1500 and value("2min") == 120_000_000
    assert value("1h") == 3_600_000_000 and value("500ns") == 0.5 and value("1_000") == 1000
    assert value("1.7e15") == 1.7e15 and isinstance(value("1.7e15"), float)

    def size(text):
        cmp = parse_filter(f"size > {text}").root
        return cmp.right.value

    assert size("4KiB") == 4096 and size("1MiB") == 1 << 20 and size("1GB") == 10**9
    assert size("2kB") == 2000 and size("3B") == 3 and size("1TiB") == 1 << 40
    assert pushdown_predicates("-5 < ts") == [Predicate("ts", ">", -5)]
    for bad, where in [("ts > 5xs", 6), ("size > 1s", 7), ("dur > 4KiB", 6), ("pid > 1ms", 6)]:
        with pytest.raises(FilterError) as e:
            parse_filter(bad)
        assert e.value.pos == where, str(e.value)


def test_grammar_errors_name_the_position():
    for bad, where, words in [
        ("", 0, "empty filter"),
        ("ts >", 4, "end of filter"),
        ("cat = 'x'", 4, "'=='"),
        ("(ts > 1", 7, "')'"),
        ("name < 'a'", 5, "text column"),
        ("name == 1", 8, "text column"),
        ("ts > 'a'", 5, "number column"),
        ("pid contains '1'", 0, "number column"),
        ("ts in [1, 'a']", 6, "mixes"),
        ("name == 'a\\q'", 10, "bad escape"),
        ("name == 'abc", 8, "unterminated"),
        ("1 == 1", 2, "column"),
        ("level", 5, "comparison"),
        ("ts > 1 && ts < 2", 7, "'and'"),
        ("name in 'abc'", 8, "list"),
        ("ts is 1", 6, "null"),
        ("`bad == 1", 0, "unterminated"),
        ("\x1b]0;title\x07 == 1", 0, "unexpected character"),
    ]:
        with pytest.raises(FilterError) as e:
            parse_filter(bad)
        assert e.value.pos == where and words in e.value.reason, (bad, str(e.value))
        assert all(ch.isprintable() for ch in str(e.value).replace("\n", "")), repr(str(e.value))
    with pytest.raises(FilterError):
        parse_filter(5)
    # hostile sizes end in a FilterError, never in RecursionError, Overflow or a huge int
    with pytest.raises(FilterError) as e:
        parse_filter("(" * 5000 + "ts > 1" + ")" * 5000)
    assert e.value.pos == 100 and "nested deeper than 100" in e.value.reason
    with pytest.raises(FilterError) as e:
        parse_filter("not " * 101 + "ts > 1")
    assert e.value.pos == 400
    with pytest.raises(FilterError) as e:
        parse_filter("ts > 1" + " or ts > 1" * 7000)
    assert "at most 65,536" in e.value.reason
    assert pushdown_predicates("ts < 1e999999999s") == [Predicate("ts", "<", float("inf"))]
    assert pushdown_predicates("ts > " + "9" * 60000) == [Predicate("ts", ">", float("inf"))]
    assert parse_filter("(" * 100 + "ts > 1" + ")" * 100).pushdown() == [Predicate("ts", ">", 1)]


def test_pushdown_skips_checkpoints_same_rows(traces, dask_client):
    d, paths, records = traces
    truth = sorted(r["args"]["seq"] for r in records if r["ts"] >= CUT and r["cat"] == "POSIX")
    pushed = f"ts >= {CUT} and cat == 'POSIX'"
    assert pushdown_predicates(pushed) == [Predicate("ts", ">=", CUT), Predicate("cat", "in", ("POSIX",))]
    unpushed = f"(ts >= {CUT} or ts < 0) and (cat == 'POSIX' or pid < 0)"
    assert pushdown_predicates(unpushed) == []
    runs = {}
    for q in (pushed, unpushed):
        with DFAnalyzer(paths, client=dask_client, query=q, small_file_mb=0, batch_size_mb=0.05) as an:
            runs[q] = (_seqs(an.events.compute(scheduler=dask_client)), an.stats["skipped_checkpoints"])
    assert runs[pushed][0] == runs[unpushed][0] == truth
    assert runs[pushed][1] > 10 and runs[unpushed][1] == 0
    # string tests on names are pushed down too, and never change the rows
    q = "name startswith 'train' and ts < %d" % (T0 + 300 * 997)
    assert Predicate("name", "startswith", "train") in pushdown_predicates(q)
    with DFAnalyzer(paths, client=dask_client, query=q, small_file_mb=0, batch_size_mb=0.05) as an:
        got = _seqs(an.events.compute(scheduler=dask_client))
        assert an.stats["skipped_checkpoints"] > 10
    assert got == sorted(
        r["args"]["seq"] for r in records if r["name"].startswith("train") and r["ts"] < T0 + 300 * 997
    )


def test_unknown_column_and_data_errors(traces, dask_client):
    d, paths, records = traces
    for q, words in [
        ("nosuch == 1", "unknown column 'nosuch' (char 1)"),
        ("cat == 'POSIX' and nmae == 'read'", "did you mean 'name'?"),
        ("tag > 5", "column 'tag' (char 1 of the filter) holds text"),
        ("level == 'x'", "column 'level' (char 1 of the filter) holds numbers"),
        ("level startswith 'x'", "holds numbers"),
    ]:
        with DFAnalyzer(paths, client=dask_client, query=q, small_file_mb=0) as an:  # held frame
            with pytest.raises(FilterError) as e:
                an.events.compute(scheduler=dask_client)
            assert words in str(e.value) and "\n" not in str(e.value), str(e.value)
        with DFAnalyzer(paths, query=q) as an:  # streamed summary over grouped small files
            with pytest.raises(FilterError) as e:
                an.summary(show=False)
            assert an._client is None  # (in threads)
            assert words in str(e.value), str(e.value)
    # a column absent from some events is null there, not unknown
    with DFAnalyzer(paths, client=dask_client, query="`odd key` is null", small_file_mb=0) as an:
        assert an.stats["events"] == sum(1 for r in records if "odd key" not in r["args"])


def _cli(args, client, capsys):
    from dfanalyzer import cli

    capsys.readouterr()
    status = cli.main([*args, "--scheduler", client.scheduler.address])
    out = capsys.readouterr()
    return status, out.out, out.err


def test_cli_bad_filter_exit_2_one_line(traces, tmp_path, dask_client, capsys):
    d, paths, records = traces
    attack = ATTACKS[0][0]
    # the reproduction, as a user types it: exit 2, one line, no file, no traceback
    r = subprocess.run(
        [sys.executable, "-m", "dfanalyzer.cli", "summary", str(d), "--filter", attack],
        cwd=tmp_path,
        env=pythonpath_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr.splitlines() == [
        "dfanalyzer: error: --filter: filter: char 5: attribute access ('.') is not part of the filter grammar "
        "(string tests: name startswith 'read', fname contains 'ckpt')"
    ]
    assert os.listdir(tmp_path) == []
    for cmd in (["functions", str(d)], ["report", str(d), "-o", str(tmp_path / "r.html")], ["insights", str(d)]):
        st, out, err = _cli([*cmd, "--filter", "ts.to_pickle('f') == 1"], dask_client, capsys)
        assert st == 2 and len(err.splitlines()) == 1 and "char 3:" in err, err
        # a filter that does not fit the data: non-zero, one line naming the column, never "not loaded"
        st, out, err = _cli([*cmd, "--filter", "nosuch == 1"], dask_client, capsys)
        assert st == 2 and err.splitlines() == [err.strip()] and "unknown column 'nosuch'" in err, (cmd, err)
        st, out, err = _cli([*cmd, "--filter", "tag > 5"], dask_client, capsys)
        assert st == 2 and len(err.splitlines()) == 1 and "holds text" in err and "not loaded" not in err, err
    st, out, err = _cli(["summary", str(d), "--filter", "tag > 5"], dask_client, capsys)
    assert st == 2 and len(err.splitlines()) == 1 and "holds text" in err, err
    assert not os.path.exists(tmp_path / "r.html") and not os.path.exists("f")


def test_precedence_nulls_and_absent_columns_on_a_small_frame():
    import numpy as np
    import pandas as pd

    df = pd.DataFrame(
        {
            "name": pd.Categorical(["read", "write", None, "readv"]),
            "ts": np.array([1, 2, 3, 4], dtype=np.int64),
            "size": pd.array([4096, None, 10, 1 << 20], dtype="Int64"),
            "ratio": pd.array([0.5, None, 1.5, 2.0], dtype="Float64"),
        }
    )

    def rows(q):
        return list(np.flatnonzero(filter_mask(df, q)))

    assert rows("ts == 1 or ts == 2 and ts == 3") == [0]  # and binds tighter than or
    assert rows("(ts == 1 or ts == 2) and ts == 2") == [1]
    assert rows("ts == 1 | ts == 4 & not ts == 4") == [0]  # & and | are and and or
    assert rows("not not ts >= 3") == [2, 3]
    assert rows("size >= 4KiB") == [0, 3] and rows("size != 10") == [0, 1, 3]  # != is not ==
    assert rows("size is null") == [1] and rows("name is not null") == [0, 1, 3]
    assert rows("name != 'read'") == [1, 2, 3] and rows("name not in ['read', 'write']") == [2, 3]
    assert rows("name startswith 'read'") == [0, 3] and rows("name not contains 'ea'") == [1, 2]
    assert rows("ratio > 1") == [2, 3] and rows("ratio in [0.5, 2]") == [0, 3]
    assert rows("size > ts") == [0, 2, 3] and rows("ts < size < 1MiB") == [0, 2]
    assert rows("absent == 1") == [] and rows("absent != 1") == [0, 1, 2, 3]  # null in every row
    assert rows("absent is null and `absent` not in [1]") == [0, 1, 2, 3]
    assert rows("ts in []") == [] and rows("ts not in ()") == [0, 1, 2, 3]
