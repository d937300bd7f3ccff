"""Reading what others wrote, exactly (issue 11, deliverable 6).

* Real DFTracer 2.2.0 traces (tests/data/dftracer-v2.2.0/README.md says how they were made):
  plain, gzip and aggregated. Per-function counts and bytes, files and hosts of the reader +
  summary equal an independent count made here with gzip + json only.
* An args key named like a core column never replaces that column.
* The byte rule knows every byte-moving call the preload records (enumerated from its source).
* Unresolved file/host hashes are a visible CLI warning.
"""

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
from conftest import DATA, ROOT, pythonpath_env

from dfanalyzer import reader as R
from dfanalyzer import summary as S

V220 = os.path.join(DATA, "dftracer-v2.2.0")
IO = ("POSIX", "STDIO")
TRACES = ["c-plain.pfw", "c-gz.pfw.gz", "c-agg.pfw", "py-plain.pfw", "py-gz.pfw.gz", "py-agg.pfw.gz"]
# The byte rule as this test states it (independent of src/reader/parser.cpp).
RET_BYTES = {
    "read",
    "pread",
    "pread64",
    "readv",
    "preadv",
    "preadv64",
    "preadv2",
    "preadv64v2",
    "write",
    "pwrite",
    "pwrite64",
    "writev",
    "pwritev",
    "pwritev64",
    "pwritev2",
    "pwritev64v2",
}
ITEM_BYTES = {"fread", "fwrite"}


def _records(path):
    # Own reader on purpose: DFTracer 2.2.0's files (foreign layout) are the oracle's input here.
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def independent_summary(path):
    """events, files, hosts and per I/O function {count, sizes} from gzip + json alone.

    sizes: ("exact", [per-call bytes]) or, when aggregated calls of unequal sizes are involved,
    ("spread", calls, total bytes, min, max)."""
    recs = _records(path)
    fh = {r["args"]["value"]: r["args"]["name"] for r in recs if r["ph"] == 4 and r["name"] == "FH"}
    hh = {r["args"]["value"]: r["args"]["name"] for r in recs if r["ph"] == 4 and r["name"] == "HH"}
    events, files, hosts = 0, set(), set()
    count = defaultdict(int)
    exact = defaultdict(list)
    spread = {}
    for r in recs:
        if r["ph"] not in (1, 3) or r["cat"] == "dftracer":
            continue
        a = r.get("args", {})
        n = a.get("dft_cnt", 1) if r["ph"] == 3 else 1
        events += n
        hosts.add(hh[a["hhash"]])
        if r["cat"] not in IO:
            continue
        name = r["name"]
        count[name] += n
        if "fhash" in a:
            files.add(fh[a["fhash"]])
        item = name in ITEM_BYTES
        if name not in RET_BYTES and not item:
            continue
        if "ret" in a:  # one call (complete event, or an aggregated record of one call)
            if a["ret"] >= 0:
                exact[name] += [a["ret"] * (a["size"] if item else 1)] * n
        elif a["ret_min"] >= 0:  # aggregated: all calls succeeded
            lo = a["ret_min"] * (a["size_min"] if item else 1)
            hi = a["ret_max"] * (a["size_max"] if item else 1)
            total = a["ret_sum"] * (a["size_min"] if item else 1)
            if lo == hi:
                exact[name] += [lo] * n
            else:
                c, t, mn, mx = spread.get(name, (0, 0, lo, hi))
                spread[name] = (c + n, t + total, min(mn, lo), max(mx, hi))
    sizes = {}
    for name in count:
        if name in spread:
            c, t, mn, mx = spread[name]
            v = exact.get(name, [])
            sizes[name] = ("spread", c + len(v), t + sum(v), min([mn] + v), max([mx] + v))
        elif exact.get(name):
            sizes[name] = ("exact", exact[name])
        else:
            sizes[name] = None
    return {"events": events, "files": files, "hosts": hosts, "count": dict(count), "sizes": sizes}


def _copy(trace, tmp_path):
    """The committed trace copied to tmp_path (its .zindex is written next to it, not in tests/data)."""
    dst = tmp_path / trace
    shutil.copyfile(os.path.join(V220, trace), dst)
    return str(dst)


def _summary(path):
    b = R.load_batch(path, 0, _last_checkpoint(path))
    assert b.skipped_lines == 0 and b.unresolved_hashes == 0 and b.warnings == []
    return b, S.finish(S.partition_partial(b.events, IO, ("app",), ("reader",))).to_dict()


def _last_checkpoint(path):
    return len(R.build_index(path)["checkpoints"]) - 1


@pytest.mark.parametrize("trace", TRACES)
def test_upstream_220_trace_equals_independent_count(trace, tmp_path):
    path = _copy(trace, tmp_path)
    want = independent_summary(path)
    b, got = _summary(path)
    assert got["events"] == want["events"]
    assert got["nodes"] == len(want["hosts"]) == 1
    assert set(b.events["hostname"].dropna().unique()) == want["hosts"]
    assert got["files"] == len(want["files"])
    assert set(b.events.loc[b.events["cat"].isin(IO), "fname"].dropna().unique()) == want["files"]
    assert {n: f["count"] for n, f in got["functions"].items()} == want["count"]
    for name, f in got["functions"].items():
        w = want["sizes"][name]
        if w is None:
            assert f["size"] is None, name
        elif w[0] == "exact":
            v = np.array(w[1], dtype=np.int64)
            assert f["size"] == {
                "min": float(v.min()),
                "p25": float(np.percentile(v, 25)),
                "mean": float(v.mean()),
                "median": float(np.percentile(v, 50)),
                "p75": float(np.percentile(v, 75)),
                "max": float(v.max()),
            }, name
        else:
            _, calls, total, lo, hi = w
            assert f["size"] == {
                "min": float(lo),
                "p25": None,
                "mean": total / calls,
                "median": None,
                "p75": None,
                "max": float(hi),
            }, name


def test_upstream_220_exact_facts(tmp_path):
    """Hand-checked facts of the committed traces (io.c: 2 files x (3 writes, 1 pwrite, 4 reads,
    1 pread, fread of 5 x 10 B), a failing read, one writev of 500 B, one fwrite of 25 x 4 B)."""
    for trace in ("c-plain.pfw", "c-gz.pfw.gz"):
        b, got = _summary(_copy(trace, tmp_path))
        assert got["files"] == 2 and got["events"] == 37
        assert set(b.events["ph"].unique()) == {"X"}
        w = b.events[b.events["name"] == "write"]
        assert w["size"].sum() == 3 * 1000 + 3 * 1100 and w["fname"].nunique() == 2
        assert got["functions"]["read"]["count"] == 9 and b.events[b.events["name"] == "read"]["size"].sum() == 8 * 700
        assert got["functions"]["fread"]["size"]["max"] == 50.0
    b, got = _summary(_copy("c-agg.pfw", tmp_path))
    ev = b.events.set_index("name")
    assert set(ev["ph"]) == {"A"}
    assert int(ev.loc["write", "dft_cnt"]) == 6 and int(ev.loc["write", "size"]) == 6300
    assert int(ev.loc["write", "dur"]) == int(ev.loc["write", "dur_sum"])
    assert pd.isna(ev.loc["read", "size"])  # one of its 9 calls failed: ret_min -1, bytes unknown
    assert int(ev.loc["fread", "size"]) == 100 and int(ev.loc["fwrite", "size"]) == 100
    assert int(ev.loc["writev", "size"]) == 500 and int(ev.loc["writev", "dur"]) == int(ev.loc["writev", "arg_dur"])
    # upstream 2.2.0 undercounts here: 3 opens (flags 578, 578, 1; only two carry "mode"), dft_cnt 2
    assert int(ev.loc["open", "flags_sum"]) == 578 + 578 + 1 and int(ev.loc["open", "dft_cnt"]) == 2
    assert got["files"] == 0  # aggregated records carry no fhash


def test_integer_phases_and_metadata_context(tmp_path):
    """1 X, 2 C, 3 A, 4 M; a ph 4 FH/HH record in another batch still resolves (collect_context)."""
    p = tmp_path / "t.pfw"
    lines = [
        '{"name":"HH","cat":"dftracer","pid":1,"tid":1,"ph":4,"args":{"name":"node7","value":"h1"}}',
        '{"name":"FH","cat":"dftracer","pid":1,"tid":1,"ph":4,"args":{"name":"/d/f","value":"f1"}}',
        '{"id":1,"name":"read","cat":"POSIX","pid":1,"tid":1,"ts":10,"dur":2,"ph":1,"args":{"hhash":"h1","fhash":"f1","ret":7}}',
        '{"name":"mem","cat":"sys","pid":1,"tid":1,"ts":11,"ph":2,"args":{"v":3}}',
        '{"name":"read","cat":"POSIX","pid":1,"tid":1,"ts":0,"ph":3,"args":{"hhash":"h1","dur_sum":9,"ret_min":1,"ret_max":1,"ret_sum":4,"dft_cnt":4}}',
        '{"name":"x","cat":"app","pid":1,"tid":1,"ts":12,"ph":0}',
    ]
    p.write_text("\n".join(lines) + "\n")
    b = R.load_batch(str(p), 0, 0)
    assert list(b.events["ph"]) == ["X", "C", "A", "?"]
    assert list(b.metadata["ph"]) == ["M", "M"]
    assert list(b.events["fname"])[:1] == ["/d/f"] and list(b.events["hostname"])[:3] == ["node7"] * 3
    assert list(b.events["dur"]) == [2, 0, 9, 0] and list(b.events["size"])[2] == 4
    assert b.unresolved_hashes == 0
    # context from a different part of a big plain file: FH/HH first, events ~3 MiB later
    big = tmp_path / "big.pfw"
    filler = '{"id":1,"name":"compute","cat":"app","pid":1,"tid":1,"ts":1,"dur":1,"ph":1}\n' * 45000
    big.write_text("\n".join(lines[:2]) + "\n" + filler + lines[2] + "\n")
    cps = R.build_index(str(big))["checkpoints"]
    assert len(cps) >= 3
    last = R.load_batch(str(big), len(cps) - 1, len(cps) - 1)
    row = last.events[last.events["name"] == "read"]
    assert list(row["fname"]) == ["/d/f"] and list(row["hostname"]) == ["node7"] and last.unresolved_hashes == 0


@pytest.mark.parametrize("fast", ["fast", "slow"])
def test_args_never_overwrite_core_columns(tmp_path, fast):
    """Args named like core columns land in arg_<key>; the core columns keep the record's values.
    "fast": the tracer's own key layout (fast path); "slow": whitespace sends it through simdjson."""
    sep = "" if fast == "fast" else " "
    lines = [
        '{"id":1,"name":"read","cat":"POSIX","pid":5,"tid":6,"ts":100,"dur":7,"ph":"X",'
        + sep
        + '"args":{"dur":999,"ts":-3,"pid":"p","tid":1.5,"name":"other","cat":"C2","ph":"Z","te":42,"ret":10}}',
        '{"id":2,"name":"read","cat":"POSIX","pid":5,"tid":6,"ts":200,"dur":3,"ph":"X",' + sep + '"args":{"ret":4}}',
        # a literal arg_dur and dur in one record share column arg_dur: one value per row, the later wins
        '{"id":3,"name":"w","cat":"POSIX","pid":5,"tid":6,"ts":300,"dur":1,"ph":"X",'
        + sep
        + '"args":{"arg_dur":1,"dur":2}}',
    ]
    p = tmp_path / "c.pfw"
    p.write_text("\n".join(lines) + "\n")
    e = R.load_batch(str(p), 0, 0).events
    assert len(e) == 3
    assert list(e["name"]) == ["read", "read", "w"] and list(e["cat"]) == ["POSIX"] * 3
    assert list(e["ph"]) == ["X"] * 3 and list(e["pid"]) == [5] * 3 and list(e["tid"]) == [6] * 3
    assert list(e["ts"]) == [100, 200, 300] and list(e["dur"]) == [7, 3, 1] and list(e["te"]) == [107, 203, 301]
    assert list(e["size"]) == [10, 4, pd.NA]
    assert list(e["arg_dur"]) == [999, pd.NA, 2]
    assert list(e["arg_ts"]) == [-3, pd.NA, pd.NA] and list(e["arg_te"]) == [42, pd.NA, pd.NA]
    assert list(e["arg_pid"].astype(object))[0] == "p" and float(e["arg_tid"][0]) == 1.5
    assert e["arg_name"][0] == "other" and e["arg_cat"][0] == "C2" and e["arg_ph"][0] == "Z"
    for c in ("arg_dur", "arg_ts", "arg_pid", "arg_tid", "arg_name", "arg_cat", "arg_ph", "arg_te"):
        assert len(e[c]) == 3


def _preload_byte_calls():
    """{event name: rule} for every call the preload records, read from its source: names given
    to byte_io_op/byte_io_at_op/DFT_VEC move args.ret bytes ("ret"), item_io_op ones ret x size ("item");
    every other recording helper (open_op, fd_op, stream_op, emit, ...) moves none ("none")."""
    rules = {"byte_io_op": "ret", "byte_io_at_op": "ret", "DFT_VEC": "ret", "copy_op": "ret", "item_io_op": "item"}
    names = {}
    for src in ("posix.cpp", "stdio.cpp"):
        text = open(os.path.join(ROOT, "src", "preload", src)).read()
        for m in re.finditer(r'\b(\w+_op|emit)\(\s*(?:[^;"()]*?,\s*)?"(\w+)"', text):
            names.setdefault(m.group(2), set()).add(rules.get(m.group(1), "none"))
        for m in re.finditer(r"\b(DFT_VEC|DFT_PATH_STAT|DFT_FD_STAT)\((\w+),", text):
            if m.group(2) != "fn":  # the macro's own definition
                names.setdefault(m.group(2), set()).add(rules.get(m.group(1), "none"))
    assert all(len(r) == 1 for r in names.values()), names  # one rule per event name
    return {n: r.pop() for n, r in names.items()}


def test_byte_rule_covers_every_preload_call(tmp_path):
    names = _preload_byte_calls()
    ret = sorted(n for n, r in names.items() if r == "ret")
    assert {"read", "write", "pread64", "readv", "preadv64v2", "pwritev64v2", "pwritev2"} <= set(ret)
    assert {"copy_file_range", "sendfile", "sendfile64", "splice"} <= set(ret)
    assert sorted(n for n, r in names.items() if r == "item") == ["fread", "fwrite"]
    assert {"lseek", "open", "fseek", "ftell", "mmap"} <= {n for n, r in names.items() if r == "none"}
    p = tmp_path / "calls.pfw"
    with open(p, "w") as f:
        for i, n in enumerate(sorted(names)):
            f.write(
                json.dumps(
                    {
                        "id": i,
                        "name": n,
                        "cat": "POSIX",
                        "pid": 1,
                        "tid": 1,
                        "ts": i,
                        "dur": 1,
                        "ph": "X",
                        "args": {"ret": 100, "size": 3, "count": 100},
                    },
                    separators=(",", ":"),
                )
                + "\n"
            )
    e = R.load_batch(str(p), 0, 0).events
    got = dict(zip(e["name"].astype(str), e["size"]))
    for n, rule in names.items():
        want = {"ret": 100, "item": 300, "none": pd.NA}[rule]
        assert (got[n] is pd.NA) if want is pd.NA else got[n] == want, (n, rule, got[n])


def test_preadv64v2_pwritev64v2_carry_size(tmp_path):
    p = tmp_path / "v2.pfw"
    p.write_text(
        '{"id":1,"name":"preadv64v2","cat":"POSIX","pid":1,"tid":1,"ts":1,"dur":1,"ph":"X","args":{"fname":"/f","count":8192,"iovcnt":2,"offset":0,"ret":8192}}\n'
        '{"id":2,"name":"pwritev64v2","cat":"POSIX","pid":1,"tid":1,"ts":2,"dur":1,"ph":"X","args":{"fname":"/f","count":4096,"iovcnt":1,"offset":0,"ret":4000}}\n'
    )
    e = R.load_batch(str(p), 0, 0).events
    assert list(e["size"]) == [8192, 4000]
    d = S.finish(S.partition_partial(e, IO, (), ())).to_dict()
    assert d["functions"]["preadv64v2"]["size"]["max"] == 8192.0
    assert d["functions"]["pwritev64v2"]["size"]["min"] == 4000.0


def test_cli_warns_on_unresolved_hashes(tmp_path):
    p = tmp_path / "h.pfw"
    p.write_text(
        '{"name":"FH","cat":"dftracer","pid":1,"tid":1,"ph":4,"args":{"name":"/known","value":"a1"}}\n'
        '{"id":1,"name":"read","cat":"POSIX","pid":1,"tid":1,"ts":1,"dur":1,"ph":1,"args":{"fhash":"a1","ret":5}}\n'
        '{"id":2,"name":"read","cat":"POSIX","pid":1,"tid":1,"ts":2,"dur":1,"ph":1,"args":{"fhash":"zz","ret":5}}\n'
        '{"id":3,"name":"read","cat":"POSIX","pid":1,"tid":1,"ts":3,"dur":1,"ph":1,"args":{"fhash":"yy","ret":5}}\n'
    )
    want = "%s: 2 file/host hashes without a FH/HH record" % p
    env = pythonpath_env()
    base = [sys.executable, "-m", "dfanalyzer.cli", "summary", str(p), "--workers", "1", "--no-progress"]
    r = subprocess.run(base + ["--json"], cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["files"] == 1
    assert "warning: " + want in r.stderr
    r = subprocess.run(base, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "Warnings" in r.stdout and "file/host hashes without a FH/HH record" in r.stdout
    assert "warning: " + want in r.stderr
