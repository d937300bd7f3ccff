"""Bad input: truncated/corrupt members, bad lines, empty/foreign files, broken indexes."""

import os
import sqlite3
import sys
import zlib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import gen_traces  # noqa: E402

from dfanalyzer import reader as R  # noqa: E402


def _ev(i, name="read", extra=""):
    return (
        '{"id":%d,"name":"%s","cat":"POSIX","pid":1,"tid":1,"ts":%d,"dur":2,"ph":"X",'
        '"args":{"fname":"/f","ret":4%s}}\n' % (i, name, 1000 + i, extra)
    ).encode()


def _members(path, groups):
    """Writes one member per group of lines; returns list of (offset, bytes)."""
    out, off = [], 0
    with open(path, "wb") as f:
        for g in groups:
            m = gen_traces.gzip_member(b"".join(g))
            f.write(m)
            out.append((off, m))
            off += len(m)
    return out


def test_truncated_final_member(tmp_path):
    p = str(tmp_path / "t.pfw.gz")
    groups = [
        [b"[\n"] + [_ev(i) for i in range(100)],
        [_ev(i) for i in range(100, 200)],
        [_ev(i) for i in range(200, 300)],
    ]
    ms = _members(p, groups)
    cut = len(ms[2][1]) // 2
    with open(p, "r+b") as f:
        f.truncate(ms[2][0] + cut)
    # what a decoder can still recover from the cut member
    d = zlib.decompressobj(-15)  # the raw deflate of a cut member: what a decoder can still recover
    part = d.decompress(ms[2][1][32:cut])
    whole = part[: part.rfind(b"\n") + 1]
    idx = R.build_index(p)
    assert idx["truncated_bytes"] == len(b"".join(groups[2])) - len(whole)
    b = R.load_batch(p, 0, len(idx["checkpoints"]) - 1)
    assert len(b.events) == 200 + whole.count(b"\n")
    trunc = [w for w in b.warnings if "cut short" in w]
    assert len(trunc) == 1 and p in trunc[0] and ("%d bytes dropped" % idx["truncated_bytes"]) in trunc[0]


def test_corrupt_middle_member(tmp_path):
    p = str(tmp_path / "c.pfw.gz")
    groups = [
        [b"[\n"] + [_ev(i) for i in range(50)],
        [_ev(i) for i in range(50, 130)],
        [_ev(i) for i in range(130, 170)],
    ]
    ms = _members(p, groups)
    off, m = ms[1]
    with open(p, "r+b") as f:
        f.seek(off + 32 + (len(m) - 40) // 2)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0x5A]))
    idx = R.build_index(p)
    b = R.load_batch(p, 0, len(idx["checkpoints"]) - 1)
    assert len(b.events) == 90
    assert b.lost_lines == 80 and b.lost_bytes == len(b"".join(groups[1]))
    assert any("80 lines" in w and "corrupt" in w for w in b.warnings)


def test_corrupt_member_header_resyncs(tmp_path):
    p = str(tmp_path / "h.pfw.gz")
    groups = [[b"[\n"] + [_ev(i) for i in range(10)], [_ev(i) for i in range(10, 30)], [_ev(i) for i in range(30, 40)]]
    ms = _members(p, groups)
    with open(p, "r+b") as f:
        f.seek(ms[1][0])
        f.write(b"\x00\x00\x00")  # destroy the magic
    idx = R.build_index(p)
    assert idx["lost_bytes"] == len(ms[1][1])
    b = R.load_batch(p, 0, len(idx["checkpoints"]) - 1)
    assert len(b.events) == 20 and b.lost_bytes == len(ms[1][1])


def test_bad_lines_skipped_and_counted(tmp_path):
    p = tmp_path / "bad.pfw"
    p.write_bytes(
        b"[\n"
        + _ev(1)
        + b'{"name":"x","ts":\n'
        + b'{"cat":"a","ts":5}\n'
        + b'{"name":"y","ts":"abc"}\n'
        + b'{"name":7,"ts":5}\n'
        + b"not json\n"
        + b"\n"
        + _ev(2)
        + b"]\n"
    )
    b = R.load_batch(str(p), 0, 0)
    assert len(b.events) == 2 and b.skipped_lines == 5
    assert R.scan(str(p))["skipped_lines"] == 5


def test_non_utf8_replaced_row_kept(tmp_path):
    p = tmp_path / "u.pfw"
    p.write_bytes(
        b'{"name":"open","cat":"POSIX","pid":1,"tid":1,"ts":10,"dur":1,"ph":"X",'
        b'"args":{"fname":"/data/\xff\xfeabc","ret":3}}\n' + _ev(2)
    )
    b = R.load_batch(str(p), 0, 0)
    assert len(b.events) == 2 and b.skipped_lines == 0
    assert b.events["fname"].iloc[0] == "/data/\ufffd\ufffdabc"


@pytest.mark.parametrize("content", [b"", b"[", b"[\n", b"[\n]\n"])
def test_empty_and_bracket_only(tmp_path, content):
    for name, data in (("e.pfw", content), ("e.pfw.gz", gen_traces.gzip_member(content) if content else b"")):
        p = tmp_path / name
        p.write_bytes(data)
        idx = R.build_index(str(p))
        # plain: an unterminated last line counts (like sed); members count '\n' (design.md)
        tail = 1 if name == "e.pfw" and content and not content.endswith(b"\n") else 0
        assert idx["lines"] == content.count(b"\n") + tail
        if idx["checkpoints"]:
            b = R.load_batch(str(p), 0, len(idx["checkpoints"]) - 1)
            assert len(b.events) == 0 and b.skipped_lines == 0
        else:
            with pytest.raises(IndexError):
                R.load_batch(str(p), 0, 0)


def test_non_gzip_named_gz(tmp_path):
    p = tmp_path / "fake.pfw.gz"
    p.write_bytes(b"this is not gzip\n")
    with pytest.raises(OSError, match="not a gzip file"):
        R.build_index(str(p))


def test_missing_file(tmp_path):
    with pytest.raises(OSError):
        R.build_index(str(tmp_path / "nope.pfw.gz"))


def test_stale_corrupt_foreign_index_rebuilt(tmp_path):
    p = str(tmp_path / "s.pfw")
    with open(p, "wb") as f:
        f.write(_ev(1) + _ev(2))
    i1 = R.build_index(p)
    assert i1["rebuilt"] and i1["lines"] == 2
    assert R.build_index(p)["rebuilt"] is False
    with open(p, "ab") as f:  # stale: size/mtime changed
        f.write(_ev(3))
    i2 = R.build_index(p)
    assert i2["rebuilt"] and i2["lines"] == 3
    ipath = i2["index_path"]
    with open(ipath, "wb") as f:  # not SQLite
        f.write(b"garbage" * 100)
    assert R.build_index(p)["rebuilt"]
    con = sqlite3.connect(ipath)  # index of another file version
    con.execute("UPDATE metadata SET value = 'x' WHERE key = 'trace_path'")
    con.commit()
    con.close()
    i3 = R.build_index(p)
    assert i3["rebuilt"] and len(R.load_batch(p, 0, 0).events) == 3
    con = sqlite3.connect(ipath)  # corrupt schema
    con.execute("DROP TABLE checkpoints")
    con.commit()
    con.close()
    assert R.build_index(p)["rebuilt"]


def test_index_schema_and_index_dir(tmp_path):
    paths = gen_traces.generate(str(tmp_path / "t"), 3000, files=1, fmt="member", member_bytes=32 << 10)
    idir = str(tmp_path / "idx")
    info = R.build_index(paths[0], index_dir=idir)
    assert info["index_path"].startswith(idir) and os.path.exists(info["index_path"])
    assert not os.path.exists(paths[0] + ".zindex")
    con = sqlite3.connect(info["index_path"])
    meta = dict(con.execute("SELECT key, value FROM metadata"))
    assert meta["kind"] == "member" and int(meta["size"]) == os.path.getsize(paths[0])
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    n = con.execute("SELECT count(*), sum(num_lines) FROM checkpoints").fetchone()
    assert n == (len(info["checkpoints"]), 3001)
    con.close()
