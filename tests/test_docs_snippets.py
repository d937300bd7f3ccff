"""The README's and docs/*.md's fenced ``bash``/``sh``/``python`` snippets, run as written
(issue 21, problem 5) in a folder laid out as they assume: ``traces/`` (and ``runA/``,
``runB/``) holding bundled CM1 traces, ``data/`` a small dataset, ``train.py`` a small program.
The only rewrites: ``/path/to/dataset`` and ``/scratch/...`` become folders of that place. Python
snippets run as a script each (no ``if __name__ == "__main__":`` guard, as a user saves them).
Blocks fenced ``text`` or without a language are grammar or output, not run. The view, insight,
report and compare commands are pointed at one running test scheduler (``--scheduler``, which
the commands document) instead of each starting its own cluster of worker processes.

``NOT_RUN`` lists the snippets CI cannot run, each with the reason; every other one runs."""

import glob
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import DATA, PKG_ROOT, ROOT, decompress_members, pythonpath_env

CM1 = os.path.join(DATA, "dftracer-v1.0.5-cm1")
DOCS = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
LANGS = {"bash": "bash", "sh": "bash", "shell": "bash", "python": "python", "py": "python"}

#: (file, first line of the snippet) -> why CI does not run it
NOT_RUN = {
    ("README.md", "bash scripts/quickstart.sh"): "installs Debian packages and the package; runs the whole suite",
    ("README.md", "cmake -S . -B build"): "the full C++ build and CTest: scripts/test.sh (CI) runs exactly that",
    ("docs/dlio.md", "bash scripts/quickstart.sh"): "installs DLIO and its dependencies (minutes); "
    "tests/test_dlio_e2e.py runs DLIO end to end and test_dlio_example_runs_in_the_dlio_venv the script's set-up",
    ("docs/cluster.md", "from dfanalyzer import DFAnalyzer, setup_dask_cluster"): "Slurm only (sbatch); "
    "tests/test_cluster_slurm.py on a local Slurm",
    ("docs/cluster.md", "from dfanalyzer.cluster import make_slurm_cluster"): "Slurm only (sbatch)",
    ("docs/cluster.md", "scripts/start_dask_slurm.sh -f $HOME/dask/scheduler.json -n 4 -c 16"): "Slurm only",
    ("docs/cluster.md", "# one CA and one certificate/key"): "Slurm only, and a user's TLS certificates",
    ("docs/cluster.md", "sudo scripts/slurm_local_setup.sh"): "installs and starts Slurm as root",
}

#: rewrites of paths that stand for the user's own (applied to the snippet text)
REWRITES = [("/path/to/dataset", "data"), ("/scratch/traces/", "traces/"), ("/scratch/data", "data")]

#: the user's program of the tracing snippets: POSIX reads of data/ (seen by the preload) in a
#: function traced by the Python API (trace file from DFTRACER_LOG_FILE)
_TRAIN = """import glob
from dftracer.python import dftracer, dft_fn

log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=0)


@dft_fn("reader").log
def read(path):
    with open(path, "rb") as f:
        return f.read()


for path in sorted(glob.glob("data/*.bin")):
    read(path)
log.finalize()
"""


def snippets():
    out = []
    for doc in DOCS:
        text = open(os.path.join(ROOT, doc), encoding="utf-8").read()
        for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.M | re.S):
            lang = LANGS.get(m.group(1))
            if lang:
                first = m.group(2).strip().splitlines()[0]
                line = text.count("\n", 0, m.start()) + 1
                out.append(pytest.param(doc, lang, first, m.group(2), id=f"{doc}:{line}"))
    return out


SNIPPETS = snippets()


def test_not_run_table_is_current():
    """Every NOT_RUN entry names a snippet that exists (no stale excuses)."""
    have = {(p.values[0], p.values[2]) for p in SNIPPETS}
    for doc, first in NOT_RUN:
        assert any(d == doc and f.startswith(first) for d, f in have), (doc, first)


@pytest.fixture(scope="module")
def scheduler():
    """A cluster of 2 worker threads in this process, reachable over TCP by the commands."""
    from distributed import LocalCluster

    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, protocol="tcp://", dashboard_address=None, silence_logs=40
    )
    yield cluster.scheduler_address
    cluster.close()


_DFANALYZER = (
    "import os, sys\n"
    "from dfanalyzer.cli import main\n"
    "a, s = sys.argv[1:], os.environ['DFA_TEST_SCHEDULER']\n"
    "if a and not a[0].startswith('-') and not any(x.startswith('--scheduler') for x in a):\n"
    "    a += ['--scheduler', s]\n"
    "sys.exit(main(a))\n"
)


def _bin_dir(tmp):
    """``python`` and the console scripts of the package under test, first on PATH."""
    b = tmp / "bin"
    b.mkdir()
    tools = {
        "python": None,
        "python3": None,
        "dfanalyzer": _DFANALYZER,
        "dftracer-index": "dfanalyzer.tools:index_main",
        "dftracer-cat": "dfanalyzer.tools:cat_main",
        "dftracer-merge": "dfanalyzer.trace_tools:merge_main",
        "dftracer-compact": "dfanalyzer.trace_tools:compact_main",
        "dftracer-split": "dfanalyzer.trace_tools:split_main",
        "dftracer-event-count": "dfanalyzer.trace_tools:event_count_main",
        "dftracer-run": "dftracer.run:main",
    }
    for name, target in tools.items():
        if target is None:
            body = f'exec "{sys.executable}" "$@"\n'
        elif "\n" in target:
            (b / ("shim_" + name + ".py")).write_text(target)
            body = f'exec "{sys.executable}" "{b / ("shim_" + name + ".py")}" "$@"\n'
        else:
            mod, fn = target.split(":")
            body = f'exec "{sys.executable}" -c \'import sys; from {mod} import {fn}; sys.exit({fn}())\' "$@"\n'
        (b / name).write_text("#!/bin/sh\n" + body)
        (b / name).chmod(0o755)
    return str(b)


def _place(tmp):
    """The folder the snippets assume."""
    names = sorted(os.listdir(CM1))[:4]
    for d in ("traces", "runA", "runB"):
        os.makedirs(tmp / d)
        for n in names:
            shutil.copy(os.path.join(CM1, n), tmp / d / n)
    shutil.copy(os.path.join(CM1, names[0]), tmp / "traces" / "app-host-1234.pfw.gz")
    os.makedirs(tmp / "data")
    for i in range(3):
        (tmp / "data" / f"{i}.bin").write_bytes(bytes([i]) * 4096)
        (tmp / "data" / f"{i}.npz").write_bytes(bytes([i]) * 1024)
    os.makedirs(tmp / "out")
    (tmp / "train.py").write_text(_TRAIN)
    # snippets that name scripts/ run from a checkout's root
    shutil.copytree(os.path.join(ROOT, "scripts"), tmp / "scripts")


def _not_run(p) -> bool:
    doc, first = p.values[0], p.values[2]
    return any(d == doc and first.startswith(f) for d, f in NOT_RUN)


# the NOT_RUN snippets are left out here (their reasons are the table; test_not_run_table_is_current
# keeps it honest), so every collected case runs
@pytest.mark.parametrize("doc,lang,first,body", [p for p in SNIPPETS if not _not_run(p)])
def test_snippet_runs_as_written(tmp_path, scheduler, doc, lang, first, body):
    for a, b in REWRITES:
        body = body.replace(a, b)
    work = tmp_path / "w"
    work.mkdir()
    _place(work)
    env = pythonpath_env()
    env["PATH"] = _bin_dir(tmp_path) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = PKG_ROOT  # (the package under test only, not the checkout's root)
    env["DFA_TEST_SCHEDULER"] = scheduler
    for k in ("DFTRACER_ENABLE", "DFTRACER_LOG_FILE", "DFTRACER_INIT", "LD_PRELOAD", "COLUMNS"):
        env.pop(k, None)
    if lang == "python":
        script = work / "snippet.py"
        script.write_text(body)
        cmd = [sys.executable, str(script)]
        if "dftracer.python" in body:  # the Python API traces only when switched on
            env["DFTRACER_ENABLE"] = "1"
    else:
        cmd = ["bash", "-euo", "pipefail", "-c", body]
    r = subprocess.run(cmd, cwd=str(work), env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{doc}: {first}\n--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}"
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    # what the snippet promises
    if "DFAnalyzer(" in body and ".summary()" in body:
        assert r.stdout.count("Summary") == 1, r.stdout[-3000:]  # printed once (no re-run by workers)
    if "initialize_log" in body or "dftracer-run" in body or "LD_PRELOAD=" in body or "python train.py" in body:
        made = glob.glob(str(work / "**" / "*.pfw*"), recursive=True)
        new = [p for p in made if not os.path.basename(p).startswith("cm1-") and "app-host-1234" not in p]
        assert new, f"{doc}: {first}: no trace written"
        text = b"".join(decompress_members(open(p, "rb").read())[0] for p in new if p.endswith(".gz"))
        text += b"".join(open(p, "rb").read() for p in new if p.endswith(".pfw"))
        if "dftracer-run" in body or "LD_PRELOAD=" in body:  # the preload traced the reads
            assert b'"cat":"POSIX"' in text and b'"name":"read"' in text, f"{doc}: {first}: no POSIX read"
        if "train.py" in body:  # our train.py's function, traced by the Python API
            assert b'"cat":"reader"' in text, f"{doc}: {first}: no Python API event"
        assert b'"ph":"X"' in text, f"{doc}: {first}: no event"
    if "report(" in body or " report " in body:
        assert (work / "report.html").stat().st_size > 0
    if "-o files.csv" in body:
        assert (work / "files.csv").read_text().splitlines()[0].startswith("fname,")


def test_dlio_example_runs_in_the_dlio_venv(tmp_path):
    """scripts/run_dlio_example.sh runs every step with build/dlio-venv's python (where
    install_dlio_deps.sh puts DLIO, pydftracer and our wheel), not the base interpreter. Set-up
    only: a stand-in venv python records its calls and stops the script at the first one."""
    script = os.path.join(ROOT, "scripts", "run_dlio_example.sh")
    venv = tmp_path / "venv"
    missing = subprocess.run(
        ["bash", script, str(tmp_path / "out")],
        env=dict(os.environ, DLIO_SKIP_INSTALL="1", DLIO_VENV=str(venv)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 1 and "install_dlio_deps.sh" in missing.stderr, missing.stderr
    (venv / "bin").mkdir(parents=True)
    log = tmp_path / "calls.log"
    fake = venv / "bin" / "python"
    fake.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\nexit 7\n')
    fake.chmod(0o755)
    r = subprocess.run(
        ["bash", script, str(tmp_path / "out")],
        env=dict(os.environ, DLIO_SKIP_INSTALL="1", DLIO_VENV=str(venv)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 7, r.stderr
    assert "check_dftracer.py" in log.read_text()  # the first step, run by the venv's python
