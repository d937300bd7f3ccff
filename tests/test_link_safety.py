"""The preload can never stop a program from starting (issue 21, docs/design.md "Link mode").

From the installed package: every undefined dynamic symbol of the preload, the core and the YAML
reader is provided by their NEEDED libraries (scripts/check_link.py, the same check the build runs
after each link); /bin/true and a Python program run under LD_PRELOAD with tracing on exit 0 with
nothing on stderr, and the Python program's read is in its trace. And the checker itself, on small
libraries built here, agrees with the dynamic loader: a preload linked against an object that
exports more than the one loaded at run time (how the g++ 13 preload broke) is refused by the
check and dies with "symbol lookup error" (exit 127) under the loader.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from test_preload_helpers import plain_env, preload_lib, read_trace, trace_files, traced_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECK_LINK = os.path.join(ROOT, "scripts", "check_link.py")


def check_link(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, CHECK_LINK, *args], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def libs():
    preload = preload_lib()
    lib_dir = os.path.dirname(preload)
    core = os.path.join(lib_dir, "libdftracer_core.so")
    yaml = os.path.join(lib_dir, "libdftracer_yaml.so")
    assert os.path.isfile(core) and os.path.isfile(yaml), os.listdir(lib_dir)
    return preload, core, yaml


def test_installed_libraries_have_no_unprovided_symbol(libs):
    res = check_link(*libs)
    assert res.returncode == 0, res.stdout + res.stderr
    for lib in libs:
        assert f"{os.path.basename(lib)}: every undefined symbol is provided" in res.stdout


def test_preload_needs_the_core_next_to_it(libs):
    preload, core, _ = libs
    out = subprocess.run(["readelf", "-dW", preload], capture_output=True, text=True, check=True).stdout
    needed = [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]
    assert needed[0] == "$ORIGIN/libdftracer_core.so", needed


def test_true_under_preload(libs, tmp_path):
    env = traced_env(libs[0], str(tmp_path / "t"), str(tmp_path))
    res = subprocess.run(["/bin/true"], env=env, capture_output=True, text=True, timeout=60)
    assert (res.returncode, res.stderr) == (0, "")


def test_python_under_preload(libs, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    payload = bytes(range(256)) * 64 + b"end"  # 16,387 bytes
    (data / "in.bin").write_bytes(payload)
    prefix = str(tmp_path / "trace" / "t")
    env = traced_env(libs[0], prefix, str(data))
    env.pop("PYTHONPATH", None)  # the program imports nothing of ours: the preload alone
    prog = "import sys\nwith open(sys.argv[1], 'rb') as f:\n    sys.stdout.write(str(len(f.read())))\n"
    res = subprocess.run(
        [sys.executable, "-c", prog, str(data / "in.bin")], env=env, capture_output=True, text=True, timeout=60
    )
    assert (res.returncode, res.stderr, res.stdout) == (0, "", str(len(payload)))
    files = trace_files(prefix)
    assert len(files) == 1, files
    evs = [e for e in read_trace(files[0]) if e.get("ph") == "X"]
    path = str(data / "in.bin")
    reads = [e for e in evs if e["name"] == "read" and e["args"].get("fname") == path]
    assert sum(e["args"]["ret"] for e in reads) == len(payload), reads
    assert any(e["name"] in ("open", "open64", "openat") and e["args"].get("fname") == path for e in evs)


def _cc(tmp_path, name, src, *args):
    c = tmp_path / (name + ".c")
    c.write_text(src)
    out = tmp_path / name
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(c), *args], check=True, capture_output=True)
    return str(out)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is needed to build the sample libraries")
def test_check_agrees_with_the_loader(tmp_path):
    """A 'preload' linked against a link-time twin that exports more than the object loaded at run
    time: the link succeeds with --no-undefined, the loader refuses it, and so does the check.
    Linked with -z now, as the preload is (bound at load, not at first call)."""
    (tmp_path / "link").mkdir()
    (tmp_path / "run").mkdir()
    soname = "-Wl,-soname,$ORIGIN/libcore.so"
    twin = _cc(tmp_path, "link/libcore.so", "int helper(void){return 1;}\nint extra(void){return 2;}\n", soname)
    _cc(tmp_path, "run/libcore.so", "int helper(void){return 1;}\n", soname)
    src = (
        "int helper(void); int extra(void); __attribute__((weak)) int maybe(void);\n"
        "int use(void){return helper() + extra() + (maybe ? maybe() : 0);}\n"
    )
    bad = _cc(tmp_path, "run/libbad.so", src, "-Wl,--no-undefined", "-Wl,-z,now", twin)
    good_src = "int helper(void); __attribute__((weak)) int maybe(void);\nint use(void){return helper() + (maybe ? maybe() : 0);}\n"
    good = _cc(tmp_path, "run/libgood.so", good_src, "-Wl,--no-undefined", "-Wl,-z,now", twin)

    loader = subprocess.run(
        ["/bin/true"], env={**plain_env(os.environ), "LD_PRELOAD": bad}, capture_output=True, text=True
    )
    assert loader.returncode == 127 and "undefined symbol: extra" in loader.stderr, loader
    res = check_link(bad)
    assert res.returncode == 1, res
    assert "undefined symbol extra is provided by none of its NEEDED libraries" in res.stderr
    assert "helper" not in res.stderr and "maybe" not in res.stderr  # provided / weak

    loader = subprocess.run(
        ["/bin/true"], env={**plain_env(os.environ), "LD_PRELOAD": good}, capture_output=True, text=True
    )
    assert (loader.returncode, loader.stderr) == (0, "")
    assert check_link(good).returncode == 0

    # The twin comparison names the symbol only the twin exports.
    res = check_link("--twin", twin, str(tmp_path / "run" / "libcore.so"))
    assert res.returncode == 1 and "only in twin ['extra']" in res.stderr, res

    # A NEEDED library that cannot be found is an error too.
    os.remove(tmp_path / "run" / "libcore.so")
    res = check_link(good)
    assert res.returncode == 1 and "NEEDED $ORIGIN/libcore.so" in res.stderr and "not found" in res.stderr, res


def test_check_removes_a_bad_library_on_request(tmp_path):
    """The build passes --remove-on-failure, so a failed check leaves no up-to-date bad library."""
    (tmp_path / "x").mkdir()
    bad = _cc(tmp_path, "x/libneeds_deflate.so", "int deflate(void*, int);\nint f(void){return deflate(0, 0);}\n")
    res = check_link("--remove-on-failure", bad)
    assert res.returncode == 1 and "undefined symbol deflate" in res.stderr, res
    assert not os.path.exists(bad)
    assert check_link(bad).returncode == 2  # no such file
