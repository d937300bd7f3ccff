"""benchmarks/gen_traces.py: a set generated in parts (``first_file``, ``t0``) shares no event.

* a part starting at file K writes the same bytes as files K.. of the set generated in one go;
* a part with its own ``t0`` has its own pids, hosts and a timeline after the first part's end;
* the streamed summary over both parts counts every event and every process exactly once.
"""

import os
import sys

import pytest
from conftest import read_trace

from dfanalyzer import DFAnalyzer

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))
import gen_traces  # noqa: E402

EVENTS_PER_FILE = 300


def _generate(out, files, **kw):
    return gen_traces.generate(str(out), EVENTS_PER_FILE * files, files, member_bytes=8 << 10, jobs=1, **kw)


def test_parts_equal_one_go_and_share_no_event(tmp_path):
    whole = _generate(tmp_path / "whole", 4)
    first = _generate(tmp_path / "a", 2)
    second = _generate(tmp_path / "b", 2, first_file=2)
    assert [os.path.basename(p) for p in second] == ["synth-2.pfw.gz", "synth-3.pfw.gz"]
    for p, q in zip(first + second, whole):
        with open(p, "rb") as f, open(q, "rb") as g:
            assert f.read() == g.read(), p

    t0 = gen_traces.DEFAULT_T0 + 10**12
    later = _generate(tmp_path / "c", 2, first_file=2, t0=t0)
    recs_a = [r for p in first for r in read_trace(p)]
    recs_c = [r for p in later for r in read_trace(p)]
    assert len(recs_a) == len(recs_c) == 2 * EVENTS_PER_FILE
    assert {r["pid"] for r in recs_a} == {10000, 10001}
    assert {r["pid"] for r in recs_c} == {10002, 10003}
    assert {r["args"]["hostname"] for r in recs_c} == {"node02", "node03"}
    assert min(r["ts"] for r in recs_c) == t0
    assert max(r["ts"] + r["dur"] for r in recs_a) < t0

    s = DFAnalyzer([str(tmp_path / "a"), str(tmp_path / "c")], index_dir=str(tmp_path / "idx")).summary(show=False)
    assert s.events == 4 * EVENTS_PER_FILE
    assert s.processes == 4 and s.nodes == 4


def test_negative_first_file_rejected(tmp_path):
    with pytest.raises(ValueError, match="first_file"):
        gen_traces.generate(str(tmp_path), 10, 1, first_file=-1)
