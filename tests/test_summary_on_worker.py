"""``dfanalyzer summary --json --scheduler ADDR`` runs the summary on a worker (issue 22, deliver 1:
the whole ``--scheduler`` command within 1.25x of the threaded one; docs/perf/i27-import.md).

The client checks the options and the patterns, imports distributed without NumPy, connects and
submits one task (``cli._summary_on_worker``), which indexes, plans, submits the chunk tasks and
folds their partials on the worker, and returns what the command writes. Checked here, against
the same command run in the client (``cli.SUMMARY_ON_WORKER = False``, the path of a command
with a progress bar) and against the threads (``--workers 2``):

* stdout, stderr and the exit status are identical, on a trace set with input problems (a file
  that is not a trace: its warnings; a symbolic link to a trace: the duplicate's note), given by
  a pattern relative to the client's working directory (not the workers');
* the failures too: no event in any file (status 1), and a filter that keeps no event (an
  empty summary, status 0);
* the client process never imports NumPy (nor pandas), and the task ran on the cluster;
* ``cluster._import_distributed(hide_numpy=True)`` leaves NumPy importable and unimported, and
  Dask's configuration as a plain import makes it.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import DATA, python_json, pythonpath_env

CM1 = os.path.join(DATA, "dftracer-v1.0.5-cm1")

# main() in a fresh process; SUMMARY_ON_WORKER from argv[2]; what the client imported to argv[1]
_RUN = (
    "import json, sys\n"
    "import dfanalyzer.cli as cli\n"
    "cli.SUMMARY_ON_WORKER = sys.argv[2] == '1'\n"
    "rc = cli.main(sys.argv[3:])\n"
    "seen = sorted(m for m in ('numpy', 'pandas', 'dfanalyzer.analyzer', 'dfanalyzer.summary') if m in sys.modules)\n"
    "open(sys.argv[1], 'w').write(json.dumps({'rc': rc, 'imported': seen}))\n"
    "sys.exit(rc)\n"
)


def _cli(tmp_path, on_worker, *argv):
    """(CompletedProcess, {'rc', 'imported'}) of ``dfanalyzer summary *argv --json --no-progress``
    run from ``tmp_path``."""
    out = tmp_path / "seen.json"
    if out.exists():
        out.unlink()
    r = subprocess.run(
        [sys.executable, "-c", _RUN, str(out), "1" if on_worker else "0", "summary", *argv, "--json", "--no-progress"],
        capture_output=True,
        text=True,
        env=pythonpath_env(),
        timeout=180,
        cwd=str(tmp_path),
    )
    return r, json.loads(out.read_text())


@pytest.fixture(scope="module")
def cluster():
    """A 2-worker cluster of worker processes (1 thread each, a TCP scheduler, as a running
    cluster is): (address, client). (Worker processes: the summary's task takes its worker's
    client, which distributed makes that process's default client.)"""
    from distributed import Client, LocalCluster

    with LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        protocol="tcp",
        host="127.0.0.1",
        dashboard_address=None,
        silence_logs=40,
    ) as lc:
        with Client(lc, set_as_default=False) as c:
            yield lc.scheduler_address, c


def _task_prefixes(client):
    return set(client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.task_prefixes)))


def test_summary_on_a_worker_writes_what_the_client_would(tmp_path, cluster):
    addr, client = cluster
    d = tmp_path / "traces"
    shutil.copytree(CM1, d)
    first = sorted(p for p in os.listdir(d) if p.endswith(".pfw.gz"))[0]
    os.symlink(d / first, d / "again.pfw.gz")  # the same trace twice: one note, read once
    (d / "text.pfw.gz").write_text("just text, not a trace\n")  # warnings, not a failure
    argv = ("traces", "--small-file-mb", "0")  # (relative: the client's directory, not the workers')
    th, th_seen = _cli(tmp_path, True, *argv, "--workers", "2")
    here, here_seen = _cli(tmp_path, False, *argv, "--scheduler", addr)
    assert "summary_on_worker" not in _task_prefixes(client)  # (Dask drops the "_")
    away, away_seen = _cli(tmp_path, True, *argv, "--scheduler", addr)
    assert "summary_on_worker" in _task_prefixes(client)  # (it ran on the cluster)
    assert th.returncode == 0 and th_seen["rc"] == 0, th.stderr[-3000:]
    for r, seen in ((here, here_seen), (away, away_seen)):
        assert (seen["rc"], r.returncode, r.stdout, r.stderr) == (0, 0, th.stdout, th.stderr)
    summary = json.loads(away.stdout)
    assert summary["events"] > 0
    assert "not a gzip file" in away.stderr and "note:" in away.stderr, away.stderr
    # the client that ran it on the worker imported neither NumPy nor the analysis modules
    assert away_seen["imported"] == []
    assert "numpy" in here_seen["imported"] and "dfanalyzer.analyzer" in here_seen["imported"]


def test_failures_on_a_worker_exit_as_in_the_client(tmp_path, cluster):
    addr, _ = cluster
    d = tmp_path / "none"
    d.mkdir()
    (d / "text.pfw.gz").write_text("just text, not a trace\n")
    traces = tmp_path / "cm1"
    shutil.copytree(CM1, traces)  # (indexes are written beside the traces: never in tests/data)
    runs = {}
    for name, argv in (
        ("no event", (str(d / "text.pfw.gz"),)),
        ("filtered out", (str(traces), "--small-file-mb", "0", "--filter", "ts < 0")),
    ):
        th, _ = _cli(tmp_path, True, *argv, "--workers", "2")
        here, _ = _cli(tmp_path, False, *argv, "--scheduler", addr)
        away, away_seen = _cli(tmp_path, True, *argv, "--scheduler", addr)
        runs[name] = away
        for r in (here, away):
            assert (r.returncode, r.stdout, r.stderr) == (th.returncode, th.stdout, th.stderr), name
        assert away_seen["rc"] == away.returncode
    assert runs["no event"].returncode == 1 and "no event loaded" in runs["no event"].stderr
    assert runs["filtered out"].returncode == 0 and json.loads(runs["filtered out"].stdout)["events"] == 0


_HIDDEN = (
    "import json, sys\n"
    "from dfanalyzer.cluster import _import_distributed\n"
    "assert 'numpy' not in sys.modules\n"
    "d = _import_distributed(hide_numpy=%s)\n"
    "after = 'numpy' in sys.modules\n"
    "import dask\n"
    "import numpy\n"  # (still importable)
    "print(json.dumps({'numpy_after_import': after, 'config': dask.config.config}, sort_keys=True, default=str))\n"
)


def test_distributed_imported_without_numpy_has_the_same_config(tmp_path):
    runs = {hide: python_json(_HIDDEN % hide, cwd=tmp_path) for hide in (True, False)}
    assert runs[True]["numpy_after_import"] is False
    assert runs[False]["numpy_after_import"] is True  # (positive control: distributed imports it)
    assert runs[True]["config"] == runs[False]["config"]
