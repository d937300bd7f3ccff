"""Every data byte of shell I/O (issue 21): descriptors the program did not open (inherited across
exec, redirected stdin/stdout, dup2'ed onto 0-2), kernel-side copies (copy_file_range, sendfile,
splice) and children made by raw fork/clone3 system calls, counted against ``strace -f -y`` and
the files themselves (docs/preload.md)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict

import pytest
from test_preload_helpers import (
    _strace_calls,
    compile_c,
    events_by_pid,
    have_strace,
    plain_env,
    preload_lib,
    trace_files,
    traced_env,
)

from dfanalyzer import reader as R


@pytest.fixture(autouse=True, scope="module")
def _strace_installed():
    assert have_strace(), "strace is required (scripts/system_deps.sh)"


READS = {"read", "pread", "pread64", "readv", "preadv", "preadv64"}
WRITES = {"write", "pwrite", "pwrite64", "writev", "pwritev", "pwritev64"}
COPIES = {"copy_file_range", "sendfile", "sendfile64", "splice"}
STRACED = "read,pread64,readv,preadv,write,pwrite64,writev,pwritev,copy_file_range,sendfile,splice"


@pytest.fixture(scope="module")
def lib():
    return preload_lib()


@pytest.fixture(scope="module")
def helper(tmp_path_factory):
    return compile_c("shellio", str(tmp_path_factory.mktemp("bin")))


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    # 1 MB + 7: not a multiple of any block size the programs use
    (d / "in.bin").write_bytes(os.urandom(1_000_007))
    return d


def sides_of_events(events, data_dir):
    """{(path, "in"|"out"): [calls, bytes]} of the POSIX data events on files under data_dir: a
    read on its file's in side, a write on the out side, a kernel copy on both."""
    out = defaultdict(lambda: [0, 0])
    for e in events:
        if e.get("cat") != "POSIX" or e["name"] not in READS | WRITES | COPIES:
            continue
        a = e["args"]
        moved = max(a["ret"], 0)
        ends = []
        if e["name"] in READS:
            ends = [(a.get("fname"), "in")]
        elif e["name"] in WRITES:
            ends = [(a.get("fname"), "out")]
        else:
            ends = [(a.get("fname"), "in"), (a.get("out_fname"), "out")]
        for path, side in ends:
            if path and path.startswith(data_dir + os.sep):
                out[(path, side)][0] += 1
                out[(path, side)][1] += moved
    return {k: tuple(v) for k, v in out.items()}


_CALL = re.compile(r"^(\d+)\s+(\w+)\((.*)\)\s+=\s+(-?\d+)")
_FD = re.compile(r"-?\d+<([^>]*)>")


def sides_of_strace(log, data_dir):
    """The same from an ``strace -f -y`` log: each data system call on an fd naming a file under
    data_dir (the kernel's own fd -> path annotation, independent of our fd table)."""
    out = defaultdict(lambda: [0, 0])
    for line in _strace_calls(log):
        m = _CALL.match(line)
        if not m:
            continue
        call, args, ret = m[2], m[3], int(m[4])
        paths = _FD.findall(args)
        if call in ("read", "pread64", "readv", "preadv"):
            ends = [(paths[0], "in")] if paths else []
        elif call in ("write", "pwrite64", "writev", "pwritev"):
            ends = [(paths[0], "out")] if paths else []
        elif call in ("copy_file_range", "splice") and len(paths) == 2:
            ends = [(paths[0], "in"), (paths[1], "out")]
        elif call == "sendfile" and len(paths) == 2:
            ends = [(paths[1], "in"), (paths[0], "out")]
        else:
            continue
        for path, side in ends:
            if path.startswith(data_dir + os.sep):
                out[(path, side)][0] += 1
                out[(path, side)][1] += max(ret, 0)
    return {k: tuple(v) for k, v in out.items()}


def run_traced(cmd, lib, tmp_path, data, **extra):
    """Run cmd under strace -f -y and the preload; returns (process, strace sides, event sides,
    events by pid)."""
    prefix = str(tmp_path / "out" / "t")
    os.makedirs(os.path.dirname(prefix), exist_ok=True)
    env = traced_env(lib, prefix, str(data), **extra)
    log = str(tmp_path / "strace.log")
    st = ["strace", "-f", "-qq", "-y", "-s", "0", "-e", f"trace={STRACED}", "-o", log]
    for k, v in env.items():
        if k.startswith("DFTRACER_") or k == "LD_PRELOAD":
            st += ["-E", f"{k}={v}"]
    r = subprocess.run(st + cmd, env=plain_env(env), cwd=str(data), capture_output=True, timeout=240)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    by_pid = events_by_pid(prefix)
    evs = [e for v in by_pid.values() for e in v]
    return r, sides_of_strace(log, str(data)), sides_of_events(evs, str(data)), by_pid, prefix


def test_dd_input_dup2_onto_stdin_40mb(lib, tmp_path):
    """GNU dd puts if= on fd 0 with dup2: every one of the 78,126 reads (bs 512) of 40 MB."""
    d = tmp_path / "d"
    d.mkdir()
    f = d / "40MB.bin"
    f.write_bytes(os.urandom(40_000_000))
    _, st, ev, _, _ = run_traced(
        ["dd", f"if={f}", "of=/dev/null", "bs=512"], lib, tmp_path, d, DFTRACER_WRITE_BUFFER_SIZE="256K"
    )
    assert st == {(str(f), "in"): (78_126, 40_000_000)}  # 78,125 full blocks and the EOF read
    assert ev == st


def test_c_dup2_program_256k_buffer(lib, helper, data, tmp_path):
    """open + dup2(fd, 0) + read loop, DFTRACER_WRITE_BUFFER_SIZE=256K (many members): the
    program's own count of reads and bytes."""
    f = str(data / "in.bin")
    prefix = str(tmp_path / "out" / "t")
    os.makedirs(os.path.dirname(prefix))
    env = traced_env(lib, prefix, str(data), DFTRACER_WRITE_BUFFER_SIZE="256K")
    r = subprocess.run([helper, "dup2", f, "64"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    n, b = int(r.stdout.split()[1]), int(r.stdout.split()[3])
    assert (n, b) == (15_627, 1_000_007)  # 15,625 full reads of 64, one of 7, EOF
    evs = [e for v in events_by_pid(prefix).values() for e in v if e["name"] == "read"]
    assert len(evs) == n and sum(e["args"]["ret"] for e in evs) == b
    assert {(e["args"]["fname"], e["args"]["fd"]) for e in evs} == {(f, 0)}


def test_cat_redirected_stdout(lib, data, tmp_path):
    """sh -c 'cat in.bin > out.bin': the shell's fd 1 inherited across exec; coreutils 9's cat
    copies with copy_file_range. Bytes on both files, byte-exact."""
    _, st, ev, _, _ = run_traced(["sh", "-c", "cat in.bin > out.bin"], lib, tmp_path, data)
    out = str(data / "out.bin")
    assert os.path.getsize(out) == 1_000_007
    assert st[(str(data / "in.bin"), "in")][1] == st[(out, "out")][1] == 1_000_007
    assert ev == st


def test_cp_copy_file_range_both_files(lib, data, tmp_path):
    _, st, ev, _, prefix = run_traced(["cp", "in.bin", "cp.bin"], lib, tmp_path, data)
    cp = str(data / "cp.bin")
    assert os.path.getsize(cp) == 1_000_007
    assert st[(str(data / "in.bin"), "in")][1] == st[(cp, "out")][1] == 1_000_007
    assert ev == st
    # The reader's byte rule (calls.def RET_COPY): size = ret on each kernel-copy row.
    (f,) = trace_files(prefix)
    e = R.load_batch(f, 0, 0).events
    rows = e[e["name"].astype(str).isin(COPIES)]
    assert len(rows) >= 1 and int(rows["size"].sum()) == 1_000_007


def test_sh_dd_redirected_stdout(lib, data, tmp_path):
    _, st, ev, _, _ = run_traced(["sh", "-c", "dd if=in.bin bs=4k > dd.bin"], lib, tmp_path, data)
    out = str(data / "dd.bin")
    assert st[(out, "out")] == (245, 1_000_007)  # 244 blocks of 4 KiB and one of 583
    assert st[(str(data / "in.bin"), "in")] == (246, 1_000_007)
    assert ev == st


def test_tar_czf_gzip_child(lib, data, tmp_path):
    """tar czf: tar reads the input, its gzip child (stdin a pipe, stdout the archive opened by
    tar's child before exec) writes every byte of the archive."""
    _, st, ev, by_pid, _ = run_traced(["tar", "czf", "a.tgz", "in.bin"], lib, tmp_path, data)
    tgz = str(data / "a.tgz")
    assert st[(tgz, "out")][1] == os.path.getsize(tgz) > 0
    assert st[(str(data / "in.bin"), "in")][1] == 1_000_007
    assert ev == st
    assert len(by_pid) >= 2  # tar and gzip


def test_python_stdin_redirected(lib, data, tmp_path):
    app = tmp_path / "app.py"
    app.write_text(
        "import sys\nn = 0\nwhile chunk := sys.stdin.buffer.raw.read(10000):\n    n += len(chunk)\nprint(n)\n"
    )
    r, st, ev, _, _ = run_traced(["sh", "-c", f"{sys.executable} {app} < in.bin"], lib, tmp_path, data)
    assert r.stdout.decode().strip() == "1000007"
    assert st[(str(data / "in.bin"), "in")] == (102, 1_000_007)  # 100 full reads, one of 7, EOF
    assert ev == st


def test_sendfile_and_splice(lib, helper, data, tmp_path):
    """Python's shutil.copyfile (sendfile) and a splice through a pipe: bytes on both files."""
    cmd = f"{sys.executable} -c \"import shutil; shutil.copyfile('in.bin', 'sf.bin')\" && {helper} splice in.bin sp.bin"
    _, st, ev, _, _ = run_traced(["sh", "-c", cmd], lib, tmp_path, data)
    for out in ("sf.bin", "sp.bin"):
        assert st[(str(data / out), "out")][1] == os.path.getsize(data / out) == 1_000_007
    assert st[(str(data / "in.bin"), "in")][1] == 2 * 1_000_007
    assert ev == st


@pytest.mark.parametrize("mode", ["sysfork", "clone3", "clonefn"])
def test_raw_fork_child_gets_its_own_file(lib, helper, data, tmp_path, mode):
    f = str(data / "in.bin")
    prefix = str(tmp_path / "out" / "t")
    os.makedirs(os.path.dirname(prefix))
    r = subprocess.run(
        [helper, mode, f, "200"], env=traced_env(lib, prefix, str(data)), capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    child = int(r.stdout.split()[1])
    by_pid = events_by_pid(prefix)
    assert child in by_pid, (child, sorted(by_pid))
    preads = [e for e in by_pid[child] if e["name"] == "pread"]
    assert len(preads) == 200 and {e["args"]["fname"] for e in preads} == {f}
    assert sum(e["args"]["ret"] for e in preads) == 200 * 4096
    parent = [p for p in by_pid if p != child]
    assert len(parent) == 1 and [e["args"]["ret"] for e in by_pid[parent[0]] if e["name"] == "fork"] == [child]
    assert len(trace_files(prefix)) == 2


def test_syscall_clone3_bad_pointer_unchanged(lib, helper, tmp_path):
    """The syscall() wrapper reads clone3's flags without a load that could fault: a bad pointer
    still gives the kernel's EFAULT, as without the tracer."""
    plain = subprocess.run([helper, "clone3bad", "x"], capture_output=True, text=True, timeout=30)
    env = traced_env(lib, str(tmp_path / "t"), str(tmp_path))
    traced = subprocess.run([helper, "clone3bad", "x"], env=env, capture_output=True, text=True, timeout=30)
    assert plain.returncode == traced.returncode == 0, traced.stderr
    assert traced.stdout == plain.stdout == "ret -1 errno 14\n"
