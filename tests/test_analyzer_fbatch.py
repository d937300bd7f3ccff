"""Bigger load batches on a cluster when ``batch_size_mb`` is not given (issue 22, i22-fbatch).

The plan: on a cluster the batches that ``events`` loads are ``total / (4 × worker threads)`` within
``[BATCH_MB, CLUSTER_BATCH_MAX_MB]`` and the partition bound; the thread pool and the streamed
summary keep ``BATCH_MB``;
a given ``batch_size_mb`` is used as is on both. The sizes are scaled down here (``BATCH_MB`` 0.1,
cap 0.4 MiB, set in this process, where the plan is made) so that 3 files of ~0.85 MB span
several batches each; the events frame and the summary planned that way must equal plain gzip +
json (``_oracle`` of test_analyzer_frame_cluster, ``tests/oracle.py``)."""

from __future__ import annotations

import os
import sys

import pytest
from oracle import Oracle
from test_analyzer_frame_cluster import _compare, _oracle
from test_oracle_diff import check, diff_dict

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))
import gen_traces  # noqa: E402

MiB = 2**20


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    out = tmp_path_factory.mktemp("fbatch")
    return sorted(gen_traces.generate(str(out), 12_000, 3, member_bytes=16 << 10, jobs=1))


@pytest.fixture
def small_sizes(monkeypatch):
    from dfanalyzer import analyzer

    monkeypatch.setattr(analyzer, "BATCH_MB", 0.1)
    monkeypatch.setattr(analyzer, "CLUSTER_BATCH_MAX_MB", 0.4)
    return analyzer


def test_cluster_batch_bytes_bounds():
    from dfanalyzer.analyzer import cluster_batch_bytes

    GiB = 2**30
    # 100M events of ~200 B: 4 batches per thread would be far past the cap: 64 MiB
    assert cluster_batch_bytes(20 * GiB, 100_000_000, 16, 128) == 64 * MiB
    # 442 MB on 2 threads (the g2m benchmark): total / 8
    assert cluster_batch_bytes(442_491_472, 2_000_016, 2, 128) == 442_491_472 // 8
    # little input per thread: never below the thread pool's 16 MiB
    assert cluster_batch_bytes(100 * MiB, 500_000, 16, 128) == 16 * MiB
    # the partition bound in memory: 208 B per event, 100 B of text per event -> 32 MiB of text
    # is 64 MiB in memory
    assert cluster_batch_bytes(100 * 2**28, 2**28, 2, 64) == int(64 * MiB * 100 / 208)
    # a partition bound below the floor keeps the floor (today's plan)
    assert cluster_batch_bytes(100 * 2**28, 2**28, 2, 4) == 16 * MiB


def test_plan_cluster_threads_and_given(traces, cluster_client, small_sizes, tmp_path):
    from dfanalyzer import DFAnalyzer
    from dfanalyzer.analyzer import _plan_kept_batches, cluster_batch_bytes

    idx = str(tmp_path / "idx")
    kw = dict(index_dir=idx, small_file_mb=0)
    with DFAnalyzer(traces, client=cluster_client, **kw) as an:
        good = [i for i in an._indexes if i["error"] is None]
        total = sum(i["uncompressed_bytes"] for i in good)
        lines = sum(i["lines"] for i in good)
        want = cluster_batch_bytes(total, lines, 2, 128)
        assert 0.1 * MiB < want < 0.4 * MiB  # between the (scaled) floor and cap here
        assert an.batch_bytes == want
        cluster = list(an._frame_batches)  # what events loads
        assert cluster == _plan_kept_batches(good, want)
        summary_plan = list(an._batches)  # the streamed summary keeps BATCH_MB
        assert summary_plan == _plan_kept_batches(good, int(0.1 * MiB))
    with DFAnalyzer(traces, n_workers=2, **kw) as an:
        assert an.batch_bytes == int(0.1 * MiB)  # the thread pool: BATCH_MB as before
        threads = list(an._batches)
        assert an._frame_batches is None and threads == summary_plan
    # at least 4 batches per worker thread, every file in several, fewer than the pool's
    assert 8 <= len(cluster) < len(threads)
    assert all(sum(b[0] == p for b in cluster) >= 2 for p in traces)
    # a given batch_size_mb is used exactly, with a cluster and with threads
    for given in (0.05, 0.3):
        with DFAnalyzer(traces, client=cluster_client, batch_size_mb=given, **kw) as a1:
            with DFAnalyzer(traces, n_workers=2, batch_size_mb=given, **kw) as a2:
                assert a1.batch_bytes == a2.batch_bytes == int(given * MiB)
                assert a1._frame_batches is None and a2._frame_batches is None
                assert list(a1._batches) == list(a2._batches) == _plan_kept_batches(good, given * MiB)


def test_bigger_batches_events_and_summary_match_truth(traces, cluster_client, small_sizes, tmp_path):
    from dfanalyzer import DFAnalyzer

    kw = dict(index_dir=str(tmp_path / "idx"), small_file_mb=0)
    want = Oracle(traces).summary()
    with DFAnalyzer(traces, client=cluster_client, **kw) as an:
        small = len(an._batches)
        assert an.batch_bytes > 0.1 * MiB
        _compare(cluster_client.compute(an.events).result(), _oracle(traces))
        # the events' bigger batches: 8 <= batches < the small plan's, and stats follow them
        assert an.stats["batches"] == len(an._batches) == len(an._frame_batches) and 8 <= len(an._batches) < small
        out = []  # the summary of the held events (bigger batches)
        diff_dict("summary", want, an.summary(show=False).to_dict(), out)
        check(out, "summary of the events held in the cluster's bigger batches")
    with DFAnalyzer(traces, client=cluster_client, **kw) as an:  # streamed (never held): BATCH_MB
        out = []
        diff_dict("summary", want, an.summary(show=False).to_dict(), out)
        check(out, "streamed summary on a cluster")
        assert an.stats["batches"] == small
        _compare(cluster_client.compute(an.events).result(), _oracle(traces))  # then held, in the bigger batches
        assert an.stats["batches"] == len(an._frame_batches) < small


def test_cli_batch_size_default_and_given():
    from dfanalyzer import cli

    p = cli.build_parser()
    assert p.parse_args(["summary", "x"]).batch_size_mb is None
    assert p.parse_args(["summary", "x", "--batch-size-mb", "24"]).batch_size_mb == 24.0


def test_embedded_cluster_started_by_events_plans_bigger_batches(traces, small_sizes, tmp_path):
    """Without a client the plan is made for the thread pool; the cluster that ``events`` starts on
    first use then gets the cluster's bigger batches too, and the events still equal gzip + json."""
    from dfanalyzer import DFAnalyzer

    kw = dict(index_dir=str(tmp_path / "idx"), small_file_mb=0)
    with DFAnalyzer(traces, client=None, n_workers=2, **kw) as ref:
        threads_plan = list(ref._batches)
    with DFAnalyzer(traces, n_workers=2, **kw) as an:
        assert an._client is None and an._frame_batches is None and list(an._batches) == threads_plan
        events = an.events  # starts the embedded 2-worker cluster (the default client while an lives)
        assert an._client is not None and an._own_client
        want_batches = an._frame_batches
        assert want_batches is not None and 8 <= len(want_batches) < len(threads_plan)
        assert an.stats["batches"] == len(want_batches) and an.batch_bytes > 0.1 * MiB
        _compare(events.compute(), _oracle(traces))
