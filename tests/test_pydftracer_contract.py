"""PyPI pydftracer beside our package (issue 11, deliverable 1).

pydftracer 2.0.x installs ``dftracer/python/`` (a package, which shadows our ``dftracer/python.py``)
and, with ``DFTRACER_ENABLE=1``, imports the native module ``dftracer.dftracer``: ours
(src/core/upstream_module.cpp), which drives our core. pydftracer 1.0.x's Python layer
(``dftracer/logger.py``) makes the same calls on a native module named ``pydftracer``.

Each test makes its own venv (``--system-site-packages``, ``--without-pip``; pip is driven from
outside with ``--python``) and installs our wheel (built once per session into build/wheels, or
``DFTRACER_WHEEL``) and pydftracer from PyPI. The traced program is tests/pydftracer_program.py.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import zipfile
from collections import Counter

import pytest
from conftest import read_trace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAM = os.path.join(ROOT, "tests", "pydftracer_program.py")
CHECK = os.path.join(ROOT, "scripts", "dlio", "check_dftracer.py")

pytestmark = pytest.mark.slow

# X events of pydftracer_program.py run_v2: 5 reads, 1 region, 2 epochs x (4 items, 4 computes,
# 4 fetch.iter, 4 fetch.block, 1 epoch.block), 1 checkpoint capture.
V2_COUNTS = {
    ("run_v2.<locals>.Reader.read", "reader"): 5,
    ("region", "block"): 1,
    ("item", "data"): 8,
    ("compute", "compute"): 8,
    ("fetch.iter", "dataloader"): 8,
    ("fetch.block", "dataloader"): 8,
    ("epoch.block", "pipeline"): 2,
    ("capture", "checkpoint"): 1,
}
# run_v1: 5 reads, 1 region, 3 static calls.
V1_COUNTS = {
    ("run_v1.<locals>.Reader.read", "reader"): 5,
    ("region", "block"): 1,
    ("run_v1.<locals>.Util.helper", "static"): 3,
}
# Files of pydftracer 1.0.2's wheel that are also files of ours (it overwrites them; its
# uninstall deletes them).
CLOBBERED_BY_102 = {
    "dftracer/__init__.py",
    "dftracer/logger.py",
    "dftracer/lib/libdftracer_preload.so",
    "dfanalyzer/__init__.py",
    "dfanalyzer/plots.py",
}


# ----------------------------------------------------------------------------------- helpers
def _pip(venv_py: str, *args: str) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "pip", "--python", venv_py, "--disable-pip-version-check", "-q", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]


def _make_venv(path) -> str:
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(path)], check=True, timeout=120
    )
    return os.path.join(str(path), "bin", "python")


@pytest.fixture(scope="session")
def our_wheel():
    """Our wheel: DFTRACER_WHEEL, else built from this tree (incremental, build/{wheel_tag})."""
    given = os.environ.get("DFTRACER_WHEEL")
    if given:
        assert os.path.isfile(given), given
        return given
    out = os.path.join(ROOT, "build", "wheels")
    res = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", ROOT, "-w", out],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    wheels = sorted(glob.glob(os.path.join(out, "dftracer-*.whl")), key=os.path.getmtime)
    assert wheels
    return wheels[-1]


WHEEL_CACHE = os.path.join(ROOT, "build", "pydftracer-wheels")


def _pydftracer_wheel(version: str) -> str:
    """PyPI's pydftracer wheel, downloaded once into build/pydftracer-wheels."""
    found = glob.glob(os.path.join(WHEEL_CACHE, f"pydftracer-{version}-*.whl"))
    if not found:
        res = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", f"pydftracer=={version}", "-d", WHEEL_CACHE],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert res.returncode == 0, res.stderr[-3000:]
        found = glob.glob(os.path.join(WHEEL_CACHE, f"pydftracer-{version}-*.whl"))
    assert len(found) == 1, found
    return found[0]


def _install_pydftracer(py: str, version: str) -> None:
    # Its only dependency on Python 3.11 in practice, typing_extensions, comes from the system
    # site-packages (pydftracer 2.0.6 imports it but declares it for Python < 3.10 only).
    _pip(py, "install", "--no-deps", _pydftracer_wheel(version))


def _install_ours(py: str, wheel: str) -> None:
    _pip(py, "install", "--no-deps", "--force-reinstall", wheel)


def _run(py: str, trace: str, *extra: str, runner=None) -> None:
    env = dict(os.environ, DFTRACER_ENABLE="1")
    env.pop("LD_PRELOAD", None)
    cmd = [py, runner or PROGRAM, trace, *extra]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd=os.path.dirname(trace))
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]


def _records(trace: str):
    files = glob.glob(trace.replace(".pfw", "") + "*.pfw.gz")
    assert len(files) == 1, files
    return read_trace(files[0])


def _events(trace: str, stringify=False):
    """(name, cat, args) of every complete event, in file order; args values str()-ed if asked."""
    evs = []
    for r in _records(trace):
        if r.get("ph") != "X":
            continue
        args = r.get("args") or {}
        if stringify:
            args = {k: str(v) for k, v in args.items()}
        evs.append((r["name"], r["cat"], args))
    return evs


def _counts(evs):
    return dict(Counter((n, c) for n, c, _ in evs))


def _which(py: str) -> dict:
    code = (
        "import json, dftracer.python as p, dftracer.logger as l, importlib.metadata as md\n"
        "try: v = md.version('pydftracer')\nexcept md.PackageNotFoundError: v = None\n"
        "print(json.dumps({'python': p.__file__, 'logger': l.__file__, 'pydftracer': v}))"
    )
    res = subprocess.run(
        [py, "-c", code], capture_output=True, text=True, timeout=60, env=dict(os.environ, DFTRACER_ENABLE="0")
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout)


def _record_problems(py: str, dist: str = "dftracer") -> list:
    """Files of `dist`'s RECORD that are missing or whose sha256 differs (pip's own bookkeeping)."""
    code = (
        "import base64, hashlib, json, sys, importlib.metadata as md\n"
        "d = md.distribution(sys.argv[1]); bad = []\n"
        "for f in d.files:\n"
        "    if f.hash is None: continue\n"
        "    p = f.locate()\n"
        "    try: data = open(p, 'rb').read()\n"
        "    except OSError: bad.append(str(f) + ' missing'); continue\n"
        "    h = base64.urlsafe_b64encode(hashlib.new(f.hash.mode, data).digest()).rstrip(b'=').decode()\n"
        "    if h != f.hash.value: bad.append(str(f) + ' changed')\n"
        "print(json.dumps(bad))"
    )
    res = subprocess.run([py, "-c", code, dist], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout)


# ----------------------------------------------------------------------------------- tests
def test_pydftracer_206_drives_our_core_to_our_trace(tmp_path, our_wheel):
    """The same program through pydftracer 2.0.6's dftracer.python and through ours: the same
    complete events (name, cat, args) in the same order, 41 of them."""
    py = _make_venv(tmp_path / "venv")
    _install_ours(py, our_wheel)
    _install_pydftracer(py, "2.0.6")
    w = _which(py)
    assert w["pydftracer"] == "2.0.6"
    assert w["python"].endswith(os.path.join("dftracer", "python", "__init__.py")), w
    ours_py = _make_venv(tmp_path / "ours")
    _install_ours(ours_py, our_wheel)
    assert _which(ours_py)["python"].endswith(os.path.join("dftracer", "python.py"))

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    theirs = str(tmp_path / "a" / "trace-0-of-1.pfw")
    ours = str(tmp_path / "b" / "trace-0-of-1.pfw")
    _run(py, theirs)
    _run(ours_py, ours)
    a, b = _events(theirs), _events(ours)
    assert _counts(a) == V2_COUNTS
    assert a == b

    # Metadata: the same records, plus pydftracer's mark_used("python_function").
    def meta(t):
        return Counter(
            (r["name"], (r.get("args") or {}).get("value"))
            for r in _records(t)
            if r.get("ph") == "M" and r["name"] not in ("cmd_line", "start_time", "ppid")
        )

    ma, mb = meta(theirs), meta(ours)
    assert ma - mb == Counter({("used", "python_function"): 1})
    assert mb - ma == Counter()
    assert ma[("workload", "pydftracer_program")] == 1 and ma[("process_id", "0")] == 1


def _v102_logger(tmp_path) -> str:
    """pydftracer 1.0.2's dftracer/logger.py, taken from its PyPI wheel."""
    path = str(tmp_path / "pydftracer_102_logger.py")
    with zipfile.ZipFile(_pydftracer_wheel("1.0.2")) as z, open(path, "wb") as f:
        f.write(z.read("dftracer/logger.py"))
    return path


RUNNER_102 = '''"""Run pydftracer_program.py v1 with pydftracer 1.0.2's dftracer/logger.py as dftracer.logger
and its native `pydftracer` module served by our dftracer.dftracer."""
import importlib, importlib.util, runpy, sys
sys.modules["pydftracer"] = importlib.import_module("dftracer.dftracer")
spec = importlib.util.spec_from_file_location("dftracer.logger", {logger!r})
mod = importlib.util.module_from_spec(spec)
sys.modules["dftracer.logger"] = mod
spec.loader.exec_module(mod)
sys.argv = [{program!r}] + sys.argv[1:]
runpy.run_path({program!r}, run_name="__main__")
assert sys.modules["dftracer.logger"] is mod
'''


def test_pydftracer_102_layer_drives_our_core_to_our_trace(tmp_path, our_wheel):
    """pydftracer 1.0.2's Python layer (from its PyPI wheel) with its native calls served by our
    dftracer.dftracer: the same complete events as our dftracer.logger, values compared as text
    (1.0.2 passes every tag as a string: string_args only)."""
    py = _make_venv(tmp_path / "venv")
    _install_ours(py, our_wheel)
    runner = tmp_path / "run_102.py"
    runner.write_text(RUNNER_102.format(logger=_v102_logger(tmp_path), program=PROGRAM))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    theirs = str(tmp_path / "a" / "trace-0-of-1.pfw")
    ours = str(tmp_path / "b" / "trace-0-of-1.pfw")
    _run(py, theirs, "v1", runner=str(runner))
    _run(py, ours, "v1")
    a, b = _events(theirs), _events(ours, stringify=True)
    assert _counts(a) == V1_COUNTS
    assert a == b
    # 1.0.2 writes each tag as a string (what its native binding received).
    assert a[0][2] == {"epoch": "1", "step": "1"}
    assert a[5][2] == {"epoch": "3", "step": "7", "label": "train"}


def test_install_orders_and_uninstall_keep_our_package(tmp_path, our_wheel):
    """ours+pydftracer 2.0.6 in both install orders, then pydftracer uninstalled: no file of ours is
    touched (RECORD hashes), every state traces all 41 events; pydftracer 1.0.2 overwrites five of
    our files (check_dftracer.py says so) and its uninstall deletes them."""
    py = _make_venv(tmp_path / "venv")
    n = 0

    def traced_ok(expect_python_suffix):
        nonlocal n
        n += 1
        (tmp_path / f"o{n}").mkdir()
        trace = str(tmp_path / f"o{n}" / "trace-0-of-1.pfw")
        _run(py, trace)
        assert _counts(_events(trace)) == V2_COUNTS
        assert _which(py)["python"].endswith(expect_python_suffix)

    theirs_suffix = os.path.join("dftracer", "python", "__init__.py")
    ours_suffix = os.path.join("dftracer", "python.py")

    # Order 1: ours, then pydftracer.
    _install_ours(py, our_wheel)
    traced_ok(ours_suffix)
    _install_pydftracer(py, "2.0.6")
    assert _record_problems(py) == []
    traced_ok(theirs_suffix)
    _pip(py, "uninstall", "-y", "pydftracer")
    assert _record_problems(py) == []
    traced_ok(ours_suffix)

    # Order 2: pydftracer, then ours (ours reinstalled over a present pydftracer), then uninstall.
    _pip(py, "uninstall", "-y", "dftracer")
    _install_pydftracer(py, "2.0.6")
    _install_ours(py, our_wheel)
    assert _record_problems(py) == [] and _record_problems(py, "pydftracer") == []
    traced_ok(theirs_suffix)
    _pip(py, "uninstall", "-y", "pydftracer")
    assert _record_problems(py) == []
    traced_ok(ours_suffix)
    res = subprocess.run([py, CHECK], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr

    # pydftracer 1.0.2 (upstream's native tracer in a wheel) overwrites files of ours.
    _install_pydftracer(py, "1.0.2")
    changed = {p.rsplit(" ", 1)[0] for p in _record_problems(py)}
    assert changed == CLOBBERED_BY_102
    res = subprocess.run([py, CHECK], capture_output=True, text=True)
    assert res.returncode == 1 and "pydftracer 1.0.2" in res.stderr, res.stderr
    _pip(py, "uninstall", "-y", "pydftracer")
    assert {p for p in _record_problems(py)} == {f + " missing" for f in CLOBBERED_BY_102}
    _install_ours(py, our_wheel)  # the repair check_dftracer.py prints
    assert _record_problems(py) == []
    traced_ok(ours_suffix)
