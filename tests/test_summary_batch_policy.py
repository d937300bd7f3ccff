"""The threaded streamed summary's batch size when ``--batch-size-mb`` is not given, and the byte
bound of its early loads (issue 22, Deliver 2: a lower GIL-held share per event with many threads;
docs/perf/i28-batch.md).

The policy (``summary_batch_bytes``) is checked at its boundary sizes against the formula written
out here; the summary JSON must be byte-identical with the policy, with ``--batch-size-mb`` set to
the policy's own size, and at other batch sizes; the early loads (``_start_loads``) must start
the longest prefix of items within ``threads × PREFETCH_MB_PER_THREAD`` MiB of text, one per thread
at least, with the text of a batch checked against plain gzip."""

from __future__ import annotations

import gzip
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))
import gen_traces  # noqa: E402

MiB = 2**20


@pytest.mark.parametrize(
    "total, threads, want",
    [
        (0, 1, 16 * MiB),  # nothing: the floor
        (8 * 16 * MiB - 1, 1, 16 * MiB),  # just under 8 floor batches per thread
        (8 * 16 * MiB, 1, 16 * MiB),
        (8 * 16 * MiB + 8, 1, 16 * MiB + 1),  # first size above the floor
        (8 * 40 * MiB + 7, 1, 40 * MiB),  # floor division
        (8 * 64 * MiB - 8, 1, 64 * MiB - 1),  # last size under the cap
        (8 * 64 * MiB, 1, 64 * MiB),
        (8 * 64 * MiB + 8, 1, 64 * MiB),  # the cap
        (16_097_701_599, 1, 64 * MiB),  # 100M events of preload output (one file)
        (16_097_701_599, 2, 64 * MiB),
        (16_097_701_599, 16, 64 * MiB),  # 125.8 MB per 8 batches of a thread: capped
        (16_097_701_599, 64, 31_440_823),  # 16,097,701,599 // 512
        (2 * 8 * 16 * MiB, 2, 16 * MiB),
        (16 * 8 * 16 * MiB, 16, 16 * MiB),
        (16 * 8 * 16 * MiB + 128, 16, 16 * MiB + 1),
        (16 * 8 * 64 * MiB, 16, 64 * MiB),
        (16 * 8 * 64 * MiB, 0, 64 * MiB),  # threads < 1 counts as 1
    ],
)
def test_policy_values_at_boundaries(total, threads, want):
    from dfanalyzer.analyzer import summary_batch_bytes

    got = summary_batch_bytes(total, threads)
    assert type(got) is int and got == want
    # the formula, written out: clamp(total / (8 x threads), 16 MiB, 64 MiB), floor division
    assert got == max(16 * MiB, min(64 * MiB, total // (8 * max(1, threads))))


@pytest.mark.parametrize(
    "sizes, threads, want",
    [
        ([16 * MiB] * 40, 2, 16),  # 8 per thread by count (256 MiB: exactly the byte bound)
        ([16 * MiB + 1] * 40, 2, 15),  # one byte more each: the 16th would pass 256 MiB
        ([64 * MiB] * 40, 2, 4),  # 2 per thread of 64 MiB
        ([64 * MiB] * 40, 16, 32),
        ([200 * MiB] * 10, 2, 2),  # over the bound alone: still one per thread
        ([200 * MiB] * 10, 16, 10),  # fewer items than threads: all, one each
        ([300 * MiB, 1, 1, 1], 2, 2),  # the first `threads` always; then 300 MiB + 1 > 256 MiB
        ([100 * MiB, 100 * MiB, 56 * MiB, 1], 2, 3),  # exactly 256 MiB, the next byte is over
        ([1] * 100, 3, 24),  # tiny items: the count bound, 8 per thread
        ([], 4, 0),
    ],
)
def test_prefetch_count_is_bounded_in_bytes(sizes, threads, want):
    from dfanalyzer import analyzer

    assert analyzer.PREFETCH_MB_PER_THREAD == 128.0 and analyzer.PREFETCH_PER_THREAD == 8
    n = analyzer._prefetch_count(sizes, threads)
    assert n == want
    if n > threads:  # the bound holds for everything past the first item per thread
        assert sum(sizes[:n]) <= threads * 128 * MiB
    if threads <= n < min(len(sizes), 8 * threads):  # and the next item would break it
        assert sum(sizes[: n + 1]) > threads * 128 * MiB


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """3 member files of 8,000 events (16 KiB members: many checkpoints, so the batch sizes below
    plan different batches)."""
    out = tmp_path_factory.mktemp("batch_policy")
    return sorted(gen_traces.generate(str(out / "t"), 24_000, 3, member_bytes=16 << 10, jobs=1))


def _text_bytes(paths):
    return sum(len(gzip.decompress(open(p, "rb").read())) for p in paths)


def test_summary_json_same_with_the_policy_and_any_batch_size(traces, tmp_path, capsys, monkeypatch):
    """Scaled down (floor 0.05 MiB, cap 0.4 MiB) so that a few MiB of text plan bigger batches
    than the floor: the policy's JSON is byte-identical to ``--batch-size-mb`` at the policy's
    size (its batches less the last round's cuts), and to the floor's, the cap's and the real
    default's."""
    from dfanalyzer import analyzer, cli

    text = _text_bytes(traces)  # plain gzip: the truth of the planner's total
    monkeypatch.setattr(analyzer, "BATCH_MB", 0.05)
    monkeypatch.setattr(analyzer, "SUMMARY_BATCH_MAX_MB", 0.4)
    monkeypatch.setattr(analyzer, "SUMMARY_MIN_THREADS", 2)  # (8 by default: test_policy_needs_threads)
    want = max(int(0.05 * MiB), min(int(0.4 * MiB), text // (8 * 2)))
    assert int(0.05 * MiB) < want < int(0.4 * MiB), "the data must plan sizes between the bounds"
    idx = str(tmp_path / "idx")

    def api(mb):
        with analyzer.DFAnalyzer(traces, index_dir=idx, n_workers=2, batch_size_mb=mb, small_file_mb=0) as an:
            an.summary(show=False)
            total = sum(i["uncompressed_bytes"] for i in an._indexes)
            return an.stats["batches"], total, an.batch_bytes

    def cli_json(*opts):
        assert (
            cli.main(
                ["summary", *traces, "--json", "--workers", "2", "--index-dir", idx, "--small-file-mb", "0", *opts]
            )
            == 0
        )
        return capsys.readouterr().out

    n_pol, total, frame_bytes = api(None)
    assert total == text
    assert analyzer.summary_batch_bytes(total, 2) == want
    assert frame_bytes == int(0.05 * MiB)  # the events' plan keeps the floor
    n_same, n_floor = api(want / MiB)[0], api(0.05)[0]
    # the policy really planned its own, bigger batches (its last round cut small: one more per
    # thread at least), and a given size is used as is (no cut)
    assert n_same + 2 <= n_pol < n_floor
    out_pol = cli_json()
    assert json.loads(out_pol)["events"] == 24_000
    for mb in (repr(want / MiB), "0.05", "0.4", "16"):
        assert cli_json("--batch-size-mb", mb) == out_pol, mb


def test_early_loads_bounded_in_bytes(traces, tmp_path, capsys, monkeypatch):
    """In the command itself: the items started early are the first of the load order whose
    text sums to at most threads × PREFETCH_MB_PER_THREAD (a batch's text checked against plain
    gzip of its members), and the output is the same as with no early load."""
    from dfanalyzer import _reader, analyzer, cli

    idx = str(tmp_path / "idx")
    argv = [
        "summary",
        *traces,
        "--index-dir",
        idx,
        *"--json --workers 2 --batch-size-mb 0.05 --small-file-mb 0".split(),
    ]
    monkeypatch.setattr(analyzer, "PREFETCH_PER_THREAD", 0)
    assert cli.main(argv) == 0
    want = capsys.readouterr().out
    monkeypatch.setattr(analyzer, "PREFETCH_PER_THREAD", 1000)  # the byte bound decides alone
    monkeypatch.setattr(analyzer, "PREFETCH_MB_PER_THREAD", 0.2)
    made, seen = _reader.Prefetch, []

    def prefetch(items, threads):
        seen.append((list(items), threads))
        return made(items, threads)

    monkeypatch.setattr(_reader, "Prefetch", prefetch)
    assert cli.main(argv) == 0
    assert capsys.readouterr().out == want
    ((items, threads),) = seen
    assert threads == 2
    with analyzer.DFAnalyzer(traces, index_dir=idx, n_workers=2, batch_size_mb=0.05, small_file_mb=0) as an:
        batches = an._summary_batches()
        order = analyzer._round_robin_by_file(batches)
    from dfanalyzer import reader

    reader_idx = {p: reader.build_index(p, index_dir=idx) for p in traces}
    assert [(os.fspath(b[0]), b[1], b[2]) for b in (batches[i] for i in order[: len(items)])] == [
        (it[1], it[2], it[3]) for it in items
    ]

    def text(b):  # the batch's members decompressed by plain gzip, from the index's offsets
        path, first, last = b[0], b[1], b[2]
        ck = reader_idx[path]["checkpoints"]
        raw = open(path, "rb").read()
        start = ck[first]["compressed_offset"]
        stop = ck[last]["compressed_offset"] + ck[last]["compressed_size"]
        return len(gzip.decompress(raw[start:stop]))

    sizes = [text(batches[i]) for i in order]
    assert [int(batches[i][3]) for i in order] == sizes
    budget = 2 * 0.2 * MiB
    n = len(items)
    assert 2 < n < len(order), "the bound must cut the prefetch somewhere inside the plan"
    assert sum(sizes[:n]) <= budget < sum(sizes[: n + 1])


def test_policy_plan_tapers_the_last_round(traces, tmp_path, monkeypatch):
    """The policy's plan (scaled down as above) covers every checkpoint of every file once, in
    order, with the text plain gzip gives; its last round (the last ``threads`` batches of the
    pool's order) is cut into batches of the floor's size, the rest are the policy's size."""
    from dfanalyzer import analyzer, reader

    text = _text_bytes(traces)
    monkeypatch.setattr(analyzer, "BATCH_MB", 0.05)
    monkeypatch.setattr(analyzer, "SUMMARY_BATCH_MAX_MB", 0.4)
    monkeypatch.setattr(analyzer, "SUMMARY_MIN_THREADS", 2)  # (8 by default: test_policy_needs_threads)
    idx = str(tmp_path / "idx")
    threads = 2
    with analyzer.DFAnalyzer(traces, index_dir=idx, n_workers=threads, small_file_mb=0) as an:
        plan = an._summary_batches()
        good = an._indexes
    size = analyzer.summary_batch_bytes(text, threads)
    big = analyzer._plan_kept_batches(good, size)
    assert len(big) < len(plan) and sum(b[3] for b in plan) == text
    for p in traces:  # every checkpoint once, in order
        n = len(reader.build_index(p, index_dir=idx)["checkpoints"])
        mine = [b for b in plan if b[0] == p]
        assert mine[0][1] == 0 and mine[-1][2] == n - 1
        assert all(a[2] + 1 == b[1] for a, b in zip(mine, mine[1:]))
    order = analyzer._round_robin_by_file(big)
    last = [big[i] for i in order[-threads:]]
    assert [b for b in big if b not in last] == [b for b in plan if b in big]  # the rest kept
    pieces = [b for b in plan if b not in big]
    for b in last:  # each last-round batch is cut as plan_batches cuts it at the floor's size
        mine = [x for x in pieces if x[0] == b[0] and b[1] <= x[1] and x[2] <= b[2]]
        assert len(mine) > 1 and mine[0][1] == b[1] and mine[-1][2] == b[2]
        assert sum(x[3] for x in mine) == b[3] and sum(x[4] for x in mine) == b[4]
    assert len(pieces) == sum(len([x for x in pieces if x[0] == b[0] and b[1] <= x[1] and x[2] <= b[2]]) for b in last)


def test_policy_needs_threads(traces, tmp_path, capsys, monkeypatch):
    """Below ``SUMMARY_MIN_THREADS`` (8) threads the summary's plan is the events' plan (16 MiB,
    scaled down here), at 8 threads the policy's; the JSON is the same either way."""
    from dfanalyzer import analyzer, cli

    assert analyzer.SUMMARY_MIN_THREADS == 8
    monkeypatch.setattr(analyzer, "BATCH_MB", 0.05)
    monkeypatch.setattr(analyzer, "SUMMARY_BATCHES_PER_THREAD", 1)  # (8 threads, few batches: a bigger size)
    idx = str(tmp_path / "idx")
    plans = {}
    for n in (7, 8):
        with analyzer.DFAnalyzer(traces, index_dir=idx, n_workers=n, small_file_mb=0) as an:
            plans[n] = (an._summary_batches(), an._batches)
    assert plans[7][0] == plans[7][1] == plans[8][1]  # the 16 MiB (here 0.05 MiB) plan
    assert len(plans[8][0]) < len(plans[8][1])  # bigger batches
    outs = []
    for n in ("7", "8"):
        argv = ["summary", *traces, "--json", "--workers", n, "--index-dir", idx, "--small-file-mb", "0"]
        assert cli.main(argv) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and json.loads(outs[0])["events"] == 24_000
