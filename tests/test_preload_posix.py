"""LD_PRELOAD interception of POSIX and STDIO calls: counts against strace, args, fd table,
errno, faults (docs/preload.md)."""

from __future__ import annotations

import os
import subprocess

import pytest
from test_preload_helpers import (
    all_events,
    compile_c,
    events_by_pid,
    have_strace,
    plain_env,
    preload_lib,
    read_trace,
    strace_cmd,
    strace_reads,
    trace_files,
    traced_env,
)


@pytest.fixture(scope="module")
def lib():
    return preload_lib()


@pytest.fixture(scope="module")
def prog(tmp_path_factory):
    return compile_c("preload_io", str(tmp_path_factory.mktemp("bin")))


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    (d / "f.bin").write_bytes(os.urandom(100_000))
    return d


def run(cmd, env, **kw):
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, **kw)


def test_dd_reads_match_strace(lib, data, tmp_path):
    assert have_strace()
    f = str(data / "f.bin")
    prefix = str(tmp_path / "out" / "dd")
    os.makedirs(os.path.dirname(prefix))
    env = traced_env(lib, prefix, str(data))
    log = str(tmp_path / "strace.log")
    r = run(strace_cmd(log, env) + ["dd", f"if={f}", "of=/dev/null", "bs=4k"], plain_env(env))
    assert r.returncode == 0, r.stderr
    n_strace, bytes_strace = strace_reads(log, f)
    evs = [e for e in all_events(prefix) if e["name"] in ("read", "pread64") and e["args"]["fname"] == f]
    assert n_strace == 26  # 24 full blocks, one of 1,696 bytes, one at EOF
    assert len(evs) == n_strace
    assert sum(e["args"]["ret"] for e in evs) == bytes_strace == 100_000
    assert all(e["cat"] == "POSIX" and e["args"]["count"] == 4096 for e in evs)


@pytest.mark.parametrize("n", [1, 250, 1000])
def test_pread_program_matches_strace(lib, prog, data, tmp_path, n):
    f = str(data / "f.bin")
    prefix = str(tmp_path / "out" / "pr")
    os.makedirs(os.path.dirname(prefix))
    log = str(tmp_path / "strace.log")
    bs = 4096
    env = traced_env(lib, prefix, str(data))
    r = run(strace_cmd(log, env) + [prog, "pread", f, str(n), str(bs)], plain_env(env))
    assert r.returncode == 0, r.stderr
    expect_bytes = min(n * bs, 100_000)
    assert r.stdout.strip() == f"bytes {expect_bytes}"
    n_strace, bytes_strace = strace_reads(log, f)
    evs = [e for e in all_events(prefix) if e["name"] in ("read", "pread", "pread64") and e["args"]["fname"] == f]
    assert len(evs) == n_strace == n
    assert sum(e["args"]["ret"] for e in evs) == bytes_strace == expect_bytes
    assert [e["args"]["offset"] for e in evs] == [i * bs for i in range(n)]


def test_event_without_metadata_has_no_args(lib, prog, data, tmp_path):
    prefix = str(tmp_path / "out" / "nm")
    os.makedirs(os.path.dirname(prefix))
    r = run([prog, "pread", str(data / "f.bin"), "10", "4096"], traced_env(lib, prefix, str(data), metadata=False))
    assert r.returncode == 0
    evs = [e for e in all_events(prefix) if e["cat"] == "POSIX"]
    assert [e["name"] for e in evs] == ["open"] + ["pread"] * 10 + ["close"]
    for e in evs:
        assert set(e) - {"id"} == {"name", "cat", "pid", "tid", "ts", "dur", "ph"}, e


def test_fd_table_follows_dup_and_close(lib, prog, data, tmp_path):
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "u.bin").write_bytes(b"u" * 10)
    f = str(data / "f.bin")
    prefix = str(tmp_path / "out" / "fd")
    os.makedirs(os.path.dirname(prefix))
    r = run([prog, "fdtable", f, str(other / "u.bin")], traced_env(lib, prefix, str(data)))
    assert r.returncode == 0, r.stdout + r.stderr
    fd, d1, d2, d3, d4, d5, u = map(int, r.stdout.split()[1:])
    evs = all_events(prefix)
    preads = [e for e in evs if e["name"] == "pread"]
    # Exactly the five reads through the dups are traced, in order, all on f.
    assert [(e["args"]["fd"], e["args"]["offset"]) for e in preads] == [(d1, 0), (d2, 1), (d3, 2), (d4, 3), (d5, 4)]
    assert {e["args"]["fname"] for e in preads} == {f}
    names = [e["name"] for e in evs if e["cat"] == "POSIX"]
    assert names.count("dup") == 1 and names.count("dup3") == 1 and names.count("fcntl") == 2
    assert names.count("dup2") == 1  # dup2(fd, 40); dup2(u, ...) is untraced
    assert names.count("open") == 2  # f twice; u is outside the data dir
    assert names.count("close") == 6  # fd, d1..d5; t was replaced by dup2(u, t) before its close
    assert all("u.bin" not in e["args"].get("fname", "") for e in evs)
    assert {e["args"]["ret"] for e in evs if e["name"] in ("dup", "dup2", "dup3", "fcntl")} == {d1, d2, d3, d4, d5}


def test_errno_and_results_identical(lib, prog, data, tmp_path):
    args = [prog, "errno", str(data / "f.bin"), str(data / "missing.bin")]
    plain = run(args, dict(os.environ))
    prefix = str(tmp_path / "out" / "er")
    os.makedirs(os.path.dirname(prefix))
    traced = run(args, traced_env(lib, prefix, str(data)))
    assert plain.returncode == traced.returncode == 0
    assert traced.stdout == plain.stdout
    lines = dict(line.split(" ", 1) for line in traced.stdout.splitlines())
    assert lines["open_missing"] == "-1 errno 2"  # ENOENT
    assert lines["read_ok"] == "8 errno 4321"  # success leaves errno untouched
    assert lines["open_ok"] == "errno 1234"
    evs = all_events(prefix)
    missing = [e for e in evs if e["name"] == "open" and e["args"]["fname"].endswith("missing.bin")]
    assert [e["args"]["ret"] for e in missing] == [-1, 3, -1]  # missing, O_EXCL create, O_EXCL again


def test_output_and_exit_status_unchanged(lib, prog, data, tmp_path):
    args = [prog, "output", str(data / "f.bin")]
    plain = run(args, dict(os.environ))
    prefix = str(tmp_path / "out" / "o")
    os.makedirs(os.path.dirname(prefix))
    traced = run(args, traced_env(lib, prefix, "all"))
    assert plain.returncode == traced.returncode == 7
    assert (traced.stdout, traced.stderr) == (plain.stdout, plain.stderr)
    readv = [e for e in all_events(prefix) if e["name"] == "readv"]
    assert [(e["args"]["count"], e["args"]["ret"], e["args"]["iovcnt"]) for e in readv] == [(30, 30, 2)]
    # "all" never records /proc, /sys, /dev nor the trace itself
    for e in all_events(prefix):
        fn = e.get("args", {}).get("fname", "")
        assert not fn.startswith(("/proc", "/sys", "/dev")) and ".pfw" not in fn


def test_stdio_events(lib, prog, data, tmp_path):
    f = str(data / "s.txt")
    prefix = str(tmp_path / "out" / "st")
    os.makedirs(os.path.dirname(prefix))
    r = run([prog, "stdio", f], traced_env(lib, prefix, str(data)))
    assert r.stdout.strip() == "fwrite 10 fread 25 ftell 100 ftello 8"
    evs = [e for e in all_events(prefix) if e["cat"] == "STDIO"]
    assert [e["name"] for e in evs] == [
        "fopen",
        "fwrite",
        "fflush",
        "fseek",
        "fread",
        "ftell",
        "fseeko",
        "ftello",
        "fclose",
    ]
    by = {e["name"]: e["args"] for e in evs}
    assert by["fwrite"]["size"] == 10 and by["fwrite"]["count"] == 10 and by["fwrite"]["ret"] == 10
    assert by["fread"]["size"] == 4 and by["fread"]["count"] == 30 and by["fread"]["ret"] == 25
    assert by["fread"]["ret"] * by["fread"]["size"] == 100
    assert by["ftell"]["ret"] == 100 and by["fseeko"]["offset"] == 8
    assert {a["fname"] for a in by.values()} == {f}


def test_threads_exact_counts(lib, prog, data, tmp_path):
    prefix = str(tmp_path / "out" / "th")
    os.makedirs(os.path.dirname(prefix))
    r = run([prog, "threads", str(data / "f.bin"), "8", "2000"], traced_env(lib, prefix, str(data)))
    assert r.returncode == 0
    evs = [e for e in all_events(prefix) if e["name"] == "pread"]
    assert len(evs) == 16_000
    assert len({e["tid"] for e in evs}) == 8
    assert sum(e["args"]["ret"] for e in evs) == 16_000 * 64


def test_signal_handler_io(lib, prog, data, tmp_path):
    prefix = str(tmp_path / "out" / "sg")
    os.makedirs(os.path.dirname(prefix))
    r = run([prog, "signals", str(data / "f.bin"), "20000"], traced_env(lib, prefix, str(data)))
    assert r.returncode == 0, r.stderr
    _, n_main, _, n_handler = r.stdout.split()
    evs = [e for e in all_events(prefix) if e["name"] == "pread"]
    main = [e for e in evs if e["args"]["count"] == 32]
    handler = [e for e in evs if e["args"]["count"] == 16]
    assert len(main) == int(n_main) == 20000
    # A handler that interrupts the tracer's own recording passes through untraced; every
    # other handler read is recorded.
    assert len(handler) <= int(n_handler)


def test_app_signal_handlers_see_their_own_actions(lib, prog, data, tmp_path):
    """The program's SIGTERM handlers, set after the tracer's, see what they would see without
    it (read-back, flags, mask, siginfo, SA_RESETHAND, signal()'s old value), and the tracer has
    written every buffered event before a handler runs: the second one SIGKILLs the process and no
    read is lost (no timed flush: DFTRACER_FLUSH_INTERVAL=0)."""
    prefix = str(tmp_path / "out" / "sc")
    os.makedirs(os.path.dirname(prefix))
    cmd = [prog, "sigchain", str(data / "f.bin"), "300"]
    env = traced_env(lib, prefix, str(data), DFTRACER_FLUSH_INTERVAL=0)
    plain = run(cmd, plain_env(env))
    traced = run(cmd, env)
    assert plain.returncode == traced.returncode == -9, (plain.stderr, traced.stderr)
    assert plain.stdout.splitlines() == [
        "before default",
        "readback 1 flags 1 usr1 1",
        "handler signo 15 term 1 int 0 usr1 1",
        "after default",
        "signal_prev default",
    ]
    assert traced.stdout == plain.stdout
    assert len([e for e in all_events(prefix) if e["name"] == "pread"]) == 600


def test_relative_paths_and_dirfds(lib, prog, data, tmp_path):
    (data / "sub").mkdir()
    (data / "sub" / "g.bin").write_bytes(b"g" * 8)
    prefix = str(tmp_path / "out" / "rel")
    os.makedirs(os.path.dirname(prefix))
    r = run([prog, "relative", str(data)], traced_env(lib, prefix, str(data)), cwd=str(tmp_path))
    assert r.stdout.strip() == "ok", r.stdout
    evs = all_events(prefix)
    reads = [(e["args"]["fname"], e["args"]["ret"]) for e in evs if e["name"] == "read"]
    g = str(data / "sub" / "g.bin")
    assert reads == [(str(data / "f.bin"), 4), (g, 4), (g, 2)]
    assert [e["args"]["fname"] for e in evs if e["name"] == "chdir"] == [str(data)]
    assert [e["args"]["fname"] for e in evs if e["name"] == "opendir"] == [str(data / "sub")]


def test_data_dir_is_component_aware(lib, prog, tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d2").mkdir()
    (tmp_path / "d" / "a.bin").write_bytes(b"a" * 4096)
    (tmp_path / "d2" / "a.bin").write_bytes(b"a" * 4096)
    prefix = str(tmp_path / "out" / "cc")
    os.makedirs(os.path.dirname(prefix))
    env = traced_env(lib, prefix, str(tmp_path / "d"))
    for sub in ("d", "d2"):
        assert run([prog, "pread", str(tmp_path / sub / "a.bin"), "3", "1024"], env).returncode == 0
    files = {e["args"]["fname"] for e in all_events(prefix) if "fname" in e.get("args", {})}
    assert files == {str(tmp_path / "d" / "a.bin")}


def test_mmap_family(lib, prog, data, tmp_path):
    prefix = str(tmp_path / "out" / "mm")
    os.makedirs(os.path.dirname(prefix))
    r = run([prog, "mmap", str(data / "f.bin")], traced_env(lib, prefix, str(data)))
    assert r.stdout.strip() == "ok"
    evs = [e for e in all_events(prefix) if e["name"] in ("mmap", "mmap64", "msync", "munmap")]
    assert [e["name"] for e in evs] == ["mmap", "msync", "munmap"]
    assert {e["args"]["fname"] for e in evs} == {str(data / "f.bin")}
    assert all(e["args"]["count"] == 4096 for e in evs)


def test_fork_exec_loop_no_leak(lib, prog, data, tmp_path):
    prefix = str(tmp_path / "out" / "fe")
    os.makedirs(os.path.dirname(prefix))
    n = 30
    r = run([prog, "forkexec", str(n), "/bin/true", str(data / "f.bin")], traced_env(lib, prefix, str(data)))
    assert r.returncode == 0, r.stdout + r.stderr
    _, before, _, after = r.stdout.split()
    assert before == after
    by_pid = events_by_pid(prefix)  # every file parses, one pid per file
    parent = [p for p, evs in by_pid.items() if any(e["name"] == "fork" for e in evs)]
    assert len(parent) == 1
    pevs = by_pid[parent[0]]
    assert sum(e["name"] == "fork" for e in pevs) == n
    assert sum(e["name"] == "open" for e in pevs) == n
    children = {e["args"]["ret"] for e in pevs if e["name"] == "fork"}
    # each forked child traced its read of the inherited fd, then its exec
    for c in children:
        names = [e["name"] for e in by_pid.get(c, [])]
        assert names.count("read") == 1 and "execl" in names, (c, names)


def test_vfork_exec_keeps_preload_env(lib, prog, data, tmp_path):
    prefix = str(tmp_path / "out" / "vf")
    os.makedirs(os.path.dirname(prefix))
    r = run([prog, "vforkenv", "/usr/bin/env"], traced_env(lib, prefix, str(data)))
    assert r.returncode == 0
    env_lines = [line for line in r.stdout.splitlines() if "=" in line]
    child_env = dict(line.split("=", 1) for line in env_lines)
    assert child_env["ONLY"] == "1"
    assert child_env["LD_PRELOAD"] == f"{lib}:/nonexistent/libother.so"
    assert child_env["DFTRACER_ENABLE"] == "1" and child_env["DFTRACER_DATA_DIR"] == str(data)
    assert "child_status 0" in r.stdout
    parent = [evs for evs in events_by_pid(prefix).values() if any(e["name"] == "vfork" for e in evs)]
    assert len(parent) == 1


def test_disabled_creates_nothing(lib, prog, data, tmp_path):
    prefix = str(tmp_path / "out" / "off")
    os.makedirs(os.path.dirname(prefix))
    env = traced_env(lib, prefix, str(data))
    env["DFTRACER_ENABLE"] = "0"
    r = run([prog, "pread", str(data / "f.bin"), "5", "100"], env)
    assert r.returncode == 0 and r.stdout.strip() == "bytes 500"
    assert trace_files(prefix) == []


def test_trace_files_parse(lib, prog, data, tmp_path):
    prefix = str(tmp_path / "out" / "pz")
    os.makedirs(os.path.dirname(prefix))
    run([prog, "pread", str(data / "f.bin"), "100", "512"], traced_env(lib, prefix, str(data)))
    files = trace_files(prefix)
    assert len(files) == 1 and files[0].endswith(".pfw.gz")
    recs = read_trace(files[0])
    assert sum(r.get("name") == "pread" for r in recs) == 100


def test_io_before_main_is_traced(lib, prog, data, tmp_path):
    prefix = str(tmp_path / "out" / "ct")
    os.makedirs(os.path.dirname(prefix))
    f = str(data / "f.bin")
    r = run([prog, "ctor"], traced_env(lib, prefix, str(data), PRELOAD_IO_CTOR_FILE=f))
    assert r.stdout.strip() == "ctor_bytes 7"
    evs = [e for e in all_events(prefix) if e["cat"] == "POSIX"]
    assert [(e["name"], e["args"].get("ret")) for e in evs] == [("open", 3), ("read", 7), ("close", 0)]


def test_python_import_storm_with_threads(lib, tmp_path):
    """dlopen storm: threads importing extension-heavy packages while everything is traced."""
    prog = (
        "import threading, importlib\n"
        "mods = ['numpy', 'json', 'decimal', 'sqlite3', 'ctypes', 'email.mime.text', 'xml.dom.minidom',\n"
        "        'asyncio', 'http.client', 'csv', 'zipfile', 'lzma', 'bz2', 'hashlib', 'ssl', 'pandas']\n"
        "errs = []\n"
        "def imp(m):\n"
        "    try: importlib.import_module(m)\n"
        "    except Exception as e: errs.append((m, repr(e)))\n"
        "ts = [threading.Thread(target=imp, args=(m,)) for m in mods]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "print('errors', errs)\n"
    )
    import sys

    plain = run([sys.executable, "-c", prog], dict(os.environ))
    prefix = str(tmp_path / "out" / "py")
    os.makedirs(os.path.dirname(prefix))
    traced = run([sys.executable, "-c", prog], traced_env(lib, prefix, "all"))
    assert plain.returncode == traced.returncode == 0, traced.stderr
    assert traced.stdout == plain.stdout == "errors []\n"
    evs = all_events(prefix)  # every line parses
    opened = {e["args"]["fname"] for e in evs if e["name"].startswith("open")}
    assert any("/numpy/__pycache__/__init__." in f for f in opened)
    # extension modules come in through dlopen, whose opens are internal to the loader (unseen)
    assert not any(f.endswith(".so") for f in opened)
    assert not any(f.startswith(("/proc/", "/sys/", "/dev/")) for f in opened)


def test_init_preload_alone_enables_and_no_event_process_leaves_no_file(lib, data, tmp_path):
    """DFTRACER_INIT=PRELOAD without DFTRACER_ENABLE traces (unless DFTRACER_ENABLE=0), and a
    process that logs no event (`uname`: only metadata records) leaves no trace file."""
    f = os.path.join(str(data), os.listdir(str(data))[0])
    base = traced_env(lib, "", str(data))
    del base["DFTRACER_ENABLE"]
    prefix = str(tmp_path / "on" / "t")
    r = run(["wc", "-c", f], dict(base, DFTRACER_LOG_FILE=prefix))
    assert r.returncode == 0 and r.stdout.split()[0] == "100000", r.stderr
    evs = all_events(prefix)
    assert len(trace_files(prefix)) == 1
    assert sum(1 for e in evs if e["name"].startswith("open") and e["args"]["fname"] == f) == 1

    off = str(tmp_path / "off" / "t")
    r = run(["wc", "-c", f], dict(base, DFTRACER_LOG_FILE=off, DFTRACER_ENABLE="0"))
    assert r.returncode == 0, r.stderr
    assert trace_files(off) == []

    quiet = str(tmp_path / "quiet" / "t")
    r = run(["uname", "-s"], dict(base, DFTRACER_LOG_FILE=quiet))
    assert r.returncode == 0 and r.stdout.strip() == "Linux", r.stderr
    assert trace_files(quiet) == []
