"""The client of a distributed summary stays lean (issue 22: the whole ``--scheduler`` command
within 1.25x of the threaded one).

* ``dfanalyzer summary --scheduler ADDR`` never imports pandas, pyarrow, dask.dataframe or
  matplotlib in the client process (the workers send NumPy/Python partials and the reader's
  metadata lists), and prints the same JSON and stderr as ``--workers 2``: a real DFTracer 1.0.5
  trace set (48 processes whose command line is only known through ``SH`` strings and the
  ``start`` records' ``cmd_hash``), one batch task per file (``--small-file-mb 0``);
* the sanity check's command lines read from the reader's metadata lists equal those read from
  their frame, for ``cmd_line`` records, hashes written as numbers or text, and missing values;
* ``DFAnalyzer.metadata`` / ``stats['per_file']`` of a distributed summary equal the threads';
* without ``client=`` an analyzer takes the default client only while one is current (a user's
  ``Client()``), else runs in threads (conftest's ``dask_client`` is never the default).
"""

import json
import os
import shutil
import subprocess
import sys

from conftest import DATA, pythonpath_env

from dfanalyzer import sanity
from dfanalyzer.analyzer import _concat_metadata
from dfanalyzer.reader import metadata_frame

CM1 = os.path.join(DATA, "dftracer-v1.0.5-cm1")
HEAVY = ("pandas", "pyarrow", "dask.dataframe", "matplotlib")

_RUN = (
    "import json, sys\n"
    "from dfanalyzer.cli import main\n"
    "rc = main(sys.argv[2:])\n"
    "heavy = sorted(m for m in sys.modules if m in %r)\n"
    "open(sys.argv[1], 'w').write(json.dumps({'rc': rc, 'heavy': heavy}))\n"
) % (HEAVY,)


def _cli(tmp_path, name, *argv):
    out = tmp_path / f"{name}.json"
    r = subprocess.run(
        [sys.executable, "-c", _RUN, str(out), "summary", *argv, "--json", "--no-progress"],
        capture_output=True,
        text=True,
        env=pythonpath_env(),
        timeout=120,
    )
    return r, json.loads(out.read_text())


def test_scheduler_client_imports_no_pandas(tmp_path):
    from distributed import Client, LocalCluster

    d = tmp_path / "cm1"
    shutil.copytree(CM1, d)
    common = (str(d), "--small-file-mb", "0")
    th, th_seen = _cli(tmp_path, "threads", *common, "--workers", "2")
    assert th.returncode == 0 and th_seen["rc"] == 0, th.stderr[-2000:]
    assert th_seen["heavy"] == []  # (the threaded command needs no pandas either: test_summary_threads.py)
    # positive control of the check: a filter is run on each batch as a DataFrame, with pandas
    fl, fl_seen = _cli(tmp_path, "filtered", *common, "--workers", "2", "--filter", "ts >= 0")
    assert fl.returncode == 0 and fl_seen["rc"] == 0 and fl.stdout == th.stdout, fl.stderr[-2000:]
    assert "pandas" in fl_seen["heavy"]
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, protocol="tcp", host="127.0.0.1", dashboard_address=None
    ) as lc:
        with Client(lc, set_as_default=False) as c:
            cl, cl_seen = _cli(tmp_path, "cluster", *common, "--scheduler", lc.scheduler_address)
            ran = c.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.task_prefixes))
    assert cl.returncode == 0 and cl_seen["rc"] == 0, cl.stderr[-2000:]
    assert cl_seen["heavy"] == []
    assert ran > 0  # (the work ran on the cluster)
    assert json.loads(cl.stdout) == json.loads(th.stdout)
    assert cl.stderr == th.stderr
    assert json.loads(cl.stdout)["events"] > 0


def _frame(parts):
    return _concat_metadata([metadata_frame(m) for m in parts])


def _md(rows):
    keys = ("name", "cat", "ph", "pid", "tid", "ts", "dur", "key", "value", "args")
    rows = [{"cat": "dftracer", "ph": "M", "tid": r.get("pid"), **r} for r in rows]
    return {k: [r.get(k) for r in rows] for k in keys}


def test_commands_of_records_equal_frame():
    a = _md(
        [
            {"name": "cmd_line", "pid": 1, "key": "cmd_line", "value": "./a.out -n 4"},
            {"name": "cmd_line", "pid": 1, "key": "cmd_line", "value": "ignored: the first wins"},
            {"name": "SH", "pid": 2, "key": "./cm1.exe", "value": 1234},
            {"name": "start", "pid": 3, "args": json.dumps({"cmd_hash": "5678"})},
        ]
    )
    b = _md(
        [
            {"name": "SH", "pid": 3, "key": "./other.exe", "value": "5678"},  # (after its start record)
            {"name": "start", "pid": 2, "args": json.dumps({"cmd_hash": 1234.0})},
            {"name": "start", "pid": 4, "args": "not json"},
            {"name": "cmd_line", "pid": 5, "key": "cmd_line", "value": None},
            {"name": "start", "pid": 6, "args": json.dumps({"cmd_hash": "1234"})},
        ]
    )
    want = {"./a.out -n 4": 1, "./cm1.exe": 2, "./other.exe": 1}
    assert sanity.commands([a, b]) == sanity.commands(_frame([a, b])) == want
    assert sanity.commands([]) == sanity.commands(None) == {}
    warning = sanity.command_warning([a, b])
    assert warning == sanity.command_warning(_frame([a, b])) and "3 different command lines" in warning


def test_distributed_metadata_and_stats_equal_threads(tmp_path, dask_client):
    from dfanalyzer import DFAnalyzer

    d = tmp_path / "cm1"
    shutil.copytree(CM1, d)
    with DFAnalyzer(str(d), args=(), small_file_mb=0, n_workers=2) as an:
        th = an.summary(show=False).to_dict(), an.metadata, an.stats["per_file"], an.input_warnings()
        assert an._client is None  # threads: no cluster taken or started (the comparison's other side)
    with DFAnalyzer(str(d), args=(), small_file_mb=0, client=dask_client) as an:
        assert an._client is dask_client
        s = an.summary(show=False).to_dict()
        raw = an._metadata_for_sanity()
        assert isinstance(raw, list) and raw and all(isinstance(m, dict) for m in raw)
        # one process per file, its command line known through the SH string of its cmd_hash
        assert sanity.commands(raw) == {"./cm1.exe": len(os.listdir(CM1))}
        assert sanity.commands(raw) == sanity.commands(an.metadata)
        cl = s, an.metadata, an.stats["per_file"], an.input_warnings()
    assert cl[0] == th[0]
    assert cl[1].equals(th[1])
    assert cl[2].equals(th[2])
    assert cl[3] == th[3]


def test_default_client_taken_only_while_current(tmp_path, dask_client):
    from dfanalyzer import DFAnalyzer

    path = shutil.copy(os.path.join(CM1, sorted(os.listdir(CM1))[0]), tmp_path)
    with DFAnalyzer(path, index_dir=str(tmp_path), n_workers=1) as an:
        threads = an.summary(show=False).to_dict()
        assert an._client is None
    with dask_client.as_current():  # what Client() in a user's script makes
        with DFAnalyzer(path, index_dir=str(tmp_path)) as an:
            assert an._client is dask_client
            assert an.summary(show=False).to_dict() == threads
    with DFAnalyzer(path, index_dir=str(tmp_path)) as an:
        assert an._client is None


def test_another_analyzers_embedded_cluster_is_not_taken(tmp_path):
    """An analyzer's embedded cluster is the default client while it lives (``a.events.compute()``
    works) but closes with it: a second analyzer made meanwhile runs in its own threads and still
    works after the first one closed (it used to take that client and raise ClosedClientError)."""
    from distributed import default_client

    from dfanalyzer import DFAnalyzer

    names = sorted(os.listdir(CM1))[:2]
    paths = [shutil.copy(os.path.join(CM1, n), tmp_path) for n in names]
    with DFAnalyzer(paths[1], index_dir=str(tmp_path), n_workers=1) as ref:
        truth = ref.summary(show=False).to_dict()
        assert ref._client is None
    a = DFAnalyzer(paths[0], index_dir=str(tmp_path), n_workers=1)
    try:
        assert len(a.events) > 0  # starts a's embedded cluster, now the default client
        assert default_client() is a._client
        with DFAnalyzer(paths[1], index_dir=str(tmp_path), n_workers=1) as b:
            assert b._client is None
            a.close()
            assert b.summary(show=False).to_dict() == truth
            assert b._client is None
    finally:
        a.close()
