"""dftracer-merge / -compact / -split / -event-count (issue 23, docs/tools.md).

Truth is computed with plain gzip + json (conftest.read_trace / decompress_members): the
multisets of event lines before and after, events per (host, pid) with the analyzer's host rule
(args.hostname, else the file's first hostname record). Sizes cross gzip member boundaries
(small ``--member-size``) and output file boundaries, with several processes and hosts.
"""

from __future__ import annotations

import collections
import gzip
import json
import os
import subprocess
import sys
import zlib

import pytest
from conftest import decompress_members, read_trace
from test_preload_helpers import compile_c, preload_lib, trace_files, traced_env

from dfanalyzer import DFAnalyzer, reader
from dfanalyzer.trace_tools import compact_main, event_count_main, merge_main, split_main

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import compact_small_files as csf  # noqa: E402
import gen_traces  # noqa: E402


def _lines(path):
    """All non-structural lines (bytes) of a trace file, plain gzip."""
    raw = open(path, "rb").read()
    data, complete = decompress_members(raw) if raw[:2] == b"\x1f\x8b" else (raw, True)
    assert complete, path
    return [ln for ln in data.split(b"\n") if ln.strip() not in (b"", b"[", b"]")]


def _split_kinds(paths):
    """(Counter of event lines, set of metadata lines) over ``paths``."""
    events, meta = collections.Counter(), set()
    for p in paths:
        for ln in _lines(p):
            r = json.loads(ln)
            if r.get("ph") == "M" or r.get("cat") == "dftracer":
                meta.add(ln)
            else:
                events[ln] += 1
    return events, meta


def _members(path):
    """Number of gzip members of ``path``; each must be complete and carry our ``DF`` size
    subfield with its true compressed size (docs/format.md, header layout)."""
    raw = open(path, "rb").read()
    n = 0
    while raw:
        assert raw[:4] == b"\x1f\x8b\x08\x04" and raw[12:14] == b"DF", (path, n)
        size = int.from_bytes(raw[16:20], "little")
        d = zlib.decompressobj(31)
        d.decompress(raw)
        assert d.eof, path
        assert len(raw) - len(d.unused_data) == size, (path, n)
        raw = d.unused_data
        n += 1
    return n


def _outputs(d):
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".pfw.gz"))


def _process_files(d, procs, host="h1", events=400, member_lines=97):
    """One file per pid in ``procs`` (metadata then ``events`` events of two threads), written in
    gzip members of ``member_lines`` lines with the tracer's encoder. Returns the paths."""
    os.makedirs(d, exist_ok=True)
    paths = []
    for pid in procs:
        lines = [b"[\n"]
        lines.append(
            b'{"id":0,"name":"hostname","cat":"dftracer","pid":%d,"tid":%d,"ts":1,"ph":"M",'
            b'"args":{"name":"hostname","value":"%s"}}\n' % (pid, pid, host.encode())
        )
        lines.append(
            b'{"id":1,"name":"process_name","cat":"dftracer","pid":%d,"tid":%d,"ts":1,"ph":"M",'
            b'"args":{"name":"app%d"}}\n' % (pid, pid, pid)
        )
        for i in range(events):
            lines.append(
                b'{"id":%d,"name":"%s","cat":"POSIX","pid":%d,"tid":%d,"ts":%d,"dur":%d,"ph":"X",'
                b'"args":{"fname":"/d/f%d","ret":%d,"count":%d}}\n'
                % (i + 2, (b"read", b"write")[i % 2], pid, pid + i % 2, 1000 * pid + i, 1 + i % 7, i % 5, i, i)
            )
        p = os.path.join(d, "app-%s-%d.pfw.gz" % (host, pid))
        with open(p, "wb") as f:
            for k in range(0, len(lines), member_lines):
                f.write(gen_traces.gzip_member(b"".join(lines[k : k + member_lines])))
        paths.append(p)
    return paths


def _summary(path):
    return DFAnalyzer(path).summary(show=False).to_dict()


# ---------------------------------------------------------------------------------------------


def test_merge_then_split_round_trip(tmp_path):
    """Five processes of one host, many members each: merge into one file (members of 16 KiB),
    split in 7 chunks; every event line comes back exactly once, byte for byte, and every
    metadata line is kept. Each chunk knows the host and process of its events."""
    ins = _process_files(str(tmp_path / "in"), [11, 12, 13, 14, 15], events=900)
    merged = str(tmp_path / "m" / "all.pfw.gz")
    assert merge_main(ins + ["-o", merged, "--member-size", "16KiB"]) == 0
    assert _members(merged) > 20  # crosses member boundaries
    assert os.path.exists(reader.index_path(merged))  # indexed
    ev_in, meta_in = _split_kinds(ins)
    assert sum(ev_in.values()) == 5 * 900
    assert _split_kinds([merged]) == (ev_in, meta_in)
    assert read_trace(merged)  # the layout of docs/format.md ("[" first, JSON object lines)
    out = str(tmp_path / "split")
    assert split_main([merged, "-o", out, "--chunks", "7", "--member-size", "8KiB"]) == 0
    chunks = _outputs(out)
    assert len(chunks) == 7
    assert all(_members(c) > 1 for c in chunks)
    ev_out, meta_out = _split_kinds(chunks)
    assert ev_out == ev_in and meta_out == meta_in
    counts = [sum(_split_kinds([c])[0].values()) for c in chunks]
    assert counts == [643] * 6 + [4500 - 6 * 643]
    for c in chunks:  # each chunk carries the hostname record of every process it holds
        recs = read_trace(c)
        pids = {r["pid"] for r in recs if r.get("ph") == "X"}
        assert pids <= {r["pid"] for r in recs if r.get("name") == "hostname"}
    assert _summary(str(tmp_path / "in")) == _summary(merged) == _summary(out)


def test_by_pid_and_hosts_with_colliding_pids(tmp_path, dask_client):
    """Two hosts with the same pids: one merged file gives every event its host (args.hostname
    added only to the second host's events); --by-pid gives one file per (host, pid) whose lines
    are the inputs' own (the second host's with that added key)."""
    a = _process_files(str(tmp_path / "in"), [7, 8], host="alpha", events=300)
    b = _process_files(str(tmp_path / "in"), [7, 8], host="beta", events=300)
    merged = str(tmp_path / "all.pfw.gz")
    assert merge_main(a + b + ["-o", merged, "--member-size", "8KiB"]) == 0
    recs = [r for r in read_trace(merged) if r.get("ph") == "X"]
    assert len(recs) == 1200
    hosts = collections.Counter((r["args"].get("hostname", "alpha"), r["pid"]) for r in recs)
    assert hosts == {("alpha", 7): 300, ("alpha", 8): 300, ("beta", 7): 300, ("beta", 8): 300}
    ev = DFAnalyzer(merged, client=dask_client).events.compute(scheduler=dask_client)
    got = collections.Counter(zip(ev["hostname"].astype(str), ev["pid"].astype(int)))
    assert got == hosts
    assert _summary(str(tmp_path / "in")) == _summary(merged)
    # by process, from the merged file: back to the inputs' lines
    out = str(tmp_path / "bypid")
    assert merge_main([merged, "-o", out, "--by-pid"]) == 0
    files = _outputs(out)
    assert [os.path.basename(f) for f in files] == [
        "trace-alpha-7.pfw.gz",
        "trace-alpha-8.pfw.gz",
        "trace-beta-7.pfw.gz",
        "trace-beta-8.pfw.gz",
    ]
    for f, src in zip(files, a):
        assert _split_kinds([f]) == _split_kinds([src]), f
    for f, src in zip(files[2:], b):  # the beta events keep the host the merge gave them
        got_ev, got_meta = _split_kinds([f])
        src_ev, src_meta = _split_kinds([src])
        assert got_meta == src_meta
        plain = collections.Counter()
        for ln, n in got_ev.items():
            r = json.loads(ln)
            assert r["args"].pop("hostname") == "beta"
            plain[json.dumps(r, separators=(",", ":")).encode()] += n
        assert plain == src_ev
    assert _summary(out) == _summary(str(tmp_path / "in"))


def test_compact_20000_small_files_same_summary(tmp_path):
    """The issue's requirement at its size: 20,000 one-process files (4 hosts with colliding
    pids, plain zlib gzip) compacted into at most 64 files of about 64 KiB; the summary and the
    events per (host, pid) (plain gzip + json) are identical. benchmarks/compact_small_files.py
    is the same run with timings."""
    small, out = str(tmp_path / "small"), str(tmp_path / "compact")
    csf.write_small_files(small, 20000)
    assert compact_main([small, "-o", out, "--size", "64KiB", "--member-size", "16KiB", "--no-index"]) == 0
    outs = _outputs(out)
    assert 8 <= len(outs) <= 64
    assert not [f for f in os.listdir(out) if f.startswith(".")]  # no temporary left
    # truth from the generator's own arithmetic: file i holds 1 + i % 5 events of (node i % 4, 1000 + i // 4)
    truth = collections.Counter({("node%d" % (i % 4), 1000 + i // 4): 1 + i % 5 for i in range(20000)})
    assert sum(truth.values()) == 60000
    per_file = [csf.plain_counts([o]) for o in outs]  # plain gzip + json over the outputs
    assert sum(per_file, collections.Counter()) == truth
    # ordered by process, and each small process file whole in one output
    assert sum(len(c) for c in per_file) == len(truth)
    assert all(_members(o) >= 2 for o in outs[:-1])
    assert _summary(small) == _summary(out)


def test_real_traced_program_round_trip(tmp_path):
    """A preload trace of a real program and its forked child (32 KiB members): merged, then
    split by size; the event lines are the tracer's, each exactly once."""
    exe = compile_c("io_loop_fork", str(tmp_path))
    data = tmp_path / "data"
    data.mkdir()
    prefix = str(tmp_path / "run" / "trace")
    env = traced_env(preload_lib(), prefix, str(data), DFTRACER_WRITE_BUFFER_SIZE="32K", DFTRACER_FLUSH_INTERVAL="0")
    subprocess.run([exe, str(data / "input.bin"), "3000"], env=env, check=True, timeout=120)
    files = trace_files(prefix)
    assert len(files) == 2
    ev_in, meta_in = _split_kinds(files)
    assert sum(ev_in.values()) >= 6000
    merged = str(tmp_path / "merged.pfw.gz")
    assert merge_main(files + ["-o", merged]) == 0
    out = str(tmp_path / "split")
    assert split_main([merged, "-o", out, "--size", "32KiB", "--member-size", "64KiB"]) == 0
    chunks = _outputs(out)
    assert len(chunks) >= 3
    assert _split_kinds(chunks) == (ev_in, meta_in)
    assert _summary(str(tmp_path / "run")) == _summary(out)
    # and the per-pid counts agree with dftracer-event-count
    pids = collections.Counter(json.loads(ln)["pid"] for ln in ev_in.elements())
    assert len(pids) == 2


def test_event_count(tmp_path, capsys):
    ins = _process_files(str(tmp_path), [3, 4], events=50)
    assert event_count_main(ins + ["--json", "--by-pid"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["total"] == 100 and [f["events"] for f in doc["files"]] == [50, 50]
    assert [(p["pid"], p["events"]) for p in doc["processes"]] == [(3, 50), (4, 50)]
    assert event_count_main([str(tmp_path / "absent.pfw.gz")]) == 1


# --------------------------------------------------------------------------------------------- errors


def _bad_input(d):
    """A valid file and one with 2 invalid lines among 10 events."""
    good = _process_files(str(d), [1], events=10)[0]
    lines = _lines(good)
    bad = os.path.join(str(d), "bad.pfw.gz")
    body = b"[\n" + b"\n".join(lines[:5] + [b"{not json", b"[1,2]"] + lines[5:]) + b"\n"
    open(bad, "wb").write(gzip.compress(body.replace(b'"pid":1,', b'"pid":2,')))
    return good, bad


def test_invalid_lines_fail_unless_skipped(tmp_path, capsys):
    good, bad = _bad_input(tmp_path / "in")
    out = tmp_path / "out"
    assert merge_main([good, bad, "-o", str(out / "m.pfw.gz")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "2 invalid lines" in err[0] and "--skip-invalid" in err[0], err
    assert not os.listdir(out)  # nothing written, no temporary left
    assert merge_main([good, bad, "-o", str(out / "m.pfw.gz"), "--skip-invalid", "--json"]) == 0
    cap = capsys.readouterr()
    assert "2 invalid lines" in cap.err and json.loads(cap.out)["invalid_lines_dropped"] == 2
    assert json.loads(cap.out)["events"] == 20
    assert sum(_split_kinds([str(out / "m.pfw.gz")])[0].values()) == 20


def test_damaged_member_is_counted(tmp_path, capsys):
    paths = _process_files(str(tmp_path / "in"), [5], events=300, member_lines=50)
    raw = bytearray(open(paths[0], "rb").read())
    second = len(gen_traces.gzip_member(b"".join(b"%s\n" % ln for ln in [b"["] + _lines(paths[0])[:49])))
    raw[second + 40] ^= 0xFF  # inside the second member's deflate data
    open(paths[0], "wb").write(bytes(raw))
    out = str(tmp_path / "m.pfw.gz")
    assert merge_main([paths[0], "-o", out]) == 1
    assert "bytes lost" in capsys.readouterr().err
    assert merge_main([paths[0], "-o", out, "--skip-invalid"]) == 0
    assert sum(_split_kinds([out])[0].values()) == 300 - 50  # the damaged member's 50 events


def test_usage_errors_and_safety(tmp_path, capsys):
    ins = _process_files(str(tmp_path / "in"), [1], events=5)
    out = str(tmp_path / "m.pfw.gz")
    with pytest.raises(SystemExit) as e:
        merge_main(ins)  # no -o
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        compact_main(ins + ["-o", str(tmp_path / "c"), "--size", "lots"])
    assert e.value.code == 2
    assert merge_main(ins + ["-o", out]) == 0
    before = open(out, "rb").read()
    assert merge_main(ins + ["-o", out]) == 2  # exists
    assert "--force" in capsys.readouterr().err
    assert open(out, "rb").read() == before
    assert merge_main(ins + ["-o", ins[0], "--force"]) == 2  # never the input
    assert merge_main([str(tmp_path / "nope.pfw.gz"), "-o", str(tmp_path / "x.pfw.gz")]) == 1
    assert "cannot read" in capsys.readouterr().err
    assert split_main([ins[0], "-o", str(tmp_path / "s"), "--lines", "0"]) == 2


def test_verification_catches_a_lost_event(tmp_path, capsys, monkeypatch):
    """The count check is real: a writer that drops one event fails the command, and nothing
    is left behind."""
    from dfanalyzer import trace_tools

    ins = _process_files(str(tmp_path / "in"), [1, 2], events=20)
    real = trace_tools.OutFile.add_event
    dropped = []

    def lossy(self, rec, metadata):
        if not dropped and rec.ident[1] == 2:
            dropped.append(rec)
            return
        real(self, rec, metadata)

    monkeypatch.setattr(trace_tools.OutFile, "add_event", lossy)
    out = tmp_path / "out"
    assert merge_main(ins + ["-o", str(out / "m.pfw.gz")]) == 1
    err = capsys.readouterr().err
    assert "verification failed: 40 events in, 39 out; host h1 pid 2: 20 in, 19 out" in err
    assert not os.listdir(out)


def test_dftracer_v1_hashes_round_trip(tmp_path):
    """DFTracer v1.0.5 traces (bundled CM1 run: hosts and file names through args.hhash/fhash and
    HH/FH records, no hostname record, a closing "]"): merged then split, every chunk carries the
    hash records its events need, so the analyzer resolves them as in the originals."""
    from conftest import DATA

    cm1 = os.path.join(DATA, "dftracer-v1.0.5-cm1")
    ins = sorted(os.path.join(cm1, f) for f in os.listdir(cm1) if f.endswith(".pfw.gz"))[:6]
    merged = str(tmp_path / "m.pfw.gz")
    assert merge_main(ins + ["-o", merged, "--member-size", "256KiB", "--no-index"]) == 0
    out = str(tmp_path / "split")
    assert split_main([merged, "-o", out, "--chunks", "5", "--member-size", "64KiB", "--no-index"]) == 0
    ev_in, meta_in = _split_kinds(ins)
    assert _split_kinds(_outputs(out)) == (ev_in, meta_in)
    (tmp_path / "orig").mkdir()
    for p in ins:
        os.symlink(p, tmp_path / "orig" / os.path.basename(p))
    s = _summary(str(tmp_path / "orig"))
    assert s["events"] == sum(ev_in.values()) and s["files"] > 0
    assert _summary(out) == s


def test_by_pid_interleaved_processes_bounded_memory(tmp_path, monkeypatch):
    """One file of 30 interleaved processes (and one with metadata only) split by process while
    the outputs may hold only 16 KiB of text together: every process gets its own file with
    exactly its lines, written in many small members."""
    from dfanalyzer import trace_tools

    monkeypatch.setattr(trace_tools, "HOLD_LIMIT", 16 << 10)
    lines = [b"["]
    for pid in list(range(100, 130)) + [999]:
        lines.append(
            b'{"id":0,"name":"hostname","cat":"dftracer","pid":%d,"tid":%d,"ts":1,"ph":"M",'
            b'"args":{"name":"hostname","value":"n1"}}' % (pid, pid)
        )
    for i in range(6000):
        pid = 100 + i % 30
        lines.append(
            b'{"id":%d,"name":"read","cat":"POSIX","pid":%d,"tid":%d,"ts":%d,"dur":2,"ph":"X","args":{"ret":%d}}'
            % (i, pid, pid, 10 + i, i)
        )
    src = tmp_path / "one.pfw.gz"
    src.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    out = str(tmp_path / "bypid")
    assert merge_main([str(src), "-o", out, "--by-pid", "--member-size", "64KiB"]) == 0
    files = _outputs(out)
    assert len(files) == 31
    ev_in, meta_in = _split_kinds([str(src)])
    assert _split_kinds(files) == (ev_in, meta_in)
    for f in files:
        recs = read_trace(f)
        assert len({r["pid"] for r in recs}) == 1
        if "-999." in f:
            assert [r["ph"] for r in recs] == ["M"]
        else:
            assert sum(r["ph"] == "X" for r in recs) == 200
            assert _members(f) >= 2  # spilled before a member was full


def test_indexer_disagreement_fails_and_leaves_nothing(tmp_path, capsys, monkeypatch):
    """The last check is the C++ indexer's own event count of each output: a disagreement fails
    the command and removes the outputs and their indexes."""
    ins = _process_files(str(tmp_path / "in"), [1], events=30)
    real = reader.scan
    monkeypatch.setattr(reader, "scan", lambda p, d=None: dict(real(p, d), events=29))
    out = tmp_path / "out"
    assert merge_main(ins + ["-o", str(out / "m.pfw.gz")]) == 1
    assert "the indexer counts 29 events in the outputs, 30 were read" in capsys.readouterr().err
    assert not os.listdir(out)


def test_compact_cuts_a_large_process_with_its_metadata(tmp_path):
    """Small processes stay whole; a process larger than --size is cut into several files, each
    starting with that process's metadata, so the summary and every event survive."""
    d = str(tmp_path / "in")
    ins = _process_files(d, [1, 2, 3], events=60) + _process_files(d, [4], events=6000, member_lines=500)
    out = str(tmp_path / "c")
    assert compact_main([d, "-o", out, "--size", "16KiB", "--member-size", "8KiB"]) == 0
    outs = _outputs(out)
    assert len(outs) >= 4
    assert _split_kinds(outs) == _split_kinds(ins)
    holders = collections.defaultdict(set)
    for o in outs:
        recs = read_trace(o)
        for r in recs:
            if r.get("ph") == "X":
                holders[r["pid"]].add(o)
        named = {r["pid"] for r in recs if r.get("name") == "hostname"}
        assert {r["pid"] for r in recs if r.get("ph") == "X"} <= named
    assert all(len(holders[p]) == 1 for p in (1, 2, 3)) and len(holders[4]) >= 3
    assert _summary(d) == _summary(out)


def test_overlong_line_is_counted_not_held(tmp_path, capsys, monkeypatch):
    """Binary data without newlines is not held as one line: counted as lost, then skipped."""
    from dfanalyzer import trace_tools

    monkeypatch.setattr(trace_tools, "_MEMBER_HOLD", 1000)
    monkeypatch.setattr(trace_tools, "_READ_BLOCK", 512)
    good = _process_files(str(tmp_path / "in"), [1], events=20)[0]
    lines = _lines(good)
    body = b"[\n" + b"\n".join(lines[:5] + [b"x" * 5000] + lines[5:]) + b"\n"
    bad = tmp_path / "bin.pfw"
    bad.write_bytes(body)
    assert event_count_main([str(bad)]) == 1
    cap = capsys.readouterr()
    assert "a line longer than 1000 bytes" in cap.err and "5001 bytes lost" in cap.err, cap.err
    assert cap.out.splitlines()[0].startswith("20\t")
