"""What the preload costs a short-lived process (issue 16, docs/performance.md "Process start").

A traced process that logs no event maps neither libstdc++.so, yaml-cpp, libgcc_s, libm nor
libdeflate.so (the core carries its own hidden C++ runtime, unwinder and libdeflate; the YAML
reader is dlopened only for DFTRACER_CONFIGURATION), starts no writer thread and leaves no file;
a process that exits soon after its events writes them on its own thread without waiting for the
writer; a YAML configuration is still honoured; and the descriptor
table is grown before the writer thread exists (growing a table shared by two threads waits for
an RCU grace period, 10-20 ms).
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest
from test_preload_helpers import (
    _strace_calls,
    have_strace,
    plain_env,
    preload_lib,
    read_trace,
    strace_cmd,
    trace_files,
    traced_env,
)


def strace_traced_cat(lib, dirs, tmp_path, *cat_args) -> list[str]:
    """System calls ("pid call...") of `cat *cat_args` under the preload, all threads."""
    data, prefix = dirs
    env = traced_env(lib, prefix, data)
    log = str(tmp_path / "strace.log")
    subprocess.run(strace_cmd(log, env) + ["cat", *cat_args], env=plain_env(env), capture_output=True, check=True)
    return list(_strace_calls(log))


@pytest.fixture(scope="module")
def lib():
    return preload_lib()


@pytest.fixture
def dirs(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "f.txt").write_text("hello\n")
    return str(data), str(tmp_path / "trace" / "t")


def test_no_event_no_cxx_runtime_no_thread_no_file(lib, dirs):
    data, prefix = dirs
    env = traced_env(lib, prefix, data)  # nothing under data is touched: no event
    maps = subprocess.run(["cat", "/proc/self/maps"], env=env, capture_output=True, text=True, check=True).stdout
    assert "libdftracer_preload.so" in maps
    assert "libdftracer_core.so" in maps
    assert "libstdc++" not in maps
    assert "yaml-cpp" not in maps and "libdftracer_yaml.so" not in maps
    # the unwinder, libdeflate and fegetround/fesetround are linked in: three objects fewer to map
    for lib_name in ("libgcc_s.so", "libm.so", "libdeflate.so"):
        assert lib_name not in maps
    tasks = subprocess.run(["ls", "/proc/self/task"], env=env, capture_output=True, text=True, check=True).stdout
    assert len(tasks.split()) == 1  # no writer thread
    assert trace_files(prefix) == []


def test_yaml_configuration_is_read(lib, dirs, tmp_path):
    data, prefix = dirs
    yaml_prefix = str(tmp_path / "yaml" / "y")
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(f"profiler:\n  log_file: {yaml_prefix}\nfeatures:\n  io:\n    stdio: false\n")
    env = traced_env(lib, prefix, data, DFTRACER_CONFIGURATION=str(cfg))
    del env["DFTRACER_LOG_FILE"]  # the file's log_file applies
    out = subprocess.run(["cat", os.path.join(data, "f.txt")], env=env, capture_output=True, text=True, check=True)
    assert out.stdout == "hello\n" and out.stderr == ""
    files = trace_files(yaml_prefix)
    assert len(files) == 1 and trace_files(prefix) == []
    names = [e["name"] for e in read_trace(files[0]) if e.get("ph") == "X" and e.get("cat") == "POSIX"]
    assert "read" in names and names.count("close") >= 1


@pytest.mark.skipif(not have_strace(), reason="needs strace")
def test_fd_table_grown_before_writer_thread(lib, dirs, tmp_path):
    data, prefix = dirs
    dup_up = clone = None
    for i, line in enumerate(strace_traced_cat(lib, dirs, tmp_path, os.path.join(data, "f.txt"))):
        if dup_up is None and re.search(r"\bfcntl\(\d+, F_DUPFD_CLOEXEC, \d+\)", line):
            dup_up = i
        if clone is None and re.search(r"\bclone3?\(", line):
            clone = i
    assert dup_up is not None and clone is not None, (dup_up, clone)
    assert dup_up < clone
    assert len(trace_files(prefix)) == 1


@pytest.mark.skipif(not have_strace(), reason="needs strace")
def test_exit_writes_on_the_main_thread_without_waiting(lib, dirs, tmp_path):
    # A process that exits soon after its events: the exit path writes the queued chunk itself
    # and leaves the parked writer thread asleep (no wake-up, no join), so the main thread never
    # blocks on the writer; on a loaded machine each such wait costs a scheduling delay (ms).
    data, prefix = dirs
    calls = strace_traced_cat(lib, dirs, tmp_path, os.path.join(data, "f.txt"))
    main = calls[0].split(None, 1)[0]
    mine = [c.split(None, 1)[1] for c in calls if c.split(None, 1)[0] == main]
    assert any(re.match(r"clone3?\(", c) for c in mine)  # the writer thread was started
    member_writes = [c for c in calls if re.search(r"\bp?write(?:64)?\(1024, ", c)]  # positional since round 5
    assert len(member_writes) == 1 and member_writes[0].split(None, 1)[0] == main
    assert [c for c in mine if "FUTEX_WAIT" in c] == []
    files = trace_files(prefix)
    assert len(files) == 1
    names = [e["name"] for e in read_trace(files[0]) if e.get("ph") == "X"]
    assert names.count("read") >= 1 and names.count("close") >= 1


@pytest.mark.skipif(not have_strace(), reason="needs strace")
def test_start_up_system_calls(lib, dirs, tmp_path):
    # The core is opened by path (DT_NEEDED $ORIGIN/libdftracer_core.so: no glibc-hwcaps/tls
    # probing), the command line comes from argv (no /proc/self/cmdline), one sigaction call
    # per flush signal (the previous action comes back from the call that installs ours), no
    # dlsym of the eager real functions (no libc symbol lookup error path either).
    data, prefix = dirs
    calls = [c.split(None, 1)[1] for c in strace_traced_cat(lib, dirs, tmp_path, "--", os.path.join(data, "f.txt"))]
    core_opens = [c for c in calls if "libdftracer_core.so" in c]
    assert len(core_opens) == 1 and core_opens[0].startswith("openat(") and "= 3" in core_opens[0], core_opens
    assert [c for c in calls if "glibc-hwcaps" in c or "/tls/" in c] == []
    assert [c for c in calls if "/proc/self/cmdline" in c] == []
    flush_signals = ("SIGHUP", "SIGINT", "SIGQUIT", "SIGABRT", "SIGPIPE", "SIGTERM", "SIGXCPU")
    flush_signals += ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL")  # crash signals (issue 25)
    for sig in flush_signals:
        assert len([c for c in calls if c.startswith(f"rt_sigaction({sig},")]) == 1, sig
    files = trace_files(prefix)
    assert len(files) == 1
    meta = {e["name"]: e["args"].get("value") for e in read_trace(files[0]) if e.get("ph") == "M"}
    assert meta["cmd_line"] == "cat -- " + os.path.join(data, "f.txt")


def test_ignored_flush_signal_stays_ignored(lib, dirs):
    # SIGHUP ignored before exec (nohup): the tracer's handler goes in and the ignore comes back
    # while every signal is blocked; the kernel's masks show HUP ignored, not caught, and TERM
    # caught (the tracer's handler).
    data, prefix = dirs
    env = traced_env(lib, prefix, data)
    out = subprocess.run(
        ["sh", "-c", "trap '' HUP; exec cat /proc/self/status"], env=env, capture_output=True, text=True, check=True
    ).stdout
    masks = {k: int(v, 16) for k, v in re.findall(r"^(SigIgn|SigCgt):\s*([0-9a-f]+)$", out, re.M)}
    hup, term = 1 << (1 - 1), 1 << (15 - 1)
    assert masks["SigIgn"] & hup and not masks["SigCgt"] & hup
    assert masks["SigCgt"] & term and not masks["SigIgn"] & term
