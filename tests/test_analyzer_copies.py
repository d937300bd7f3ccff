"""Kernel copies in the files view (issue 20): copy_file_range / sendfile / splice (byte rule
RET_COPY in calls.def) move ``ret`` bytes from ``fname`` to ``out_fname``; the files view counts
them as read bytes of the one and written bytes of the other. Real ``cp`` and ``cat`` runs under
the preload, checked against the files' sizes and against the independent oracle."""

from __future__ import annotations

import os
import subprocess

import pytest
from oracle import Oracle
from test_oracle_diff import check, diff_frame
from test_preload_helpers import preload_lib, trace_files, traced_env

SIZE = 1_000_007  # 1 MB + 7: not a multiple of any block size cp/cat use


@pytest.fixture(scope="module")
def copied(tmp_path_factory):
    """``cp in.bin cp.bin`` and ``sh -c 'cat in.bin > cat.bin'`` traced with metadata."""
    tmp = tmp_path_factory.mktemp("copies")
    data = tmp / "d"
    data.mkdir()
    (data / "in.bin").write_bytes(os.urandom(SIZE))
    lib = preload_lib()
    out = tmp / "trace"
    out.mkdir()
    for i, cmd in enumerate((["cp", "in.bin", "cp.bin"], ["sh", "-c", "cat in.bin > cat.bin"])):
        env = traced_env(lib, str(out / f"t{i}"), str(data))
        r = subprocess.run(cmd, env=env, cwd=str(data), capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert os.path.getsize(data / "cp.bin") == os.path.getsize(data / "cat.bin") == SIZE
    return str(out), data


@pytest.mark.parametrize("batch,part", [(0.01, 0.02), (16, 128)])
def test_cp_and_cat_bytes_on_both_files(copied, batch, part, dask_client):
    from dfanalyzer import DFAnalyzer

    out, data = copied
    with DFAnalyzer(out, batch_size_mb=batch, partition_size_mb=part, small_file_mb=0, client=dask_client) as an:
        fv = an.files()
        ev = an.events.compute(scheduler=dask_client)
    src, cp, cat = (str(data / n) for n in ("in.bin", "cp.bin", "cat.bin"))
    # cp and cat each read the whole input once, and wrote every byte of their output
    assert fv.loc[src, "read_bytes"] == 2 * SIZE and fv.loc[src, "write_bytes"] == 0
    for f in (cp, cat):
        assert fv.loc[f, "write_bytes"] == os.path.getsize(f) == SIZE, f
        assert fv.loc[f, "read_bytes"] == 0
    # the copies were really kernel copies (else this test would not test them)
    names = set(ev["name"].astype(str))
    assert names & {"copy_file_range", "sendfile", "sendfile64", "splice"}, names
    # the output file's row: the copies are its events (cp.bin may have no other data event)
    copies = ev[ev["name"].astype(str).isin(["copy_file_range", "sendfile", "sendfile64", "splice"])]
    on_cp = copies[copies["out_fname"].astype(object) == cp]
    assert fv.loc[cp, "ops"] >= len(on_cp) >= 1


def test_copies_match_the_oracle(copied, dask_client):
    from dfanalyzer import DFAnalyzer

    out, _ = copied
    o = Oracle(trace_files(os.path.join(out, "t0")) + trace_files(os.path.join(out, "t1")))
    with DFAnalyzer(out, batch_size_mb=0.01, partition_size_mb=0.02, small_file_mb=0, client=dask_client) as an:
        diffs: list = []
        diff_frame("files", o.files(), an.files(), diffs)
    check(diffs, "files() with kernel copies")
