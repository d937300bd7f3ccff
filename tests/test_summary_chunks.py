"""The distributed streamed summary runs a few chunk tasks per worker thread (issue 22).

* ``plan_chunks`` puts every item in exactly one chunk, keeps the given order, never makes an
  empty chunk and makes at most ``threads * per_thread`` of them;
* on a cluster, a summary whose batches are cut across chunk boundaries (dozens of ~256 KiB
  batches in 4 chunks, plus a group of small files) equals the threaded one, its event count the
  count read with plain gzip + json, and its per-file stats and metadata are in file order.
"""

import os
import sys

import pytest
from conftest import read_trace

from dfanalyzer import DFAnalyzer
from dfanalyzer.analyzer import plan_chunks

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))
import gen_traces  # noqa: E402


@pytest.mark.parametrize("n,threads", [(0, 2), (1, 4), (3, 2), (4, 2), (64, 2), (65, 3), (7, 16)])
def test_plan_chunks_cover_in_order(n, threads):
    order = list(range(n))[::-1]
    chunks = plan_chunks(n, order, threads)
    assert [i for ch in chunks for i in ch] == order
    assert all(chunks)
    assert len(chunks) == min(n, 2 * threads)
    if chunks:
        assert max(map(len, chunks)) - min(map(len, chunks)) <= 1


def test_cluster_summary_equals_threads(tmp_path, dask_client):
    d = tmp_path / "t"
    paths = gen_traces.generate(str(d), 3 * 60_000, 3, member_bytes=32 << 10, jobs=1)
    paths += gen_traces.generate(str(d), 3 * 400, 3, member_bytes=8 << 10, jobs=1, first_file=3)
    want = sum(1 for p in paths for r in read_trace(p) if r.get("ph") == "X" and r.get("cat") != "dftracer")
    with DFAnalyzer(str(d), args=(), batch_size_mb=0.25, client=dask_client) as an:
        got = an.summary(show=False)
        assert an.stats["batches"] > 8  # several batches per chunk (2 workers: 4 chunks)
        assert an.stats["small_files"] == 3
        cl_stats = an.stats["per_file"].drop(columns=["warnings"]).to_dict("records")
        cl_md = an.metadata.reset_index(drop=True)
    th = _threads_summary(str(d))
    assert got.to_dict() == th[0].to_dict()
    assert got.events == want
    assert cl_stats == th[1]
    assert cl_md.equals(th[2])


def _threads_summary(d):
    """The summary, per-file stats and metadata with the thread pool (no distributed client)."""
    with DFAnalyzer(d, args=(), batch_size_mb=0.25, n_workers=2) as an:
        s = an.summary(show=False)
        out = (
            s,
            an.stats["per_file"].drop(columns=["warnings"]).to_dict("records"),
            an.metadata.reset_index(drop=True),
        )
        assert an._client is None  # (conftest's dask_client is not the default client)
    return out


def test_client_that_is_not_the_default(tmp_path):
    """``DFAnalyzer(client=c)`` with ``Client(..., set_as_default=False)`` and no default client:
    the streamed summary waited with ``distributed.wait`` (which asks ``default_client()``: "No
    clients found") and ``events`` persisted on the local scheduler ("Missing dependency")."""
    import subprocess

    from conftest import pythonpath_env

    d = tmp_path / "t"
    paths = gen_traces.generate(str(d), 2 * 60_000, 2, member_bytes=32 << 10, jobs=1)
    want = sum(1 for p in paths for r in read_trace(p) if r.get("ph") == "X" and r.get("cat") != "dftracer")
    code = (
        "import sys\n"
        "from distributed import Client, LocalCluster\n"
        "from dfanalyzer import DFAnalyzer\n"
        "if __name__ == '__main__':\n"
        "    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as lc:\n"
        "        with Client(lc, set_as_default=False) as c:\n"
        "            with DFAnalyzer(sys.argv[1], args=(), batch_size_mb=0.25, client=c) as an:\n"
        "                print(an.summary(show=False).events)\n"
        "            with DFAnalyzer(sys.argv[1], args=(), batch_size_mb=0.25, client=c) as an:\n"
        "                ev = an.events  # (computing it needs c: it is not the default client)\n"
        "                print(c.compute(ev.shape[0]).result(), ev.npartitions > 1)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(d)], capture_output=True, text=True, env=pythonpath_env(), timeout=120
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == [str(want), str(want), "True"]
