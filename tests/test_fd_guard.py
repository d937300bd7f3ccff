"""The trace descriptor stays out of the application's way (docs/preload.md, "The trace
descriptor"; issue 11, deliverable 4).

An application that closes descriptors it did not open (a daemon's close loop, close_range,
closefrom, os.closerange), dup2/dup3s its own file onto the tracer's number, or closes stdout
before the first event must keep its files byte-identical, and the trace must keep every event:
under the preload (C and Python programs) and with the C and Python APIs alone (no wrappers; the
writer's check before each chunk protects them). Every run has RLIMIT_NOFILE 1024 (the common
default: the trace descriptor is then 1023, inside the daemon's 3..1023 loop) and 4 KiB chunks,
so the trace file is open, and written many times, before and after the application's call.
The writer thread keeps its own descriptor table (docs/perf/preload.md, round 5): its trace
descriptor is not in the application's table at all, so none of these calls can reach it, and
the application's table holds one only when an application thread writes (the flush at exit).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
from collections import Counter

import pytest
from conftest import ROOT, pythonpath_env
from test_preload_helpers import C_SOURCES, compile_c, preload_lib, read_trace, trace_files, traced_env

N = 200  # preads per phase and 4 KiB blocks per output file
BLOCK = 4096
C_MODES = ["daemon", "close_range", "closefrom", "dup2", "dup3", "stdout"]


@pytest.fixture(scope="module")
def lib():
    return preload_lib()


@pytest.fixture(scope="module")
def bins(tmp_path_factory, lib):
    """fd_guard built plain (for the preload) and against the C API (libdftracer_core)."""
    d = str(tmp_path_factory.mktemp("bin"))
    libdir = os.path.dirname(lib)
    api = os.path.join(d, "fd_guard_api")
    subprocess.run(
        [
            "gcc",
            "-O1",
            "-Wall",
            "-DFD_GUARD_API",
            "-I",
            os.path.join(ROOT, "include"),
            "-o",
            api,
            os.path.join(C_SOURCES, "fd_guard.c"),
            "-L",
            libdir,
            "-ldftracer_core",
            f"-Wl,-rpath,{libdir}",
        ],
        check=True,
    )
    return {"preload": compile_c("fd_guard", d), "api": api}


@pytest.fixture
def dirs(tmp_path):
    data = tmp_path / "data"
    (data / "out").mkdir(parents=True)
    (data / "f.bin").write_bytes(os.urandom(16 * BLOCK))
    (tmp_path / "trace").mkdir()
    return data, str(tmp_path / "trace" / "t")


def limit_fds():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))


def api_env(prefix: str, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not (k.startswith("DFTRACER_") or k == "LD_PRELOAD")}
    env.update(DFTRACER_ENABLE="1", DFTRACER_LOG_FILE=prefix, DFTRACER_DATA_DIR="all")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run(cmd, env, reopened: bool = False):
    """Runs with DFTRACER_LOG_LEVEL=INFO; reopened: whether the writer must have found its
    descriptor closed or replaced and re-opened the file. Never now: the writer's descriptor is
    in the writer thread's own table (with the preload the wrappers also keep the application
    off the application-table descriptor of an application thread's flush)."""
    env = dict(env, DFTRACER_LOG_LEVEL="INFO", DFTRACER_WRITE_BUFFER_SIZE="4096")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, preexec_fn=limit_fds)
    assert r.returncode == 0, r.stderr
    assert "got fd" not in r.stderr, r.stderr
    if "fd_guard" in cmd[0]:  # the C program reports the descriptor it found (RLIMIT_NOFILE 1024)
        assert "fd_guard: trace fd 1023 cloexec 1 table writer\n" in r.stderr, r.stderr
    # re-opened on 1023 again, or on 511 when the application holds 1023 now (dup2 modes)
    assert ("re-opened as 1023" in r.stderr or "re-opened as 511" in r.stderr) == reopened, r.stderr
    assert "warning" not in r.stderr, r.stderr
    return r


def check_app_files(out_dir, mode: str):
    """a.bin / b.bin (and stdout's out.log) are exactly what the application wrote."""
    expect_a = b"".join(bytes([ord("a") + i % 26]) * BLOCK for i in range(N))
    expect_b = b"".join(bytes([ord("A") + i % 26]) * BLOCK for i in range(N))
    assert (out_dir / "a.bin").read_bytes() == expect_a
    assert (out_dir / "b.bin").read_bytes() == expect_b
    if mode == "stdout":
        assert (out_dir / "out.log").read_text() == "".join(f"line {i}\n" for i in range(N))


def one_trace(prefix: str) -> list[dict]:
    files = trace_files(prefix)
    assert len(files) == 1, files
    return read_trace(files[0])  # every line JSON, gzip members complete


@pytest.mark.parametrize("mode", C_MODES)
def test_c_program_under_preload(lib, bins, dirs, mode):
    data, prefix = dirs
    env = traced_env(lib, prefix, str(data))
    run([bins["preload"], mode, str(data / "f.bin"), str(data / "out"), str(N)], env, reopened=False)
    check_app_files(data / "out", mode)
    evs = [e for e in one_trace(prefix) if e.get("ph") == "X"]
    by = Counter((e["name"], os.path.basename(e["args"].get("fname", ""))) for e in evs)
    assert by[("pread64", "f.bin")] + by[("pread", "f.bin")] == 2 * N
    assert by[("write", "a.bin")] == N
    assert by[("write", "b.bin")] == N
    assert sum(v for (name, f), v in by.items() if f == "f.bin" and name.startswith("open")) == 2
    assert sum(v for (name, f), v in by.items() if f == "b.bin" and name.startswith("open")) == 1


@pytest.mark.parametrize("mode", C_MODES)
def test_c_api_without_preload(bins, dirs, mode):
    data, prefix = dirs
    run([bins["api"], mode, str(data / "f.bin"), str(data / "out"), str(N)], api_env(prefix))
    check_app_files(data / "out", mode)
    names = Counter(e["name"] for e in one_trace(prefix) if e.get("ph") == "X")
    assert names == {"read_block": 2 * N, "write_block": 2 * N}


PY_APP = textwrap.dedent(
    """
    import os, sys, time
    mode, data, out, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    api = os.environ.get("FDG_API") == "1"
    if api:
        from dftracer.python import dftracer, dft_fn
        log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)
        traced = dft_fn("APP").log
    else:
        traced = lambda f: f

    @traced
    def read_block(fd, i):
        assert len(os.pread(fd, 4096, (i % 16) * 4096)) == 4096

    @traced
    def write_block(fd, b):
        assert os.write(fd, b) == 4096

    def reads():
        fd = os.open(data, os.O_RDONLY)
        for i in range(n):
            read_block(fd, i)
        os.close(fd)

    def trace_fd():  # in any thread's table (the writer thread has its own)
        for _ in range(20000):
            for tid in os.listdir("/proc/self/task"):
                try:
                    for name in os.listdir(f"/proc/self/task/{tid}/fd"):
                        p = f"/proc/self/task/{tid}/fd/{name}"  # a non-empty trace: its final descriptor
                        if ".pfw" in os.readlink(p) and os.stat(p).st_size > 0:
                            return int(name)
                except OSError:
                    pass
            time.sleep(0.0005)
        sys.exit("the tracer never opened its trace file")

    reads()
    t = trace_fd()
    fa = None
    if mode == "closerange":
        os.closerange(3, 1 << 16)
    elif mode == "close_loop":
        for fd in range(3, 1024):
            try:
                os.close(fd)
            except OSError:
                pass
    elif mode in ("dup2", "dup3"):
        own = os.open(out + "/a.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        assert os.dup2(own, t, inheritable=(mode == "dup2")) == t  # inheritable=False: dup3
        os.close(own)
        fa = t
    if fa is None:
        fa = os.open(out + "/a.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    fb = os.open(out + "/b.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for i in range(n):
        write_block(fa, bytes([97 + i % 26]) * 4096)
    for i in range(n):
        write_block(fb, bytes([65 + i % 26]) * 4096)
    os.close(fa)
    os.close(fb)
    reads()
    if api:
        log.finalize()
    """
)


@pytest.mark.parametrize("api", [False, True], ids=["preload", "api"])
@pytest.mark.parametrize("mode", ["closerange", "close_loop", "dup2", "dup3"])
def test_python_program(lib, dirs, tmp_path, mode, api):
    data, prefix = dirs
    script = tmp_path / "app.py"
    script.write_text(PY_APP)
    env = api_env(prefix, FDG_API=1) if api else traced_env(lib, prefix, str(data))
    run(
        [sys.executable, str(script), mode, str(data / "f.bin"), str(data / "out"), str(N)],
        pythonpath_env(env),
    )
    check_app_files(data / "out", mode)
    evs = [e for e in one_trace(prefix) if e.get("ph") == "X"]
    if api:
        assert Counter(e["name"] for e in evs) == {"read_block": 2 * N, "write_block": 2 * N}
    else:
        by = Counter((e["name"], os.path.basename(e["args"].get("fname", ""))) for e in evs)
        assert by[("pread64", "f.bin")] + by[("pread", "f.bin")] == 2 * N
        assert by[("write", "a.bin")] == N
        assert by[("write", "b.bin")] == N


PIPE_APP = textwrap.dedent(
    """
    import os, select, sys, time
    data = sys.argv[1]
    r, w = os.pipe()  # before the writer thread exists
    fd = os.open(data, os.O_RDONLY)
    for i in range(64):
        os.pread(fd, 4096, 0)  # traced: the first event starts the writer thread
    me = str(os.getpid())
    for _ in range(4000):
        others = [t for t in os.listdir("/proc/self/task") if t != me]
        if others:
            break
        time.sleep(0.0005)
    assert len(others) == 1, others
    pipe = os.readlink(f"/proc/self/fd/{w}")

    def writer_table():  # (entries, entries naming the pipe); the writer empties its copy at start
        names, held = os.listdir(f"/proc/self/task/{others[0]}/fd"), 0
        for n in names:
            try:
                held += os.readlink(f"/proc/self/task/{others[0]}/fd/{n}") == pipe
            except FileNotFoundError:  # closed meanwhile
                pass
        return names, held

    for _ in range(4000):  # a few µs after the thread starts; 2 s at most
        writer_fds, held = writer_table()
        if not held:
            break
        time.sleep(0.0005)
    os.close(w)  # the application's last write end: the reader must see EOF now
    ready, _, _ = select.select([r], [], [], 5.0)
    eof = bool(ready) and os.read(r, 1) == b""
    print(f"writer-fds {len(writer_fds)} holds-pipe {held} eof {int(eof)}")
    """
)


def test_writer_thread_holds_no_application_descriptor(lib, dirs, tmp_path):
    """The writer thread's table is its own and holds none of the application's files: closing
    the last write end of a pipe gives its reader EOF at once (a shared or copied table would
    keep the pipe open as long as the writer runs)."""
    data, prefix = dirs
    script = tmp_path / "pipe_app.py"
    script.write_text(PIPE_APP)
    env = dict(traced_env(lib, prefix, str(data)), DFTRACER_WRITE_BUFFER_SIZE="4096")
    r = subprocess.run(
        [sys.executable, str(script), str(data / "f.bin")],
        env=pythonpath_env(env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "holds-pipe 0 eof 1\n" in r.stdout, r.stdout + r.stderr
    evs = [e for e in one_trace(prefix) if e.get("ph") == "X" and e["name"] in ("pread", "pread64")]
    assert len(evs) == 64
