"""Index trust rules (docs/index.md, "Trust rules"; issue 15): a valid-SQLite index that does not
describe its trace is rejected with a warning and rebuilt; index folders another user controls are
refused; with nothing writable the index stays in memory and no temp file is left behind."""

import gzip
import os
import resource
import signal
import sqlite3
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import gen_traces  # noqa: E402
from conftest import pythonpath_env  # noqa: E402

from dfanalyzer import reader as R  # noqa: E402

N = 1000
OTHER_UID = 4242  # tests run as root here: os.chown simulates another owner


def _lines(n=N):
    return [
        b'{"id":%d,"name":"read","cat":"POSIX","pid":7,"tid":7,"ts":%d,"dur":5,"ph":"X",'
        b'"args":{"fname":"/d/f","ret":4096}}\n' % (i, 1000 + 10 * i)
        for i in range(n)
    ]


def _trace(tmp_path, kind):
    """A trace of N events: kind "member" (several DF members), "inflate" (plain gzip, 2 members)
    or "plain"."""
    d = tmp_path / "traces"
    d.mkdir(exist_ok=True)
    lines = _lines()
    if kind == "member":
        p = d / "m.pfw.gz"
        gen_traces.write_members(str(p), lines, member_bytes=20 << 10)
    elif kind == "inflate":
        p = d / "g.pfw.gz"
        p.write_bytes(gzip.compress(b"".join(lines[:400])) + gzip.compress(b"".join(lines[400:])))
    else:
        p = d / "p.pfw"
        p.write_bytes(b"".join(lines))
    return str(p)


def _events(p, index_dir=None):
    info = R.build_index(p, index_dir)
    n = len(info["checkpoints"])
    return 0 if n == 0 else len(R.load_batch(p, 0, n - 1, index_dir=index_dir).events)


def _sql(ipath, *stmts):
    con = sqlite3.connect(ipath)
    for s in stmts:
        con.execute(s)
    con.commit()
    con.close()


def _assert_rejected(p, reason, index_dir=None):
    info = R.build_index(p, index_dir)
    assert info["rebuilt"] is True
    assert len(info["warnings"]) == 1 and "rejected" in info["warnings"][0], info["warnings"]
    assert reason in info["warnings"][0], info["warnings"]
    again = R.build_index(p, index_dir)  # the rebuilt index is trusted
    assert again["rebuilt"] is False and again["warnings"] == []
    assert _events(p, index_dir) == N


FORGED = {
    "member": [
        ("all checkpoints deleted", ["DELETE FROM checkpoints"], "checkpoints hold 0 lines"),
        (
            "all deleted, totals zeroed",
            ["DELETE FROM checkpoints", "UPDATE metadata SET value = 0 WHERE key IN ('lines', 'uncompressed_bytes')"],
            "is not indexed",
        ),
        ("middle checkpoint deleted", ["DELETE FROM checkpoints WHERE number = 1"], "not 0, 1, 2"),
        (
            "last checkpoint deleted",
            ["DELETE FROM checkpoints WHERE number = (SELECT max(number) FROM checkpoints)"],
            "checkpoints hold",
        ),
        ("size 10^12", ["UPDATE checkpoints SET uncompressed_size = 1000000000000 WHERE number = 0"], "out of range"),
        (
            "compressed size 10^12",
            ["UPDATE checkpoints SET compressed_size = 1000000000000 WHERE number = 0"],
            "outside the file",
        ),
        ("negative offset", ["UPDATE checkpoints SET compressed_offset = -5 WHERE number = 1"], "outside the file"),
        ("wrong kind", ["UPDATE metadata SET value = 'plain' WHERE key = 'kind'"], "kind 'plain'"),
        ("text in an integer field", ["UPDATE checkpoints SET num_lines = 'x' WHERE number = 0"], "not an integer"),
        ("NULL context kind", ["INSERT INTO context VALUES(NULL, '1', 'x')"], "unknown kind"),
        ("other content", ["UPDATE metadata SET value = 1 WHERE key = 'head_crc'"], "checksums differ"),
        ("lines moved", ["UPDATE checkpoints SET first_line = first_line + 1 WHERE number = 1"], "does not start"),
        (
            "trailer size",
            [
                "UPDATE checkpoints SET uncompressed_size = uncompressed_size - 1 WHERE number = 0",
                "UPDATE checkpoints SET uncompressed_offset = uncompressed_offset - 1, block_offset = block_offset - 1 "
                "WHERE number > 0",
                "UPDATE metadata SET value = value - 1 WHERE key = 'uncompressed_bytes'",
            ],
            "differ from the member header",
        ),
    ],
    "inflate": [
        ("wrong kind", ["UPDATE metadata SET value = 'member' WHERE key = 'kind'"], "kind 'member'"),
        ("second member deleted", ["DELETE FROM checkpoints WHERE number = 1"], "checkpoints hold 400 lines"),
        (
            "events > lines",
            [
                "UPDATE metadata SET value = 1 WHERE key = 'stats_scanned'",
                "UPDATE metadata SET value = 5000 WHERE key = 'events'",
            ],
            "more events",
        ),
    ],
    "plain": [
        ("wrong kind", ["UPDATE metadata SET value = 'inflate' WHERE key = 'kind'"], "kind 'inflate'"),
        (
            "checkpoint shifted",
            [
                "UPDATE checkpoints SET compressed_offset = compressed_offset + 3, "
                "uncompressed_offset = uncompressed_offset + 3 WHERE number = 0"
            ],
            "outside the file",
        ),
        (
            "all deleted, totals zeroed",
            ["DELETE FROM checkpoints", "UPDATE metadata SET value = 0 WHERE key IN ('lines', 'uncompressed_bytes')"],
            "cover 0 of",
        ),
    ],
}


@pytest.mark.parametrize(
    "kind,case,stmts,reason",
    [(k, c, s, r) for k, cases in FORGED.items() for c, s, r in cases],
    ids=[f"{k}-{c}" for k, cases in FORGED.items() for c, _, _ in cases],
)
def test_forged_index_rejected_and_rebuilt(tmp_path, kind, case, stmts, reason):
    p = _trace(tmp_path, kind)
    info = R.build_index(p)
    if kind == "member":
        assert len(info["checkpoints"]) >= 3
    assert _events(p) == N
    _sql(info["index_path"], *stmts)
    _assert_rejected(p, reason)


def test_stale_index_rebuilt_without_warning(tmp_path):
    p = _trace(tmp_path, "member")
    R.build_index(p)
    with open(p, "ab") as f:
        f.write(gen_traces.gzip_member(b"".join(_lines(3))))
    info = R.build_index(p)
    assert info["rebuilt"] and info["warnings"] == [] and info["lines"] == N + 3


def test_version_2_index_with_arg_columns_is_stale_and_rebuilt(tmp_path):
    """Format 3 dropped version 2's arg_columns table: a version-2 index (with that table and
    scan results) is stale, rebuilt without a warning, and scan() works on the new one."""
    assert R._reader.INDEX_FORMAT_VERSION == 3
    p = _trace(tmp_path, "member")
    ipath = R.scan(p)["index_path"]
    _sql(
        ipath,
        "UPDATE metadata SET value = 2 WHERE key = 'format_version'",
        "CREATE TABLE arg_columns(key TEXT PRIMARY KEY, dtype TEXT)",
        "INSERT INTO arg_columns VALUES('ret', 'Int64')",
    )
    info = R.build_index(p)
    assert info["rebuilt"] and info["warnings"] == [] and info["events"] is None
    con = sqlite3.connect(ipath)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    version = con.execute("SELECT value FROM metadata WHERE key = 'format_version'").fetchone()[0]
    con.close()
    assert "arg_columns" not in tables and int(version) == 3
    s = R.scan(p)
    assert s["events"] == N and s["skipped_lines"] == 0 and "arg_columns" not in s
    assert R.build_index(p)["rebuilt"] is False and R.build_index(p)["events"] == N


def test_index_of_another_owner_or_a_symlink_rejected(tmp_path):
    p = _trace(tmp_path, "member")
    ipath = R.build_index(p)["index_path"]
    os.chown(ipath, OTHER_UID, OTHER_UID)
    _assert_rejected(p, "owned by uid 4242")
    os.rename(ipath, ipath + ".real")
    os.symlink(ipath + ".real", ipath)
    _assert_rejected(p, "not a regular file")
    assert not os.path.islink(ipath)


@pytest.mark.parametrize(
    "setup,reason",
    [
        ("other-owner", "owned by uid 4242"),
        ("group-writable", "writable by group or others"),
        ("world-writable", "writable by group or others"),
        ("symlink", "symbolic link"),
        ("parent-other-owner", "owned by another user"),
    ],
)
def test_unsafe_index_dir_refused_index_in_memory(tmp_path, setup, reason):
    p = _trace(tmp_path, "member")
    base = tmp_path / "cache"
    base.mkdir(mode=0o700)
    idir = base / "zindex"
    if setup == "symlink":
        (base / "real").mkdir(mode=0o700)
        os.symlink(base / "real", idir)
    else:
        idir.mkdir(mode=0o700)
    if setup == "other-owner":
        os.chown(idir, OTHER_UID, OTHER_UID)
    elif setup == "group-writable":
        os.chmod(idir, 0o770)
    elif setup == "world-writable":
        os.chmod(idir, 0o777)
    elif setup == "parent-other-owner":
        os.chown(base, OTHER_UID, OTHER_UID)
    assert R.index_path(p, str(idir)) == ""
    info = R.build_index(p, str(idir))
    assert info["in_memory"] and info["index_path"] == ""
    assert len(info["warnings"]) == 1 and "kept in memory" in info["warnings"][0] and reason in info["warnings"][0]
    assert _events(p, str(idir)) == N
    assert sorted(os.listdir(idir)) == [] and sorted(os.listdir(base)) in (["zindex"], ["real", "zindex"])


def test_safe_index_dir_created_private(tmp_path):
    p = _trace(tmp_path, "member")
    idir = tmp_path / "new" / "zindex"
    info = R.build_index(p, str(idir))
    assert not info["in_memory"] and info["warnings"] == [] and info["index_path"].startswith(str(idir))
    assert os.stat(idir).st_mode & 0o777 == 0o700


def _read_only(folder, argv, env):
    """Runs argv with `folder` bind-mounted read-only in a private mount namespace (needs root)."""
    script = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" && exec "$@"'
    return subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script, folder, *argv],
        env=pythonpath_env(env),
        capture_output=True,
        text=True,
        timeout=120,
    )


_LOAD = (
    "import sys; from dfanalyzer import reader as R\n"
    "i = R.build_index(sys.argv[1]); b = R.load_batch(sys.argv[1], 0, len(i['checkpoints']) - 1)\n"
    "print(len(b.events), repr(i['index_path']), i['in_memory'], '|'.join(i['warnings']))\n"
)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a private read-only mount")
def test_read_only_folder_home_unset_never_a_shared_path(tmp_path):
    """HOME unset and a read-only trace folder: the index goes to the passwd home's cache, never to
    a shared fixed path like /tmp/.cache/dftracer/zindex."""
    p = _trace(tmp_path, "member")
    env = {k: v for k, v in os.environ.items() if k not in ("HOME", "XDG_CACHE_HOME", "DFTRACER_INDEX_DIR")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")  # keep the test out of root's real cache
    out = _read_only(os.path.dirname(p), [sys.executable, "-c", _LOAD, p], env)
    assert out.returncode == 0, out.stderr
    events, ipath, in_memory, _ = (out.stdout.strip() + " ").split(" ", 3)
    assert events == str(N) and in_memory == "False"
    assert ipath.startswith(repr(str(tmp_path / "xdg" / "dftracer" / "zindex"))[:-1])
    env.pop("XDG_CACHE_HOME")
    code = "import sys; from dfanalyzer import reader as R; print(R.index_path(sys.argv[1]))"
    out = _read_only(os.path.dirname(p), [sys.executable, "-c", code, p], env)
    assert out.returncode == 0 and not out.stdout.startswith("/tmp/"), out.stdout + out.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a private read-only mount")
def test_read_only_folder_and_no_writable_cache_in_memory(tmp_path):
    """Nothing writable (trace folder and home both read-only): an in-memory index, exact events,
    a warning, nothing written."""
    p = _trace(tmp_path, "member")
    folder = os.path.dirname(p)
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "DFTRACER_INDEX_DIR")}
    env["HOME"] = os.path.join(folder, "home")  # inside the read-only mount
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    out = _read_only(folder, [sys.executable, "-c", _LOAD, p], env)
    assert out.returncode == 0, out.stderr
    events, ipath, in_memory, warning = out.stdout.strip().split(" ", 3)
    assert (events, ipath, in_memory) == (str(N), "''", "True")
    assert "kept in memory" in warning
    assert sorted(os.listdir(folder)) == ["m.pfw.gz"]


def test_full_disk_in_memory_no_temp_file(tmp_path):
    """Writes fail (RLIMIT_FSIZE 0 stands in for a full disk): exact events, a warning, rc 0, and
    no temp file left beside the trace."""
    p = _trace(tmp_path, "member")

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))

    code = (
        "import sys; from dfanalyzer import reader as R\n"
        "for _ in range(3):\n"
        "    i = R.build_index(sys.argv[1]); b = R.load_batch(sys.argv[1], 0, len(i['checkpoints']) - 1)\n"
        "    print(len(b.events), i['in_memory'], '|'.join(i['warnings']))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, p],
        env=pythonpath_env(),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit,
    )
    assert out.returncode == 0, out.stderr
    rows = [line.split(" ", 2) for line in out.stdout.splitlines()]
    assert len(rows) == 3
    for events, in_memory, warning in rows:
        assert events == str(N) and in_memory == "True" and "kept in memory" in warning
    assert sorted(os.listdir(os.path.dirname(p))) == ["m.pfw.gz"]
